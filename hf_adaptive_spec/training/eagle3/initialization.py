"""Starting points of an EAGLE-3 drafter: random (EAGLE-3's), one of the target's decoder layers, or a
trained drafter grown without changing what it computes (a wider MLP; more decoder layers; a larger draft
vocabulary keeping every trained head row)."""

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
    moves it to the token after next, which is what the drafter predicts. A drafter of more layers
    keeps its further layers' random initialisation.
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


def _mlp_prefixes(draft: Eagle3DraftModel) -> list[str]:
    """State-dict prefixes of every decoder layer's MLP: the EAGLE-3 layer's, then each further layer's."""
    return ["midlayer.mlp"] + [f"layers.{name}.mlp" for name in draft.layers]


def _grown(draft: Eagle3DraftModel, config, state: dict[str, torch.Tensor], vocabulary=None) -> Eagle3DraftModel:
    """A drafter of ``config`` holding ``state`` (and drafting over ``vocabulary`` if given), on ``draft``'s
    device and dtype and in its mode."""
    weight = draft.lm_head.weight
    grown = Eagle3DraftModel(config).to(device=weight.device, dtype=weight.dtype)
    if vocabulary is not None:
        grown.set_vocab_mapping(vocabulary)
        state = {**state, "d2t": grown.d2t, "t2d": grown.t2d}
    grown.load_state_dict(state)
    return grown.train(draft.training)


def widen_mlp(draft: Eagle3DraftModel, intermediate_size: int, seed: int = 0) -> Eagle3DraftModel:
    """A copy of ``draft`` whose MLPs (every layer's) have ``intermediate_size`` channels and compute the same function.

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
    for mlp in _mlp_prefixes(draft):
        for name in ("gate_proj", "up_proj"):
            weight = state[f"{mlp}.{name}.weight"]
            rows = torch.randn(extra, weight.shape[1], generator=generator) * config.initializer_range
            state[f"{mlp}.{name}.weight"] = torch.cat([weight, rows.to(weight)])
            if f"{mlp}.{name}.bias" in state:
                bias = state[f"{mlp}.{name}.bias"]
                state[f"{mlp}.{name}.bias"] = torch.cat([bias, bias.new_zeros(extra)])
        down = state[f"{mlp}.down_proj.weight"]
        state[f"{mlp}.down_proj.weight"] = torch.cat([down, down.new_zeros(down.shape[0], extra)], dim=1)
    return _grown(draft, config, state)


def deepen(draft: Eagle3DraftModel, num_layers: int, seed: int = 0) -> Eagle3DraftModel:
    """A copy of ``draft`` with ``num_layers`` decoder layers that computes the same function.

    The trained layers are kept. Each new Llama layer, appended after them, gets weights drawn as a
    fresh layer's (normal, ``initializer_range``; norms at one) except its two output projections
    (attention ``o_proj``, MLP ``down_proj``), which start at zero: the layer adds nothing to the
    residual stream, and the first update gives those projections a gradient from the drawn ones.
    A capacity step whose cost is one more layer per draft level.
    """
    current = draft.config.num_hidden_layers
    if num_layers < current:
        raise ValueError(
            f"draft_num_hidden_layers={num_layers} is fewer than the checkpoint's {current} layers; deepening keeps "
            "every trained layer, so it can only grow. Leave draft_num_hidden_layers unset to keep them."
        )
    if num_layers == current:
        return draft
    config = copy.deepcopy(draft.config)
    config.num_hidden_layers = num_layers
    with torch.random.fork_rng(devices=[]):  # drawn from ``seed`` without moving the caller's generator
        torch.manual_seed(seed)
        deep = Eagle3DraftModel(config)
    weight = draft.lm_head.weight
    deep = deep.to(device=weight.device, dtype=weight.dtype)
    deep.load_state_dict(draft.state_dict(), strict=False)  # every trained tensor; the new layers keep their draw
    with torch.no_grad():
        for index in range(current, num_layers):
            layer = deep.layers[str(index)]
            for projection in (layer.self_attn.o_proj, layer.mlp.down_proj):
                projection.weight.zero_()
                if projection.bias is not None:
                    projection.bias.zero_()
    return deep.train(draft.training)


def widen_vocabulary(
    draft: Eagle3DraftModel, target: PreTrainedModel, vocabulary: torch.LongTensor
) -> Eagle3DraftModel:
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
    return _grown(draft, config, {**draft.state_dict(), "lm_head.weight": rows}, vocabulary)


def initialize_drafter(draft: Eagle3DraftModel, target: PreTrainedModel, initialization: str) -> Eagle3DraftModel:
    """Apply a named starting point (:data:`INITIALIZATIONS`) to a freshly built drafter."""
    if initialization not in INITIALIZATIONS:
        raise ValueError(f"initialization must be one of {INITIALIZATIONS}, got {initialization!r}.")
    if initialization == "target_layer":
        copy_target_layer(draft, target)
    return draft
