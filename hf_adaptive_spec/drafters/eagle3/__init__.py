"""EAGLE-3 drafter: the draft model, its engine plug-in and its checkpoint formats."""

from .configuration import Eagle3DrafterConfig, default_aux_layer_ids
from .drafter import Eagle3Drafter
from .modeling import Eagle3DraftModel, Eagle3DraftOutput

__all__ = ["Eagle3DraftModel", "Eagle3DraftOutput", "Eagle3Drafter", "Eagle3DrafterConfig", "default_aux_layer_ids"]
