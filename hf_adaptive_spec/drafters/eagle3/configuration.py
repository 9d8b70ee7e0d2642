"""Configuration of the EAGLE-3 draft model: a Llama layer plus how it attaches to its target."""

from __future__ import annotations

from huggingface_hub.dataclasses import strict
from transformers import LlamaConfig, PretrainedConfig
from transformers.activations import ACT2FN

from ...core.features import aux_layer_ids_problem, default_aux_layer_ids
from ...core.values import check_number

__all__ = ["Eagle3DrafterConfig", "aux_layer_ids_problem", "default_aux_layer_ids"]


@strict
class Eagle3DrafterConfig(LlamaConfig):
    r"""The draft layer's Llama fields plus the EAGLE-3 specific ones.

    RoPE comes from this config only (``rope_parameters``; a legacy ``rope_theta`` / ``rope_scaling``
    is accepted): official EAGLE-3 configs carry no ``rope_theta``, so the drafter uses base 10000
    whatever the target uses.

    Args:
        num_hidden_layers: decoder layers: 1 is EAGLE-3's; more add plain Llama layers after the EAGLE-3
            layer, as vLLM's multi-layer EAGLE-3 does.
        draft_vocab_size: rows of ``lm_head`` (defaults to ``vocab_size``, the target vocabulary).
        target_hidden_size: width of the target's hidden states (defaults to ``hidden_size``).
        target_num_hidden_layers: decoder layers of the target the drafter is built for (saved with it;
            loading it on a target of another depth is refused unless ``ignore_target_mismatch=True``).
        aux_hidden_state_layer_ids: target hidden states the drafter reads, in transformers'
            ``hidden_states`` numbering (index ``i`` = input of decoder layer ``i``, vLLM's numbering;
            SGLang's is ``i - 1``), in concatenation order: strictly increasing, within ``1..L-1``.
            Defaults to :func:`default_aux_layer_ids` (``[2, L//2, L-3]``).
        use_aux_hidden_state: True (EAGLE-3): the first draft step fuses the three target features
            with ``fc``. False: no ``fc``; one target feature of width ``hidden_size`` is used as is
            (defaults to the final norm's output, index ``L``). Later draft steps always take the
            drafter's own output; the flag replaces the reference code's silent width test.
    """

    model_type = "hfas_eagle3"

    num_hidden_layers: int = 1
    draft_vocab_size: int | None = None
    target_hidden_size: int | None = None
    target_num_hidden_layers: int | None = None
    aux_hidden_state_layer_ids: list[int] | None = None
    use_aux_hidden_state: bool = True

    def __post_init__(self, **kwargs):
        if self.draft_vocab_size is None:
            self.draft_vocab_size = self.vocab_size
        if self.target_hidden_size is None:
            self.target_hidden_size = self.hidden_size
        if self.aux_hidden_state_layer_ids is None and self.target_num_hidden_layers is not None:
            self.aux_hidden_state_layer_ids = self.default_layer_ids()
        super().__post_init__(**kwargs)
        self._check_eagle3_fields()

    def default_layer_ids(self) -> list[int]:
        """The feature layers a drafter of this kind reads by default on its target."""
        num_layers = self.target_num_hidden_layers
        return default_aux_layer_ids(num_layers) if self.use_aux_hidden_state else [num_layers]

    @property
    def num_features(self) -> int:
        """Target hidden states fused by the first draft step."""
        return 3 if self.use_aux_hidden_state else 1

    def _check_eagle3_fields(self) -> None:
        if self.hidden_act not in ACT2FN:  # else transformers' bare KeyError when the MLP is built
            raise ValueError(
                f"hidden_act={self.hidden_act!r} names no activation transformers knows (ACT2FN), so the drafter's "
                "MLP cannot be built: fix hidden_act in the checkpoint's config.json (EAGLE-3's is 'silu')."
            )
        check_number("Eagle3DrafterConfig", "num_hidden_layers", self.num_hidden_layers, integer=True,
                     meaning="the EAGLE-3 layer and the plain Llama layers after it")  # 2.0 failed in range()
        ids = self.aux_hidden_state_layer_ids
        if ids is not None and not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise ValueError(  # a float failed in the capture, a bool read as a layer
                f"aux_hidden_state_layer_ids must be ints (indices into the target's hidden_states), got {ids!r}."
            )
        if self.num_hidden_layers < 1:
            raise ValueError(
                f"An EAGLE-3 drafter needs at least its EAGLE-3 layer; this config has num_hidden_layers="
                f"{self.num_hidden_layers}. Use 1 (EAGLE-3's) or more (plain Llama layers after it)."
            )
        if not 0 < self.draft_vocab_size <= self.vocab_size:
            raise ValueError(
                f"draft_vocab_size ({self.draft_vocab_size}) must be in 1..vocab_size ({self.vocab_size}, the target "
                "vocabulary)."
            )
        if self.aux_hidden_state_layer_ids is None:
            raise ValueError(
                "Set aux_hidden_state_layer_ids, or target_num_hidden_layers for the default [2, L//2, L-3]."
            )
        if len(self.aux_hidden_state_layer_ids) != self.num_features:
            raise ValueError(
                f"use_aux_hidden_state={self.use_aux_hidden_state} needs {self.num_features} feature layer(s), got "
                f"aux_hidden_state_layer_ids={self.aux_hidden_state_layer_ids}."
            )
        problem = self.use_aux_hidden_state and aux_layer_ids_problem(
            self.aux_hidden_state_layer_ids, self.target_num_hidden_layers
        )
        if problem:
            raise ValueError(f"aux_hidden_state_layer_ids={self.aux_hidden_state_layer_ids} {problem}.")
        if not self.use_aux_hidden_state and self.target_hidden_size != self.hidden_size:
            raise ValueError(
                "use_aux_hidden_state=False feeds the target feature to the layer unfused, so target_hidden_size "
                f"({self.target_hidden_size}) must equal hidden_size ({self.hidden_size})."
            )

    def check_target(self, target_config: PretrainedConfig) -> None:
        """Raise a ValueError naming the fix when this drafter cannot run on ``target_config``'s model."""
        target = target_config.get_text_config()
        num_layers = target.num_hidden_layers
        if self.target_num_hidden_layers not in (None, num_layers):
            raise ValueError(
                f"This drafter was built for a {self.target_num_hidden_layers}-layer target; the target has "
                f"{num_layers} layers. Use a drafter trained for this target, or load it with "
                "ignore_target_mismatch=True to reuse it on purpose."
            )
        if self.target_hidden_size != target.hidden_size:
            raise ValueError(
                f"Hidden size mismatch: the drafter reads target features of width {self.target_hidden_size}, the "
                f"target's hidden size is {target.hidden_size}. Use a drafter trained for this target (or set "
                "target_hidden_size in the drafter's config.json if it is missing there)."
            )
        if self.vocab_size != target.vocab_size:
            raise ValueError(
                f"Vocabulary mismatch: the drafter's vocab_size is {self.vocab_size}, the target's is "
                f"{target.vocab_size}. An EAGLE-3 drafter must share its target's tokenizer"
                + ("; this target has more tokens than the drafter knows (its embeddings resized with "
                   "resize_token_embeddings, or another model): use the target as the drafter was trained for it "
                   "(vocab_size as above), or train a drafter for this one (hf-adaptive-spec train eagle3)."
                   if target.vocab_size > self.vocab_size else ".")
            )
        problem = self.use_aux_hidden_state and aux_layer_ids_problem(self.aux_hidden_state_layer_ids, num_layers)
        if problem:
            raise ValueError(
                f"aux_hidden_state_layer_ids={self.aux_hidden_state_layer_ids} {problem}. Fix the ids in the drafter's "
                "config, or use a drafter trained for this target."
            )
        bad = [i for i in self.aux_hidden_state_layer_ids if not 0 <= i <= num_layers]
        if bad:
            raise ValueError(
                f"aux_hidden_state_layer_ids {self.aux_hidden_state_layer_ids} has ids {bad} out of range for a "
                f"{num_layers}-layer target (0..{num_layers}, transformers' hidden_states numbering). Fix the ids in "
                "the drafter's config, or use a drafter trained for this target."
            )
