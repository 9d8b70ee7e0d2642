"""The EAGLE-3 engine plug-in: target features in, draft-vocabulary log-probs out, one tree level at a time."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import DynamicCache, PreTrainedModel

from ...core.attention import check_tree_attention_support, tree_extension_mask
from ...core.drafter_identity import cached_weights_digest
from ...core.kv_cache import drop_tail
from ...core.output_head import OutputHead
from ...core.static_steps import StaticDraftSteps, tree_level_rows
from ...core.transfer import to_device
from ...core.tree import DraftTree
from ...hub.config import ARTIFACT_TYPE_KEY, CONFIG_NAME, check_no_config_overrides, read_json_object
from ...hub.errors import ArtifactTypeError
from ...hub.location import ArtifactLocation
from ...hub.mixin import HubArtifactMixin
from ...hub.registry import load_hint, registered_class
from ..base import DraftContext, Drafter
from ..static_shapes import StaticShapesMixin
from .checkpoint import check_not_causal_lm_config, holds_causal_lm_weights, load_checkpoint
from .export import check_no_other_weights, save_checkpoint
from .layout import EAGLE3_ARTIFACT_TYPE, declares_eagle3, holds_eagle3_config
from .modeling import Eagle3DraftModel
from .static import static_draft_steps


class Eagle3Drafter(StaticShapesMixin, Drafter, HubArtifactMixin, artifact_type=EAGLE3_ARTIFACT_TYPE,
                    card_kind="eagle3_drafter"):
    """Drafts with an EAGLE-3 head reading the target's hidden states.

    The drafter keeps its own KV cache over the committed prefix: its position ``t`` holds (target
    feature of token ``t``, embedding of token ``t+1``), so after :meth:`begin_tree` it covers
    positions ``0..T-2`` and its last output predicts the root's children. Tree nodes take their
    parent's pre-norm output as hidden input, at position ``T-2 + depth``; :meth:`end_tree` drops them.
    A call continuing from a cache of ``P`` tokens shifts all of this by ``P`` (:meth:`continue_after`).

    Persistence is the Hub mixin's (``save_pretrained``, ``push_to_hub`` with its card,
    ``from_pretrained(path, target=model)``) in SpecForge's layout, which vLLM and SGLang load.

    Example:
        >>> drafter = Eagle3Drafter.from_pretrained(
        ...     "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", target=model, allow_pickle=True
        ... )
        >>> model.generate(**inputs, assistant_model=drafter, assistant_policy=StaticTreePolicy())
    """

    load_hint = "Eagle3Drafter.from_pretrained(path, target=model)"

    def __init__(self, model: Eagle3DraftModel):
        check_tree_attention_support(model.config, role="EAGLE-3 draft model")
        model.check_embeddings()
        self.model = model.eval()
        self._cache = DynamicCache()
        self._committed = 0  # draft positions in the cache: committed tokens - 1 - _skipped
        self._skipped = 0  # prompt tokens a continued call's cache held: the drafter starts after them
        self._fed: list[int] = []  # tree nodes in the cache, after the committed prefix
        self._outputs: dict[int, torch.Tensor] = {}  # pre-norm output per tree node (root: node 0)
        self._head = OutputHead(model.lm_head)

    @property
    def feature_layers(self) -> tuple[int, ...]:
        """The target hidden states the drafter reads: its config's ``aux_hidden_state_layer_ids``, which its
        ``fc`` was trained on."""
        return tuple(self.model.config.aux_hidden_state_layer_ids)

    @feature_layers.setter
    def feature_layers(self, layers: object) -> None:
        """Refused: the model reads its config's ids, so a copy set here was ignored (or failed inside the
        capture); the ids are the checkpoint's."""
        raise ValueError(
            f"Eagle3Drafter.feature_layers follow the checkpoint's aux_hidden_state_layer_ids "
            f"({self.feature_layers}), which its fc layer was trained on; {layers!r} cannot be set. Train or load a "
            "drafter of those feature layers instead."
        )

    def weights_digest(self) -> str:
        """The draft model's :func:`~hf_adaptive_spec.core.drafter_identity.weights_digest` (one checkpoint, one
        digest, whatever dtype or device it was loaded in)."""
        return cached_weights_digest(self.model)

    # ----- persistence: SpecForge's layout in the Hub mixin -------------------------------------

    #: the weight files an earlier push of another artifact leaves at the repo's top, which loading would read as the
    #: drafter's (every ``*.safetensors`` there, :func:`~.export.check_no_other_weights`): a causal LM's shards
    #: and their index, a DVI adapter. Each pattern starts with a literal name, so no file in a subfolder (a
    #: Trainer's ``checkpoint-N/``) matches, nor the drafter's own ``model.safetensors``
    stale_repo_files = ("model-*-of-*.safetensors", "model.safetensors.index.json", "adapter_model.safetensors")

    #: ``save_pretrained(state_dict=...)`` writes that state dict (a trainer's, cast to bfloat16 for a small
    #: checkpoint), as ``Eagle3DraftModel.save_pretrained`` does
    saves_state_dict = True

    def _check_save_folder(self, folder: Path) -> None:
        """The mixin's check (no other artifact's ``config.json``), after refusing a folder holding other weights
        (:func:`~.export.check_no_other_weights`); both before the mixin removes the folder's ``config.json``."""
        check_no_other_weights(folder)
        super()._check_save_folder(folder)

    @classmethod
    def _holds_own_config(cls, config: dict) -> bool:
        return holds_eagle3_config(config)

    def _save_pretrained(self, save_directory: Path) -> None:
        """``config.json`` + ``model.safetensors`` in the layout vLLM and SGLang load (see the README)."""
        save_checkpoint(self.model, save_directory, self._state_dict_being_saved())

    @classmethod
    def _check_location(cls, location: ArtifactLocation) -> None:
        """That ``config.json`` parses and the folder is no other kind of artifact (one of this package's, named by
        its ``artifact_type``, or a causal LM, named by its config or, in a local folder, its weights); the loader
        names every other problem (its catalogue: ``tests/eagle3/test_eagle3_checkpoint.py``). Official
        checkpoints carry no ``artifact_type``."""
        config = read_json_object(location.resolve(CONFIG_NAME))
        declared = config.get(ARTIFACT_TYPE_KEY)
        if declared is not None and declared != EAGLE3_ARTIFACT_TYPE:
            holder = registered_class(declared)
            hint = f" Load it with {load_hint(holder)}." if holder else ""
            raise ArtifactTypeError(f"{location} holds a '{declared}' artifact, not an EAGLE-3 drafter.{hint}")
        check_not_causal_lm_config(config, location)  # a Hub repo too, before its weights are downloaded
        if location.is_local and not declares_eagle3(config) and holds_causal_lm_weights(location.folder):
            raise ArtifactTypeError(
                f"{location} holds a causal language model (model.layers.* weights, no fc.weight), not an EAGLE-3 "
                "drafter: load it with AutoModelForCausalLM.from_pretrained(path) (as a drafter: "
                "CausalLMDrafter(model))."
            )

    load_keywords = frozenset({"target", "allow_pickle", "ignore_target_mismatch", "dtype"})
    refused_keyword_hints = dict.fromkeys(
        ("device_map", "device"),
        "The drafter lands on the target's device: load the target where it should run (device_map=), or move the "
        "drafter after loading (drafter.model.to(device)).",
    )

    @classmethod
    def _load(
        cls,
        location: ArtifactLocation,
        target: PreTrainedModel | None = None,
        allow_pickle: bool = False,
        ignore_target_mismatch: bool = False,
        dtype: torch.dtype | str | None = None,
        **config_fields,
    ) -> Eagle3Drafter:
        """Load an official EAGLE-3 or SpecForge checkpoint (local directory or Hub id) for ``target``:
        ``from_pretrained(path, target=model)``. ``pytorch_model.bin`` needs ``allow_pickle=True``; a
        drafter saved for a target of another depth needs ``ignore_target_mismatch=True``. The weights land in
        ``dtype`` (default: the target's; a name such as ``"float32"`` too, and ``"auto"`` for the dtype they were
        saved in): ``dtype=torch.float32`` keeps a float32 checkpoint exact beside a bfloat16 target (converting
        after loading cannot, the weights were rounded on the way)."""
        if not isinstance(target, PreTrainedModel):
            raise TypeError(
                "Eagle3Drafter.from_pretrained needs the model it drafts for: from_pretrained(path, target=model)."
            )
        check_no_config_overrides("Eagle3Drafter.from_pretrained", read_json_object(location.resolve(CONFIG_NAME)),
                                  config_fields)
        return cls(load_checkpoint(location, target, allow_pickle, ignore_target_mismatch, dtype))

    def bind(self, target: PreTrainedModel) -> None:
        self.model.config.check_target(target.config)
        config = self.model.config
        identity = config.draft_vocab_size == config.vocab_size and not self.model.d2t.any()
        self.draft_to_target = None if identity else self.model.draft_to_target()
        self._cache = DynamicCache()
        self._committed = self._skipped = 0
        self._fed, self._outputs = [], {}
        self._head = OutputHead(self.model.lm_head)  # re-reads the weight if it changed since the last generation
        self._reset_static_shapes()

    def continue_after(self, cached_length: int) -> None:
        """Draft from the features this call computes, as if the prompt began at token ``cached_length``: the
        drafter's positions count from there (RoPE sees the same distances) and it attends to no earlier token.
        Drafts may be right less often than with the whole prompt; verification keeps the output exact."""
        self._skipped = cached_length

    def _static_steps(self, max_length: int, compile_options: dict | None) -> StaticDraftSteps:
        return static_draft_steps(self.model, max_length, compile_options)

    def _static_weights(self) -> torch.nn.Module:
        return self.model

    @torch.no_grad()
    def begin_tree(self, context: DraftContext) -> torch.Tensor:
        device, dtype = self.model.device, self.model.dtype
        num_tokens = context.input_ids.shape[1]
        features = self.model.gather_target_features(context.new_features).to(device=device, dtype=dtype)
        start = self._skipped + self._committed  # the first new feature's token
        if start + features.shape[1] != num_tokens - 1:
            raise ValueError(
                f"The drafter expected features from token {start} on and got {features.shape[1]}, but the "
                f"sequence has {num_tokens} tokens: every token but the root needs its feature once. Call bind() "
                "before a new generation."
            )
        positions = torch.arange(self._committed, num_tokens - 1 - self._skipped, device=device)
        next_tokens = context.input_ids[:, start + 1 :].to(device)  # position t pairs feature t with token t+1
        if self._static_in_use:
            return self._begin_static(next_tokens, features, positions)
        output = self.model(
            next_tokens,
            features,
            target_features=True,
            position_ids=positions[None],
            past_key_values=self._cache,
            compute_logits=False,
        )
        self._committed += positions.numel()
        self._outputs = {0: output.prenorm_hidden_states[0, -1]}
        return self._draft_log_probs(output.prenorm_hidden_states[0, -1:])

    def _begin_static(
        self, next_tokens: torch.LongTensor, features: torch.Tensor, positions: torch.Tensor
    ) -> torch.Tensor:
        new = positions.numel()
        causal = torch.ones(new, new, dtype=torch.bool, device="cpu").tril()
        prenorm, log_probs = self._static.run(True, (self.model, True), (next_tokens, features), positions, causal,
                                              self._committed, last_row_only=True)
        self._committed += new
        self._outputs = {0: prenorm[-1]}
        return log_probs

    def _expand_static(self, tree: DraftTree, nodes: list[int]) -> torch.Tensor:
        tokens, positions, visible = tree_level_rows(tree, self._fed, nodes, self._committed - 1, self.model.device)
        hidden = torch.stack([self._outputs[tree.parents[node]] for node in nodes])[None]
        prenorm, log_probs = self._static.run(False, (self.model, False), (tokens, hidden), positions, visible,
                                              self._committed)
        self._outputs.update(zip(nodes, prenorm))
        self._fed = self._fed + nodes
        return log_probs

    @torch.no_grad()
    def expand(self, tree: DraftTree, nodes: list[int]) -> torch.Tensor:
        if self._static_in_use:
            return self._expand_static(tree, nodes)
        device = self.model.device
        mask, query_positions = tree_extension_mask(
            self.model.config, self._cache, tree, self._fed, nodes, self._committed - 1, self.model.dtype, device
        )
        output = self.model(
            to_device(torch.tensor([[tree.tokens[node] for node in nodes]], device="cpu"), device),
            torch.stack([self._outputs[tree.parents[node]] for node in nodes])[None],
            target_features=False,
            position_ids=query_positions[None],
            attention_mask=mask,
            past_key_values=self._cache,
            compute_logits=False,
        )
        self._outputs.update(zip(nodes, output.prenorm_hidden_states[0]))
        self._fed = self._fed + nodes
        return self._draft_log_probs(output.prenorm_hidden_states[0])

    def _draft_log_probs(self, prenorm_rows: torch.Tensor) -> torch.Tensor:
        """``[n, draft_vocab]`` log-probs of ``[n, hidden]`` pre-norm outputs; the head runs one
        row at a time as fast as the target's (see :class:`~hf_adaptive_spec.core.OutputHead`)."""
        return torch.log_softmax(self._head(self.model.norm(prenorm_rows)).float(), dim=-1)

    def end_tree(self) -> None:
        if not self._static_in_use:  # static slots past the committed prefix are simply overwritten
            drop_tail(self._cache, len(self._fed))
        self._fed, self._outputs = [], {}
