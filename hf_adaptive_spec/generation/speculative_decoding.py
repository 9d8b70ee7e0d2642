"""The decoding loop: draft a tree, verify it in one target forward, keep the accepted path.

It runs as a ``custom_generate`` callable of transformers' ``generate``, which has already
merged the GenerationConfig, built the logits processors and stopping criteria, created the
cache and sent the prompt to the streamer.
"""

from __future__ import annotations

import time

import torch
from transformers import GenerationConfig, LogitsProcessorList, PreTrainedModel, StoppingCriteriaList
from transformers.generation.streamers import BaseStreamer

from ..drafters.base import DraftContext, Drafter
from ..policies.base import CycleFeedback, CycleState, DraftPolicy, TreeConfig
from .acceptance import Acceptance, accept_greedy, accept_sampling
from ..core.attention import check_tree_attention_support, tree_attention_mask
from ..core.features import FeatureCapture, decoder_layers
from ..core.kv_cache import compact_cache, prepare_cache_for_trees
from ..core.output_head import OutputHead
from .statistics import SpeculationStats, SpeculativeDecoderOnlyOutput
from ..core.tree import DraftTree
from .prompt_lookup import graft_chain, lookup_continuation
from .tree_builder import DraftTimes, TreeBuilder


def _check_supported(model: PreTrainedModel, input_ids: torch.Tensor, config: GenerationConfig, model_kwargs: dict) -> None:
    if input_ids.shape[0] != 1:
        raise ValueError(
            f"assistant_policy supports batch size 1 only (got {input_ids.shape[0]} sequences): call generate once "
            "per prompt, or drop assistant_policy for batched stock generation."
        )
    if model.config.is_encoder_decoder:
        raise ValueError("assistant_policy supports decoder-only models only.")
    if (config.num_beams or 1) > 1:
        raise ValueError("assistant_policy cannot be combined with beam search (num_beams > 1).")
    if config.output_attentions or config.output_hidden_states:
        raise ValueError("assistant_policy does not return attentions or hidden states; drop output_attentions/output_hidden_states.")
    if model_kwargs.get("inputs_embeds") is not None:
        raise ValueError("assistant_policy needs input_ids, not inputs_embeds.")
    mask = model_kwargs.get("attention_mask")
    if mask is not None and not bool(mask.all()):
        raise ValueError("assistant_policy does not support padded inputs: pass the prompt without padding.")
    check_tree_attention_support(model.config, role="target model")


class _Output:
    """Appends emitted tokens one at a time, applying the stopping criteria after each."""

    def __init__(self, input_ids, stopping_criteria, config: GenerationConfig, streamer: BaseStreamer | None):
        self.sequence = input_ids
        self.stopping_criteria = stopping_criteria
        self.streamer = streamer
        wants_dict = config.return_dict_in_generate
        self.scores = () if wants_dict and config.output_scores else None
        self.raw_logits = () if wants_dict and config.output_logits else None
        self.finished = False

    def emit(self, tokens: list[int], score_rows: list[torch.Tensor], raw_rows: list[torch.Tensor]) -> None:
        emitted = []
        for token, score_row, raw_row in zip(tokens, score_rows, raw_rows):
            token_tensor = torch.tensor([[token]], dtype=self.sequence.dtype, device=self.sequence.device)
            self.sequence = torch.cat([self.sequence, token_tensor], dim=-1)
            if self.scores is not None:
                self.scores += (score_row[None],)
            if self.raw_logits is not None:
                self.raw_logits += (raw_row[None],)
            emitted.append(token)
            if bool(self.stopping_criteria(self.sequence, self.scores).any()):
                self.finished = True
                break
        if self.streamer is not None and emitted:
            self.streamer.put(torch.tensor(emitted, dtype=self.sequence.dtype))


class _TreeLogits:
    """Target logits per tree node, ``[vocab]`` float32 rows.

    With ``hidden`` (the final-norm output ``[n, hidden]``) the lm_head runs only for the nodes
    the acceptance walk visits (about τ of them), not for every verified token.
    """

    def __init__(
        self, logits: torch.Tensor | None = None, hidden: torch.Tensor | None = None, head: OutputHead | None = None
    ):
        self.logits, self.hidden, self.head = logits, hidden, head
        self.rows: dict[int, torch.Tensor] = {}

    def __getitem__(self, node: int) -> torch.Tensor:
        if self.logits is not None:
            return self.logits[node]
        if node not in self.rows:
            self.rows[node] = self.head(self.hidden[node : node + 1])[0].float()
        return self.rows[node]


class _TreeScores:
    """Processed target scores per tree node, computed on demand along the acceptance walk."""

    def __init__(self, tree: DraftTree, logits: _TreeLogits, sequence: torch.Tensor, processor: LogitsProcessorList):
        self.tree, self.logits, self.sequence, self.processor = tree, logits, sequence, processor
        self.cache: dict[int, torch.Tensor] = {}

    def __call__(self, node: int) -> torch.Tensor:
        if node not in self.cache:
            path_tokens = [self.tree.tokens[i] for i in self.tree.path_to(node)[1:]]
            prefix = torch.cat([self.sequence, self.sequence.new_tensor([path_tokens])], dim=-1)
            self.cache[node] = self.processor(prefix, self.logits[node][None].clone())[0]
        return self.cache[node]


def _lm_head_is_last_step(model: PreTrainedModel, final_hidden: torch.Tensor, logits: torch.Tensor) -> bool:
    """Whether the model's logits are exactly ``lm_head(final-norm output)`` (no softcapping,
    scaling, ...), checked on the prefill's last position: then verification can skip the head."""
    head = model.get_output_embeddings()
    if head is None:
        return False
    with torch.no_grad():
        recomputed = head(final_hidden[None])[0].float()
    return torch.allclose(recomputed, logits.float(), rtol=1e-4, atol=1e-4)


def verify_tree(
    model: PreTrainedModel, cache, tree: DraftTree, past_length: int, lazy_head: OutputHead | None
) -> _TreeLogits:
    """One target forward over the whole tree (its rows are appended to ``cache``); with ``lazy_head``
    the decoder only, the head running later on the nodes the acceptance walk visits."""
    device = model.device
    positions = past_length + torch.tensor(tree.depths, device=device)
    mask = tree_attention_mask(
        model.config, cache, positions, positions, tree.ancestor_mask().to(device), model.dtype
    )
    inputs = dict(
        input_ids=torch.tensor([tree.tokens], device=device),
        attention_mask=mask,
        position_ids=positions[None],
        past_key_values=cache,
        use_cache=True,
    )
    if lazy_head is not None:
        return _TreeLogits(hidden=model.get_decoder()(**inputs).last_hidden_state[0], head=lazy_head)
    return _TreeLogits(logits=model(**inputs).logits[0].float())


def speculative_decoding(
    model: PreTrainedModel,
    input_ids: torch.LongTensor,
    logits_processor: LogitsProcessorList,
    stopping_criteria: StoppingCriteriaList,
    generation_config: GenerationConfig,
    spec_drafter: Drafter,
    spec_policy: DraftPolicy,
    spec_streamer: BaseStreamer | None = None,
    **model_kwargs,
) -> torch.LongTensor | SpeculativeDecoderOnlyOutput:
    """Lossless tree speculative decoding (greedy or sampling), batch size 1."""
    _check_supported(model, input_ids, generation_config, model_kwargs)
    cache = prepare_cache_for_trees(model_kwargs.get("past_key_values"))
    if cache.get_seq_length() > 0:
        raise ValueError("assistant_policy cannot continue from a pre-filled past_key_values; pass a fresh cache.")
    started = time.perf_counter()
    spec_drafter.bind(model)
    stats = SpeculationStats()
    accept = accept_sampling if generation_config.do_sample else accept_greedy
    out = _Output(input_ids, stopping_criteria, generation_config, spec_streamer)
    final_index = len(decoder_layers(model))
    wanted = set(spec_drafter.feature_layers) | set(spec_policy.feature_layers)
    shared = spec_drafter.shared_layers
    if shared and any(i < shared for i in wanted):
        raise ValueError(
            f"{type(spec_drafter).__name__} shares the target's first {shared} layers, whose hidden states are not "
            f"computed for every tree node; features {sorted(i for i in wanted if i < shared)} cannot be served. "
            "Ask for hidden-state indices >= the shared layers, or disable the drafter's cache sharing."
        )
    lookup_tokens = generation_config.prompt_lookup_num_tokens or 0
    lookup_ngram_size = generation_config.max_matching_ngram_size or 2  # transformers' default
    if lookup_tokens and shared:
        raise ValueError(
            f"{type(spec_drafter).__name__} verifies through its own cache of the draft nodes, which has no entries for "
            "prompt-lookup nodes: drop prompt_lookup_num_tokens, or disable the drafter's cache sharing."
        )
    with FeatureCapture(model, wanted | {final_index}) as capture:
        logits = model(**model.prepare_inputs_for_generation(input_ids, **model_kwargs), return_dict=True).logits
        head_is_last_step = _lm_head_is_last_step(model, capture.latest[final_index][0, -1], logits[0, -1])
        lazy_head = OutputHead(model.get_output_embeddings()) if head_is_last_step else None
        if shared and lazy_head is None:
            raise ValueError(
                f"{type(spec_drafter).__name__} verifies through the target's final norm and lm_head, but this model's "
                "logits are not lm_head(final norm) (softcapping or scaling): disable the drafter's cache sharing."
            )
        first = _TreeLogits(logits=logits[0, -1:].float())
        choice = accept(DraftTree.with_root(-1), _TreeScores(DraftTree.with_root(-1), first, input_ids, logits_processor))
        out.emit([choice.next_token], choice.score_rows, [first[0]])
        new_features = {i: capture.latest[i] for i in wanted}
        builder = TreeBuilder(spec_drafter, spec_policy, target_vocab_size=logits.shape[-1])
        while not out.finished:
            sequence = out.sequence
            past_length = sequence.shape[1] - 1
            times = DraftTimes()
            tick = time.perf_counter()
            last_features = {i: new_features[i][0, -1] for i in spec_policy.feature_layers}
            config = spec_policy.tree_config(CycleState(sequence.shape[1], last_features))
            times.policy += time.perf_counter() - tick
            if not isinstance(config, TreeConfig):
                raise ValueError(f"The policy's tree_config returned {config!r}; expected a TreeConfig.")
            room = generation_config.max_length - sequence.shape[1] - 1  # leave room for the bonus token
            max_depth = min(config.depth, room)
            context = DraftContext(
                sequence, {i: new_features[i] for i in spec_drafter.feature_layers}, cache if shared else None
            )
            chain: list[int] = []
            if lookup_tokens and room > 0 and not config.sample_drafts:  # sampled sibling groups must stay whole
                tick = time.perf_counter()
                chain = lookup_continuation(sequence[0], lookup_ngram_size, min(lookup_tokens, room))
                times.draft += time.perf_counter() - tick
            tree = builder.build(context, config, max_depth, times, lookup_length=len(chain))
            draft_depth = tree.max_depth  # the drafter's; a lookup chain may reach deeper
            graft_chain(tree, chain)
            drafted = max_depth >= 1  # else the drafter did not run and has yet to read new_features

            tick = time.perf_counter()
            if shared:
                hidden = spec_drafter.verify(model, cache, tree, past_length)
                tree_logits = _TreeLogits(hidden=hidden, head=lazy_head)
            else:
                tree_logits = verify_tree(model, cache, tree, past_length, lazy_head)
            scores = _TreeScores(tree, tree_logits, sequence, logits_processor)
            result: Acceptance = accept(tree, scores)
            keep = torch.tensor(result.path, device=model.device)
            compact_cache(cache, len(tree), keep)
            kept = {i: capture.latest[i][:, keep] for i in wanted}  # only what drafter/policy read
            new_features = kept if drafted else {i: torch.cat([new_features[i], kept[i]], dim=1) for i in wanted}
            verify_time = time.perf_counter() - tick

            tokens = [tree.tokens[i] for i in result.path[1:]] + [result.next_token]
            out.emit(tokens, result.score_rows, [tree_logits[i] for i in result.path])
            stats.record(accepted=len(result.path) - 1, depth=draft_depth, verified=len(tree))
            stats.draft_time += times.draft
            stats.policy_time += times.policy
            stats.verify_time += verify_time
            tick = time.perf_counter()
            spec_policy.observe(
                CycleFeedback(
                    context_length=sequence.shape[1],
                    draft_depth=draft_depth,
                    verified_tokens=len(tree),
                    accepted_length=len(result.path) - 1,
                    draft_time=times.draft,
                    verify_time=verify_time,
                    policy_time=times.policy,
                )
            )
            stats.policy_time += time.perf_counter() - tick
    if spec_streamer is not None:
        spec_streamer.end()
    stats.total_time = time.perf_counter() - started
    model.last_speculation = stats
    if not generation_config.return_dict_in_generate:
        return out.sequence
    return SpeculativeDecoderOnlyOutput(
        sequences=out.sequence,
        scores=out.scores,
        logits=out.raw_logits,
        past_key_values=cache,
        speculation=stats,
    )
