"""Starting points of an EAGLE-3 drafter: random (EAGLE-3's), one of the target's decoder layers, or a
trained drafter widened (a wider MLP computing the same function; a larger draft vocabulary keeping every
trained head row)."""

from __future__ import annotations

import copy

import torch
from transformers import PreTrainedModel

from ...core.features import decoder_layers
from ...drafters.eagle3.modeling import Eagle3DraftModel

INITIALIZATIONS = ("random", "target_layer")


def copy_target_layer(draft: Eagle3DraftModel, target: PreTrainedModel, layer: int = -1) -> None:
    """Start the draft layer as the target's decoder layer ``layer`` (default: the last one).

    - ``fc`` passes the deepest feature through unchanged (the other feature blocks start at 0),
      so the residual stream starts as a real target hidden state;
    - the hidden half of ``q/k/v_proj`` and the whole of ``o_proj``, the MLP and the norms are the
      target layer's; the embedding half of ``q/k/v_proj`` keeps its random initialisation;
    - ``norm`` is the target's final norm and ``lm_head`` the target's output rows of the draft
      vocabulary.

    The layer then predicts from the target's state at ``t`` as the target's own top does; training
    moves it to the token after next, which is what the drafter predicts.
    """
    source = decoder_layers(target)[layer]
    mid, hidden = draft.midlayer, draft.config.hidden_size
    same_mlp = draft.midlayer.mlp.up_proj.weight.shape == source.mlp.up_proj.weight.shape
    if draft.config.target_hidden_size != hidden or source.self_attn.q_proj.weight.shape[1] != hidden or not same_mlp:
        raise ValueError(
            "copy_target_layer needs a drafter shaped like the target's layers (hidden_size == target_hidden_size, "
            "the same intermediate_size); use initialization='random' for this drafter."
        )
    with torch.no_grad():
        if draft.fc is not None:
            draft.fc.weight.zero_()
            draft.fc.weight[:, -hidden:].copy_(torch.eye(hidden))
        for name in ("q_proj", "k_proj", "v_proj"):
            mine, theirs = getattr(mid.self_attn, name), getattr(source.self_attn, name)
            mine.weight[:, hidden:].copy_(theirs.weight)
            if mine.bias is not None and theirs.bias is not None:
                mine.bias.copy_(theirs.bias)
        mid.self_attn.o_proj.load_state_dict(source.self_attn.o_proj.state_dict())
        mid.hidden_norm.load_state_dict(source.input_layernorm.state_dict())
        mid.input_layernorm.load_state_dict(source.input_layernorm.state_dict())
        mid.post_attention_layernorm.load_state_dict(source.post_attention_layernorm.state_dict())
        mid.mlp.load_state_dict(source.mlp.state_dict())
        draft.norm.load_state_dict(target.get_decoder().norm.state_dict())
        draft.lm_head.weight.copy_(target.get_output_embeddings().weight[draft.draft_to_target()])


def widen_mlp(draft: Eagle3DraftModel, intermediate_size: int, seed: int = 0) -> Eagle3DraftModel:
    """A copy of ``draft`` whose MLP has ``intermediate_size`` channels and computes the same function.

    The trained channels are kept. The new ones get ``gate_proj`` / ``up_proj`` rows drawn as a
    fresh layer's (normal, ``initializer_range``) and zero ``down_proj`` columns: the output is
    unchanged, and the first update gives the zero columns a gradient (channels that were all
    zero would never get one). A capacity step for a drafter whose curve has flattened.
    """
    current = draft.config.intermediate_size
    if intermediate_size < current:
        raise ValueError(
            f"draft_intermediate_size={intermediate_size} is narrower than the checkpoint's MLP ({current}); "
            "widening keeps every trained channel, so it can only grow. Leave draft_intermediate_size unset "
            "to keep the checkpoint's width."
        )
    if intermediate_size == current:
        return draft
    config = copy.deepcopy(draft.config)
    config.intermediate_size = intermediate_size
    state = draft.state_dict()
    generator = torch.Generator().manual_seed(seed)
    extra = intermediate_size - current
    for name in ("gate_proj", "up_proj"):
        weight = state[f"midlayer.mlp.{name}.weight"]
        rows = torch.randn(extra, weight.shape[1], generator=generator) * config.initializer_range
        state[f"midlayer.mlp.{name}.weight"] = torch.cat([weight, rows.to(weight)])
        if f"midlayer.mlp.{name}.bias" in state:
            bias = state[f"midlayer.mlp.{name}.bias"]
            state[f"midlayer.mlp.{name}.bias"] = torch.cat([bias, bias.new_zeros(extra)])
    down = state["midlayer.mlp.down_proj.weight"]
    state["midlayer.mlp.down_proj.weight"] = torch.cat([down, down.new_zeros(down.shape[0], extra)], dim=1)
    wide = Eagle3DraftModel(config).to(device=down.device, dtype=down.dtype)
    wide.load_state_dict(state)
    return wide.train(draft.training)


def widen_vocabulary(draft: Eagle3DraftModel, target: PreTrainedModel, vocabulary: torch.LongTensor) -> Eagle3DraftModel:
    """A copy of ``draft`` that drafts over ``vocabulary`` (sorted target ids holding all of its own).

    Every trained head row is kept. A new token's row is the target's output row of that token, mapped
    into the drafter's head space by the least-squares linear map taking the target's rows of the kept
    tokens to the drafter's trained rows: new tokens start where the trained geometry puts them. (Zero
    rows would give thousands of tokens logit 0 in every context, drawing probability from the trained
    ones; random rows, noise.) Returns ``draft`` itself when the vocabulary is its own.
    """
    current = draft.draft_to_target().cpu()
    vocabulary = torch.as_tensor(vocabulary, dtype=torch.long).cpu()
    if vocabulary.ndim != 1 or (vocabulary[1:] <= vocabulary[:-1]).any():
        raise ValueError(
            "The draft vocabulary must be a 1-D tensor of distinct target ids in increasing order, as "
            "build_draft_vocabulary returns it; sort it (and drop repeats) first."
        )
    if not torch.isin(current, vocabulary).all():
        raise ValueError(
            f"The new draft vocabulary ({len(vocabulary)} tokens) drops tokens of the checkpoint's ({len(current)}); "
            "widening keeps every trained head row, so it can only grow. Leave draft_vocab_size unset to keep "
            "the checkpoint's vocabulary."
        )
    if len(vocabulary) == len(current):
        return draft
    trained = draft.lm_head.weight.detach().float().cpu()
    source = target.get_output_embeddings().weight.detach().float().cpu()
    mapping = torch.linalg.lstsq(source[current], trained).solution
    rows = source[vocabulary] @ mapping
    kept = torch.searchsorted(vocabulary, current)
    rows[kept] = trained
    config = copy.deepcopy(draft.config)
    config.draft_vocab_size = len(vocabulary)
    weight = draft.lm_head.weight
    wide = Eagle3DraftModel(config).to(device=weight.device, dtype=weight.dtype)
    wide.set_vocab_mapping(vocabulary)
    state = {**draft.state_dict(), "lm_head.weight": rows, "d2t": wide.d2t, "t2d": wide.t2d}
    wide.load_state_dict(state)
    return wide.train(draft.training)


def initialize_drafter(draft: Eagle3DraftModel, target: PreTrainedModel, initialization: str) -> Eagle3DraftModel:
    """Apply a named starting point (:data:`INITIALIZATIONS`) to a freshly built drafter."""
    if initialization not in INITIALIZATIONS:
        raise ValueError(f"initialization must be one of {INITIALIZATIONS}, got {initialization!r}.")
    if initialization == "target_layer":
        copy_target_layer(draft, target)
    return draft
