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
from transformers.utils import logging

from ..core.cache_contents import check_continuation, remember_tokens
from ..core.cost_curve import CostCurve, bfloat16_conversion_hint, cost_curve_mismatch
from ..core.drafter_identity import drafter_mismatch
from ..core.exclusive import exclusive_use
from ..core.kv_cache import prepare_cache_for_trees
from ..core.static_cache import is_static_cache
from ..core.timing import synchronize
from ..core.transfer import upload
from ..core.tree import DraftTree, nodes_in_place
from ..drafters.base import DraftContext, Drafter, DraftOutcome
from ..policies.base import CycleFeedback, CycleState, DraftPolicy, TreeConfig, lookup_mismatch
from .acceptance import Acceptance, StopsAfter, accept_greedy, accept_sampling
from .emission import OutputSequence, TreeScores, emitting_each_token
from .input_checks import check_feature_layers, check_supported
from .prompt_lookup import LookupBranch, graft_chain
from .static_path import fast_path
from .statistics import SpeculationStats, SpeculativeDecoderOnlyOutput
from .stopping import processed_together
from .targets import (
    DynamicTarget,
    SharedCacheTarget,
    StaticTarget,
    TargetForward,
    check_cache_sharing,
    static_target,
)
from .tree_builder import DraftTimes, TreeBuilder, fit_largest_bucket

logger = logging.get_logger(__name__)

def _call_cache(
    model: PreTrainedModel, config: GenerationConfig, static_cache: str | None, model_kwargs: dict,
    cache_length: int | None = None,
):
    """The cache this call decodes in: the caller's (or the DynamicCache ``generate`` made), or with
    ``static_cache="engine"`` the model's own StaticCache of the size that fits the call, or of the call's
    ``max_cache_len`` (``cache_length``) as stock's would be (``FastPath.cache_for``)."""
    if static_cache == "engine":
        path = fast_path(model)
        return path.cache_for(path.needed_slots(config.max_length), claim=True, length=cache_length)
    return model_kwargs.get("past_key_values")


def _target_forward(
    model: PreTrainedModel,
    cache,
    config: GenerationConfig,
    drafter: Drafter,
    wanted: set[int],
    lookup_tokens: int,
    static_cache: str | None,
    model_kwargs: dict,
    cached_length: int,
) -> TargetForward:
    """The static-cache target for a StaticCache (the model's own with ``static_cache="engine"``), the
    drafter's shared-cache verification if it declares one, else the DynamicCache target; checked for
    this call, which continues after the ``cached_length`` tokens the cache holds."""
    static = static_cache == "engine" or is_static_cache(cache)
    sharing = drafter.cache_sharing
    if sharing is not None:
        check_cache_sharing(drafter, wanted, lookup_tokens, static)
    if static:
        return static_target(model, cache, static_cache == "engine", wanted, model_kwargs, config, cached_length)
    cache = prepare_cache_for_trees(cache)
    if sharing is not None:
        return SharedCacheTarget(model, cache, wanted, sharing, cached_length)
    return DynamicTarget(model, cache, wanted, cached_length)


def speculative_decoding(
    model: PreTrainedModel,
    input_ids: torch.LongTensor,
    logits_processor: LogitsProcessorList,
    stopping_criteria: StoppingCriteriaList,
    generation_config: GenerationConfig,
    spec_drafter: Drafter,
    spec_policy: DraftPolicy,
    spec_streamer: BaseStreamer | None = None,
    spec_static_cache: str | None = None,
    spec_cache_length: int | None = None,
    **model_kwargs,
) -> torch.LongTensor | SpeculativeDecoderOnlyOutput:
    """Lossless tree speculative decoding (greedy or sampling), batch size 1.

    Stock ``generate`` has already put the prompt to ``spec_streamer``: a call that fails from here on (a refused
    input, a drafter's or policy's error) ends the streamer before raising, so a consumer iterating a
    ``TextIteratorStreamer`` in another thread stops instead of waiting forever."""
    try:
        check_supported(model, input_ids, generation_config, model_kwargs)
        check_feature_layers(spec_policy, "policy")
        check_feature_layers(spec_drafter, "drafter")
        input_ids = input_ids.to(model.device)  # prompt ids on the CPU with a model elsewhere: one copy, here
        wanted = set(spec_drafter.feature_layers) | set(spec_policy.feature_layers)
        lookup = LookupBranch.from_config(generation_config)
        cache = _call_cache(model, generation_config, spec_static_cache, model_kwargs, spec_cache_length)
        held = (cache,) if spec_static_cache == "engine" else ()  # the model's own cache: claimed as chosen
        with exclusive_use({"drafter": spec_drafter, "policy": spec_policy, "cache": cache}, held):
            cached_length = 0 if spec_static_cache == "engine" else check_continuation(cache, input_ids)
            target = _target_forward(model, cache, generation_config, spec_drafter, wanted, lookup.num_tokens,
                                     spec_static_cache, model_kwargs, cached_length)
            decoder = _Decoder(model, target, spec_drafter, spec_policy, generation_config, logits_processor, lookup)
            out = OutputSequence(input_ids, stopping_criteria, generation_config, spec_streamer)
            return decoder.run(out, model_kwargs)
    except BaseException:
        if spec_streamer is not None:
            spec_streamer.end()
        raise


def _drafter_accepted_length(path: list[int], drafter_nodes: int) -> int:
    """Accepted tokens before ``path`` (root first) enters a node the lookup branch grafted (numbered from
    ``drafter_nodes`` on): what the drafter itself got right."""
    return next((i for i, node in enumerate(path[1:]) if node >= drafter_nodes), len(path) - 1)


class _Decoder:
    """One cycle at a time: ask the policy, draft a tree, verify it, accept, commit, give feedback."""

    def __init__(self, model, target: TargetForward, drafter: Drafter, policy: DraftPolicy,
                 config: GenerationConfig, processor: LogitsProcessorList, lookup: LookupBranch):
        self.model, self.target, self.drafter, self.policy = model, target, drafter, policy
        self.config, self.processor, self.lookup = config, processor, lookup
        # a caller's processors: each token emitted before the next row is processed (fixed for the call)
        self.emits_each_token = not processed_together(processor)
        self.builder: TreeBuilder | None = None  # once the prefill shows the target's vocabulary
        self.capacity = target.path.largest_bucket if isinstance(target, StaticTarget) else None
        if self.capacity is not None and lookup.num_tokens >= self.capacity:  # else a long match fails mid-call
            raise ValueError(
                f"prompt_lookup_num_tokens={lookup.num_tokens} verifies up to {lookup.num_tokens + 1} tokens per cycle "
                f"(the chain and the cycle's root), but the static-cache path verifies at most {self.capacity} (its "
                f"largest bucket): pass prompt_lookup_num_tokens <= {self.capacity - 1}, or add a bucket of at least "
                f"{lookup.num_tokens + 1}: hf_adaptive_spec.fast_path(model, buckets="
                f"{(*target.path.buckets, lookup.num_tokens + 1)}) before generate."
            )
        self.stats = SpeculationStats()

    def run(self, out: OutputSequence, model_kwargs: dict) -> torch.LongTensor | SpeculativeDecoderOnlyOutput:
        """The decoding loop of one call, with its drafter, policy and cache held: prefill, then
        cycles until a stopping criterion ends ``out``."""
        started = time.perf_counter()
        self.drafter.bind(self.model)
        tick = time.perf_counter()
        self.policy.begin_generation()
        self.stats.policy_time += time.perf_counter() - tick
        if isinstance(self.target, StaticTarget):
            self.drafter.use_static_shapes(self.config.max_length, self.target.options)
        if self.target.cached_length:
            self.drafter.continue_after(self.target.cached_length)
        with self.target:
            first_logits, features = self.target.prefill(out.sequence, model_kwargs)
            # the prefill's logits (always computed): its row is not rescored before the walk asks for it
            self.builder = TreeBuilder(self.drafter, self.policy, target_vocab_size=first_logits.logits.shape[-1])
            root = DraftTree.with_root(-1)
            choice = self._accept(root, TreeScores(root, first_logits, out.sequence, self.processor))
            out.emit([choice.next_token], choice.score_row, lambda _: first_logits[0])
            self.lookup.start(out.sequence)
            while not out.finished:
                features = self.cycle(out, features)
        result = self._finish(out, time.perf_counter() - started)
        if out.streamer is not None:  # after _finish: a failure there ends it once, in speculative_decoding
            out.streamer.end()
        return result

    def _finish(self, out: OutputSequence, seconds: float) -> torch.LongTensor | SpeculativeDecoderOnlyOutput:
        stats, target, drafter = self.stats, self.target, self.drafter
        stats.total_time = seconds
        stats.compiled, stats.compile_time = target.compiled, target.compile_time + drafter.compile_time
        stats.packaged = target.packaged
        stats.cache = "static" if isinstance(target, StaticTarget) else "dynamic"
        self._report_policy_fit(stats)
        self.model.last_speculation = stats
        returned = target.cache_for_caller() if self.config.return_dict_in_generate else None
        self._remember_cache_contents(out.sequence, returned)
        if returned is None:
            return out.sequence
        return SpeculativeDecoderOnlyOutput(
            sequences=out.sequence,
            scores=out.scores,
            logits=out.raw_logits,
            past_key_values=returned,
            speculation=stats,
        )

    def _remember_cache_contents(self, sequence: torch.LongTensor, returned) -> None:
        """Which tokens the caller's cache (or the copy returned of the engine's own) now holds: every token of
        the output but the last, as stock's does (``core/cache_contents.py``)."""
        caller_cache = returned if self.target.own_cache else self.target.cache
        if caller_cache is not None:
            remember_tokens(caller_cache, sequence[0, :-1])

    def _report_policy_fit(self, stats: SpeculationStats) -> None:
        """Name this call's cost curve; report a policy trained on another one, with another drafter or with
        another prompt-lookup branch, and a bfloat16 call on a CPU that converts bfloat16 (warn once of each)."""
        path = "compiled" if stats.compiled else "static" if stats.cache == "static" else "eager"
        running = CostCurve.of(self.model.device, self.model.dtype, path)
        stats.cost_curve = str(running)
        policy_name = type(self.policy).__name__
        trained_on = getattr(self.policy, "trained_on", None)
        learned = self.policy.learned
        stats.policy_cost_curve_mismatch = cost_curve_mismatch(policy_name, trained_on, running, learned)
        trained_for = getattr(self.policy, "trained_for_drafter", None)
        if trained_for is not None:  # the drafter's digest is only computed for a policy that records one
            weights = self.drafter.weights_digest()
            stats.policy_drafter_mismatch = drafter_mismatch(
                policy_name, trained_for, type(self.drafter).__name__, weights, learned
            )
        trained_with = getattr(self.policy, "trained_with_lookup_tokens", None)
        trained_ngram_size = getattr(self.policy, "trained_with_lookup_ngram_size", None)
        stats.policy_lookup_mismatch = lookup_mismatch(
            policy_name, trained_with, self.lookup.num_tokens, trained_ngram_size, self.lookup.ngram_size, learned
        )
        reports = (stats.policy_cost_curve_mismatch, stats.policy_drafter_mismatch, stats.policy_lookup_mismatch,
                   bfloat16_conversion_hint(running))
        for report in reports:
            if report:
                logger.warning_once(report)

    def cycle(self, out: OutputSequence, new_features: dict[int, torch.Tensor]) -> dict[int, torch.Tensor]:
        """Run one cycle after ``out.sequence``; returns the features of the tokens it committed (plus
        those the drafter has not read yet)."""
        sequence = out.sequence
        past_length = sequence.shape[1] - 1
        times, drafter_compiling_before = DraftTimes(), self.drafter.compile_time
        tree, drafter_nodes, draft_depth, drafted = self._draft(sequence, new_features, times, out.last_token)
        tick, compiling_before = time.perf_counter(), self.target.compile_time
        tree_logits = self.target.verify(tree, past_length)
        scores = TreeScores(tree, tree_logits, sequence, self.processor)
        stops_after = emitting_each_token(out, scores, tree_logits) if self.emits_each_token else None
        result = self._accept(tree, scores, stops_after)
        verify_time = time.perf_counter() - tick - (self.target.compile_time - compiling_before)
        tokens = [tree.tokens[i] for i in result.path[1:]] + [result.next_token]
        # one upload for the tokens to emit and the path to keep in the cache (as long as the tokens)
        uploaded = upload([tokens, result.path], sequence)
        if stops_after is not None:  # the walk emitted them, each before the next row was processed
            emitted = len(tokens)
        else:
            emitted = out.emit(tokens, result.score_row, lambda index: tree_logits[result.path[index]], uploaded[:1])
        self.lookup.extend(tokens[:emitted])
        tick = time.perf_counter()
        # the cache keeps what the sequence got: a stopping criterion met inside the path drops the rest
        kept = self.target.commit(tree, past_length, uploaded[1, :emitted], nodes_in_place(result.path[:emitted]))
        synchronize(self.model.device)  # on CUDA the commit is queued: time it here, not in the next cycle's draft
        verify_time += time.perf_counter() - tick
        if drafted:
            features = {i: kept[i][:, :emitted] for i in self.drafter.feature_layers}
            outcome = DraftOutcome(tree, result.path[:emitted], tokens[:emitted], features, drafter_nodes)
            self._give_feedback(outcome, times)
        else:  # the drafter did not run and has yet to read new_features
            kept = {i: torch.cat([new_features[i], kept[i]], dim=1) for i in kept}
        times.draft -= self.drafter.compile_time - drafter_compiling_before  # compiling is not drafting
        drafter_accepted = _drafter_accepted_length(result.verified_path, drafter_nodes)
        self._record(sequence.shape[1], tree, result, draft_depth, drafter_accepted, times, verify_time, emitted)
        return kept

    def _accept(self, tree: DraftTree, scores: TreeScores, stops_after: StopsAfter | None = None) -> Acceptance:
        """Rejection sampling, or the greedy walk with every node's argmax read at once where that pays."""
        if self.config.do_sample:
            return accept_sampling(tree, scores, stops_after)
        return accept_greedy(tree, scores, scores.argmaxes(), stops_after)

    def _give_feedback(self, outcome: DraftOutcome, times: DraftTimes) -> None:
        """The drafter's :meth:`~Drafter.observe` (drafting time: an online learner logs its records here)."""
        tick = time.perf_counter()
        self.drafter.observe(outcome)
        times.draft += time.perf_counter() - tick

    def _draft(self, sequence, new_features, times: DraftTimes, root_token: int):
        room = self.config.max_length - sequence.shape[1] - 1  # leave room for the bonus token
        chain: list[int] = []  # before the policy: it may draft less where the branch matched
        if self.lookup.num_tokens:
            tick = time.perf_counter()
            chain = self.lookup.chain(sequence, room)  # from the host's copy of the sequence: no device read
            times.draft += time.perf_counter() - tick
        tick = time.perf_counter()
        last_features = {i: new_features[i][0, -1] for i in self.policy.feature_layers}
        config = self.policy.tree_config(CycleState(sequence.shape[1], last_features, lookup_length=len(chain)))
        times.policy += time.perf_counter() - tick
        if not isinstance(config, TreeConfig):
            raise ValueError(f"The policy's tree_config returned {config!r}; expected a TreeConfig.")
        if config.sample_drafts and chain:  # sampled sibling groups must stay whole: no chain grafted among them
            logger.warning_once(
                f"{type(self.policy).__name__} drafts sampled trees (TreeConfig.sample_drafts), onto which the "
                "prompt-lookup branch grafts no chain: prompt_lookup_num_tokens has no effect on those cycles (the "
                "output is exact either way). Use a deterministic tree to combine drafting with prompt lookup."
            )
            chain = []
        max_depth = min(config.depth, room)
        if self.capacity is not None:  # the tree and the chain fit the largest verification bucket by construction
            config = self._fit_largest_bucket(config, len(chain))
        context = DraftContext(
            sequence, {i: new_features[i] for i in self.drafter.feature_layers}, self.target.draft_cache
        )
        tree = self.builder.build(context, config, max_depth, times, lookup_length=len(chain), root_token=root_token)
        draft_depth = tree.max_depth  # the drafter's; a lookup chain may reach deeper
        drafter_nodes = len(tree)
        graft_chain(tree, chain)  # its new nodes are numbered after the drafter's
        # drafted: the drafter ran (the builder counts its steps; a tree of the root alone runs none, and the drafter
        # then has yet to read this cycle's features)
        return tree, drafter_nodes, draft_depth, times.levels > 0

    def _fit_largest_bucket(self, config: TreeConfig, chain_length: int) -> TreeConfig:
        """Lower ``total_tokens`` so the tree and the lookup chain fit the largest bucket; counted in
        ``stats.capped_trees`` and warned about once, never silent."""
        fitted = fit_largest_bucket(config, self.capacity, chain_length)
        if fitted is config:
            return config
        self.stats.capped_trees += 1
        logger.warning_once(
            f"The policy asked for trees of {config.total_tokens} tokens; the static-cache path verifies at most "
            f"{self.capacity} per cycle (its largest bucket, prompt-lookup chain included), so trees are capped "
            "(out.speculation.capped_trees counts them). Use a smaller tree, or larger buckets: "
            "hf_adaptive_spec.fast_path(model, buckets=(8, 12, 16, 32, 64)) before generate."
        )
        return fitted

    def _record(self, context_length: int, tree: DraftTree, result: Acceptance, draft_depth: int,
                drafter_accepted: int, times: DraftTimes, verify_time: float, emitted: int) -> None:
        """Statistics count the tokens the cycle emitted (a stopping criterion met inside the accepted path drops
        the rest, and τ counts what generate returns); the policy observes what verification accepted: with a
        caller's processors, up to the token a stop ended the walk on (its rows past a stop are not processed, as
        stock processes none, so whether later drafts were right is not known)."""
        stats = self.stats
        stats.record(accepted=emitted - 1, depth=draft_depth, verified=len(tree), levels=times.levels,
                     draft_seconds=times.draft, verify_seconds=verify_time)
        stats.policy_time += times.policy
        tick = time.perf_counter()
        self.policy.observe(
            CycleFeedback(
                context_length=context_length,
                draft_depth=draft_depth,
                verified_tokens=len(tree),
                accepted_length=len(result.verified_path) - 1,
                draft_time=times.draft,
                verify_time=verify_time,
                policy_time=times.policy,
                drafter_accepted_length=drafter_accepted,
                committed_tokens=emitted,
            )
        )
        stats.policy_time += time.perf_counter() - tick
