"""The DVI draft head: the target's final norm and lm_head, shared, with a LoRA adapter (peft)."""

from __future__ import annotations

import math

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from peft.tuners.lora import LoraLayer
from peft.tuners.tuners_utils import BaseTunerLayer
from peft.utils.other import AuxiliaryTrainingWrapper
from torch import nn

from ...core.modes import eval_except
from ...core.values import check_number
from .config import DRAFT_HEAD_MODULE


def default_lora_config() -> LoraConfig:
    """LoRA on the draft head: rank 16, alpha 32, no dropout (the paper gives no values; ours)."""
    return LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=[DRAFT_HEAD_MODULE])


class DVIDraftHead(nn.Module):
    """``draft_head(norm(h_k))``: the target's final norm and output projection, shared and frozen.

    The LoRA adapter goes on ``draft_head`` (peft wraps it; the target keeps its own plain
    ``lm_head``). Its name matches no module of a transformers model, so the adapter cannot be
    applied to the target's real head by mistake.
    """

    def __init__(self, norm: nn.Module, lm_head: nn.Module, name_or_path: str | None = None):
        super().__init__()
        self.norm = norm
        self.draft_head = lm_head
        self.name_or_path = name_or_path  # the target's id: peft writes it as base_model_name_or_path

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """``[..., hidden]`` shallow states -> ``[..., vocab]`` draft logits."""
        return self.draft_head(self.norm(hidden))


def check_output_head_unadapted(target: nn.Module, lm_head: nn.Module) -> None:
    """Refuse a target whose output head holds a peft layer of the user's own (a LoRA on ``lm_head``, or
    ``modules_to_save=["lm_head"]``), before anything changes: peft puts the draft head's adapter (named ``default``)
    into that very layer, where it overwrote an adapter of the same name, or joined one of another name, which the
    updater then trained, so the target generated other tokens (a ``modules_to_save`` head failed inside peft)."""
    peft_kinds = (BaseTunerLayer, AuxiliaryTrainingWrapper)
    peft_layers = [module for module in lm_head.modules() if isinstance(module, peft_kinds)]
    if not peft_layers:
        return
    name = next((name for name, module in target.named_modules() if module is lm_head), "lm_head")
    layer = peft_layers[0]
    adapters = sorted(getattr(layer, "lora_A", None) or getattr(layer, "modules_to_save", None) or ())
    raise ValueError(
        f"DVIDrafter: the target's output head '{name}' holds a peft adapter of its own ({type(layer).__name__}, "
        f"adapters {adapters}). The DVI draft head puts its LoRA adapter on that module, which would overwrite or "
        f"join yours and change what the target generates. Merge your adapter into the weights first "
        f"(model = model.merge_and_unload()), or remove it (model.unload()), or use an adapter whose target_modules "
        f"and modules_to_save leave out '{name}'."
    )


def lora_draft_head(head: DVIDraftHead, lora_config: LoraConfig) -> PeftModel:
    """Wrap ``head`` with a LoRA adapter without changing the shared target weights' ``requires_grad``."""
    flags = {param: param.requires_grad for param in head.parameters()}
    shared = [head.norm, head.draft_head]  # the target's final norm and output head
    peft_head = get_peft_model(head, lora_config)
    for param, requires_grad in flags.items():
        param.requires_grad_(requires_grad)  # peft freezes the base weights, which are the target's
    return eval_except(peft_head, shared)  # the adapter drafts without dropout; the target's modules keep its mode


def check_lora_config(lora_config: LoraConfig | None) -> LoraConfig:
    config = lora_config or default_lora_config()
    modules = config.target_modules
    names = {modules} if isinstance(modules, str) else set(modules or ())
    if names != {DRAFT_HEAD_MODULE}:
        raise ValueError(
            f"The DVI LoRA adapter targets the draft head only: target_modules must be ['{DRAFT_HEAD_MODULE}'], "
            f"got {modules!r}."
        )
    # peft refuses r=0 and torch a dropout of 1.5 only inside get_peft_model, naming neither the setting nor the fix
    check_number("DVIDrafter", "lora_config.r", config.r, at_least=1, integer=True, meaning="the LoRA rank")
    check_number("DVIDrafter", "lora_config.lora_alpha", config.lora_alpha, above=0, below=math.inf,
                 meaning="the LoRA scale is lora_alpha / r: 0 would make the adapter a no-op")
    check_number("DVIDrafter", "lora_config.lora_dropout", config.lora_dropout, at_least=0, below=1,
                 meaning="the dropout probability of the adapter's input during updates")
    if config.rank_pattern or config.alpha_pattern:
        raise ValueError(
            "The DVI LoRA adapter has one module, the draft head: set its rank and alpha with r= and lora_alpha=, "
            f"not rank_pattern={config.rank_pattern!r} / alpha_pattern={config.alpha_pattern!r}."
        )
    return config


def check_config_describes_adapter(peft_head: PeftModel) -> None:
    """Refuse to save an ``adapter_config.json`` that would build another adapter than the one that drafted: peft
    reads ``r``, ``lora_alpha``, ``use_rslora``, ``use_dora`` and ``lora_dropout`` when it builds the LoRA layer, so
    a value set on the config since then (``drafter.lora_config.lora_alpha = 64``) was saved while the layer kept
    the old one, and the loaded drafter drafted with another scale, or failed to load as mis-shaped weights."""
    for adapter, config in peft_head.peft_config.items():
        layer = next(module for module in peft_head.modules() if isinstance(module, LoraLayer))
        dropout = layer.lora_dropout[adapter]
        built = {
            "r": layer.r[adapter],
            "lora_alpha": layer.lora_alpha[adapter],
            "scaling": layer.scaling[adapter],
            "use_dora": layer.use_dora[adapter],
            "lora_dropout": dropout.p if isinstance(dropout, nn.Dropout) else 0.0,
        }
        rank = math.sqrt(config.r) if config.use_rslora else config.r
        described = {
            "r": config.r, "lora_alpha": config.lora_alpha, "scaling": config.lora_alpha / rank,
            "use_dora": config.use_dora, "lora_dropout": config.lora_dropout,
        }
        changed = {name: (built[name], described[name]) for name in built if not _same(built[name], described[name])}
        if changed:
            differences = ", ".join(f"{name} {now!r} (the adapter's {was!r})" for name, (was, now) in changed.items())
            raise ValueError(
                f"The DVI drafter's LoraConfig was changed after its adapter was built: {differences}. peft reads "
                "these when it builds the LoRA layer, so the saved adapter_config.json would load another adapter "
                "than the one that drafted. Set them back on drafter.lora_config before saving, or build a new "
                "DVIDrafter(target, exit_layer, lora_config=...) with the values (and train it)."
            )


def _same(built: object, described: object) -> bool:
    if isinstance(built, float) or isinstance(described, float):
        return math.isclose(float(built), float(described), rel_tol=1e-9)
    return built == described
