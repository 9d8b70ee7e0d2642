"""Checkpoints shipped inside the package for the default model (Hub layout, safetensors)."""

from __future__ import annotations

from pathlib import Path

from ..core.cost_curve import CostCurve

#: name -> folder of each shipped checkpoint (for SmolLM2-135M-Instruct). The three policies are
#: the outputs of their recipes (trainers/recipes/ltd_smollm2_skip.yaml, radar_smollm2_skip.yaml,
#: resps_smollm2_plain.yaml: skip-or-verify action sets) retrained for the shipped stage-15 EAGLE-3 drafter on
#: the eager float32 curve of an AVX2-only EPYC with the 4-token prompt-lookup branch
#: (results/policies_eager/avx2_fp32/retrain.sh; each card gives its command and live results). Their configs
#: record that drafter's weights (``trained_for_drafter``) and that curve (``trained_on``).
SHIPPED = {
    "eagle3": "eagle3-smollm2-135m-instruct",
    "ltd": "ltd-smollm2-135m-instruct",
    "resps": "resps-smollm2-135m-instruct",
    "radar": "radar-smollm2-135m-instruct",
    "dvi": "dvi-smollm2-135m-instruct",
}

#: (name, cost curve) -> folder of a learned policy retrained for another cost curve than the default
#: one's; ``shipped_checkpoint(name, cost_curve=...)`` prefers it on that curve. RADAR on the compiled float32
#: curve (trained on an AVX2 EPYC with the stage-15 drafter and the 4-token prompt-lookup branch): live 0.95-1.03x
#: the static tree 2/4/8 in four Spec-Bench runs, 1.01x on MT-bench (its card; results/README.md, issue 32); what
#: RADAR should be on that curve, not what `profile` recommends there (a static tree). LTD on the compiled bfloat16
#: curve (trained on an AVX512-BF16 EPYC's profile, buckets 2/8/12/16/32, with the 4-token branch, ``lookup_first``:
#: trainers/recipes/ltd_smollm2_compiled_lookup_first.yaml): live on Spec-Bench 13 x 10 1.010x the best static tree
#: (LookupFirstPolicy 2/4/8 + branch; bootstrap 0.99-1.03x), 2.32x stock-compiled+sized (its card; results/README.md,
#: issue 32, session 67). RADAR on the compiled bfloat16 curve (the same profile, ``lookup_first``, all 100 held-out
#: 2-turn conversations: trainers/recipes/radar_smollm2_compiled_lookup_first.yaml): live on Spec-Bench 13 x 10 0.996x
#: that static tree (bootstrap 0.986-1.005x), a tie (its card; results/README.md, issue 32, session 68).
SHIPPED_FOR_CURVE: dict[tuple[str, str], str] = {
    ("radar", "cpu/float32/compiled"): "radar-smollm2-135m-instruct-fp32-compiled",
    ("ltd", "cpu/bfloat16/compiled"): "ltd-smollm2-135m-instruct-bf16-compiled",
    ("radar", "cpu/bfloat16/compiled"): "radar-smollm2-135m-instruct-bf16-compiled",
}


def shipped_checkpoint(name: str, cost_curve: CostCurve | str | None = None) -> Path:
    """Folder of the shipped ``name`` checkpoint; raises naming what is missing.

    Args:
        name: ``"eagle3"``, ``"dvi"`` or a learned policy (``"ltd"``, ``"resps"``, ``"radar"``).
        cost_curve: the curve the checkpoint will run on (a :class:`CostCurve` or ``str`` of one, such as
            ``"cpu/bfloat16/compiled"``): the variant of ``name`` trained on it when one is shipped, else the default
            one. Text of another form is refused (a typo would give the default variant silently).
    """
    if name not in SHIPPED:
        raise ValueError(f"No shipped checkpoint named {name!r}; shipped: {', '.join(SHIPPED)}.")
    curve = CostCurve.parse(cost_curve) if isinstance(cost_curve, str) else cost_curve
    folder = Path(__file__).parent / SHIPPED_FOR_CURVE.get((name, curve and curve.key), SHIPPED[name])
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(
            f"The shipped {name} checkpoint is missing at {folder}: reinstall hf-adaptive-spec, "
            "or pass a checkpoint path."
        )
    return folder
