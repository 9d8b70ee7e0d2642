"""Per-call speculation statistics and the ``generate`` output that carries them."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

from transformers.generation.utils import GenerateDecoderOnlyOutput


@dataclass
class SpeculationStats:
    """What one speculative ``generate`` call did.

    ``accepted_lengths[i]`` counts the drafted tokens accepted in cycle ``i`` (the target's
    bonus token excluded); every cycle is one target forward. When a stopping criterion (an
    end-of-sequence token) ends generation inside a cycle's accepted tokens, that cycle counts
    the tokens it emitted less one, so τ is tokens returned per target forward. Times are wall
    seconds.
    """

    accepted_lengths: list[int] = field(default_factory=list)
    draft_depths: list[int] = field(default_factory=list)
    verified_tokens: list[int] = field(default_factory=list)
    #: per cycle, the drafter's forward steps (levels drafted before pruning, >= the verified
    #: tree's depth): what drafting time is spent on.
    draft_levels: list[int] = field(default_factory=list)
    #: per cycle, seconds drafting (the drafter's steps and ``observe``, the prompt-lookup search; compiling
    #: excluded). A cycle that drafts after cycles that did not first reads every token committed since: what the
    #: profile's catch-up table prices (``HardwareProfile.catch_up_seconds``).
    draft_times: list[float] = field(default_factory=list)
    #: per cycle, seconds verifying (the target's forward over the tree, acceptance and the cache update): what
    #: the profile's verification curve prices, cycle by cycle (``HardwareProfile.verify_seconds``).
    verify_times: list[float] = field(default_factory=list)
    draft_time: float = 0.0
    verify_time: float = 0.0
    policy_time: float = 0.0
    total_time: float = 0.0
    #: ``"dynamic"`` (a growing DynamicCache) or ``"static"`` (trees padded into a fixed-size StaticCache).
    cache: str = "dynamic"
    #: whether verification ran a ``torch.compile``'d graph; False means eager, never a silent fallback.
    compiled: bool = False
    #: whether the compiled verification forwards ran as ahead-of-time packages, built or loaded
    #: from disk (CPU with weight freezing; see ``generation.static_path.FastPath``).
    packaged: bool = False
    #: seconds spent compiling graphs (or building and loading packages) during this call (first use of a bucket),
    #: included in ``total_time`` but not in ``verify_time``.
    compile_time: float = 0.0
    #: cycles whose tree the static-cache path lowered to fit its largest verification bucket.
    capped_trees: int = 0
    #: the cost curve this call ran on, ``device/dtype/path (instruction set)``, e.g. ``cpu/bfloat16/compiled (AVX2)``
    #: (see :class:`~hf_adaptive_spec.core.CostCurve`).
    cost_curve: str = ""
    #: set when the policy was trained on another cost curve than this call's: what differs and
    #: what to do. None when they match or the policy is not trained on one (static trees).
    policy_cost_curve_mismatch: str | None = None
    #: set when the policy was trained with another drafter than this call's (by the digest of its weights,
    #: ``DraftPolicy.trained_for_drafter``): what differs and what to do. None when they match or the policy
    #: records no drafter.
    policy_drafter_mismatch: str | None = None
    #: set when the policy was trained with another prompt-lookup branch than this call's
    #: (``DraftPolicy.trained_with_lookup_tokens`` against ``prompt_lookup_num_tokens``): what differs and what to
    #: do. None when they match or the policy records none.
    policy_lookup_mismatch: str | None = None

    @property
    def cycles(self) -> int:
        return len(self.accepted_lengths)

    @property
    def mean_accepted_tokens(self) -> float:
        """Tokens emitted per target forward (Spec-Bench's τ): mean of accepted drafts + 1."""
        return 1.0 + sum(self.accepted_lengths) / self.cycles if self.cycles else 0.0

    @property
    def mean_draft_depth(self) -> float:
        return sum(self.draft_depths) / self.cycles if self.cycles else 0.0

    @property
    def mean_verified_tokens(self) -> float:
        return sum(self.verified_tokens) / self.cycles if self.cycles else 0.0

    def accepted_length_histogram(self) -> dict[int, int]:
        return dict(sorted(Counter(self.accepted_lengths).items()))

    def record(self, accepted: int, depth: int, verified: int, levels: int = 0, draft_seconds: float = 0.0,
               verify_seconds: float = 0.0) -> None:
        self.accepted_lengths.append(accepted)
        self.draft_depths.append(depth)
        self.verified_tokens.append(verified)
        self.draft_levels.append(levels)
        self.draft_times.append(draft_seconds)
        self.draft_time += draft_seconds
        self.verify_times.append(verify_seconds)
        self.verify_time += verify_seconds

    def to_dict(self) -> dict:
        """Plain-JSON summary, including the derived means."""
        data = asdict(self)
        data.update(
            cycles=self.cycles,
            mean_accepted_tokens=self.mean_accepted_tokens,
            mean_draft_depth=self.mean_draft_depth,
            mean_verified_tokens=self.mean_verified_tokens,
        )
        return data


@dataclass
class SpeculativeDecoderOnlyOutput(GenerateDecoderOnlyOutput):
    """``GenerateDecoderOnlyOutput`` plus ``speculation`` (a :class:`SpeculationStats`)."""

    speculation: SpeculationStats | None = None
