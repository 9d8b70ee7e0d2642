"""The policy a machine's profile recommends: the package's default follows the measured cost curve.

``hf-adaptive-spec profile --recording DIR`` replays the static trees of a recording (and the shipped
learned policies), with and without the prompt-lookup branch (``--lookup-tokens``), with the costs it just
measured and writes what won into the profile JSON (``recommendation``). :func:`recommended_generate_kwargs`
reads it back, so a script asks the machine it runs on, not the machine a policy happened to be trained on::

    # $HF_ADAPTIVE_SPEC_PROFILE or ~/.cache/hf_adaptive_spec/profile.json
    model.generate(**inputs, assistant_model=drafter, **hfas.recommended_generate_kwargs(model=model))

(the ``assistant_policy`` of :func:`recommended_policy`, and ``prompt_lookup_num_tokens`` when the winner grafts
the prompt-lookup branch).

A profile names the target and drafter it timed; given ``model`` (and ``drafter``, an EAGLE-3 checkpoint or
the :class:`~hf_adaptive_spec.Eagle3Drafter` loaded from it), a profile of others is refused, and so is one
measured on a processor with other matrix instructions (its ``instruction_set``) than this one, and, given the
loaded ``model``, one measured on another device type or in another dtype than the model's. A CPU profile timed
with other CPU threads than this process runs (``torch.get_num_threads()``) is warned of. The recommended static
tree records the profile's curve as its ``trained_on``, so ``generate`` reports a call on another path.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel

from ..checkpoints import shipped_checkpoint
from ..core.cost_curve import CostCurve
from ..core.values import check_flag, check_number
from ..drafters.eagle3 import Eagle3Drafter
from ..generation.static_path import DEFAULT_BUCKETS
from ..policies import AutoDraftPolicy
from ..policies.base import DraftPolicy, TreeConfig
from ..policies.static import static_tree_policy
from .hardware import HardwareProfile
from .identity import check_profiled, shipped_policies_misfit

PROFILE_ENV = "HF_ADAPTIVE_SPEC_PROFILE"


def default_profile_path() -> Path:
    """Where ``hf-adaptive-spec profile`` writes and :func:`recommended_policy` reads by default:
    ``$HF_ADAPTIVE_SPEC_PROFILE``, else ``~/.cache/hf_adaptive_spec/profile.json``."""
    configured = os.environ.get(PROFILE_ENV)
    return Path(configured) if configured else Path.home() / ".cache" / "hf_adaptive_spec" / "profile.json"


def _profile_with_recommendation(
    profile: str | Path | HardwareProfile | None,
    model: PreTrainedModel | str | None,
    drafter: str | Path | Eagle3Drafter | None,
) -> HardwareProfile:
    if isinstance(profile, HardwareProfile):
        loaded, where = profile, "this profile"
    else:
        path = Path(profile) if profile is not None else default_profile_path()
        if not path.is_file():
            raise FileNotFoundError(
                f"No hardware profile at {path}: measure this machine with `hf-adaptive-spec profile --recording DIR` "
                f"(it writes there by default; set ${PROFILE_ENV} or pass the file), "
                "or choose a StaticTreePolicy yourself."
            )
        loaded, where = HardwareProfile.load(path), str(path)
    if not loaded.recommendation:
        raise ValueError(
            f"The hardware profile {where} recommends nothing: it was measured without a recording. Run "
            "`hf-adaptive-spec profile --recording DIR` (a folder from `hf-adaptive-spec record`) to rank the trees."
        )
    _check_recommendation(loaded, where)
    check_profiled(loaded, where, model, drafter)
    _check_this_machine(loaded, where, model)
    return loaded


def _check_recommendation(profile: HardwareProfile, where: str) -> None:
    """Refuse a recommendation ``profile --recording`` does not write (edited, or by another version): its tree must
    be a :class:`TreeConfig`'s depth, top_k and total_tokens (``lookup_first`` a bool), its prompt-lookup branch an
    int >= 0 or None and its policy a name or None."""
    recommendation = profile.recommendation
    try:
        tree = recommendation.get("tree") if isinstance(recommendation, dict) else None
        if not isinstance(tree, dict):
            raise ValueError(f"it must be an object whose tree has depth, top_k and total_tokens: {recommendation!r}.")
        TreeConfig(*(tree.get(name) for name in ("depth", "top_k", "total_tokens")))
        check_flag("the recommended tree", "lookup_first", tree.get("lookup_first", False))
        if recommendation.get("lookup_tokens") is not None:
            check_number("the recommendation", "lookup_tokens", recommendation["lookup_tokens"], at_least=0,
                         integer=True, meaning="generate's prompt_lookup_num_tokens, 0 for none")
        if not isinstance(recommendation.get("policy"), str | None):
            raise ValueError(f"its policy must be a shipped policy's name or None, got {recommendation['policy']!r}.")
    except ValueError as error:
        raise ValueError(
            f"The hardware profile {where} holds a recommendation its ranking does not write: {error} It was edited "
            "or written by another version: rank again on its costs with `hf-adaptive-spec profile --rerank --json "
            "FILE --recording DIR`, or measure again with `hf-adaptive-spec profile --recording DIR`."
        ) from error


def _check_this_machine(profile: HardwareProfile, where: str, model: PreTrainedModel | str | None) -> None:
    """A profile measured on another device type or in another dtype than ``model`` (a loaded module) is, or copied
    from a processor with other matrix instructions, measured another curve: refuse it (a profile that did not
    record its instruction set is taken as it is). The path is ``generate``'s choice, not the model's: the
    recommended policy records the profile's curve as ``trained_on``, and ``generate`` reports a call on another.
    On a CPU, a profile timed with other threads than this process runs is warned of (:func:`_warn_other_threads`)."""
    measured = profile.cost_curve()
    here = CostCurve.of(profile.device, profile.dtype, profile.path)
    if isinstance(model, torch.nn.Module):
        here = CostCurve.of(model.device, model.dtype, profile.path)
        if (here.device, here.dtype) != (measured.device, measured.dtype):
            raise ValueError(
                f"The hardware profile {where} was measured on {measured.device} in {measured.dtype} and the model is "
                f"on {here.device} in {here.dtype}: its costs are not this model's (what a verification of many tokens "
                f"costs depends on both). Load the model as profiled (dtype=torch.{measured.dtype}, on "
                f"{measured.device}), or run `hf-adaptive-spec profile --device {here.device} --dtype {here.dtype} "
                "--recording DIR` where it runs (and pass that profile)."
            )
    if not measured.fits(here):  # the same device, dtype and path: the instruction sets differ
        raise ValueError(
            f"The hardware profile {where} was measured on a {profile.device} with {profile.instruction_set} and this "
            f"one has {here.instruction_set}: its costs are not this machine's (a compiled bfloat16 verification of 8 "
            "tokens costs about one token with bfloat16 matrix instructions and several without). Run "
            f"`hf-adaptive-spec profile --device {here.device} --recording DIR` on this machine."
        )
    if here.device == "cpu":
        _warn_other_threads(profile, where)


def _warn_other_threads(profile: HardwareProfile, where: str) -> None:
    """Warn when ``profile`` was timed with other CPU threads than this process runs (``torch.get_num_threads()``):
    a verification of many tokens costs another multiple of one token's with other threads, so the tree it recommends
    may not be the best here."""
    threads = torch.get_num_threads()
    if profile.num_threads != threads:
        warnings.warn(
            f"The hardware profile {where} was timed with {profile.num_threads} CPU threads and this process runs "
            f"{threads} (torch.get_num_threads()): what a verification of many tokens costs against one token depends "
            f"on the threads, so its recommendation may not be this process's best. Call "
            f"torch.set_num_threads({profile.num_threads}) before generating, or profile with `hf-adaptive-spec "
            f"profile --num-threads {threads} --recording DIR`.",
            stacklevel=5,  # the caller of recommended_policy() and its kin
        )


def recommended_policy(
    profile: str | Path | HardwareProfile | None = None,
    *,
    model: PreTrainedModel | str | None = None,
    drafter: str | Path | Eagle3Drafter | None = None,
) -> DraftPolicy:
    """The policy ``profile`` recommends for its cost curve: the shipped learned policy it names when
    that policy was trained on this curve and beat the best static tree in its replay, else that tree.
    Warns when the recommendation also grafts the prompt-lookup branch, which is a ``generate`` argument
    (:func:`recommended_generate_kwargs` returns both).

    Args:
        profile: a profile JSON (default :func:`default_profile_path`) or a loaded profile.
        model: the target you generate with (or its name): a profile that timed another is refused.
        drafter: the EAGLE-3 drafter you draft with, as its checkpoint (a folder or Hub id) or the loaded
            :class:`~hf_adaptive_spec.Eagle3Drafter` (recognised by its weights; a profile made before it kept
            their digest is refused for an object, with the fix): a profile that timed another is refused.
    """
    loaded = _profile_with_recommendation(profile, model, drafter)
    lookup_tokens = _lookup_tokens(loaded)
    if lookup_tokens:
        warnings.warn(
            f"The profile recommends this policy with the prompt-lookup branch of {lookup_tokens} tokens: pass "
            f"prompt_lookup_num_tokens={lookup_tokens} to generate too (without it the policy "
            f"{'drafts nothing: plain one-token steps' if _is_lookup_alone(loaded) else 'is slower than ranked'}), "
            "or use hfas.recommended_generate_kwargs(), which includes it.",
            stacklevel=2,
        )
    return _policy_of(loaded)


def recommended_generate_kwargs(
    profile: str | Path | HardwareProfile | None = None,
    *,
    model: PreTrainedModel | str | None = None,
    drafter: str | Path | Eagle3Drafter | None = None,
) -> dict[str, Any]:
    """What ``profile`` recommends, as ``generate`` keyword arguments: ``assistant_policy`` (as
    :func:`recommended_policy`) and, when the winner grafts the prompt-lookup branch, ``prompt_lookup_num_tokens``
    (on a CPU without bfloat16 matrix instructions the branch alone, drafting nothing, can win); ``model`` and
    ``drafter`` as in :func:`recommended_policy`. Generate in the profile's buckets
    (:func:`recommended_buckets`)."""
    loaded = _profile_with_recommendation(profile, model, drafter)
    lookup_tokens = _lookup_tokens(loaded)
    return {
        "assistant_policy": _policy_of(loaded),
        **({"prompt_lookup_num_tokens": lookup_tokens} if lookup_tokens else {}),
    }


def recommended_lookup_tokens(
    profile: str | Path | HardwareProfile | None = None,
    *,
    model: PreTrainedModel | str | None = None,
    drafter: str | Path | Eagle3Drafter | None = None,
) -> int:
    """The prompt-lookup branch length ``profile`` recommends (``generate``'s ``prompt_lookup_num_tokens``;
    0: none); ``model`` and ``drafter`` as in :func:`recommended_policy`."""
    return _lookup_tokens(_profile_with_recommendation(profile, model, drafter))


def _lookup_tokens(profile: HardwareProfile) -> int:
    return int(profile.recommendation.get("lookup_tokens") or 0)


def _is_lookup_alone(profile: HardwareProfile) -> bool:
    return not profile.recommendation.get("policy") and profile.recommendation["tree"]["depth"] == 0


def _policy_of(loaded: HardwareProfile) -> DraftPolicy:
    """The recommended policy of a checked profile: the shipped learned policy it names, else its static tree."""
    name = loaded.recommendation.get("policy")
    if name:
        _check_shipped_policy_fits(loaded, name)
        policy = AutoDraftPolicy.from_pretrained(shipped_checkpoint(name, loaded.cost_curve()))
        if not policy.trained_on.fits(loaded.cost_curve()):
            raise ValueError(
                f"The profile recommends the shipped {name} policy, but it was trained on {policy.trained_on} and the "
                f"profile measured {loaded.cost_curve()}: the package was updated since; run `hf-adaptive-spec "
                "profile --recording DIR` again."
            )
        _check_recommended_branch(loaded, name, policy)
        return policy
    policy = static_tree_policy(_tree_of(loaded), bool(loaded.recommendation["tree"].get("lookup_first")))
    policy.mark_trained_on(loaded.cost_curve())  # ranked on this curve: generate reports a call on another
    return policy


def recommended_tree(
    profile: str | Path | HardwareProfile | None = None,
    *,
    model: PreTrainedModel | str | None = None,
    drafter: str | Path | Eagle3Drafter | None = None,
) -> TreeConfig:
    """The best static tree of ``profile``'s recommendation (whatever policy it recommends; the tree a
    :class:`~hf_adaptive_spec.LookupFirstPolicy` drafts where the lookup branch did not match); ``model`` and
    ``drafter`` as in :func:`recommended_policy`."""
    return _tree_of(_profile_with_recommendation(profile, model, drafter))


def _tree_of(loaded: HardwareProfile) -> TreeConfig:
    """The recommended static tree of a checked profile."""
    tree = loaded.recommendation["tree"]
    return TreeConfig(depth=tree["depth"], top_k=tree["top_k"], total_tokens=tree["total_tokens"])


def recommended_buckets(
    profile: str | Path | HardwareProfile | None = None,
    *,
    model: PreTrainedModel | str | None = None,
    drafter: str | Path | Eagle3Drafter | None = None,
) -> tuple[int, ...]:
    """The verification buckets ``profile`` timed and ranked its trees on (``profile --buckets``), for
    ``hfas.fast_path(model, buckets=...)`` before ``generate``; ``model`` and ``drafter`` as in
    :func:`recommended_policy`. The engine's default buckets for a profile of the eager path, with a warning: it
    ranked its trees on the eager curve, which pads nothing, not on these buckets."""
    loaded = _profile_with_recommendation(profile, model, drafter)
    if loaded.buckets:
        return tuple(loaded.buckets)
    warnings.warn(
        f"The hardware profile times the {loaded.path} path, which pads no tree to a bucket: these are the engine's "
        f"default buckets {DEFAULT_BUCKETS}, not ones it ranked its trees on, and its recommended tree was ranked on "
        "the eager curve. To generate on the static path, measure it with `hf-adaptive-spec profile --compile "
        "--recording DIR` (or --static) and use that profile's buckets and tree.",
        stacklevel=2,
    )
    return DEFAULT_BUCKETS


def _check_recommended_branch(profile: HardwareProfile, name: str, policy: DraftPolicy) -> None:
    """A shipped policy that records the prompt-lookup branch it was trained with is recommended with that branch
    (``profile`` replays it with no other since it records one): refuse a profile written before."""
    trained_with, recommended = policy.trained_with_lookup_tokens, _lookup_tokens(profile)
    if trained_with is not None and trained_with != recommended:
        raise ValueError(
            f"The profile recommends the shipped {name} policy with prompt_lookup_num_tokens={recommended or None}, "
            f"but it was trained with {trained_with or 'no'} prompt-lookup tokens: the package was updated since; run "
            "`hf-adaptive-spec profile --recording DIR` again."
        )


def _check_shipped_policy_fits(profile: HardwareProfile, name: str) -> None:
    """A shipped policy is for the target and drafter it was trained for: refuse a recommendation of it in a profile
    of others (written before ``profile`` checked it)."""
    misfit = shipped_policies_misfit(profile.model, profile.drafter) if profile.model and profile.drafter else None
    if misfit:
        raise ValueError(
            f"The profile recommends the shipped {name} policy, but {misfit}. Run `hf-adaptive-spec profile "
            "--recording DIR` again (it no longer recommends them for another model), or train a policy for this pair "
            f"(`hf-adaptive-spec train {name}`) and load it with AutoDraftPolicy.from_pretrained(PATH)."
        )
