"""Train a Re-SpS draft policy with PPO on exact replays of recorded generations (TRL-style script).

    python trainers/resps.py --config trainers/recipes/resps_smollm2.yaml
    torchrun --nproc_per_node 2 trainers/resps.py --config trainers/recipes/resps_smollm2.yaml --ddp_backend gloo

Every ``ReSpSConfig`` (``transformers.TrainingArguments``) and ``ReSpSScriptArguments`` field can
be set in the YAML file or on the command line. The run needs one replay recording per ``top_k``
of the action grid and a hardware profile (see hf_adaptive_spec/policies/resps/README.md).
"""

from hf_adaptive_spec.training.resps.script import ReSpSScriptArguments, main, make_parser, run

__all__ = ["ReSpSScriptArguments", "main", "make_parser"]

if __name__ == "__main__":
    raise SystemExit(run())
