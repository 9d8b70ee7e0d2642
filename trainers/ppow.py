"""Post-train an EAGLE-3 drafter with PPOW, window-level RL (TRL-style script).

    python trainers/ppow.py --config trainers/recipes/ppow_smollm2.yaml
    hf-adaptive-spec train ppow --config trainers/recipes/ppow_smollm2.yaml
    torchrun --nproc_per_node 2 trainers/ppow.py --config ... --ddp_backend gloo

Every ``PPOWConfig`` (``transformers.TrainingArguments``) and ``PPOWScriptArguments`` field can
be set in the YAML file or on the command line; the ablations are ``--use_proximity_reward false``
and ``--use_adaw false``.
"""

from hf_adaptive_spec.training.ppow.script import PPOWScriptArguments, main, make_parser, run

__all__ = ["PPOWScriptArguments", "main", "make_parser"]

if __name__ == "__main__":
    raise SystemExit(run())
