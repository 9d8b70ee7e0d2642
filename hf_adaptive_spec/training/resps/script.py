"""The Re-SpS training script (``trainers/resps.py``, ``hf-adaptive-spec train resps``).

    python trainers/resps.py --config trainers/recipes/resps_smollm2.yaml
    torchrun --nproc_per_node 2 trainers/resps.py --config trainers/recipes/resps_smollm2.yaml --ddp_backend gloo

Any ``ReSpSConfig`` / ``transformers.TrainingArguments`` field and any ``ReSpSScriptArguments``
field can be set in the YAML file or on the command line. Training reads replay recordings
(one per ``top_k`` of the grid, see ``ReSpSPolicy.required_recordings``) and a hardware profile;
it never runs the target model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from transformers import set_seed
from trl import TrlParser

from ...core.features import default_aux_layer_ids
from ...core.values import check_number
from ...environments import MultiReplayEnvironment, ReplayRecording, load_training_recording
from ...environments.provenance import load_profile_for_recordings
from ...policies.resps import ReSpSPolicy
from ..base import PolicyScriptArguments, check_continued_lookup_first, run_training_script
from .config import ReSpSConfig
from .trainer import ReSpSTrainer


@dataclass
class ReSpSScriptArguments(PolicyScriptArguments):
    """Recording and profile arguments of the Re-SpS training script (the lookup branch and the card's names, from
    the first recording: :class:`PolicyScriptArguments`)."""

    #: the arguments naming local files or folders the run reads, checked before any model loads
    local_inputs: ClassVar[tuple[str, ...]] = ("recordings", "hardware_profile")

    recordings: list[str] = field(
        default_factory=list,
        metadata={"help": "Recording folders (`hf-adaptive-spec record --output ...`), one per top_k of the grid."},
    )
    hardware_profile: str | None = field(
        default=None, metadata={"help": "HardwareProfile JSON (`hf-adaptive-spec profile --json ... --eagle3 ...`)."}
    )
    target_num_hidden_layers: int | None = field(
        default=None,
        metadata={"help": "Decoder layers L of the target (SmolLM2-135M: 30): state layers 2, L//2, L-3 (EAGLE-3's), "
                  "which the recordings must hold; unset: the recordings' feature layers."},
    )
    num_eval_prompts: int = field(
        default=0, metadata={"help": "Last N recorded prompts held out for evaluate() (policy vs best fixed tree)."}
    )
    init_from: str | None = field(
        default=None,
        metadata={"help": "Continue from this Re-SpS policy (folder or Hub repo): its grid, networks and statistics."},
    )

    def __post_init__(self):
        super().__post_init__()
        # a negative count trained on fewer prompts than recorded (range(num_train, n) empty: no evaluation either)
        check_number("ReSpSScriptArguments", "num_eval_prompts", self.num_eval_prompts, at_least=0, integer=True,
                     meaning="the last recorded prompts held out for evaluate(); 0: none")
        if self.target_num_hidden_layers is not None:
            check_number("ReSpSScriptArguments", "target_num_hidden_layers", self.target_num_hidden_layers,
                         at_least=1, integer=True, meaning="the target's decoder layers; unset: the recordings'")


def make_parser() -> TrlParser:
    return TrlParser((ReSpSScriptArguments, ReSpSConfig))


def load_environment(script_args: ReSpSScriptArguments) -> MultiReplayEnvironment:
    if not script_args.recordings or not script_args.hardware_profile:
        raise ValueError(
            "Pass --recordings (one recorded folder per top_k of the grid) and --hardware_profile (a profile JSON); "
            "see hf_adaptive_spec/policies/resps/README.md for how to make them."
        )
    profile = load_profile_for_recordings(script_args.hardware_profile, script_args.recordings)
    recordings = [load_training_recording(path) for path in script_args.recordings]
    return MultiReplayEnvironment(recordings, profile, **script_args.lookup_kwargs())


def build_policy(
    script_args: ReSpSScriptArguments, args: ReSpSConfig, environment: MultiReplayEnvironment
) -> ReSpSPolicy:
    """A new policy sized from the recorded features, or ``init_from`` with this run's intervals and temperature."""
    kwargs = args.policy_kwargs()
    if script_args.init_from:
        keep = ("decision_interval", "training_interval", "temperature")
        policy = ReSpSPolicy.from_pretrained(script_args.init_from, **{name: kwargs[name] for name in keep})
        check_continued_lookup_first(script_args, policy, script_args.init_from)
        return policy
    features = environment.reference.prompts[0][0].features
    layers = state_layers(script_args.target_num_hidden_layers, environment.reference)
    hidden_size = next(iter(features.values())).numel()
    return ReSpSPolicy(
        hidden_size=hidden_size, num_target_layers=script_args.target_num_hidden_layers, feature_layers=layers,
        lookup_first=script_args.lookup_first, **kwargs,
    )


def state_layers(num_target_layers: int | None, recording: ReplayRecording) -> tuple[int, ...]:
    """The target hidden states a new policy reads: EAGLE-3's ``(2, L//2, L-3)`` for ``num_target_layers`` L, which the
    recording must hold, else the recording's own feature layers."""
    recorded = tuple(recording.feature_layers)
    if not recorded:
        raise ValueError(
            "The recordings hold no target features: record them with the policy's feature layers "
            "(`hf-adaptive-spec record` keeps the EAGLE-3 drafter's by default)."
        )
    if num_target_layers is None:
        return recorded
    asked = tuple(default_aux_layer_ids(num_target_layers))
    if not set(asked) <= set(recorded):
        raise ValueError(
            f"target_num_hidden_layers={num_target_layers} reads the target's hidden states {list(asked)} (EAGLE-3's "
            f"2, L//2, L-3), but the recordings hold {list(recorded)}: they were made with a target of another depth. "
            "Leave target_num_hidden_layers unset to read the recordings' layers, or set it to the recorded target's "
            "decoder layer count."
        )
    return asked


def main(script_args: ReSpSScriptArguments, training_args: ReSpSConfig) -> ReSpSTrainer:
    """Load recordings and profile, build the policy and trainer; train, save (and push); return the trainer."""
    environment = load_environment(script_args)
    num_train = environment.num_prompts - script_args.num_eval_prompts
    if num_train < 1:
        raise ValueError(
            f"num_eval_prompts={script_args.num_eval_prompts} leaves no prompt to train on "
            f"({environment.num_prompts} recorded)."
        )
    set_seed(training_args.seed)  # the policy's initial weights
    policy = build_policy(script_args, training_args, environment)
    profile = environment.profile
    policy.mark_trained_on(
        profile.cost_curve(), profile.drafter_identity(), environment.lookup_tokens, environment.lookup_ngram_size
    )
    trainer = ReSpSTrainer(
        policy=policy,
        args=training_args,
        environment=environment,
        train_dataset=range(num_train),
        eval_dataset=range(num_train, environment.num_prompts) if script_args.num_eval_prompts else None,
        fit_normalizer=not script_args.init_from,
        **script_args.card_names(script_args.recordings[0]).trainer_kwargs(),
    )
    trainer.train_save_and_push()
    return trainer


def run(argv: list[str] | None = None) -> int:
    """Parse argv (YAML via --config) and train."""
    return run_training_script(make_parser(), main, argv, ReSpSTrainer)
