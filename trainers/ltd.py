"""Train LTD's depth and verification-size policies on a replay recording (TRL-style script).

    python trainers/ltd.py --config trainers/recipes/ltd_smollm2.yaml
    hf-adaptive-spec train ltd --config trainers/recipes/ltd_smollm2.yaml
    torchrun --nproc_per_node 2 trainers/ltd.py --config trainers/recipes/ltd_smollm2.yaml --ddp_backend gloo

Every ``LTDConfig`` (``transformers.TrainingArguments``) and ``LTDScriptArguments`` field can
be set in the YAML file or on the command line. The run replays the recording with the
hardware profile's costs; no model is loaded.
"""

from hf_adaptive_spec.training.ltd.script import LTDScriptArguments, main, make_parser, run

__all__ = ["LTDScriptArguments", "main", "make_parser"]

if __name__ == "__main__":
    raise SystemExit(run())
