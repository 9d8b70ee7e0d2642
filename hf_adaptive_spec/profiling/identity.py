"""Which target and drafter a profile timed, so that its costs and recommendation are not applied to others.

A profile's verification times are its target's, its draft step its drafter's, and the tree it
recommends follows its recording's acceptance. ``hf-adaptive-spec profile`` writes both names into the
profile (and a digest of the EAGLE-3 drafter's weights, to recognise a loaded drafter object);
:func:`check_profiled` refuses a profile for another target or drafter. Names compare in one
form: a local folder as its resolved path, a checkpoint shipped with the package as
``hf_adaptive_spec:<folder>`` (the same on every machine), a Hub id as written.

The learned policies shipped with the package were trained for the default model and the EAGLE-3
drafter shipped for it (``checkpoints.SHIPPED``); :func:`shipped_policies_misfit` says when a target or
drafter is another.
"""

from __future__ import annotations

from pathlib import Path

from transformers import PreTrainedModel

from ..checkpoints import shipped_checkpoint
from ..default_model import DEFAULT_MODEL_ID
from ..drafters.eagle3 import Eagle3Drafter

SHIPPED_PREFIX = "hf_adaptive_spec:"


def artifact_name(name_or_path: str | Path) -> str:
    """``name_or_path`` in the form profiles compare (see the module docstring)."""
    path = Path(name_or_path)
    if not path.exists():
        return str(name_or_path)
    resolved = path.resolve()
    shipped = shipped_checkpoint("eagle3").parent.resolve()
    return f"{SHIPPED_PREFIX}{resolved.name}" if resolved.parent == shipped else str(resolved)


def model_name(model: PreTrainedModel | str) -> str:
    """A target's name: its config's ``name_or_path`` (what ``from_pretrained`` was given), or the name itself
    (``"default"``, as the command line takes it, is the default model)."""
    name = model if isinstance(model, str) else model.config._name_or_path or type(model).__name__
    return artifact_name(DEFAULT_MODEL_ID if name == "default" else name)


def eagle3_name(checkpoint: str | Path | None) -> str:
    """An EAGLE-3 drafter's name: its checkpoint's, the shipped one's when None."""
    return artifact_name(shipped_checkpoint("eagle3") if checkpoint is None else checkpoint)


def check_profiled(
    profile, where: str, model: PreTrainedModel | str | None = None, drafter: str | Path | Eagle3Drafter | None = None
) -> None:
    """Refuse ``profile`` (a :class:`~hf_adaptive_spec.profiling.HardwareProfile`) for a target or EAGLE-3
    drafter other than the ones it timed; a name not given, or not recorded (profiles made before the
    names were), is not compared. ``drafter`` is a checkpoint (path or Hub id) or a loaded
    :class:`~hf_adaptive_spec.Eagle3Drafter`, matched by its weights."""
    if isinstance(drafter, Eagle3Drafter):
        _check_drafter_weights(profile, where, drafter)
        drafter = None
    elif drafter is not None and not isinstance(drafter, (str, Path)):
        raise TypeError(
            "drafter= takes an EAGLE-3 checkpoint (a folder or Hub id) or an Eagle3Drafter, "
            f"not {type(drafter).__name__}."
        )
    asked = {"target": None if model is None else model_name(model),
             "drafter": None if drafter is None else eagle3_name(drafter)}
    for role, recorded in (("target", profile.model), ("drafter", profile.drafter)):
        if asked[role] is not None and recorded is not None and asked[role] != recorded:
            raise ValueError(
                f"The hardware profile {where} timed the {role} {recorded}, not {asked[role]}: its costs and the tree "
                "it recommends are another model's. Profile this one (`hf-adaptive-spec profile --model ... --eagle3 "
                "... --recording ...`), with --json or $HF_ADAPTIVE_SPEC_PROFILE naming another file to keep both."
            )


def _check_drafter_weights(profile, where: str, drafter: Eagle3Drafter) -> None:
    """A drafter object is the profile's when its weights are those the profile timed."""
    if profile.drafter_weights is None:
        raise ValueError(
            f"The hardware profile {where} records no digest of its drafter's weights ({profile.drafter}; profiles "
            "made before they were kept, or timing no EAGLE-3 drafter), so a loaded drafter cannot be matched to it: "
            "pass its checkpoint instead (drafter=\"PATH_OR_HUB_ID\"), or profile again with `hf-adaptive-spec profile "
            "--eagle3 ...`."
        )
    if drafter.weights_digest() != profile.drafter_weights:
        raise ValueError(
            f"The hardware profile {where} timed the drafter {profile.drafter}, and this drafter's weights are not "
            "its: its costs and the tree it recommends are another drafter's. Profile this one (`hf-adaptive-spec "
            "profile --model ... --eagle3 ... --recording ...`), with --json or $HF_ADAPTIVE_SPEC_PROFILE naming "
            "another file."
        )


def shipped_policies_pair() -> tuple[str, str]:
    """The target and drafter the shipped learned policies were trained for, as profiles name them: the default
    model and the EAGLE-3 drafter shipped for it (every checkpoint in ``checkpoints.SHIPPED`` is for it)."""
    return model_name(DEFAULT_MODEL_ID), eagle3_name(None)


def shipped_policies_misfit(model: PreTrainedModel | str | None, drafter: str | Path | None) -> str | None:
    """Why the shipped learned policies do not fit ``model`` and ``drafter`` (names or checkpoints as
    :func:`model_name` and :func:`eagle3_name` take them; None for the shipped drafter), or None when they do."""
    target, shipped_drafter = shipped_policies_pair()
    asked_target, asked_drafter = model_name(model or DEFAULT_MODEL_ID), eagle3_name(drafter)
    if (asked_target, asked_drafter) == (target, shipped_drafter):
        return None
    return (
        f"the shipped policies were trained for {DEFAULT_MODEL_ID} with its shipped EAGLE-3 drafter "
        f"({shipped_drafter}), not for the target {asked_target} with the drafter {asked_drafter}"
    )
