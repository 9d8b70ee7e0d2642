"""Recording greedy generations for exact replay: one maximal draft tree per generated position.

Greedy decoding commits the same tokens whatever the draft policy does; a policy only changes
where cycles start. So :func:`record_greedy_trees` generates greedily one token per cycle and,
at *every* position, drafts the deepest and widest tree a policy may ask for and has the
target verify every node any depth-stop or verify-size choice could keep. Replaying a policy
on the recording (``replay.py``) then gives exactly the accepted lengths live ``generate``
would give, without running the target again.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from transformers import DynamicCache, LogitsProcessorList, PreTrainedModel

from ..core.drafter_identity import cached_weights_digest
from ..core.features import FeatureCapture
from ..core.kv_cache import drop_tail, prepare_cache_for_trees
from ..core.sequences import end_of_sequence_ids
from ..core.tree import DraftTree, full_tree_size
from ..core.values import plain_ints
from ..drafters.base import DraftContext, Drafter, DraftOutcome
from ..generation.targets import verify_tree
from ..generation.tree_builder import DraftTimes, TreeBuilder, best_nodes
from ..policies.base import CycleState, DraftPolicy, TreeConfig, VerifySizeInfo
from .recorded import RECORDING_FORMAT, ReplayRecording, ReplayTree, check_feature_layers, check_same_models

__all__ = [  # the recording's data classes live in recorded.py; importing them from here keeps working
    "RECORDING_FORMAT",
    "ReplayRecording",
    "ReplayTree",
    "check_feature_layer_indices",
    "check_feature_layers",
    "check_recordable",
    "check_same_models",
    "greedy_tokens",
    "record_greedy_trees",
    "record_replay",
    "verifiable_nodes",
]


class _WholeTree(DraftPolicy):
    """Drafts to the configured depth and keeps every candidate (the recorder prunes itself)."""

    def __init__(self, config: TreeConfig):
        self.config = config

    def tree_config(self, state: CycleState) -> TreeConfig:
        return self.config

    def num_tokens_to_verify(self, info: VerifySizeInfo) -> int:
        return len(info.scores)


def verifiable_nodes(tree: DraftTree, max_candidates: int) -> list[int]:
    """Every node some depth stop and verify size ``<= max_candidates`` can keep, root included.

    Nodes are created level by level, so the tree cut at depth ``d`` is a prefix of the nodes.
    """
    keep = {0}
    for depth in range(1, tree.max_depth + 1):
        prefix = [i for i, d in enumerate(tree.depths) if d <= depth]
        keep.update(best_nodes(tree.subtree(prefix), max_candidates))
    return sorted(keep)


def check_recordable(config: TreeConfig, max_new_tokens: int) -> None:
    """Refuse a recording that would hold nothing to replay exactly: sampled trees, no tree (depth 0 or the root
    alone verified) or no cycle (fewer than 2 new tokens)."""
    if config.sample_drafts:
        raise ValueError(
            "Replay is exact for greedy decoding with deterministic trees; record with sample_drafts=False."
        )
    if config.depth < 1:
        raise ValueError("A recording needs trees to replay: record with depth >= 1 (plain steps need no recording).")
    if config.total_tokens < 2:
        raise ValueError(
            f"total_tokens={config.total_tokens} verifies the root alone, no drafted token to replay: record with "
            "total_tokens >= 2 (the largest verification a replayed policy may ask for, root included)."
        )
    if max_new_tokens < 2:
        raise ValueError(
            f"max_new_tokens={max_new_tokens} records no cycle (the prompt's forward commits the first token, each "
            "cycle one more): record with max_new_tokens >= 2."
        )


def check_feature_layer_indices(
    layers: Iterable[int], model: PreTrainedModel, name: str = "feature_layers"
) -> tuple[int, ...]:
    """``layers``, the target hidden states a recording keeps (0, the embeddings, to the target's layer count), as
    ints; refused by ``name`` (``--feature-layers`` on the command line) when one is no int, comes twice (a recording
    claiming a layer twice is refused where pooled with one naming it once) or is outside the target's."""
    layers = tuple(plain_ints(layers))
    odd = [layer for layer in layers if isinstance(layer, bool) or not isinstance(layer, int)]
    if odd:
        raise ValueError(f"{name} takes hidden-state indices (ints) such as (2, 15, 27), got {odd} in {layers}.")
    repeated = sorted({layer for layer in layers if layers.count(layer) > 1})
    if repeated:
        raise ValueError(f"{name} names {repeated} more than once (got {layers}): name each hidden state once.")
    last = model.config.get_text_config().num_hidden_layers
    outside = [layer for layer in layers if not 0 <= layer <= last]
    if outside:
        raise ValueError(f"{name} {outside} are outside the target's hidden states 0 (the embeddings) to {last} (its "
                         "last layer): give indices in that range.")
    return layers


def greedy_processors(model: PreTrainedModel, input_ids: torch.LongTensor, max_new_tokens: int) -> LogitsProcessorList:
    """The logits processors a greedy ``generate(input_ids, max_new_tokens=...)`` call applies, built by ``generate``
    itself from the model's ``generation_config`` (a repetition penalty, n-gram bans, a minimum length...): its greedy
    token is their scores' argmax, not the raw logits', so the recording must pick it the same way."""
    captured: list[LogitsProcessorList] = []

    def capture(model, input_ids, logits_processor, **kwargs):
        captured.append(logits_processor)
        return input_ids

    type(model).generate(  # the stock generate: it prepares the processors, then hands over without a forward
        model, input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=max_new_tokens, do_sample=False,
        use_cache=False, custom_generate=capture,  # no cache: none is allocated for a call that runs no forward
    )
    return captured[0]


def greedy_tokens(
    processors: LogitsProcessorList, sequence: torch.LongTensor, tree: DraftTree, nodes: list[int], logits: torch.Tensor
) -> list[int]:
    """The target's greedy token after each of ``nodes`` of ``tree`` (``logits``' rows, in order), as greedy
    ``generate`` picks it: the argmax of ``processors``' scores (on float32 rows, as the engine's) after
    ``sequence`` and the node's path."""
    if not processors:
        return logits.argmax(-1).tolist()
    chosen = []
    for row, node in enumerate(nodes):
        path = [tree.tokens[i] for i in tree.path_to(node)[1:]]
        prefix = torch.cat([sequence, sequence.new_tensor([path])], dim=-1)
        chosen.append(int(processors(prefix, logits[row][None].to(torch.float32, copy=True))[0].argmax()))
    return chosen


@torch.no_grad()
def record_greedy_trees(
    model: PreTrainedModel,
    drafter: Drafter,
    input_ids: torch.LongTensor,
    config: TreeConfig,
    max_new_tokens: int,
    feature_layers: tuple[int, ...] = (),
    eos_token_ids: tuple[int, ...] | None = None,
) -> list[ReplayTree]:
    """Generate ``input_ids`` ([1, T]) greedily, one token per cycle, recording every cycle start.

    Each cycle drafts the full tree of ``config.depth`` levels with ``config.top_k`` (EAGLE-2
    expansion, no pruning) and verifies the nodes any verification of at most
    ``config.total_tokens`` tokens could keep; then it commits only the target's next token. The generation ends
    at ``eos_token_ids`` (None: the model's own, where ``generate`` stops; ``()``: none).
    """
    if eos_token_ids is None:
        eos_token_ids = end_of_sequence_ids(model)
    if input_ids.shape[0] != 1:
        raise ValueError(f"record_greedy_trees takes one prompt at a time, got a batch of {input_ids.shape[0]}.")
    check_recordable(config, max_new_tokens)
    feature_layers = check_feature_layer_indices(feature_layers, model)
    drafter.bind(model)
    input_ids = input_ids.to(model.device)
    cache = prepare_cache_for_trees(DynamicCache(config=model.config))
    wanted = set(drafter.feature_layers) | set(feature_layers)
    sharing = drafter.cache_sharing
    whole = TreeConfig(depth=config.depth, top_k=config.top_k, total_tokens=full_tree_size(config.depth, config.top_k))
    trees: list[ReplayTree] = []
    processors = greedy_processors(model, input_ids, max_new_tokens)
    with FeatureCapture(model, wanted) as capture:
        logits = model(input_ids=input_ids, past_key_values=cache, use_cache=True).logits
        builder = TreeBuilder(drafter, _WholeTree(whole), target_vocab_size=logits.shape[-1])
        first = greedy_tokens(processors, input_ids, DraftTree.with_root(-1), [0], logits[0, -1:])
        sequence = torch.cat([input_ids, input_ids.new_tensor([first])], dim=-1)
        new_features = {i: capture.latest[i] for i in wanted}
        while sequence.shape[1] - input_ids.shape[1] < max_new_tokens and int(sequence[0, -1]) not in eos_token_ids:
            state = {i: new_features[i][0, -1].clone() for i in feature_layers}
            shared = cache if sharing is not None else None
            context = DraftContext(sequence, {i: new_features[i] for i in drafter.feature_layers}, shared)
            tree = builder.build(context, whole, config.depth, DraftTimes())
            verified = verifiable_nodes(tree, config.total_tokens - 1)
            subtree, past_length = tree.subtree(verified), sequence.shape[1] - 1
            if sharing is not None:  # the engine's path for self-speculative drafters
                logits = model.get_output_embeddings()(sharing.verify(model, cache, subtree, past_length))
            else:
                logits = verify_tree(model, cache, subtree, past_length, lazy_head=None).logits
            greedy = greedy_tokens(processors, sequence, tree, verified, logits)
            target_next = [-1] * len(tree)
            for row, node in enumerate(verified):
                target_next[node] = greedy[row]
            drop_tail(cache, len(verified) - 1)  # the root alone is kept: a crop, nothing moved
            new_features = {i: capture.latest[i][:, :1] for i in wanted}
            drafter.observe(
                DraftOutcome(subtree, [0], greedy[:1], {i: new_features[i] for i in drafter.feature_layers})
            )
            trees.append(
                ReplayTree(sequence.shape[1], tree.tokens, tree.parents, tree.depths, tree.scores, target_next, state)
            )
            sequence = torch.cat([sequence, sequence.new_tensor([[greedy[0]]])], dim=-1)
    return trees


def record_replay(
    model: PreTrainedModel,
    drafter: Drafter,
    prompts: list[torch.LongTensor],
    config: TreeConfig,
    max_new_tokens: int,
    feature_layers: tuple[int, ...] = (),
    eos_token_ids: tuple[int, ...] | None = None,
) -> ReplayRecording:
    """Record each prompt with :func:`record_greedy_trees` into a :class:`ReplayRecording`; ``eos_token_ids``: the
    tokens that end a generation (None: the model's own end-of-sequence ids, where ``generate`` stops, so that the
    replay ends where a live generation does; ``()``: none)."""
    feature_layers = check_feature_layer_indices(feature_layers, model)
    if eos_token_ids is None:
        eos_token_ids = end_of_sequence_ids(model)
    recorded = [
        record_greedy_trees(model, drafter, ids, config, max_new_tokens, feature_layers, eos_token_ids)
        for ids in prompts
    ]
    return ReplayRecording(
        tree_config=config,
        vocab_size=model.get_output_embeddings().weight.shape[0],
        max_new_tokens=max_new_tokens,
        prompts=recorded,
        feature_layers=tuple(feature_layers),
        eos_token_ids=tuple(eos_token_ids),
        prompt_ids=[ids[0].tolist() for ids in prompts],
        target_weights=cached_weights_digest(model),
        drafter_weights=drafter.weights_digest(),
    )
