"""How ``hf-adaptive-spec profile`` times this machine: bare verification forwards, and verification, draft
levels, catch-up and static-path buckets as ``generate`` runs them (the numbers a
:class:`~hf_adaptive_spec.profiling.hardware.HardwareProfile` holds)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import torch
from transformers import DynamicCache, PreTrainedModel

from ..core.attention import tree_attention_mask
from ..core.kv_cache import drop_tail, prepare_cache_for_trees
from ..core.output_head import OutputHead
from ..core.static_cache import full_length_static_cache
from ..core.static_steps import DRAFT_BUCKETS
from ..core.timing import timed
from ..core.tree import DraftTree, full_tree_size
from ..drafters.base import Drafter
from ..generation.static_path import FastPath, fast_path
from ..generation.targets import StaticTarget
from ..policies.base import CycleState, DraftPolicy, TreeConfig
from ..policies.static import StaticTreePolicy
from .hardware import DEFAULT_VERIFY_TOKENS, monotone_seconds, static_cache_slots, unread_after


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
            model.config,
            cache,
            positions,
            positions,
            torch.ones(n, n, dtype=torch.bool, device=device).tril(),
            model.dtype,
        )
        ids = torch.randint(0, model.config.vocab_size, (1, n), generator=generator).to(device)
        verification = partial(_verify_chain, decoder, head, ids, mask, positions, cache)
        runs = []
        for _ in range(repeats + 1):  # the first run warms up
            runs.append(timed(device, verification)[1])  # on a GPU, the kernels' time, not their launch
            drop_tail(cache, n)
        seconds.append(statistics.median(runs[1:]))
    return list(tokens), seconds


def _verify_chain(decoder, head: OutputHead, ids, mask, positions, cache) -> list[torch.Tensor]:
    """One verification forward as the engine runs it: the decoder over every node, the lm_head on the ~τ nodes its
    acceptance walk visits (two here)."""
    hidden = decoder(
        input_ids=ids, attention_mask=mask, position_ids=positions[None], past_key_values=cache, use_cache=True
    ).last_hidden_state
    return [head(hidden[0, row : row + 1]) for row in range(min(ids.shape[1], 2))]


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
            runs.append(timed(model.device, lambda: target.verify(chain, context_length)[0])[1])  # noqa: B023
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
            "Timing a later draft level needs cycles of one level and of more; got levels "
            f"{sorted(set(draft_levels))}: generate more tokens (max_new_tokens) so that the cycles alternate."
        )
    return max((statistics.median(deep) - statistics.median(shallow)) / (depth - 1), 0.0)


#: a cycle that drafts nothing and verifies the root alone: a plain decoding step inside the speculative engine
PLAIN_STEP = TreeConfig(depth=0, top_k=1, total_tokens=1)


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
        drafting = TreeConfig(depth=1, top_k=1, total_tokens=2)
        super().__init__([drafting] + [PLAIN_STEP] * (interval - 1))


def catch_up_points(
    unread: list[int], seconds: list[float], bounds: tuple[int, ...]
) -> tuple[list[float], list[float]]:
    """``(mean tokens, median seconds)`` of the drafting cycles grouped by the smallest of ``bounds`` their unread
    tokens fit (the drafter's step buckets, then doublings), the medians made non-decreasing in the tokens
    (:func:`monotone_seconds`: reading more does not cost less, and a falling last segment, extrapolated, would
    price a long prompt's first step below 0 s); groups without a cycle are left out."""
    groups: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for tokens, time_ in zip(unread, seconds):
        groups[next((bound for bound in bounds if tokens <= bound), bounds[-1])].append((tokens, time_))
    points = [(statistics.mean(t for t, _ in group), statistics.median(s for _, s in group))
              for _, group in sorted(groups.items())]
    return [t for t, _ in points], monotone_seconds([s for _, s in points])


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


#: cycles each verification size gets per ``generate`` call of :func:`measure_verification_in_generate`
CYCLES_PER_SIZE = 6


def measure_verification_in_generate(
    model: PreTrainedModel,
    input_ids: torch.LongTensor,
    drafter: Drafter,
    tokens: list[int],
    rounds: int = 3,
    cycles_per_size: int = CYCLES_PER_SIZE,
) -> list[float]:
    """Seconds per verification of each of ``tokens`` tree tokens as ``generate`` runs it on the eager path: what
    the replay charges a cycle is its verify time in ``generate`` (acceptance and cache update included), not a bare
    forward's (:func:`measure_verification`). One static tree per size (one token: a plain step, the root alone),
    timed in turn inside each call (:func:`rotated_cycle_seconds`).

    Timed a call per size instead, the drift between calls ranked the sizes by noise: on an AVX2 EPYC in float32,
    4-6 tokens cost 1.97-2.01x one token and 8-12 tokens 1.84x, and the replay put the shipped LTD at 0.988x the
    static tree where live it ran 1.090x (results/README.md, sessions 59-62)."""
    configs = [PLAIN_STEP if n == 1 else bucket_filling_tree(n).config for n in tokens]
    return rotated_cycle_seconds(model, input_ids, drafter, dict(zip(tokens, configs)), rounds, cycles_per_size)


def rotated_cycle_seconds(
    model: PreTrainedModel,
    input_ids: torch.LongTensor,
    drafter: Drafter,
    trees: dict[int, TreeConfig],
    rounds: int,
    cycles_per_size: int,
    before_call: Callable[[], None] = lambda: None,
    **generate_kwargs,
) -> list[float]:
    """Seconds per cycle of each of ``trees`` (keyed by the size it verifies), taken in turn cycle by cycle inside
    each ``generate`` call (:class:`_TreeRotation`), so that the machine's drift reaches every size alike: the median
    per size of every cycle of ``rounds`` calls after one that warms up (and compiles), made non-decreasing in size
    (:func:`monotone_seconds`). ``before_call`` runs before each call (e.g. a cache reset)."""
    sizes, configs = list(trees), list(trees.values())
    per_size: list[list[float]] = [[] for _ in sizes]
    for call in range(rounds + 1):  # the first call warms up
        before_call()
        out = model.generate(
            input_ids, max_new_tokens=rotation_tokens(configs, cycles_per_size), do_sample=False,
            assistant_model=drafter, assistant_policy=_TreeRotation(configs), return_dict_in_generate=True,
            **generate_kwargs,
        )
        if call:
            for cycle, seconds in enumerate(out.speculation.verify_times):
                per_size[cycle % len(sizes)].append(seconds)
    unmeasured = [n for n, runs in zip(sizes, per_size) if not runs]
    if unmeasured:
        raise ValueError(
            f"No cycle verified {unmeasured} tokens (generation stopped within {len(sizes)} cycles of a call): time a "
            "prompt that does not end in an end-of-sequence token, or fewer sizes."
        )
    return monotone_seconds([statistics.median(runs) for runs in per_size])


def rotation_tokens(configs: list[TreeConfig], cycles_per_size: int) -> int:
    """New tokens for ``cycles_per_size`` rotations of ``configs``: the most their cycles may accept."""
    return cycles_per_size * sum(config.reachable_depth + 1 for config in configs)


def measure_buckets_in_generate(
    model: PreTrainedModel,
    input_ids: torch.LongTensor,
    drafter: Drafter,
    buckets: list[int],
    cache_length: int,
    rounds: int = 3,
    cycles_per_size: int = CYCLES_PER_SIZE,
    **generate_kwargs,
) -> list[float]:
    """Seconds per verification of each static-path bucket as ``generate`` runs it, in a ``StaticCache`` of
    ``cache_length`` slots (attention runs over all of them): a tree that fills each bucket, the buckets timed in turn
    inside each call (:func:`rotated_cycle_seconds`). ``generate_kwargs``: e.g. the compiled path's
    ``compile_config``.

    Timed a call per bucket instead, the drift between calls inverted them: on a 2-core AMX Xeon, in a 512-slot cache,
    bucket 12 came out at 39.6 ms and bucket 8 at 47.3 ms, where the bench's cycles measured 61.6 and 57.2 ms
    (results/README.md, session 63)."""
    path = fast_path(model)
    engine_buckets = path.buckets
    if not set(buckets) <= set(engine_buckets):
        raise ValueError(
            f"Buckets {sorted(set(buckets) - set(engine_buckets))} are not the engine's ({list(engine_buckets)}): a "
            "tree is padded to the engine's next bucket, so time those (fast_path(model, buckets=...) sets them)."
        )
    trees = {bucket: bucket_filling_tree(bucket).config for bucket in buckets}
    new_tokens = rotation_tokens(list(trees.values()), cycles_per_size)
    needed = path.needed_slots(input_ids.shape[1] + new_tokens)
    if needed > cache_length:
        raise ValueError(
            f"A cache of {cache_length} slots cannot hold a {input_ids.shape[1]}-token prompt, {new_tokens} new tokens "
            f"and a {path.largest_bucket}-token verification: pass cache_length >= {needed}, a shorter prompt or fewer "
            "cycles per bucket."
        )
    cache = full_length_static_cache(model.config, cache_length)
    return rotated_cycle_seconds(
        model, input_ids, drafter, trees, rounds, cycles_per_size, before_call=cache.reset, past_key_values=cache,
        **generate_kwargs,
    )
