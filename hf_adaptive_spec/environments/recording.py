"""Recording greedy generations for exact replay: one maximal draft tree per generated position.

Greedy decoding commits the same tokens whatever the draft policy does; a policy only changes
where cycles start. So :func:`record_greedy_trees` generates greedily one token per cycle and,
at *every* position, drafts the deepest and widest tree a policy may ask for and has the
target verify every node any depth-stop or verify-size choice could keep. Replaying a policy
on the recording (``replay.py``) then gives exactly the accepted lengths live ``generate``
would give, without running the target again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from transformers import DynamicCache, LogitsProcessorList, PreTrainedModel

from ..core.drafter_identity import cached_weights_digest
from ..core.features import FeatureCapture
from ..core.kv_cache import drop_tail, prepare_cache_for_trees
from ..core.sequences import end_of_sequence_ids
from ..core.tree import DraftTree, full_tree_size
from ..drafters.base import DraftContext, Drafter, DraftOutcome
from ..generation.targets import verify_tree
from ..generation.tree_builder import DraftTimes, TreeBuilder, best_nodes
from ..policies.base import CycleState, DraftPolicy, TreeConfig, VerifySizeInfo

RECORDING_FORMAT = "hf_adaptive_spec.replay_recording.v1"


@dataclass
class ReplayTree:
    """The cycle that starts at one position of a recorded greedy generation.

    Args:
        context_length: committed tokens at cycle start (the root is the last of them).
        tokens / parents / depths / scores: the maximal draft tree, as a :class:`DraftTree`.
        target_next: the target's greedy next token after each node; ``-1`` for nodes no
            allowed choice can send to verification (never needed).
        features: the target hidden states the recording kept (``hidden_states`` numbering) at
            the last processed token, ``[hidden]`` each, as a policy sees them in ``CycleState``.
    """

    context_length: int
    tokens: list[int]
    parents: list[int]
    depths: list[int]
    scores: list[float]
    target_next: list[int]
    features: dict[int, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Refuse a tree whose per-node lists differ in length (a damaged row): a short ``target_next`` would
        replay its missing nodes as never verified, or as another node's token."""
        lengths = {name: len(getattr(self, name)) for name in ("parents", "depths", "scores", "target_next")}
        uneven = {name: length for name, length in lengths.items() if length != len(self.tokens)}
        if uneven:
            raise ValueError(f"a recorded tree holds {len(self.tokens)} tokens but {uneven} of the other per-node "
                             "lists (each node has one of each)")

    def draft_tree(self) -> DraftTree:
        return DraftTree(
            tokens=list(self.tokens), parents=list(self.parents), depths=list(self.depths), scores=list(self.scores)
        )

    def cycle_state(self, lookup_length: int = 0, feature_layers: Iterable[int] | None = None) -> CycleState:
        """What a policy reading ``feature_layers`` (None: every layer the recording kept) saw at this cycle's start,
        as ``generate`` shows it: those hidden states and no other; ``lookup_length``: the prompt-lookup chain the
        replay grafts."""
        layers = tuple(self.features if feature_layers is None else feature_layers)
        try:
            features = {layer: self.features[layer] for layer in layers}
        except KeyError:  # a caller of one cycle, which no replay's start checked: the same refusal
            check_feature_layers(layers, tuple(self.features))
            raise
        return CycleState(self.context_length, features, lookup_length=lookup_length)


def check_feature_layers(wanted: Iterable[int], kept: Iterable[int]) -> None:
    """Refuse a policy reading target hidden states ``wanted`` (its ``feature_layers``) that a recording keeping
    ``kept`` does not hold: replayed, it would fail inside its own code, or read another layer than live."""
    wanted, kept = tuple(wanted), tuple(kept)
    missing = sorted(set(wanted) - set(kept))
    if missing:
        raise ValueError(
            f"The policy reads the target's hidden states {missing} (its feature_layers {list(wanted)}), but the "
            f"recording keeps {list(kept)}: record it again keeping them (`hf-adaptive-spec record --feature-layers "
            f"{','.join(str(layer) for layer in sorted(set(wanted) | set(kept)))}`), or replay a policy that reads "
            "the recorded layers."
        )


@dataclass
class ReplayRecording:
    """Recorded greedy generations of several prompts with one drafter.

    Args:
        tree_config: the maximal tree: ``depth`` and ``top_k`` of every recorded tree, and
            ``total_tokens``, the largest verification (root included) the recording covers.
        vocab_size: the target's vocabulary size.
        max_new_tokens: the generation length each prompt was recorded for.
        prompts: per prompt, one :class:`ReplayTree` per cycle start (position), in order.
        feature_layers: the hidden states kept in each tree's ``features``.
        eos_token_ids: tokens that ended a generation.
        prompt_ids: per prompt, its token ids (what a prompt-lookup branch searches); empty in
            recordings made before they were kept.
        target_weights / drafter_weights: digests of the target's and the drafter's weights
            (:func:`~hf_adaptive_spec.core.drafter_identity.weights_digest`), by which recordings of other
            models are refused where they would be pooled; None where unknown (recordings made before they were
            kept, a drafter that has no digest), and then not compared.
    """

    tree_config: TreeConfig
    vocab_size: int
    max_new_tokens: int
    prompts: list[list[ReplayTree]]
    feature_layers: tuple[int, ...] = ()
    eos_token_ids: tuple[int, ...] = ()
    prompt_ids: list[list[int]] = field(default_factory=list)
    target_weights: str | None = None
    drafter_weights: str | None = None

    @property
    def num_positions(self) -> int:
        return sum(len(trees) for trees in self.prompts)

    @property
    def keeps_prompt_ids(self) -> bool:
        """Whether every prompt's ids are kept (a recording of no prompts keeps all of its none)."""
        return len(self.prompt_ids) == len(self.prompts)

    @classmethod
    def concatenate(cls, recordings: list[ReplayRecording]) -> ReplayRecording:
        """The prompts of every recording, in order (e.g. shards of one run); all settings must agree."""
        if not recordings:
            raise ValueError("No recordings to concatenate.")

        def settings(recording: ReplayRecording) -> tuple:
            r = recording
            return r.tree_config, r.vocab_size, r.max_new_tokens, r.feature_layers, r.eos_token_ids

        for recording in recordings[1:]:
            if settings(recording) != settings(recordings[0]):
                raise ValueError(
                    f"Recordings made with different settings cannot be concatenated: {settings(recordings[0])} vs "
                    f"{settings(recording)} (tree config, vocab, max_new_tokens, feature layers, eos). Record every "
                    "shard with the same options."
                )
        target_weights, drafter_weights = check_same_models(recordings, "concatenated")
        with_ids = all(recording.keeps_prompt_ids for recording in recordings)
        return replace(
            recordings[0],
            prompts=[trees for recording in recordings for trees in recording.prompts],
            prompt_ids=[ids for recording in recordings for ids in recording.prompt_ids] if with_ids else [],
            target_weights=target_weights,
            drafter_weights=drafter_weights,
        )

    def sequence(self, prompt: int) -> list[int]:
        """Prompt ``prompt``'s ids followed by its whole greedy generation."""
        if not self.keeps_prompt_ids:
            raise ValueError(
                "This recording does not keep its prompts' ids (recorded before they were kept): record it again "
                "with `hf-adaptive-spec record` to replay a prompt-lookup branch."
            )
        trees = self.prompts[prompt]
        last = [trees[-1].target_next[0]] if trees else []
        return self.prompt_ids[prompt] + [tree.tokens[0] for tree in trees] + last

    def save(self, directory: str | Path) -> None:
        """``recording.json`` (trees) and ``features.safetensors`` (hidden states, if any)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tensors: dict[str, torch.Tensor] = {}
        prompts = []
        for p, trees in enumerate(self.prompts):
            rows = []
            for t, tree in enumerate(trees):
                rows.append(
                    [tree.context_length, tree.tokens, tree.parents, tree.depths, tree.scores, tree.target_next]
                )
                for layer, value in tree.features.items():
                    tensors[f"{p}.{t}.{layer}"] = value.detach().float().contiguous()
            prompts.append(rows)
        c = self.tree_config
        meta = {
            "format": RECORDING_FORMAT,
            "tree_config": {"depth": c.depth, "top_k": c.top_k, "total_tokens": c.total_tokens},
            "vocab_size": self.vocab_size,
            "max_new_tokens": self.max_new_tokens,
            "feature_layers": list(self.feature_layers),
            "eos_token_ids": list(self.eos_token_ids),
            "prompt_ids": self.prompt_ids,
            **{key: value for key, value in self.model_digests().items() if value is not None},
            "prompts": prompts,
        }
        (directory / "recording.json").write_text(json.dumps(meta), encoding="utf-8")
        if tensors:
            save_file(tensors, str(directory / "features.safetensors"))

    @classmethod
    def load(cls, directory: str | Path) -> ReplayRecording:
        """The recording saved in ``directory``; one damaged or saved in part (a file cut short or missing, a row
        without its fields) is refused naming the folder, never loaded as another recording."""
        directory = Path(directory)
        try:
            meta = json.loads((directory / "recording.json").read_text(encoding="utf-8"))
        except ValueError as error:  # JSONDecodeError, UnicodeDecodeError: the file was cut short or overwritten
            raise damaged_recording(directory, f"recording.json does not parse: {error}") from error
        if not isinstance(meta, dict) or meta.get("format") != RECORDING_FORMAT:
            raise ValueError(
                f"{directory} is not a replay recording ({RECORDING_FORMAT}); record one with record_replay()."
            )
        try:
            return cls.from_saved(directory, meta)
        except (KeyError, TypeError, ValueError, SafetensorError) as error:
            what = f"no entry {error}" if isinstance(error, KeyError) else str(error)
            raise damaged_recording(directory, what) from error

    @classmethod
    def from_saved(cls, directory: Path, meta: dict) -> ReplayRecording:
        """The recording of ``meta`` (``recording.json``'s contents) and ``directory``'s feature file."""
        layers = tuple(meta["feature_layers"])
        feature_file = directory / "features.safetensors"
        if layers and any(meta["prompts"]) and not feature_file.exists():  # saved with its first tree's features
            raise ValueError(f"features.safetensors is missing, and the recording keeps hidden states {list(layers)}")
        tensors = load_file(str(feature_file)) if feature_file.exists() else {}
        prompts = [
            [
                ReplayTree(*row, features={layer: tensors[f"{p}.{t}.{layer}"] for layer in layers})
                for t, row in enumerate(rows)
            ]
            for p, rows in enumerate(meta["prompts"])
        ]
        prompt_ids = meta.get("prompt_ids", [])
        if prompt_ids and len(prompt_ids) != len(prompts):
            raise ValueError(f"it keeps the ids of {len(prompt_ids)} prompts and the trees of {len(prompts)}")
        return cls(
            tree_config=TreeConfig(**meta["tree_config"]),
            vocab_size=meta["vocab_size"],
            max_new_tokens=meta["max_new_tokens"],
            prompts=prompts,
            feature_layers=layers,
            eos_token_ids=tuple(meta["eos_token_ids"]),
            prompt_ids=prompt_ids,
            target_weights=meta.get("target_weights"),
            drafter_weights=meta.get("drafter_weights"),
        )

    def model_digests(self) -> dict[str, str | None]:
        """``target_weights`` and ``drafter_weights`` by name, as ``recording.json`` keeps them."""
        return {"target_weights": self.target_weights, "drafter_weights": self.drafter_weights}


def check_same_models(recordings: Iterable[ReplayRecording], pooled: str) -> tuple[str | None, str | None]:
    """Refuse recordings of other targets or drafters where they are ``pooled`` (concatenated, replayed as one): a
    policy or a ranking over them would mix two drafters' acceptance, or two targets' generations. Returns the
    target and drafter digests they share (None where no recording keeps one); an unknown digest is not compared."""
    recordings, shared = list(recordings), []
    for role in ("target", "drafter"):
        digests = {getattr(recording, f"{role}_weights") for recording in recordings} - {None}
        if len(digests) > 1:
            raise ValueError(
                f"Recordings made with other {role} weights cannot be {pooled}: their {role}s' digests are "
                f"{sorted(digests)}. Record every recording with the same target and drafter (`hf-adaptive-spec "
                "record` keeps their digests), or use them apart."
            )
        shared.append(next(iter(digests), None))
    return shared[0], shared[1]


def damaged_recording(directory: Path, what: str) -> ValueError:
    """The refusal of the recording in ``directory``, damaged or saved in part as ``what`` says."""
    return ValueError(
        f"The recording in {directory} is damaged or was saved in part ({what}): delete that folder and record it "
        "again (`hf-adaptive-spec record` with the same --output and options records the shards missing)."
    )


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
