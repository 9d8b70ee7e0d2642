"""The hardware cost profile: what verification, a draft step and a policy call cost here.

It feeds cost-model rewards (LTD, Re-SpS), RADAR's latency model, the replay environment
and the reports. Times are medians of repeated wall-clock measurements, taken by
:mod:`~hf_adaptive_spec.profiling.measure`.
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path

import torch

from ..core.cost_curve import PATHS, CostCurve
from ..core.drafter_identity import DrafterIdentity
from ..core.files import write_text_atomically
from ..core.values import check_number, plain_ints
from ..generation.static_path import FastPath

DEFAULT_VERIFY_TOKENS = (1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64)
#: the fix for a profile holding what no measurement gives
MEASURE_AGAIN = "The profile is damaged or hand-edited: measure it again with `hf-adaptive-spec profile`."


@dataclass
class HardwareProfile:
    """Measured costs on one machine, for one target (and optionally a drafter and policy).

    Args:
        verify_tokens / verify_seconds: target forward time for ``n`` new tokens (a tree of ``n``
            nodes) after ``context_length`` cached tokens; on the eager path ``profile`` times each as ``generate``
            verifies it, the sizes in turn cycle by cycle, made non-decreasing in size
            (:func:`.measure.measure_verification_in_generate`; profiles made before 2026-12-02 hold a bare forward's
            time, :func:`.measure.measure_verification`, and those of 2026-12-02 a call per size, unsmoothed).
        draft_step_seconds: drafter time per draft level after a cycle's first, measured inside ``generate``
            (:func:`.measure.measure_in_generate`; profiles made before 2026-12-01 hold the mean over every level).
        catch_up_tokens / catch_up_seconds: what a cycle drafting one level costs when its first step reads
            this many committed tokens the drafter has not read yet, measured inside ``generate``
            (:func:`.measure.measure_catch_up_in_generate`; ascending token counts, interpolated between them, the
            times made non-decreasing in the count, as measured since 2026-12-05 and at load for older profiles: reading
            more tokens does not cost less, and a dip extrapolated past the last count priced a long prompt's first
            step below 0 s). A cycle
            that drafts after cycles that drafted nothing reads every token committed since (EAGLE-3 on the
            compiled bfloat16 path of two AVX2 cores, live: 5.7 ms for up to 4 tokens, 8.0 ms for 5-8, 12.5 ms
            for 9-16, 20.6 ms for 17-32; results/README.md), and the first drafted cycle reads the prompt.
            :meth:`draft_time` charges it; None in profiles made before it was measured, where every level costs
            ``draft_step_seconds``.
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
        instruction_set: the processor's matrix instruction set
            (:func:`~hf_adaptive_spec.core.cost_curve.instruction_set_of`: a CPU's, which decides what a many-token
            forward costs in bfloat16, or a GPU's compute capability); None in profiles made before it was recorded.
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
        self._check_settings()
        self.verify_tokens = self._distinct_sizes("verify_tokens")
        if not self.verify_tokens:
            raise ValueError(
                "verify_tokens is empty or missing: a profile prices every verification from its measured sizes, one "
                f"at least (a replay would have nothing to interpolate). {MEASURE_AGAIN}"
            )
        if len(self.verify_tokens) != len(self.verify_seconds):
            raise ValueError(f"verify_tokens {self.verify_tokens} and verify_seconds need one time per size.")
        pairs = sorted(zip(self.verify_tokens, self.verify_seconds))  # the interpolation reads them in order
        self.verify_tokens, self.verify_seconds = [n for n, _ in pairs], [s for _, s in pairs]
        self._check_times()
        if self.buckets is not None:
            self._check_buckets()
        if (self.catch_up_tokens is None) != (self.catch_up_seconds is None) or (
            self.catch_up_tokens is not None
            and (len(self.catch_up_tokens) != len(self.catch_up_seconds) or not self.catch_up_tokens
                 or self.catch_up_tokens != sorted(set(self.catch_up_tokens)) or self.catch_up_tokens[0] < 1)
        ):
            raise ValueError(
                f"catch_up_tokens {self.catch_up_tokens} and catch_up_seconds {self.catch_up_seconds} need one time "
                "per token count, the counts distinct, ascending and >= 1 (a first step reads a token at least; "
                "measure_catch_up_in_generate), or both None."
            )
        if self.bucket_seconds is not None and len(self.bucket_seconds) != len(self.buckets or []):
            raise ValueError(
                f"bucket_seconds has {len(self.bucket_seconds)} times for buckets {self.buckets}: give one time per "
                "bucket (measure_buckets_in_generate), or None."
            )
        if self.catch_up_seconds is not None:  # older profiles kept the medians as measured
            self.catch_up_seconds = monotone_seconds(self.catch_up_seconds)

    def _check_settings(self) -> None:
        """Refuse settings no measurement has: a path the engine does not have (a typo would fail only once a curve
        is taken from the profile), no thread, a negative context (0: fitted over a run's contexts, as
        ``examples/profile_from_bench.py`` writes it) or a static cache of no slots."""
        if self.path not in PATHS:
            raise ValueError(
                f"path is {self.path!r}: it must be one of {PATHS}, the engine path the profile timed "
                "(`hf-adaptive-spec profile` writes 'eager', with --static 'static' and with --compile 'compiled')."
            )
        _check_count("num_threads", self.num_threads, at_least=1)
        _check_count("context_length", self.context_length, at_least=0)
        if self.cache_slots is not None:
            _check_count("cache_slots", self.cache_slots, at_least=1)

    def _distinct_sizes(self, name: str) -> list[int]:
        """``name``'s token counts as Python ints (numpy's too), refused unless each is an int >= 1 (a timed tree
        holds its root: a point at 0 would price a plain step between it and the next) and none comes twice (its
        second time would be ignored)."""
        sizes = plain_ints(getattr(self, name))
        for size in sizes:
            _check_count(name, size, at_least=1, meaning=f"each the nodes of a timed tree, in {sizes}")
        if len(set(sizes)) != len(sizes):
            raise ValueError(f"{name} {sizes} measures a size twice: give each size once.")
        return sizes

    def _check_buckets(self) -> None:
        """The static path's buckets: distinct sizes, each measured, sorted (given in order when ``bucket_seconds``
        follow it), and only on the static-cache path: the eager path pads no tree to a bucket."""
        if self.path == "eager":
            raise ValueError(
                f"buckets {self.buckets} on the eager path: the eager path (the DynamicCache engine) pads no tree to a "
                "bucket, so a replay would pad and cap its trees as generate never does there. If the profile timed "
                "the static-cache path, set path to 'static' or 'compiled' (as `hf-adaptive-spec profile --static` "
                "or `--compile` writes it); else set buckets and bucket_seconds to None."
            )
        buckets = self._distinct_sizes("buckets")
        if buckets != sorted(buckets) and self.bucket_seconds is not None:
            raise ValueError(f"bucket_seconds follow the buckets' order: give the buckets sorted, not {buckets}.")
        self.buckets = sorted(buckets)
        missing = sorted(set(self.buckets) - set(self.verify_tokens))
        if missing:
            raise ValueError(
                f"A profile with buckets {self.buckets} must measure each of them; {missing} not measured."
            )

    def _check_times(self) -> None:
        """Refuse times no measurement gives: a verification, catch-up or bucket time that is not a positive finite
        number of seconds, or a negative or non-finite draft step or policy call (the replay would price cycles at
        or below 0 s and rank by it)."""
        for name in ("verify_seconds", "catch_up_seconds", "bucket_seconds"):
            bad = [value for value in getattr(self, name) or []
                   if not (isinstance(value, numbers.Real) and math.isfinite(value) and value > 0)]
            if bad:
                raise ValueError(
                    f"{name} holds {bad}: every time must be a positive finite number of seconds, as a measured one "
                    "is. The profile is damaged, hand-edited or fitted to a line that falls to 0 there: measure it "
                    "again with `hf-adaptive-spec profile`."
                )
        for name in ("draft_step_seconds", "policy_call_seconds"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, numbers.Real) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} is {value}: it must be a finite number of seconds >= 0. {MEASURE_AGAIN}")

    def cost_curve(self) -> CostCurve:
        """Which cost curve this profile measured (what a policy trained on it records as ``trained_on``); refused
        for a device or dtype torch does not name."""
        self._check_device_and_dtype()
        return replace(CostCurve.of(self.device, self.dtype, self.path), instruction_set=self.instruction_set)

    def _check_device_and_dtype(self) -> None:
        """Refuse a device torch does not parse or a dtype that is not a torch dtype's own name: the curve would carry
        it ('cpu/fp32/eager' fits no policy and no model). Checked where a profile is loaded and its curve taken,
        not on construction: RADAR's dataset replays on an untimed placeholder of neither (device and dtype 'none')."""
        try:
            torch.device(self.device)
        except (RuntimeError, TypeError):
            raise ValueError(
                f"device is {self.device!r}, which torch does not name: write the device the profile was measured on "
                "as torch names it ('cpu', 'cuda', 'cuda:0')."
            ) from None
        dtype = getattr(torch, self.dtype, None) if isinstance(self.dtype, str) else None
        if not isinstance(dtype, torch.dtype) or str(dtype) != f"torch.{self.dtype}":
            raise ValueError(
                f"dtype is {self.dtype!r}, not a torch dtype's name: write the dtype the profile was measured in as "
                "torch names it ('float32', 'bfloat16', 'float16'; not 'fp32' nor an alias such as 'float')."
            )

    def drafter_identity(self) -> DrafterIdentity | None:
        """The EAGLE-3 drafter this profile timed, by name and weights (what a policy trained on it records as
        ``trained_for_drafter``); None for a profile that timed no EAGLE-3 drafter or made before the digest was
        kept."""
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
        measured, and ``draft_step_seconds`` for each later one; 0 for a cycle that drafts nothing. Refused for a
        profile without ``draft_step_seconds``, which cannot price a drafting cycle."""
        if levels == 0:
            return 0.0
        if self.draft_step_seconds is None:
            raise ValueError(
                f"This profile has no draft_step_seconds: it cannot price a drafting cycle ({levels} levels here). "
                "Measure it with a drafter: `hf-adaptive-spec profile` times a draft step inside generate."
            )
        if self.catch_up_tokens is None:
            return levels * self.draft_step_seconds
        first = piecewise_linear(self.catch_up_tokens, self.catch_up_seconds, unread_tokens)
        return first + (levels - 1) * self.draft_step_seconds

    def save(self, path: str | Path) -> None:
        write_text_atomically(Path(path), json.dumps(asdict(self), indent=2) + "\n")  # a crash keeps the one before

    @classmethod
    def load(cls, path: str | Path) -> HardwareProfile:
        """The profile saved at ``path``, refused naming the file when it is not one this version reads (not a JSON
        object of a profile's keys) or holds what no measurement gives."""
        try:
            values = json.loads(Path(path).read_text(encoding="utf-8"))
            _check_keys(values)
            profile = cls(**values)
            profile._check_device_and_dtype()
        except ValueError as error:
            raise ValueError(f"The hardware profile {path}: {error}") from error
        except TypeError as error:  # a value of another JSON type than measured: null or text for a list, a number
            raise ValueError(
                f"The hardware profile {path} holds a value of the wrong type ({error}): it was edited or written by "
                "another program; measure the machine again with `hf-adaptive-spec profile`."
            ) from error
        return profile


def _check_keys(values: object) -> None:
    """Refuse a profile's JSON that is not an object of :class:`HardwareProfile`'s keys: not an object, a key the class
    does not have or a required one missing (written by another version, or edited)."""
    known = [f.name for f in fields(HardwareProfile)]
    required = [f.name for f in fields(HardwareProfile) if f.default is MISSING and f.default_factory is MISSING]
    if isinstance(values, dict):
        unknown, missing = [key for key in values if key not in known], [key for key in required if key not in values]
        if not unknown and not missing:
            return
        problem = "; ".join([*([f"it has keys no profile has: {unknown}"] if unknown else []),
                             *([f"it lacks the required keys {missing}"] if missing else [])])
    else:
        problem = f"it holds a JSON {type(values).__name__}, not an object of a profile's keys"
    raise ValueError(
        f"{problem} (a profile has {known}, the first {len(required)} required). It was written by another version "
        "of hf-adaptive-spec or edited: measure the machine again with `hf-adaptive-spec profile` (with --recording "
        "DIR for a recommendation)."
    )


def _check_count(name: str, value: object, **bounds) -> int:
    """``value`` of the profile's integer setting ``name``, refused as
    :func:`~hf_adaptive_spec.core.values.check_number` refuses it, with the fix."""
    try:
        return check_number("HardwareProfile", name, value, integer=True, **bounds)
    except ValueError as error:
        raise ValueError(f"{error} {MEASURE_AGAIN}") from None


def piecewise_linear(xs: list[float], ys: list[float], x: float) -> float:
    """``y`` at ``x`` on the measured points ``(xs, ys)`` (``xs`` ascending): interpolated between them, past the
    last along the last segment (more costs more, not the largest measured time) unless it falls, then the last
    point's (a falling segment extrapolated goes below 0), below the first the first's."""
    if x <= xs[0] or len(xs) == 1:
        return ys[0]
    segment = next((i for i in range(1, len(xs)) if x <= xs[i]), len(xs) - 1)
    (x0, y0), (x1, y1) = (xs[segment - 1], ys[segment - 1]), (xs[segment], ys[segment])
    if x > x1 and y1 < y0:
        return y1
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def monotone_seconds(seconds: list[float]) -> list[float]:
    """The non-decreasing sequence closest to ``seconds`` (least squares: adjacent sizes that cost less than a
    smaller one are pooled to their mean). A larger tree does not cost less to verify on the eager path, nor more
    unread tokens less to read; a measured dip is noise, and a replay would pick the tree that sits in it."""
    pools: list[tuple[float, int]] = []  # (mean, sizes pooled)
    for value in seconds:
        pools.append((value, 1))
        while len(pools) > 1 and pools[-2][0] > pools[-1][0]:
            (right, n_right), (left, n_left) = pools.pop(), pools.pop()
            pools.append(((left * n_left + right * n_right) / (n_left + n_right), n_left + n_right))
    return [mean for mean, count in pools for _ in range(count)]


def unread_after(unread_tokens: int, drafted: bool, committed_tokens: int) -> int:
    """The committed tokens the drafter has not read when the next cycle begins: a cycle that drafted read its
    ``unread_tokens`` and leaves its own ``committed_tokens``; one that drafted nothing adds them to the rest."""
    return committed_tokens if drafted else unread_tokens + committed_tokens


def static_cache_slots(context_length: int, tokens_after_context: int) -> int:
    """The slots of the engine's own StaticCache for ``context_length`` cached tokens and ``tokens_after_context``
    more: a static cache attends over all of its slots, so a measurement's cache must be as long."""
    return FastPath.rounded_cache_length(context_length + tokens_after_context + 1)
