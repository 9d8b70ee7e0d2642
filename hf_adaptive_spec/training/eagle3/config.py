"""``Eagle3Config``: the training arguments of the EAGLE-3 drafter trainer (TRL conventions)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from ...core.settings import DEFAULT_MAX_NGRAM_SIZE
from ...core.values import check_number
from ..config import SpecTrainingArguments
from ..warmup import carry_warmup_ratio
from .feature_cache import check_bound
from .initialization import INITIALIZATIONS
from .ttt import check_target_temperature

DEFAULT_DRAFT_VOCAB_SIZE = 8192


@dataclass
class Eagle3Config(SpecTrainingArguments):
    r"""Arguments of :class:`Eagle3Trainer` on top of ``transformers.TrainingArguments``.

    Defaults follow SpecForge (AdamW, cosine schedule, warm-up 1.5%, gradient clipping 0.5) and
    EAGLE-3 (7 training-time-test steps, step weights 0.8^k), set for CPU training. The default warm-up
    ratio applies when ``warmup_steps`` is not given; a ``warmup_steps`` given replaces it.

    The loss of a batch is each training-time-test step's mean over the batch's answer tokens (weighted by
    ``copy_loss_weight``). With ``gradient_accumulation_steps`` N the update is the one of a single batch N times
    larger: each step's summed loss is divided by that step's loss weight summed over the N micro-batches, counted
    before their forward passes (:meth:`Eagle3Trainer.get_batch_samples`, transformers' ``num_items_in_batch``), and
    not divided by N again; under torchrun, with ``average_tokens_across_devices`` (transformers' default), the
    totals are summed over the processes too, so the update is the mean over every process's answer tokens. The
    logged ``loss`` is that accumulated batch's; the logged ``loss_step{k}`` and ``acc_step{k}`` are the mean of each
    micro-batch's own values, as without accumulation.

    Args:
        ttt_steps: draft steps unrolled per position (EAGLE-3's training-time test).
        ploss_decay: weight ``decay**k`` of step ``k``'s loss.
        draft_vocab_size: size of the reduced draft vocabulary (the most frequent assistant tokens; default
            8,192). With ``init_from``, a larger size adds the most frequent tokens the checkpoint lacks and
            keeps its trained rows (:func:`widen_vocabulary`); a smaller one is refused; unset keeps it.
        max_length: tokens kept per conversation.
        initialization: starting point of a new drafter: ``"random"`` (EAGLE-3's) or
            ``"target_layer"`` (the target's last decoder layer, :func:`copy_target_layer`).
        recompute_loss_softmax: recompute each training-time-test step's float32 log-softmax in the backward
            pass instead of keeping it (:func:`ttt_loss`): in bfloat16 each step keeps 2 bytes an element of its
            logits instead of 8 (the log-softmax and the target's gathered rows), for a larger batch on a GPU;
            it costs the recomputation.
        compile_loss: compile each step's cross-entropy with ``torch.compile`` (inductor; on a CPU it needs a C++
            compiler): the gather, float32 cast, log-softmax and sums run fused, and the backward pass recomputes
            them, so it keeps what ``recompute_loss_softmax`` keeps. Compiled on the first batch (seconds to a
            minute); off by default: on a 2-core CPU the loss alone ran faster, a whole training step slower
            (results/README.md); on a GPU not measured.
        draft_intermediate_size: MLP width of a new drafter's layer (default: the target's); a
            capacity knob that vLLM's and SGLang's EAGLE-3 loaders read from ``config.json``. With
            ``init_from``, a larger width widens the trained drafter without changing its output
            (:func:`widen_mlp`); a smaller one is refused.
        draft_num_hidden_layers: decoder layers of a new drafter (default 1, EAGLE-3's; more add plain Llama
            layers after it, as vLLM's multi-layer EAGLE-3). With ``init_from``, more layers than the
            checkpoint's are appended without changing its output (:func:`deepen`); fewer are refused.
        copy_loss_weight: extra weight of the answer tokens a prompt lookup would have proposed
            (:func:`lookup_hits` of the tokens before them, n-grams up to ``copy_ngram_size``): their loss
            counts ``1 + copy_loss_weight`` times; 0 (the default) weighs every token alike. The held-out
            curve reports acceptance on those tokens whatever the weight.
        copy_ngram_size: the longest n-gram that lookup matches (transformers' ``max_matching_ngram_size``
            default, 2).
        target_temperature: temperature of the target distribution the loss reads (:func:`ttt_loss`): below 1 it
            sharpens it toward the target's top token, the one greedy verification accepts, above 1 it flattens it;
            1 (the default) is the target's own distribution, EAGLE-3's loss. A finite number above 0.
        feature_cache_dir: a folder where the frozen target's outputs for each training conversation are kept after
            the first time it computes them, so later passes (epochs) read them instead of running the target
            (:class:`~hf_adaptive_spec.training.eagle3.feature_cache.FeatureCache`; reusable across runs with the
            same target, dtype and feature layers, refused otherwise; one process at a time, and a run of several
            processes is refused). Evaluation batches run the target. Unset (the default): no cache.
        feature_cache_max_gb: the most the cache may hold on disk; conversations past it are computed every pass.
            A row costs ``(feature layers + 1) × hidden × dtype bytes`` a token: 4.5 KiB in bfloat16 for SmolLM2.
    """

    #: fields a resumed run may change (:func:`~hf_adaptive_spec.training.resume.check_resume_settings`): where and how
    #: much the target's outputs are cached, and how the loss is computed (compiled, recomputed in backward), change
    #: what a step costs, not what it trains
    resume_may_change: ClassVar[frozenset[str]] = frozenset(
        {"feature_cache_dir", "feature_cache_max_gb", "compile_loss", "recompute_loss_softmax"}
    )

    ttt_steps: int = field(default=7, metadata={"help": "Draft steps unrolled per position (training-time test)."})
    ploss_decay: float = field(default=0.8, metadata={"help": "Weight decay**k of draft step k's loss."})
    draft_vocab_size: int | None = field(
        default=None, metadata={"help": "Size of the draft vocabulary (default 8192; with init_from: widen to it)."}
    )
    max_length: int = field(default=768, metadata={"help": "Tokens kept per conversation."})
    initialization: str = field(
        default="random",
        metadata={"help": "New drafter's start: 'random' or 'target_layer'.", "choices": ["random", "target_layer"]},
    )
    recompute_loss_softmax: bool = field(
        default=False, metadata={"help": "Recompute each step's float32 log-softmax in backward (less memory in bf16)."}
    )
    compile_loss: bool = field(
        default=False, metadata={"help": "Compile the loss (torch.compile); keeps what recompute_loss_softmax keeps."}
    )
    draft_intermediate_size: int | None = field(
        default=None,
        metadata={"help": "MLP width of the drafter's layer (default: the target's; with init_from: widen to it)."},
    )
    draft_num_hidden_layers: int | None = field(
        default=None, metadata={"help": "Decoder layers of the drafter (default 1; with init_from: deepen to it)."}
    )
    copy_loss_weight: float = field(
        default=0.0, metadata={"help": "Extra loss weight of answer tokens a prompt lookup would propose (0: none)."}
    )
    target_temperature: float = field(
        default=1.0,
        metadata={"help": "Temperature of the target distribution the loss reads: below 1 sharpens it toward its top "
                  "token (what greedy verification accepts), above 1 flattens it; 1: the target's own."},
    )
    copy_ngram_size: int = field(
        default=DEFAULT_MAX_NGRAM_SIZE, metadata={"help": "Longest n-gram the copy weighting's lookup matches."}
    )
    feature_cache_dir: str | None = field(
        default=None, metadata={"help": "Keep the target's outputs per conversation here; later passes read them."}
    )
    feature_cache_max_gb: float = field(default=32.0, metadata={"help": "The most the feature cache holds on disk."})
    include_num_input_tokens_seen: str = field(
        default="non_padding", metadata={"help": "Count the tokens trained on (the held-out curve's x axis)."}
    )
    learning_rate: float = field(default=1e-4, metadata={"help": "Peak AdamW learning rate."})
    adam_beta2: float = field(default=0.95, metadata={"help": "AdamW beta2 (EAGLE uses 0.95)."})
    lr_scheduler_type: str = field(default="cosine", metadata={"help": "Learning-rate schedule."})
    warmup_ratio: float = field(
        default=0.015, metadata={"help": "Share of steps spent warming up (the default yields to warmup_steps given)."}
    )
    max_grad_norm: float = field(default=0.5, metadata={"help": "Gradient clipping norm."})
    logging_steps: float = field(default=10, metadata={"help": "Log every X update steps."})
    remove_unused_columns: bool = field(default=False, metadata={"help": "Keep loss_mask for the loss."})
    use_cpu: bool = field(default=True, metadata={"help": "Train on CPU (set False on an accelerator)."})

    def __post_init__(self):
        carry_warmup_ratio(self)
        super().__post_init__()
        if self.copy_loss_weight < 0:
            raise ValueError(
                f"copy_loss_weight must be 0 or more (0 weighs every token alike), got {self.copy_loss_weight}."
            )
        check_target_temperature(self.target_temperature)
        if self.copy_ngram_size < 1:
            raise ValueError(f"copy_ngram_size must be at least 1, got {self.copy_ngram_size}.")
        check_bound(self.feature_cache_max_gb)
        self._check_drafter_settings()

    def _check_drafter_settings(self) -> None:
        """The unrolled steps, their loss weights, the length and the new drafter's shape, before any model loads
        (a negative decay trains odd steps by gradient ascent; 0 steps fails mid-training)."""
        owner = "Eagle3Config"
        check_number(owner, "ttt_steps", self.ttt_steps, at_least=1, integer=True, meaning="draft steps unrolled")
        check_number(owner, "ploss_decay", self.ploss_decay, at_least=0, below=math.inf,
                     meaning="step k's loss weighs decay**k")
        check_number(owner, "max_length", self.max_length, at_least=2, integer=True,
                     meaning="tokens kept per conversation")
        if self.draft_vocab_size is not None:
            check_number(owner, "draft_vocab_size", self.draft_vocab_size, at_least=1, integer=True,
                         meaning="the reduced draft vocabulary; unset: the target's")
        if self.initialization not in INITIALIZATIONS:
            raise ValueError(f"{owner}: initialization must be one of {INITIALIZATIONS}, got {self.initialization!r}.")
