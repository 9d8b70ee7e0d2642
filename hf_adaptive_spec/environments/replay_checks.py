"""What a replay refuses before it runs: a prompt-lookup branch ``generate`` would refuse, and an eager profile that
never timed the sizes a recording verifies (or, with the branch, only extrapolates them)."""

from __future__ import annotations

import warnings

from ..profiling.hardware import HardwareProfile


def check_lookup(lookup_tokens: int, lookup_ngram_size: int, profile: HardwareProfile) -> None:
    """Refuse a prompt-lookup branch ``generate`` refuses (``prompt_lookup_num_tokens`` and ``max_matching_ngram_size``
    of its ``LookupBranch``, and a chain the static path's largest bucket cannot verify with its root), rather than
    replay no branch (a negative length or n-gram matches nothing) or price a verification generate never runs."""
    for name, value, low in (("lookup_tokens", lookup_tokens, 0), ("lookup_ngram_size", lookup_ngram_size, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}: pass the branch's "
                             f"{'prompt_lookup_num_tokens (0: none)' if low == 0 else 'max_matching_ngram_size'}.")
    if lookup_tokens and profile.buckets and lookup_tokens >= profile.buckets[-1]:
        raise ValueError(
            f"lookup_tokens={lookup_tokens} verifies up to {lookup_tokens + 1} tokens per cycle (the chain and the "
            f"root), but the profile's static-cache path verifies at most {profile.buckets[-1]} (its largest bucket of "
            f"{profile.buckets}), so generate refuses such a call: pass lookup_tokens <= {profile.buckets[-1] - 1}, or "
            f"profile buckets that hold {lookup_tokens + 1} (`hf-adaptive-spec profile --static --buckets ...`)."
        )


def check_measured_sizes(
    profile: HardwareProfile, recordings: list, names: list[str] | None = None, lookup_tokens: int = 0
) -> None:
    """Refuse an eager profile that did not time one token (a plain step) and the largest tree each recording
    verifies: below its smallest size the replay charges that size's time and past its largest it extrapolates,
    so the replay would rest on sizes never timed. With a prompt-lookup branch of ``lookup_tokens`` a tree verifies
    up to ``total_tokens + lookup_tokens``: past the largest size timed that is priced along the last measured
    segment, an estimate, and warned of (:class:`ExtrapolatedCostWarning`); a refusal would fail the profiles timed
    before ``profile`` timed the branch. A bucketed profile prices every tree at a timed bucket."""
    if profile.buckets:
        return
    names = names or [_recording_name(recording) for recording in recordings]
    totals = {recording.tree_config.total_tokens for recording in recordings}
    unmeasured = [n for n in sorted({1} | totals) if n < profile.verify_tokens[0] or n > profile.verify_tokens[-1]]
    if unmeasured:
        raise ValueError(
            f"The profile timed verifications of {profile.verify_tokens} tokens, and replaying "
            f"{[str(n) for n in names]} needs {unmeasured} too (a plain step verifies 1; the recordings' trees up to "
            "their total_tokens): time them, `hf-adaptive-spec profile --recording DIR` (it adds them to "
            "--verify-tokens)."
        )
    largest = max(totals, default=1) + lookup_tokens
    if largest > profile.verify_tokens[-1]:
        warnings.warn(
            f"The profile timed verifications up to {profile.verify_tokens[-1]} tokens, and a recorded tree of "
            f"{max(totals)} with the prompt-lookup branch of {lookup_tokens} verifies up to {largest}: those sizes are "
            f"priced by extending the profile's last measured segment ({profile.verify_tokens[-2:]} tokens), an "
            f"estimate. Time them: `hf-adaptive-spec profile --recording DIR --lookup-tokens {lookup_tokens}` adds "
            "each recording's total_tokens plus the branch to --verify-tokens.",
            ExtrapolatedCostWarning,
            stacklevel=3,
        )


def _recording_name(recording) -> str:
    """A recording named by its tree, where the caller has no path for it (one of a MultiReplayEnvironment's)."""
    tree = recording.tree_config
    return f"the recording of depth {tree.depth}, top_k {tree.top_k}, total_tokens {tree.total_tokens}"


class ExtrapolatedCostWarning(UserWarning):
    """A replay priced a verification size its eager profile never timed (:func:`check_measured_sizes`)."""
