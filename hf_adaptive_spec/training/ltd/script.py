"""The LTD training script (``trainers/ltd.py``, ``hf-adaptive-spec train ltd``).

    python trainers/ltd.py --config trainers/recipes/ltd_smollm2.yaml
    torchrun --nproc_per_node 2 trainers/ltd.py --config ... --ddp_backend gloo

Any ``LTDConfig`` / ``transformers.TrainingArguments`` field and any ``LTDScriptArguments``
field can be set in the YAML file or on the command line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch
from transformers import set_seed
from trl import TrlParser

from ...core.values import check_number
from ...environments import ReplayEnvironment, ReplayRecording, load_recording, load_training_recording
from ...environments.provenance import load_profile_for_recordings
from ...policies.ltd import LTDPolicy
from ..base import PolicyScriptArguments, check_continued_lookup_first, run_training_script
from .config import LTDConfig
from .trainer import LTDTrainer


@dataclass
class LTDScriptArguments(PolicyScriptArguments):
    """Environment and policy shape arguments of the LTD training script (the lookup branch and the card's names:
    :class:`PolicyScriptArguments`)."""

    #: the arguments naming local files or folders the run reads, checked before any model loads
    local_inputs: ClassVar[tuple[str, ...]] = ("recording_dir", "profile_path", "eval_recording_dir")

    recording_dir: str = field(
        metadata={"help": "Replay recording: a folder, or a folder of `hf-adaptive-spec record` shards."},
    )
    profile_path: str = field(
        metadata={"help": "HardwareProfile JSON with draft_step_seconds (`hf-adaptive-spec record --profile ...`)."},
    )
    eval_recording_dir: str | None = field(
        default=None, metadata={"help": "Recording replayed for evaluation and the card; unset: the training one."}
    )
    depth: int | None = field(default=None, metadata={"help": "Tree depth cap; unset: the recording's."})
    top_k: int | None = field(default=None, metadata={"help": "Tree top-k; must equal the recording's (unset: it)."})
    total_tokens: int | None = field(
        default=None, metadata={"help": "Largest verification, root included; unset: the recording's."}
    )
    size_choices: list[int] | None = field(
        default=None, metadata={"help": "Verification sizes the size head picks from; unset: 1 .. total_tokens - 1."}
    )
    lookup_feature: bool = field(
        default=False, metadata={"help": "A new policy's heads also see the lookup chain's length (LTDPolicy)."}
    )
    init_from: str | None = field(
        default=None,
        metadata={"help": "Continue from this LTD policy (folder or repo), in its own shape (shape arguments: its)."},
    )
    num_threads: int = field(
        default=1,
        metadata={"help": "torch CPU threads per process (the heads see one observation at a time: more only cost)."},
    )

    def __post_init__(self):
        super().__post_init__()
        for name in ("depth", "top_k", "total_tokens"):  # 0 read as unset: the recording's shape, silently
            if getattr(self, name) is not None:
                check_number("LTDScriptArguments", name, getattr(self, name), at_least=1, integer=True,
                             meaning="unset: the recording's")
        check_number("LTDScriptArguments", "num_threads", self.num_threads, at_least=1, integer=True)


def make_parser() -> TrlParser:
    return TrlParser((LTDScriptArguments, LTDConfig))


def build_policy(script_args: LTDScriptArguments, recording: ReplayRecording) -> LTDPolicy:
    """The policy to train: ``init_from``, or a fresh one shaped by the script arguments and the recording."""
    if script_args.init_from:
        policy = LTDPolicy.from_pretrained(script_args.init_from)
        check_continued_lookup_first(script_args, policy, script_args.init_from)
        _check_continued_shape(script_args, policy)
        return policy
    tree = recording.tree_config
    return LTDPolicy(
        depth=tree.depth if script_args.depth is None else script_args.depth,
        top_k=tree.top_k if script_args.top_k is None else script_args.top_k,
        total_tokens=tree.total_tokens if script_args.total_tokens is None else script_args.total_tokens,
        size_choices=script_args.size_choices,
        lookup_feature=script_args.lookup_feature,
        lookup_first=script_args.lookup_first,
    )


def _check_continued_shape(script_args: LTDScriptArguments, policy: LTDPolicy) -> None:
    """Refuse shape arguments (a recipe's, or the command line's) that differ from the continued policy's own: they
    would shape a new policy, and a continued one keeps its shape (they were ignored)."""
    held = {"depth": policy.tree.depth, "top_k": policy.tree.top_k, "total_tokens": policy.tree.total_tokens,
            "size_choices": policy.size_choices, "lookup_feature": policy.lookup_feature}
    given = {name: getattr(script_args, name) for name in held}
    given["lookup_feature"] = given["lookup_feature"] or None  # False is the default: unset
    differ = [f"{name}: {held[name]!r} -> {value!r}" for name, value in given.items()
              if value is not None and value != held[name]]
    if differ:
        raise ValueError(
            f"init_from={script_args.init_from!r} continues a policy of another shape ({'; '.join(differ)}): a "
            "continued policy keeps its own. Give its values (or none), or drop init_from to train a new policy."
        )


def main(script_args: LTDScriptArguments, training_args: LTDConfig) -> LTDTrainer:
    """Load the recording(s) and profile, build the policy and trainer; train, evaluate, save (and push)."""
    profile = load_profile_for_recordings(
        script_args.profile_path, [script_args.recording_dir, script_args.eval_recording_dir]
    )
    recording = load_training_recording(script_args.recording_dir)
    lookup = script_args.lookup_kwargs()
    eval_environment = (
        ReplayEnvironment(load_recording(script_args.eval_recording_dir), profile, **lookup)
        if script_args.eval_recording_dir
        else None
    )
    torch.set_num_threads(script_args.num_threads)
    set_seed(training_args.seed)
    policy = build_policy(script_args, recording)
    policy.mark_trained_on(
        profile.cost_curve(), profile.drafter_identity(), script_args.lookup_tokens, script_args.lookup_ngram_size
    )
    trainer = LTDTrainer(
        model=policy,
        args=training_args,
        environment=ReplayEnvironment(recording, profile, **lookup),
        eval_environment=eval_environment,
        **script_args.card_names(script_args.recording_dir).trainer_kwargs(),
    )
    trainer.train_save_and_push()
    return trainer


def run(argv: list[str] | None = None) -> int:
    """Parse argv (YAML via --config) and train."""
    return run_training_script(make_parser(), main, argv, LTDTrainer)
