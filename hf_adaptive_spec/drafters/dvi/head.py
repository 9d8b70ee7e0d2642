"""The DVI draft head: the target's final norm and lm_head, shared, with a LoRA adapter (peft)."""

from __future__ import annotations

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from torch import nn

from ...core.modes import eval_except
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
    return config
