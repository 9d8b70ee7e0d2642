"""Train a RADAR draft policy from a replay recording (TRL-style script).

    python trainers/radar.py --config trainers/recipes/radar_smollm2.yaml
    torchrun --nproc_per_node 2 trainers/radar.py --config trainers/recipes/radar_smollm2.yaml --ddp_backend gloo

Every ``RadarConfig`` (``transformers.TrainingArguments``) and ``RadarScriptArguments`` field can
be set in the YAML file or on the command line. The first run builds the dataset from the
recording (exact replay of every number of draft calls) and saves it at ``dataset_path``.
"""

from hf_adaptive_spec.training.radar.script import RadarScriptArguments, main, make_parser, run

__all__ = ["RadarScriptArguments", "main", "make_parser"]

if __name__ == "__main__":
    raise SystemExit(run())
