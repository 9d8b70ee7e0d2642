"""The hardware cost profile: what verification, a draft step and a policy call cost here.

It feeds cost-model rewards (LTD, Re-SpS), RADAR's latency model, the replay environment
and the reports. Times are medians of repeated wall-clock measurements.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
from transformers import DynamicCache, PreTrainedModel

from ..core.cost_curve import CostCurve
from ..core.drafter_identity import DrafterIdentity
from ..core.timing import timed
from ..core.attention import tree_attention_mask
from ..core.kv_cache import drop_tail, prepare_cache_for_trees
from ..core.static_cache import full_length_static_cache
from ..core.static_steps import DRAFT_BUCKETS
from ..core.output_head import OutputHead
from ..core.tree import DraftTree, full_tree_size
from ..drafters.base import Drafter
from ..generation.static_path import FastPath, fast_path
from ..generation.targets import StaticTarget
from ..policies.base import CycleState, DraftPolicy, TreeConfig
from ..policies.static import StaticTreePolicy

DEFAULT_VERIFY_TOKENS = (1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64)


@dataclass
class HardwareProfile:
    """Measured costs on one machine, for one target (and optionally a drafter and policy).

    Args:
        verify_tokens / verify_seconds: target forward time for ``n`` new tokens (a tree of ``n``
            nodes) after ``context_length`` cached tokens; on the eager path ``profile`` times each as ``generate``
            verifies it (:func:`measure_verification_in_generate`; profiles made before 2026-12-02 hold a bare
            forward's time, :func:`measure_verification`).
        draft_step_seconds: drafter time per draft level after a cycle's first, measured inside ``generate``
            (:func:`measure_in_generate`; profiles made before 2026-12-01 hold the mean over every level).
        catch_up_tokens / catch_up_seconds: what a cycle drafting one level costs when its first step reads
            this many committed tokens the drafter has not read yet, measured inside ``generate``
            (:func:`measure_catch_up_in_generate`; ascending token counts, interpolated between them). A cycle
            that drafts after cycles that drafted nothing reads every token committed since (EAGLE-3 on the
            compiled bfloat16 path of two AVX2 cores, live: 5.7 ms for up to 4 tokens, 8.0 ms for 5-8, 12.5 ms
            for 9-16, 20.6 ms for 17-32; results/README.md), and the first drafted cycle reads the prompt. :meth:`draft_time` charges it; None in
            profiles made before it was measured, where every level costs ``draft_step_seconds``.
        policy_call_seconds: mean policy time per cycle, measured inside ``generate``.
        path: ``"eager"`` (the DynamicCache engine) or ``"static"`` / ``"compiled"`` (the
            static-cache path, eager or compiled): the curve a policy or replay is trained on.
        buckets: the static-cache path's verification sizes: a tree of ``n`` nodes is padded to
            the smallest bucket that fits it (trees never exceed the largest), so it costs the
            bucket's time, a step function. None on the eager path (``n`` costs ``n``).
        bucket_seconds: each bucket's verification time measured inside ``generate`` (a padded tree,
            its mask, acceptance and the cache update: what a cycle pays), in ``buckets`` order.
            When set, it is a tree's cost on the static path; ``verify_seconds`` stays the bare
            forwards. None in profiles made before it was measured.
        cache_slots: the static path's StaticCache length the times were measured in. Attention runs
            over every slot of a static cache, so a longer cache costs more per cycle (on a 2-core CPU
            an 8-token verification costs about 22 ms in 512 slots and 31 ms in 1,408): a profile timed
            in a shorter cache than you generate with under-charges every bucket, the larger ones most,
            and policies trained on it verify too much (results/README.md). None on the eager path.
        recommendation: what ``hf-adaptive-spec profile --recording`` found best on this curve
            (see :func:`~hf_adaptive_spec.profiling.recommended_policy`): ``{"tree": {depth, top_k,
            total_tokens, tau, tokens_per_second}, "policy": a shipped learned policy's name or None,
            ...}``; None when no recording was replayed.
        model / drafter: the target and the drafter timed, named as :mod:`~hf_adaptive_spec.profiling.identity`
            writes them (the target's ``name_or_path``; the EAGLE-3 checkpoint, or ``early exit: N layers``):
            :func:`~hf_adaptive_spec.profiling.recommended_policy` refuses the profile for others. None in
            profiles made before they were recorded.
        drafter_weights: a digest of the timed EAGLE-3 drafter's weights
            (:meth:`~hf_adaptive_spec.drafters.base.Drafter.weights_digest`), by which a loaded drafter
            object is recognised; None without an EAGLE-3 drafter and in profiles made before it was kept.
        instruction_set: the processor's matrix instruction set (:func:`~hf_adaptive_spec.core.cost_curve.instruction_set_of`:
            a CPU's, which decides what a many-token forward costs in bfloat16, or a GPU's compute capability);
            None in profiles made before it was recorded.
    """

    device: str
    dtype: str
    num_threads: int
    context_length: int
    verify_tokens: list[int] = field(default_factory=list)
    verify_seconds: list[float] = field(default_factory=list)
    draft_step_seconds: float | None = None
    policy_call_seconds: float | None = None
    catch_up_tokens: list[float] | None = None
    catch_up_seconds: list[float] | None = None
    path: str = "eager"
    buckets: list[int] | None = None
    recommendation: dict | None = None
    bucket_seconds: list[float] | None = None
    cache_slots: int | None = None
    model: str | None = None
    drafter: str | None = None
    drafter_weights: str | None = None
    instruction_set: str | None = None

    def __post_init__(self):
        if len(self.verify_tokens) != len(self.verify_seconds):
            raise ValueError(f"verify_tokens {self.verify_tokens} and verify_seconds need one time per size.")
        if len(set(self.verify_tokens)) != len(self.verify_tokens):
            raise ValueError(f"verify_tokens {self.verify_tokens} measures a size twice: give each size once.")
        pairs = sorted(zip(self.verify_tokens, self.verify_seconds))  # the interpolation reads them in order
        self.verify_tokens, self.verify_seconds = [n for n, _ in pairs], [s for _, s in pairs]
        if self.buckets is not None:
            if self.buckets != sorted(self.buckets) and self.bucket_seconds is not None:
                raise ValueError(f"bucket_seconds follow the buckets' order: give the buckets sorted, not {self.buckets}.")
            self.buckets = sorted(self.buckets)
            missing = sorted(set(self.buckets) - set(self.verify_tokens))
            if missing:
                raise ValueError(f"A profile with buckets {self.buckets} must measure each of them; {missing} not measured.")
        if (self.catch_up_tokens is None) != (self.catch_up_seconds is None) or (
            self.catch_up_tokens is not None
            and (len(self.catch_up_tokens) != len(self.catch_up_seconds) or not self.catch_up_tokens
                 or self.catch_up_tokens != sorted(set(self.catch_up_tokens)))
        ):
            raise ValueError(
                f"catch_up_tokens {self.catch_up_tokens} and catch_up_seconds {self.catch_up_seconds} need one time per "
                "token count, the counts distinct and ascending (measure_catch_up_in_generate), or both None."
            )
        if self.bucket_seconds is not None and len(self.bucket_seconds) != len(self.buckets or []):
            raise ValueError(
                f"bucket_seconds has {len(self.bucket_seconds)} times for buckets {self.buckets}: give one time per "
                "bucket (measure_buckets_in_generate), or None."
            )

    def cost_curve(self) -> CostCurve:
        """Which cost curve this profile measured (what a policy trained on it records as ``trained_on``)."""
        return replace(CostCurve.of(self.device, self.dtype, self.path), instruction_set=self.instruction_set)

    def drafter_identity(self) -> DrafterIdentity | None:
        """The EAGLE-3 drafter this profile timed, by name and weights (what a policy trained on it records as
        ``trained_for_drafter``); None for a profile that timed no EAGLE-3 drafter or made before the digest was kept."""
        if self.drafter is None or self.drafter_weights is None:
            return None
        return DrafterIdentity(self.drafter, self.drafter_weights)

    def bucket_for(self, num_tokens: int) -> int:
        """The bucket a tree of ``num_tokens`` nodes is padded to (the largest for larger trees, which the
        engine lowers to fit it)."""
        if not self.buckets:
            raise ValueError("This profile has no buckets: it times the eager path, where n tokens cost n.")
        return next((bucket for bucket in self.buckets if num_tokens <= bucket), self.buckets[-1])

    def verify_time(self, num_tokens: int) -> float:
        """Verification time for ``num_tokens`` tokens: with ``buckets``, the time of the bucket it is
        padded to (as ``generate`` runs it when ``bucket_seconds`` is set); else interpolated between the
        measured sizes, and past the largest one along its last segment (a larger tree costs more, not the
        largest measured one's time); below the smallest, the smallest's time."""
        if self.buckets:
            bucket = self.bucket_for(num_tokens)
            if self.bucket_seconds is not None:
                return self.bucket_seconds[self.buckets.index(bucket)]
            num_tokens = bucket
        return piecewise_linear(self.verify_tokens, self.verify_seconds, num_tokens)

    def draft_time(self, levels: int, unread_tokens: int = 1) -> float:
        """Drafting time of a cycle of ``levels`` drafter steps whose first step reads ``unread_tokens``
        committed tokens (1 after a cycle that drafted and accepted nothing; more after accepted drafts, after
        cycles that drafted nothing, and for the prompt): the catch-up table's time for the first step, where
        measured, and ``draft_step_seconds`` for each later one; 0 for a cycle that drafts nothing."""
        if levels == 0:
            return 0.0
        if self.catch_up_tokens is None:
            return levels * self.draft_step_seconds
        first = piecewise_linear(self.catch_up_tokens, self.catch_up_seconds, unread_tokens)
        return first + (levels - 1) * self.draft_step_seconds

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> HardwareProfile:
        return cls(**json.loads(Path(path).read_text(encoding="utf-8")))


def piecewise_linear(xs: list[float], ys: list[float], x: float) -> float:
    """``y`` at ``x`` on the measured points ``(xs, ys)`` (``xs`` ascending): interpolated between them, past the
    last along the last segment (more costs more, not the largest measured time), below the first the first's."""
    if x <= xs[0] or len(xs) == 1:
        return ys[0]
    segment = next((i for i in range(1, len(xs)) if x <= xs[i]), len(xs) - 1)
    (x0, y0), (x1, y1) = (xs[segment - 1], ys[segment - 1]), (xs[segment], ys[segment])
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def unread_after(unread_tokens: int, drafted: bool, committed_tokens: int) -> int:
    """The committed tokens the drafter has not read when the next cycle begins: a cycle that drafted read its
    ``unread_tokens`` and leaves its own ``committed_tokens``; one that drafted nothing adds them to the rest."""
    return committed_tokens if drafted else unread_tokens + committed_tokens


def static_cache_slots(context_length: int, tokens_after_context: int) -> int:
    """The slots of the engine's own StaticCache for ``context_length`` cached tokens and ``tokens_after_context``
    more: a static cache attends over all of its slots, so a measurement's cache must be as long."""
    return FastPath.rounded_cache_length(context_length + tokens_after_context + 1)


@torch.no_grad()
def measure_verification(
    model: PreTrainedModel, context_length: int = 256, tokens: tuple[int, ...] = DEFAULT_VERIFY_TOKENS, repeats: int = 5
) -> tuple[list[int], list[float]]:
    """Median time of one verification of ``n`` tree tokens, for each ``n`` in ``tokens``: the
    decoder over every node plus the lm_head on two of them, as the engine runs it."""
    device = model.device
    decoder, head = model.get_decoder(), OutputHead(model.get_output_embeddings())
    generator = torch.Generator().manual_seed(0)
    context = torch.randint(0, model.config.vocab_size, (1, context_length), generator=generator).to(device)
    cache = prepare_cache_for_trees(DynamicCache(config=model.config))
    model(context, past_key_values=cache, use_cache=True)
    seconds = []
    for n in tokens:
        depths = torch.arange(n, device=device)  # a chain: same cost as any tree of n nodes
        positions = context_length + depths
        mask = tree_attention_mask(
            model.config, cache, positions, positions, torch.ones(n, n, dtype=torch.bool, device=device).tril(), model.dtype
        )
        ids = torch.randint(0, model.config.vocab_size, (1, n), generator=generator).to(device)
        runs = []
        for _ in range(repeats + 1):  # the first run warms up
            def verification():  # the engine runs the lm_head on the ~τ nodes its acceptance walk visits
                hidden = decoder(
                    input_ids=ids, attention_mask=mask, position_ids=positions[None], past_key_values=cache, use_cache=True
                ).last_hidden_state
                return [head(hidden[0, row : row + 1]) for row in range(min(n, 2))]

            runs.append(timed(device, verification)[1])  # on a GPU, the kernels' time, not their launch
            drop_tail(cache, n)
        seconds.append(statistics.median(runs[1:]))
    return list(tokens), seconds


@torch.no_grad()
def measure_static_verification(
    model: PreTrainedModel,
    context_length: int = 256,
    tokens: tuple[int, ...] = DEFAULT_VERIFY_TOKENS,
    repeats: int = 5,
    compile_options: dict | None = None,
    cache_slots: int | None = None,
) -> tuple[list[int], list[float], float]:
    """The same curve on the static-cache path the engine runs with ``cache_implementation="static"``:
    every ``n`` is its own bucket (so ``n`` is measured, not a padded size), compiled with
    ``compile_options`` (None: eager) in-process: ahead-of-time packages run the same graphs (no
    slower, results/README.md) and would leave one package per size on disk; in a StaticCache of
    ``cache_slots`` (default: the engine's own for this context). Returns ``(tokens, seconds,
    compile seconds)``."""
    sizes = tuple(sorted(set(tokens)))
    path = FastPath(model, buckets=sizes, package_dir=None)
    slots = cache_slots or static_cache_slots(context_length, sizes[-1])
    if slots < context_length + sizes[-1] + 1:
        raise ValueError(
            f"A cache of {slots} slots cannot hold {context_length} context tokens and a verification of {sizes[-1]}: "
            f"pass cache_slots >= {context_length + sizes[-1] + 1} or a shorter context_length."
        )
    cache = full_length_static_cache(model.config, slots)
    target = StaticTarget(model, cache, set(), path, compile_options)
    generator = torch.Generator().manual_seed(0)
    context = torch.randint(0, model.config.vocab_size, (1, context_length), generator=generator)
    target.prefill(context.to(model.device), {})
    seconds = []
    for n in sizes:
        chain = DraftTree(
            tokens=torch.randint(0, model.config.vocab_size, (n,), generator=generator).tolist(),
            parents=list(range(-1, n - 1)), depths=list(range(n)), scores=[0.0] * n,
        )  # a chain: same cost as any tree of n nodes
        runs = []
        for _ in range(repeats + 1):  # the first run warms up (and compiles)
            runs.append(timed(model.device, lambda: target.verify(chain, context_length)[0])[1])
        seconds.append(statistics.median(runs[1:]))
    return list(sizes), seconds, target.compile_time



def measure_in_generate(
    model: PreTrainedModel,
    input_ids: torch.LongTensor,
    drafter: Drafter,
    tree: StaticTreePolicy,
    max_new_tokens: int = 64,
    **generate_kwargs,
) -> tuple[float, float]:
    """``(seconds per draft level after a cycle's first, policy seconds per cycle)`` from one speculative
    ``generate`` (``generate_kwargs``: e.g. the compiled static-cache path's) whose cycles alternate ``tree`` and its
    first level alone: :func:`later_level_seconds` of their drafting times, which is what
    :meth:`HardwareProfile.draft_time` charges each level after the first. Drafting time holds the per-cycle
    prompt-lookup search and the drafter's ``observe``, which the difference cancels. (A mean over every level,
    as profiles made before 2026-12-01 took, counts the cheaper first level in: on an AVX2 EPYC, compiled float32,
    it gave 12.0 ms where the bench's later levels cost 16.5.)"""
    deep = tree.config if tree.config.reachable_depth >= 2 else TreeConfig(2, tree.config.top_k, 3)
    policy = _TreeRotation([deep, replace(deep, depth=1)])  # the tree, then its first level alone
    out = model.generate(
        input_ids, max_new_tokens=max_new_tokens, do_sample=False, assistant_model=drafter, assistant_policy=policy,
        return_dict_in_generate=True, **generate_kwargs,
    )
    stats = out.speculation
    return later_level_seconds(stats.draft_levels, stats.draft_times), stats.policy_time / max(stats.cycles, 1)


def later_level_seconds(draft_levels: list[int], draft_times: list[float]) -> float:
    """What each drafted level after a cycle's first costs: the median drafting time of the deepest cycles less
    that of the one-level cycles, over the levels between (0 where noise makes it negative)."""
    depth = max(draft_levels, default=0)
    deep = [seconds for levels, seconds in zip(draft_levels, draft_times) if levels == depth]
    shallow = [seconds for levels, seconds in zip(draft_levels, draft_times) if levels == 1]
    if depth < 2 or not shallow:
        raise ValueError(
            f"Timing a later draft level needs cycles of one level and of more; got levels {sorted(set(draft_levels))}: "
            "generate more tokens (max_new_tokens) so that the cycles alternate."
        )
    return max((statistics.median(deep) - statistics.median(shallow)) / (depth - 1), 0.0)


class _TreeRotation(DraftPolicy):
    """Drafts ``trees`` in turn, one a cycle, from the first at each generation (the profile's measurements)."""

    def __init__(self, trees: list[TreeConfig]):
        self.trees, self.cycle = tuple(trees), 0

    def begin_generation(self) -> None:
        self.cycle = 0

    def tree_config(self, state: CycleState) -> TreeConfig:
        self.cycle += 1
        return self.trees[(self.cycle - 1) % len(self.trees)]


class _DraftEveryKthCycle(_TreeRotation):
    """Drafts one level every ``interval``-th cycle and nothing in between, so that the drafting cycles' first steps
    read about ``interval`` times the committed tokens of a cycle (the profile's catch-up measurement)."""

    def __init__(self, interval: int):
        drafting, resting = TreeConfig(depth=1, top_k=1, total_tokens=2), TreeConfig(depth=0, top_k=1, total_tokens=1)
        super().__init__([drafting] + [resting] * (interval - 1))


def catch_up_points(unread: list[int], seconds: list[float], bounds: tuple[int, ...]) -> tuple[list[float], list[float]]:
    """``(mean tokens, median seconds)`` of the drafting cycles grouped by the smallest of ``bounds`` their unread
    tokens fit (the drafter's step buckets, then doublings); groups without a cycle are left out."""
    groups: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for tokens, time_ in zip(unread, seconds):
        groups[next((bound for bound in bounds if tokens <= bound), bounds[-1])].append((tokens, time_))
    points = [(statistics.mean(t for t, _ in group), statistics.median(s for _, s in group))
              for _, group in sorted(groups.items())]
    return [t for t, _ in points], [s for _, s in points]


def measure_catch_up_in_generate(
    model: PreTrainedModel,
    input_ids: torch.LongTensor,
    drafter: Drafter,
    intervals: tuple[int, ...] = (1, 2, 4, 8, 16),
    max_new_tokens: int = 128,
    **generate_kwargs,
) -> tuple[list[float], list[float]]:
    """``HardwareProfile.catch_up_tokens`` and ``catch_up_seconds``: per-cycle drafting times (``out.speculation.
    draft_times``) of one-level trees drafted every ``interval``-th cycle, against the committed tokens each
    drafting cycle's first step read (the prompt's for the first), after a call that compiles. Greedy, so each
    interval's cycles repeat across calls; the prompt gives the largest count."""
    bounds = (*DRAFT_BUCKETS, *(DRAFT_BUCKETS[-1] * 2**i for i in range(1, 8)))
    unread, seconds = [], []
    for number, interval in enumerate((intervals[0], *intervals)):  # the first call warms up (and compiles)
        out = model.generate(
            input_ids, max_new_tokens=max_new_tokens, do_sample=False, assistant_model=drafter,
            assistant_policy=_DraftEveryKthCycle(interval), return_dict_in_generate=True, **generate_kwargs,
        )
        if number == 0:
            continue
        stats, waiting = out.speculation, input_ids.shape[1]
        for accepted, levels, draft_seconds in zip(stats.accepted_lengths, stats.draft_levels, stats.draft_times):
            if levels:
                unread.append(waiting)
                seconds.append(draft_seconds)
            waiting = unread_after(waiting, levels > 0, accepted + 1)
    return catch_up_points(unread, seconds, bounds)


def bucket_filling_tree(bucket: int, top_k: int = 4) -> StaticTreePolicy:
    """A static tree whose every cycle verifies ``bucket`` tokens (root included): the shallowest
    EAGLE-2 expansion with beam ``top_k`` that drafts at least that many nodes."""
    if bucket < 2 or top_k < 1:
        raise ValueError(f"A tree filling bucket {bucket} with beam {top_k}: give a bucket >= 2 and top_k >= 1.")
    depth = 1
    while full_tree_size(depth, top_k) < bucket:
        depth += 1
    return StaticTreePolicy(depth=depth, top_k=top_k, total_tokens=bucket)


def measure_verification_in_generate(
    model: PreTrainedModel,
    input_ids: torch.LongTensor,
    drafter: Drafter,
    tokens: list[int],
    rounds: int = 3,
    max_new_tokens: int = 48,
) -> list[float]:
    """Seconds per verification of each of ``tokens`` tree tokens as ``generate`` runs it on the eager path: the
    median over ``rounds`` (after one that warms up) of the verify time per cycle of a static tree of that size (one
    token: a plain step, the root alone), the sizes taken in turn within each round so that a machine's drift
    reaches all of them alike: what the replay charges a cycle is its verify time in ``generate`` (acceptance and
    cache update included), not a bare forward's timed size after size (:func:`measure_verification`; on an AVX2
    EPYC in float32 that charged 4-6 tokens 10-15% more than 12, ``generate`` 7-9% more, with differences of that
    size varying between measurements; results/README.md, session 59)."""
    policies = [StaticTreePolicy(0, 1, 1) if n == 1 else bucket_filling_tree(n) for n in tokens]
    per_size: list[list[float]] = [[] for _ in tokens]
    for _ in range(rounds + 1):  # the first round warms up
        for runs, policy in zip(per_size, policies):
            out = model.generate(
                input_ids, max_new_tokens=max_new_tokens, do_sample=False, assistant_model=drafter,
                assistant_policy=policy, return_dict_in_generate=True,
            )
            runs.append(out.speculation.verify_time / max(out.speculation.cycles, 1))
    return [statistics.median(runs[1:]) for runs in per_size]


def measure_buckets_in_generate(
    model: PreTrainedModel,
    input_ids: torch.LongTensor,
    drafter: Drafter,
    buckets: list[int],
    cache_length: int,
    runs: int = 3,
    max_new_tokens: int = 64,
    **generate_kwargs,
) -> list[float]:
    """Seconds per verification of each static-path bucket as ``generate`` runs it: the median over
    ``runs`` generations (after one that compiles) of the verify time per cycle of a tree that fills
    the bucket, in a ``StaticCache`` of ``cache_length`` slots (attention runs over all of them).
    ``generate_kwargs``: e.g. the compiled path's ``compile_config``. Cycles cut short by
    ``max_new_tokens`` verify less; with 64 tokens they are a cycle or two of each run."""
    path = fast_path(model)
    engine_buckets = path.buckets
    if not set(buckets) <= set(engine_buckets):
        raise ValueError(
            f"Buckets {sorted(set(buckets) - set(engine_buckets))} are not the engine's ({list(engine_buckets)}): a tree is "
            "padded to the engine's next bucket, so time those (fast_path(model, buckets=...) sets them)."
        )
    needed = path.needed_slots(input_ids.shape[1] + max_new_tokens)
    if needed > cache_length:
        raise ValueError(
            f"A cache of {cache_length} slots cannot hold a {input_ids.shape[1]}-token prompt, {max_new_tokens} new tokens and "
            f"a {path.largest_bucket}-token verification: pass cache_length >= {needed} or a shorter prompt."
        )
    cache = full_length_static_cache(model.config, cache_length)
    seconds = []
    for bucket in buckets:
        policy = bucket_filling_tree(bucket)
        per_run = []
        for _ in range(runs + 1):  # the first run warms up (and compiles the bucket's graphs)
            cache.reset()
            out = model.generate(
                input_ids, max_new_tokens=max_new_tokens, do_sample=False, assistant_model=drafter,
                assistant_policy=policy, past_key_values=cache, return_dict_in_generate=True, **generate_kwargs,
            )
            per_run.append(out.speculation.verify_time / max(out.speculation.cycles, 1))
        seconds.append(statistics.median(per_run[1:]))
    return seconds
