"""``DVIConfig``: the training arguments of the DVI trainer (TRL conventions)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from peft import LoraConfig

from ...core.values import check_number
from ...drafters.dvi.config import DRAFT_HEAD_MODULE, DVIOnlineLearnerConfig, check_online_learner_values
from ..config import SpecTrainingArguments, check_no_mixed_precision

_ONLINE = DVIOnlineLearnerConfig  # field defaults are read from the online config: one source of truth
#: DVIOnlineLearnerConfig fields the trainer sets under another name
_RENAMED_ONLINE_FIELDS = {"batch_size": "update_batch_size"}


def _flag_name(field_name: str) -> str:
    """How a user set an online-learner field: the ``DVIConfig`` field and the script flag of that name."""
    name = _RENAMED_ONLINE_FIELDS.get(field_name, field_name)
    return f"DVIConfig.{name} (--{name})"


@dataclass
class DVIConfig(SpecTrainingArguments):
    r"""Arguments of :class:`DVITrainer` on top of ``transformers.TrainingArguments``.

    One training step is one prompt (``per_device_train_batch_size`` prompts): the target
    generates with the online :class:`~hf_adaptive_spec.drafters.dvi.DVIDrafter`, which logs its
    accept/reject records, then the drafter's updater steps once (``update_every=0``). With
    ``rollout="replay"`` the prompts come with the target's greedy completions and the loop is
    replayed from one teacher-forced forward per prompt (:class:`GreedyChainReplay`): the same
    records and updates as greedy ``generate`` with chains, at the cost of a prefill. This is
    the paper's budget, one update per prompt over 2,000 ShareGPT prompts, with proposal depth 4.
    ``learning_rate``, ``weight_decay``, ``adam_beta1/2``, ``max_grad_norm`` and ``seed`` are
    the updater's; ``lr_scheduler_type`` schedules its learning rate over the steps.

    Args:
        exit_layer: target layers in the draft path.
        lora_r: LoRA rank of the draft head.
        lora_alpha: LoRA alpha (scaling ``alpha / r``).
        lora_dropout: LoRA dropout (active during updates only).
        draft_depth: chain length drafted per cycle (the paper's ``k_spec``).
        max_new_tokens: tokens generated per prompt.
        rollout: ``generate`` runs the online loop in ``generate``; ``replay`` replays greedy
            chains over the dataset's ``completion_ids`` (exact when they are the target's
            greedy output).
        update_every: 0 = one update after each prompt; N > 0 = an update every N fresh
            records during generation (the online trigger) instead.
        buffer_size, update_batch_size, kl_temperature, kl_weight, kl_weight_min, ce_weight,
        pg_weight, entropy_weight, warmup_updates, ramp_updates, baseline_decay: see
            :class:`~hf_adaptive_spec.drafters.dvi.DVIOnlineLearnerConfig` (``update_batch_size`` is its
            ``batch_size``).
    """

    exit_layer: int = field(default=4, metadata={"help": "Target layers in the draft path."})
    lora_r: int = field(default=16, metadata={"help": "LoRA rank of the draft head."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha of the draft head."})
    lora_dropout: float = field(default=0.0, metadata={"help": "LoRA dropout (updates only)."})
    draft_depth: int = field(default=4, metadata={"help": "Chain length per cycle (paper: k_spec = 4)."})
    max_new_tokens: int = field(default=256, metadata={"help": "Tokens generated per prompt."})
    rollout: str = field(
        default="generate",
        metadata={
            "help": "generate: run generate with the online drafter; replay: replay greedy chains over the "
            "dataset's completion_ids (the target's greedy answers) from one forward per prompt.",
            "choices": ["generate", "replay"],
        },
    )
    update_every: int = field(
        default=0, metadata={"help": "0: one update per prompt (paper). N>0: update every N fresh records."}
    )
    buffer_size: int = field(default=_ONLINE.buffer_size, metadata={"help": "Records kept in the rollout buffer."})
    update_batch_size: int = field(default=_ONLINE.batch_size, metadata={"help": "Records per update."})
    kl_temperature: float = field(default=_ONLINE.kl_temperature, metadata={"help": "tau of the target distribution."})
    kl_weight: float = field(default=_ONLINE.kl_weight, metadata={"help": "KL weight during warm-up."})
    kl_weight_min: float = field(default=_ONLINE.kl_weight_min, metadata={"help": "KL weight floor after the ramp."})
    ce_weight: float = field(default=_ONLINE.ce_weight, metadata={"help": "Reward-masked CE weight after the ramp."})
    pg_weight: float = field(default=_ONLINE.pg_weight, metadata={"help": "Policy-gradient weight after the ramp."})
    entropy_weight: float = field(default=_ONLINE.entropy_weight, metadata={"help": "Entropy bonus weight."})
    warmup_updates: int = field(default=_ONLINE.warmup_updates, metadata={"help": "KL-only updates before the ramp."})
    ramp_updates: int = field(default=_ONLINE.ramp_updates, metadata={"help": "Updates of the KL->RL ramp."})
    baseline_decay: float = field(
        default=_ONLINE.baseline_decay, metadata={"help": "EMA decay of the reward baseline."}
    )
    learning_rate: float = field(
        default=_ONLINE.learning_rate, metadata={"help": "AdamW learning rate of the LoRA weights."}
    )
    max_grad_norm: float = field(
        default=_ONLINE.max_grad_norm, metadata={"help": "Gradient clipping norm of the updates."}
    )
    lr_scheduler_type: str = field(default="constant", metadata={"help": "Learning-rate schedule over the prompts."})
    per_device_train_batch_size: int = field(default=1, metadata={"help": "Prompts per step (generated one by one)."})
    logging_steps: float = field(default=10, metadata={"help": "Log every X steps."})
    remove_unused_columns: bool = field(default=False, metadata={"help": "Keep the prompt column."})
    use_cpu: bool = field(default=True, metadata={"help": "Run on CPU (set False on an accelerator)."})

    def __post_init__(self) -> None:
        super().__post_init__()
        check_no_mixed_precision(self, "DVITrainer's training step generates (or replays) the prompts and updates the "
                                       "LoRA head inside them")
        if self.rollout not in ("generate", "replay"):
            raise ValueError(f"DVIConfig.rollout must be 'generate' or 'replay', got {self.rollout!r}.")
        # adamw_torch_fused is transformers' default (torch >= 2.8): both name the updater's torch.optim.AdamW
        if getattr(self.optim, "value", self.optim) not in ("adamw_torch", "adamw_torch_fused"):
            raise ValueError(
                f"DVIConfig.optim={getattr(self.optim, 'value', self.optim)!r} would not be used: the LoRA head steps "
                "with the online updater's AdamW inside generate (DVIUpdater), set by learning_rate, weight_decay, "
                "adam_beta1/2 and adam_epsilon."
            )
        self._check_trainer_loop()
        # a chain of 0 drafts nothing, and nothing is learned
        check_number("DVIConfig", "draft_depth", self.draft_depth, at_least=1, integer=True,
                     meaning="the chain drafted per cycle")
        check_online_learner_values(self._online_values(), name_of=_flag_name)
        # peft refused --lora_r 0 and torch --lora_dropout 1.5 only after the target loaded, naming neither flag
        check_number("DVIConfig", "lora_r (--lora_r)", self.lora_r, at_least=1, integer=True, meaning="the LoRA rank")
        check_number("DVIConfig", "lora_alpha (--lora_alpha)", self.lora_alpha, above=0, below=math.inf,
                     meaning="the LoRA scale is lora_alpha / lora_r: 0 would make the adapter a no-op")
        check_number("DVIConfig", "lora_dropout (--lora_dropout)", self.lora_dropout, at_least=0, below=1,
                     meaning="the dropout probability of the adapter's input during updates")

    def _check_trainer_loop(self) -> None:
        """Refuse the ``Trainer`` features DVI's loop has no use for: its evaluation runs the draft head as a language
        model on the eval dataset (it fails at the first evaluation), and an accumulated step would only group
        prompts whose updates already ran one per prompt (and the card would miscount them)."""
        if getattr(self.eval_strategy, "value", self.eval_strategy) != "no":
            raise ValueError(
                f"DVIConfig.eval_strategy={getattr(self.eval_strategy, 'value', self.eval_strategy)!r} is not "
                "supported: DVITrainer has no evaluation loop. Keep eval_strategy='no' and measure the saved adapter's "
                "acceptance with examples/dvi_acceptance.py --adapters <output_dir>."
            )
        if self.gradient_accumulation_steps != 1:
            raise ValueError(
                f"DVIConfig.gradient_accumulation_steps={self.gradient_accumulation_steps}: keep it 1. The LoRA head "
                "steps once per prompt inside the training step (the online updater), so there is nothing to "
                "accumulate; raise per_device_train_batch_size for more prompts per step."
            )

    def _online_values(self) -> dict[str, Any]:
        """The :class:`DVIOnlineLearnerConfig` fields these arguments set, by the online config's names."""
        return {
            "buffer_size": self.buffer_size, "update_every": self.update_every, "batch_size": self.update_batch_size,
            "learning_rate": self.learning_rate, "weight_decay": self.weight_decay, "adam_beta1": self.adam_beta1,
            "adam_beta2": self.adam_beta2, "adam_epsilon": self.adam_epsilon, "max_grad_norm": self.max_grad_norm,
            "kl_temperature": self.kl_temperature, "kl_weight": self.kl_weight, "kl_weight_min": self.kl_weight_min,
            "ce_weight": self.ce_weight, "pg_weight": self.pg_weight, "entropy_weight": self.entropy_weight,
            "warmup_updates": self.warmup_updates, "ramp_updates": self.ramp_updates,
            "baseline_decay": self.baseline_decay, "seed": self.seed,
        }

    def online_config(self) -> DVIOnlineLearnerConfig:
        """The :class:`DVIOnlineLearnerConfig` these arguments describe."""
        return DVIOnlineLearnerConfig(**self._online_values())

    def lora_config(self) -> LoraConfig:
        """The peft ``LoraConfig`` of the draft head."""
        return LoraConfig(
            r=self.lora_r,
            lora_alpha=self.lora_alpha,
            lora_dropout=self.lora_dropout,
            target_modules=[DRAFT_HEAD_MODULE],
        )
