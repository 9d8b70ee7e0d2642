"""Train a DVI LoRA draft head for a target model (TRL-style script).

    python trainers/dvi.py --config trainers/recipes/dvi_smollm2.yaml
    python trainers/dvi.py --config trainers/recipes/dvi_smollm2_smoke.yaml   # a minute

Every ``DVIConfig`` (``transformers.TrainingArguments``) and ``DVIScriptArguments`` field can
be set in the YAML file or on the command line. The run is the drafter's online loop over the
prompts: generate with the online drafter, one LoRA update per prompt.
"""

from hf_adaptive_spec.training.dvi.script import DVIScriptArguments, main, make_parser, run

__all__ = ["DVIScriptArguments", "main", "make_parser"]

if __name__ == "__main__":
    raise SystemExit(run())
