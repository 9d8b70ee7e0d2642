"""The RADAR training script (``trainers/radar.py``).

    python trainers/radar.py --config trainers/recipes/radar_smollm2.yaml
    torchrun --nproc_per_node 2 trainers/radar.py --config ... --ddp_backend gloo

The dataset is read from ``dataset_path``, or built there from the replay recording at
``recording_path`` when that folder holds no dataset yet. Any ``RadarConfig`` /
``transformers.TrainingArguments`` field and any ``RadarScriptArguments`` field can be set in
the YAML file or on the command line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from transformers import set_seed
from trl import TrlParser

from ...core.values import check_number
from ...environments import load_training_recording
from ...environments.provenance import load_profile_for_recordings
from ...policies.radar.policy import RadarPolicy
from ..base import PolicyScriptArguments, run_training_script
from .config import RadarConfig
from .data import RadarDataset, build_radar_dataset
from .trainer import RadarTrainer


@dataclass
class RadarScriptArguments(PolicyScriptArguments):
    """Data arguments of the RADAR training script (the lookup branch and the card's names:
    :class:`PolicyScriptArguments`)."""

    #: the arguments naming local files or folders the run reads, checked before any model loads
    local_inputs: ClassVar[tuple[str, ...]] = ("profile_path", "recording_path")

    profile_path: str = field(metadata={"help": "Hardware profile JSON (`hf-adaptive-spec profile --json ...`)."})
    dataset_path: str = field(metadata={"help": "RADAR dataset folder; built from recording_path when absent."})
    recording_path: str | None = field(
        default=None, metadata={"help": "Replay recording folder (environments.record_replay(...).save(path))."}
    )
    depth: int | None = field(
        default=None, metadata={"help": "Most draft calls per cycle; unset: the recording's depth."}
    )
    total_tokens: int | None = field(
        default=None, metadata={"help": "Verified tokens per cycle (root included); unset: the recording's."}
    )
    eval_fraction: float = field(default=0.1, metadata={"help": "Share of recorded prompts held out for evaluation."})

    def __post_init__(self):
        super().__post_init__()
        # a negative share held out most of the prompts (round(-0.1 * 10) = -1: all but one), and trained on one
        check_number("RadarScriptArguments", "eval_fraction", self.eval_fraction, at_least=0, below=1,
                     meaning="the share of recorded prompts held out; 0: none")


def make_parser() -> TrlParser:
    return TrlParser((RadarScriptArguments, RadarConfig))


def load_or_build_dataset(script_args: RadarScriptArguments) -> RadarDataset:
    """The dataset at ``dataset_path``, or one built from ``recording_path`` and saved there."""
    if (Path(script_args.dataset_path) / "radar_dataset.json").is_file():
        dataset = RadarDataset.load(script_args.dataset_path)
        _check_cached_dataset(script_args, dataset)
        return dataset
    if script_args.recording_path is None:
        raise ValueError(
            f"{script_args.dataset_path} holds no RADAR dataset: set recording_path to build it from a recording."
        )
    recording = load_training_recording(script_args.recording_path)
    dataset = build_radar_dataset(
        recording, script_args.depth, script_args.total_tokens, **script_args.lookup_kwargs(),
        lookup_first=script_args.lookup_first,
    )
    dataset.save(script_args.dataset_path, built_from=script_args.recording_path)
    return dataset


def _check_cached_dataset(script_args: RadarScriptArguments, dataset: RadarDataset) -> None:
    """A dataset already at ``dataset_path`` is used as it is: settings that would build another one are refused."""
    tree = dataset.tree_config
    built_from = RadarDataset.built_from(script_args.dataset_path)
    asked = {
        "the prompt-lookup branch": (script_args.lookup_kwargs(), dataset.lookup_kwargs()),
        "lookup_first": (script_args.lookup_first, dataset.lookup_first),
        "depth": (script_args.depth, tree.depth),
        "total_tokens": (script_args.total_tokens, tree.total_tokens),
        "recording_path": (script_args.recording_path, built_from),
    }
    differ = [f"{name} {given} (the dataset's: {held})" for name, (given, held) in asked.items()
              if given is not None and held is not None and given != held]  # held None: saved before it was kept
    if differ:
        raise ValueError(
            f"{script_args.dataset_path} already holds a RADAR dataset, built with other settings than asked: "
            f"{'; '.join(differ)}. Give the dataset's own settings (or leave them unset) to train on it, or pass a new "
            "dataset_path to build another."
        )


def recording_of(script_args: RadarScriptArguments) -> str | None:
    """The recording the run trains on: ``recording_path``, else the one the dataset at ``dataset_path`` was built
    from (None when neither is known)."""
    if script_args.recording_path or not (Path(script_args.dataset_path) / "radar_dataset.json").is_file():
        return script_args.recording_path
    return RadarDataset.built_from(script_args.dataset_path)


def main(script_args: RadarScriptArguments, training_args: RadarConfig) -> RadarTrainer:
    """Load (or build) the data, split it, make the policy and the trainer; train, save (and push)."""
    recording = recording_of(script_args)
    profile = load_profile_for_recordings(script_args.profile_path, [recording])
    dataset = load_or_build_dataset(script_args)
    train_set, held_out = dataset.split_by_prompt(script_args.eval_fraction, training_args.seed)
    if not len(held_out) and training_args.load_best_model_at_end:
        raise ValueError("Best-checkpoint selection needs held-out prompts: set eval_fraction > 0, or "
                         "--load_best_model_at_end false --eval_strategy no.")
    set_seed(training_args.seed)
    tree = dataset.tree_config
    policy = RadarPolicy(
        depth=tree.depth, top_k=tree.top_k, total_tokens=tree.total_tokens, lstm_hidden=training_args.lstm_hidden,
        mlp_hidden=training_args.mlp_hidden, dropout=training_args.dropout, allow_skip=training_args.allow_skip,
        lookup_first=dataset.lookup_first,
    )
    policy.mark_trained_on(
        profile.cost_curve(), profile.drafter_identity(), dataset.lookup_tokens, dataset.lookup_ngram_size
    )
    trainer = RadarTrainer(
        model=policy,
        args=training_args,
        train_dataset=train_set,
        eval_dataset=held_out if len(held_out) else None,
        profile=profile,
        **script_args.card_names(recording).trainer_kwargs(),
    )
    trainer.train_save_and_push()
    return trainer


def run(argv: list[str] | None = None) -> int:
    """Parse argv (YAML via --config) and train."""
    return run_training_script(make_parser(), main, argv, RadarTrainer)
