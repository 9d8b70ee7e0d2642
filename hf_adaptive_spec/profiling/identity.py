"""Which target and drafter a profile timed, so that its costs and recommendation are not applied to others.

A profile's verification times are its target's, its draft step its drafter's, and the tree it
recommends follows its recording's acceptance. ``hf-adaptive-spec profile`` writes both names into the
profile; :func:`check_profiled` refuses a profile for another target or drafter. Names compare in one
form: a local folder as its resolved path, a checkpoint shipped with the package as
``hf_adaptive_spec:<folder>`` (the same on every machine), a Hub id as written.
"""

from __future__ import annotations

from pathlib import Path

from transformers import PreTrainedModel

from ..checkpoints import shipped_checkpoint

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
    """A target's name: its config's ``name_or_path`` (what ``from_pretrained`` was given), or the name itself."""
    name = model if isinstance(model, str) else model.config._name_or_path or type(model).__name__
    return artifact_name(name)


def eagle3_name(checkpoint: str | Path | None) -> str:
    """An EAGLE-3 drafter's name: its checkpoint's, the shipped one's when None."""
    return artifact_name(shipped_checkpoint("eagle3") if checkpoint is None else checkpoint)


def check_profiled(profile, where: str, model: PreTrainedModel | str | None = None, drafter: str | None = None) -> None:
    """Refuse ``profile`` (a :class:`~hf_adaptive_spec.profiling.HardwareProfile`) for a target or EAGLE-3
    checkpoint other than the ones it timed; a name not given, or not recorded (profiles made before the
    names were), is not compared."""
    asked = {"target": None if model is None else model_name(model),
             "drafter": None if drafter is None else eagle3_name(drafter)}
    for role, recorded in (("target", profile.model), ("drafter", profile.drafter)):
        if asked[role] is not None and recorded is not None and asked[role] != recorded:
            raise ValueError(
                f"The hardware profile {where} timed the {role} {recorded}, not {asked[role]}: its costs and the tree it "
                "recommends are another model's. Profile this one (`hf-adaptive-spec profile --model ... --eagle3 ... "
                "--recording ...`), with --json or $HF_ADAPTIVE_SPEC_PROFILE naming another file to keep both."
            )
