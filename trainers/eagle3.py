"""Train an EAGLE-3 drafter for a target model (TRL-style script).

    python trainers/eagle3.py --config trainers/recipes/eagle3_smollm2.yaml
    hf-adaptive-spec train eagle3 --config trainers/recipes/eagle3_smollm2.yaml
    torchrun --nproc_per_node 2 trainers/eagle3.py --config ... --ddp_backend gloo

Every ``Eagle3Config`` (``transformers.TrainingArguments``) and ``Eagle3ScriptArguments``
field can be set in the YAML file or on the command line.
"""

from hf_adaptive_spec.training.eagle3.script import Eagle3ScriptArguments, main, make_parser, run

__all__ = ["Eagle3ScriptArguments", "main", "make_parser"]

if __name__ == "__main__":
    raise SystemExit(run())
