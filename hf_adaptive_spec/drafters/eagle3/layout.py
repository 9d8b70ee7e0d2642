"""What marks an EAGLE-3 checkpoint, shared by reading it (``checkpoint.py``) and writing it (``export.py``): the
official and SpecForge layouts' architectures, the file names both use, the ``config.json`` fields only an EAGLE-3
drafter's config holds, and the Hub mixin's name for EAGLE-3 drafters."""

from __future__ import annotations

from ...hub.config import ARTIFACT_TYPE_KEY
from ...hub.config import CONFIG_NAME as CONFIG_NAME  # both layouts' config file: the Hub mixin's config.json
from ...hub.weights import WEIGHTS_NAME

OFFICIAL_ARCHITECTURE = "LlamaForCausalLM"
SPECFORGE_ARCHITECTURE = "LlamaForCausalLMEagle3"
#: both layouts' weights file: the Hub mixin's model.safetensors
SAFETENSORS_NAME = WEIGHTS_NAME
#: the Hub mixin's name for EAGLE-3 drafters (not written into ``config.json``: the layout is SpecForge's)
EAGLE3_ARTIFACT_TYPE = "hf_adaptive_spec.drafter.eagle3"

#: config.json fields only an EAGLE-3 drafter's config holds (the official one, too, names draft_vocab_size)
EAGLE3_CONFIG_FIELDS = ("draft_vocab_size", "target_hidden_size", "target_num_hidden_layers", "eagle_config",
                        "eagle_aux_hidden_state_layer_ids")


def holds_eagle3_config(config: dict) -> bool:
    """Whether a folder's ``config.json`` is an EAGLE-3 drafter's (official, SpecForge's, or one declaring the
    drafter's ``artifact_type``): an EAGLE-3 drafter saved there replaces it."""
    declared = config.get(ARTIFACT_TYPE_KEY)
    return declared == EAGLE3_ARTIFACT_TYPE or (declared is None and declares_eagle3(config))


def declares_eagle3(raw: dict) -> bool:
    """Whether a ``config.json`` is an EAGLE-3 drafter's: SpecForge's architecture, or a field only EAGLE-3 has."""
    return SPECFORGE_ARCHITECTURE in (raw.get("architectures") or []) or any(f in raw for f in EAGLE3_CONFIG_FIELDS)
