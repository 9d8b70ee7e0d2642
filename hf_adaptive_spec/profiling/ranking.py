"""What ``hf-adaptive-spec profile`` recommends from a measured profile and recordings: the best static tree, each
shipped learned policy's replay and fit to the curve, and the lines that say so."""

from __future__ import annotations

from ..checkpoints import shipped_checkpoint
from ..core.cost_curve import CostCurve
from ..core.drafter_identity import DrafterIdentity
from ..environments.static_grid import (
    check_measured_sizes,
    rank_over_recordings,
    recordings_by_top_k,
    replay_environment_over,
)
from ..policies import AutoDraftPolicy
from .hardware import HardwareProfile
from .identity import shipped_policies_misfit

#: the shipped learned policies the profile checks against the measured curve.
SHIPPED_POLICIES = ("ltd", "resps", "radar")
#: how much faster than the best static tree a learned policy must replay to be recommended. Replay has
#: overstated RADAR's live speed against the tree by 1.0-3.5 points on the compiled bfloat16 curve (1.017x /
#: 1.013x replayed, 1.007x / 0.995x live in one shared cache; 1.016x / 1.012x replayed, 0.991x / 0.977x live in
#: caches sized per call; results/README.md): a lead inside this margin is not a lead.
REPLAY_MARGIN = 1.04


def recommend(profile: HardwareProfile, recordings: list, names: list[str], lookup_counts: tuple[int, ...]) -> dict:
    """The best static tree on ``recordings`` with ``profile``'s costs, with each prompt-lookup branch length of
    ``lookup_counts`` and without, and each shipped learned policy's replayed speed (with the branch it was trained
    with, else its best branch); a learned policy is recommended only if trained for the profile's target and drafter
    and on this curve, and faster than the tree by more than the replay's error (:data:`REPLAY_MARGIN`).
    ``lookup_tokens`` is the recommendation's branch, for ``generate``'s ``prompt_lookup_num_tokens`` (0: none)."""
    check_recorded_positions(recordings, names)
    check_measured_sizes(profile, recordings, names)
    counts = tuple(sorted({0, *lookup_counts}))
    ranked = rank_over_recordings(recordings, profile, counts)
    best = ranked[0]
    misfit = shipped_policies_misfit(profile.model, profile.drafter)
    policies = {
        name: {"not_for_this_model": misfit} if misfit
        else fastest_replay(shipped_policy_replay(name, profile, recordings, n)
                            for n in branches_to_replay(name, profile, counts))
        for name in SHIPPED_POLICIES
    }
    to_beat = REPLAY_MARGIN * best.tokens_per_second
    faster = {name: entry["tokens_per_second"] for name, entry in policies.items()
              if entry.get("fits_curve") and entry.get("tokens_per_second", 0.0) > to_beat}
    chosen = max(faster, key=faster.get) if faster else None
    plain = next(tree for tree in ranked if tree.is_plain)
    return {
        "tree": best.to_dict(),
        "policy": chosen,
        "plain_tokens_per_second": plain.tokens_per_second,
        "policies": policies,
        "recordings": [str(name) for name in names],
        "lookup_tokens": policies[chosen]["lookup_tokens"] if chosen else best.lookup_tokens,
        "lookup_counts": list(counts),
        "replay_margin": REPLAY_MARGIN,
        "runner_up_trees": [tree.to_dict() for tree in ranked[1:4]],
    }


def check_recorded_positions(recordings: list, names: list[str]) -> None:
    """Refuse recordings that hold no cycle to replay (every generation ended at its first token, as with
    ``record --max-new-tokens 1``), naming them: ranked, every tree would replay at 0 tokens/s."""
    empty = [str(name) for recording, name in zip(recordings, names) if recording.num_positions == 0]
    if empty:
        raise ValueError(
            f"The recordings {empty} hold no positions (each generation ended at its first token): nothing to rank "
            "the trees on. Record them again with `hf-adaptive-spec record --max-new-tokens N` (N >= 2, e.g. 256) "
            "on prompts the target answers at length, or leave them out."
        )


def fastest_replay(entries) -> dict:
    """Of one policy's replay entries (one per lookup branch length), the fastest replayed, else the first."""
    entries = list(entries)
    replayed = [entry for entry in entries if entry.get("tokens_per_second")]
    return max(replayed, key=lambda entry: entry["tokens_per_second"]) if replayed else entries[0]


def branches_to_replay(name: str, profile: HardwareProfile, counts: tuple[int, ...]) -> tuple[int, ...]:
    """The prompt-lookup branch lengths to replay the shipped ``name`` policy with: the one it was trained with
    when it records it (with another, ``generate`` reports the policy as misused), else each of ``counts``."""
    trained_with = trained_branch(name, profile.cost_curve())
    return counts if trained_with is None else (trained_with,)


def trained_branch(name: str, curve: CostCurve | None) -> int | None:
    """The prompt-lookup branch length the shipped ``name`` policy for ``curve`` was trained with (None: not
    recorded)."""
    return AutoDraftPolicy.from_pretrained(shipped_checkpoint(name, curve)).trained_with_lookup_tokens


def shipped_branch_lengths(curve: CostCurve | None) -> set[int]:
    """The prompt-lookup branch lengths the shipped learned policies for ``curve`` were trained with: a
    recommendation replays each with its own, so a profile times each recorded tree with them."""
    return {length for name in SHIPPED_POLICIES if (length := trained_branch(name, curve)) is not None}


def shipped_policy_replay(name: str, profile: HardwareProfile, recordings: list, lookup_tokens: int) -> dict:
    """Whether the shipped ``name`` policy was trained on ``profile``'s curve, and its replayed tokens/s
    (None, with the reason, when the recordings do not hold the trees it asks for). It replays on the data the
    static trees are ranked on (:func:`~hf_adaptive_spec.environments.static_grid.replay_environment_over`): all
    the recordings, pooled per ``top_k``, and replayed together over several (a policy that changes ``top_k``, as
    Re-SpS may)."""
    policy = AutoDraftPolicy.from_pretrained(shipped_checkpoint(name, profile.cost_curve()))
    curve = profile.cost_curve()
    entry = {"trained_on": str(policy.trained_on), "fits_curve": policy.trained_on.fits(curve),
             "fit": (curve_fit(policy.trained_on, curve)
                     + drafter_fit(policy.trained_for_drafter, profile.drafter_identity()))}
    try:
        result = replay_environment_over(recordings_by_top_k(recordings), profile, lookup_tokens).replay(policy)
    except ValueError as error:
        return {**entry, "not_replayed": str(error)}
    return {**entry, "tokens_per_second": result.tokens_per_second, "tau": result.mean_accepted_tokens,
            "lookup_tokens": lookup_tokens}


def recommendation_lines(profile: HardwareProfile) -> list[str]:
    """What the profile recommends, or for each shipped learned policy whether it fits this curve."""
    curve = profile.cost_curve()
    recommendation = profile.recommendation
    if not recommendation:
        misfit = shipped_policies_misfit(profile.model, profile.drafter)
        return shipped_policy_fit(curve, misfit, profile.drafter_identity()) + [
            "no --recording: pass one to rank the static trees and pick this machine's default policy"
        ]
    tree, plain = recommendation["tree"], recommendation["plain_tokens_per_second"]
    lines = [
        f"best static tree: {tree_description(tree, recommendation['lookup_tokens'])} "
        f"(tau {tree['tau']:.2f}, modelled {tree['tokens_per_second'] / plain:.2f}x plain steps)"
    ]
    for name, entry in recommendation["policies"].items():
        if "not_for_this_model" in entry:
            lines.append(not_for_this_model(name, entry["not_for_this_model"]))
            continue
        fit = (entry.get("fit", "fits this curve") if entry["fits_curve"]  # profiles before "fit" was recorded
               else f"trained on {entry['trained_on']}: retrain it on this profile")
        speed = (replayed_speed(entry["tokens_per_second"] / tree["tokens_per_second"], recommendation)
                 if entry.get("tokens_per_second") else f"not replayed ({entry.get('not_replayed')})")
        lines.append(f"shipped {name} policy: {fit}; {speed}")
    chosen = recommendation["policy"]
    lookup = recommendation["lookup_tokens"]
    lines.append(f"recommended: {'the shipped ' + chosen + ' policy' if chosen else 'the static tree above'}"
                 + (f" with prompt_lookup_num_tokens={lookup}" if lookup else "")
                 + " (model.generate(**inputs, assistant_model=drafter, "
                 "**hfas.recommended_generate_kwargs(model=model)) "
                 f"reads it from the profile; use the drafter it timed, {profile.drafter})")
    return lines


def tree_description(tree: dict, lookup_tokens: int) -> str:
    """A ranked tree in words; ``lookup_tokens``: the branch of profiles written before each tree kept its own."""
    lookup = tree.get("lookup_tokens", lookup_tokens)
    if tree["depth"] == 0:
        return f"the {lookup}-token prompt-lookup branch alone, nothing drafted" if lookup else "plain one-token steps"
    shape = f"depth {tree['depth']}, top_k {tree['top_k']}, total_tokens {tree['total_tokens']}"
    if tree.get("lookup_first"):
        return shape + f", drafted only where the {lookup}-token prompt-lookup branch did not match (LookupFirstPolicy)"
    return shape + (f" with the {lookup}-token prompt-lookup branch" if lookup else "")


def replayed_speed(ratio: float, recommendation: dict) -> str:
    """A learned policy's replayed speed against the tree, and whether the lead clears the replay's margin."""
    margin = recommendation.get("replay_margin", 1.0)  # profiles written before the margin compared bare speeds
    verdict = "" if ratio <= 1.0 or ratio > margin else f", within the replay's {margin - 1:.0%} margin: not a lead"
    return f"replayed {ratio:.3f}x the best static tree{verdict}"


def shipped_policy_fit(curve: CostCurve, misfit: str | None = None, timed: DrafterIdentity | None = None) -> list[str]:
    """For each shipped learned policy, whether it was trained on this cost curve and with the drafter ``timed``
    (the profile's, when it kept its weights' digest); ``misfit``: why they are not for the profile's target and
    drafter (:func:`~hf_adaptive_spec.profiling.identity.shipped_policies_misfit`)."""
    if misfit:
        return [not_for_this_model(name, misfit) for name in SHIPPED_POLICIES]
    lines = []
    for name in SHIPPED_POLICIES:
        policy = AutoDraftPolicy.from_pretrained(shipped_checkpoint(name, curve))
        fit = curve_fit(policy.trained_on, curve) + drafter_fit(policy.trained_for_drafter, timed)
        lines.append(f"shipped {name} policy: trained on {policy.trained_on}; {fit}")
    return lines


def drafter_fit(trained_for: DrafterIdentity | None, timed: DrafterIdentity | None) -> str:
    """What to add to a policy's curve fit when it was trained with other weights than the drafter a profile
    timed (empty when they match or either is not known). Its replay on the profile's recording measures it
    with the timed drafter all the same."""
    if trained_for is None or timed is None or trained_for.weights == timed.weights:
        return ""
    return (f"; trained with other drafter weights than this profile's ({trained_for.weights[:12]}, not "
            f"{timed.weights[:12]}): retrain it on a recording of this drafter")


def curve_fit(trained_on: CostCurve, curve: CostCurve) -> str:
    """Whether a policy trained on ``trained_on`` fits ``curve`` (:meth:`CostCurve.fits`), saying when that
    could only be judged without the instruction set."""
    if not trained_on.fits(curve):
        return "trained on another curve: retrain it on this profile"
    if trained_on.instruction_set is None and curve.instruction_set is not None:
        return (f"fits this curve's device, dtype and path (the policy did not record its instruction set, this "
                f"curve's is {curve.instruction_set})")
    return "fits this curve"


def not_for_this_model(name: str, misfit: str) -> str:
    """The line for a shipped learned policy trained for another target or drafter than the profile's."""
    return (f"shipped {name} policy: not for the target and drafter profiled ({misfit}): train one for them "
            f"(`hf-adaptive-spec train {name}` on a recording of it and this profile) and use it with "
            f"`bench --{name}-policy DIR` or AutoDraftPolicy.from_pretrained(DIR)")
