"""The DVI drafter: the target's first layers plus a LoRA draft head, learning online from its outcomes."""

from __future__ import annotations

import threading

import torch
from peft import LoraConfig
from torch import nn
from transformers import DynamicCache, PreTrainedModel

from ...core.attention import check_tree_attention_support, is_sliding_layer, tree_extension_mask
from ...core.features import decoder_layers, unwrap_peft
from ...core.kv_cache import drop_tail
from ...core.tree import DraftTree
from ...core.values import check_flag
from ..base import DraftContext, Drafter, DraftOutcome
from ..causal_lm import truncated_causal_lm
from ..static_shapes import StaticShapesMixin
from .checkpoint import RECOMMENDED_DEPTH, DVICheckpointMixin, target_shape
from .config import DVI_ARTIFACT_TYPE, DVIOnlineLearnerConfig, check_online_arguments
from .head import DVIDraftHead, check_lora_config, check_output_head_unadapted, lora_draft_head
from .learner import DVIOnlineLearner
from .online import DVIUpdater, UpdateMetrics
from .shared_cache import DraftedNodes, DVISharedCache


def _shallow_step(shallow: nn.Module, input_ids, position_ids, mask, cache, output_rows) -> tuple[torch.Tensor]:
    """Shallow states ``[B, hidden]`` of one fixed-shape step, of the ``output_rows`` alone when given (the head
    runs after, eagerly: it learns online)."""
    hidden = shallow(input_ids=input_ids, position_ids=position_ids, attention_mask=mask, past_key_values=cache,
                     use_cache=True).last_hidden_state[0]
    return (hidden if output_rows is None else hidden.index_select(0, output_rows),)


def check_exit_layer(exit_layer: int, num_layers: int) -> None:
    """Refuse a draft path that is not a strict part of the target: an int ``1 <= exit_layer <= num_layers - 1``."""
    if isinstance(exit_layer, bool) or not isinstance(exit_layer, int) or not 1 <= exit_layer < num_layers:
        raise ValueError(
            f"exit_layer={exit_layer!r} does not fit a {num_layers}-layer target: the draft path runs the target's "
            f"first exit_layer layers and verification all {num_layers}. Pass an int in 1..{num_layers - 1} (the "
            "DVI trainer's --exit_layer, 4 by default)."
        )


class DVIDrafter(
    DVICheckpointMixin, StaticShapesMixin, Drafter, artifact_type=DVI_ARTIFACT_TYPE, card_kind="dvi_adapter"
):
    """DVI self-speculation: draft with the target's first ``exit_layer`` layers and a LoRA head.

    The draft path is the target's layers ``0 .. exit_layer-1`` (weights shared, not copied),
    then the target's final norm and ``lm_head`` with a LoRA adapter (peft). Verification is
    the unmodified target, so the output is exactly the target's. By default draft and
    verification share the target's KV cache of the first ``exit_layer`` layers: the drafter
    writes the draft nodes' K/V there, and verification runs only the remaining layers on the
    drafted states (plus the shallow layers for leaves the drafter never fed). With
    ``share_cache=False`` it keeps its own shallow cache and the target verifies with all its
    layers, like transformers' ``assistant_early_exit``.

    With ``online=True`` it learns while generating (the paper's "Improve" step): after each
    cycle it compares its draft with the tokens the engine committed (:meth:`observe`), logs one
    :class:`~hf_adaptive_spec.drafters.dvi.DVIRecord` per drafted position up to and including
    the first reject, and every ``online_config.update_every`` records steps the LoRA weights
    with the KL→RL schedule. Nothing else changes: the target and the head's base weights stay
    bitwise equal, and the generated tokens are the target's.

    Args:
        target: the target model (a transformers causal LM, or a peft model wrapping one).
        exit_layer: number of target layers the draft path runs (``1 .. num_layers-1``).
        lora_config: peft ``LoraConfig`` of the draft head (``target_modules=['draft_head']``);
            :func:`default_lora_config` by default.
        online: learn from the drafts' outcomes during ``generate``.
        online_config: the :class:`DVIOnlineLearnerConfig` (defaults when None).
        share_cache: share the first ``exit_layer`` layers' KV cache with verification. The
            default (None) shares unless one of those layers has sliding-window attention,
            which cannot keep a draft tree next to its window exactly. On the static-cache path
            the drafter drafts in a fixed-size cache of its own at padded shapes instead (compiled
            with the call's ``compile_config``), unless ``share_cache=True`` was asked for, which
            that path refuses.

    Example:
        >>> drafter = DVIDrafter(model, exit_layer=4, online=True)
        >>> model.generate(**inputs, assistant_model=drafter, assistant_policy=StaticTreePolicy.chain(4))
        >>> drafter.freeze()  # stop learning; drafter.save_pretrained("dvi-adapter") to keep it

    One drafter serves one ``generate`` at a time: it holds the sequence's draft cache, and a
    ``generate`` in another thread that binds it makes the first one fail with a RuntimeError.
    Updates and head reads share a lock, so :meth:`update`, :meth:`save_pretrained` and
    :meth:`freeze` are safe to call from another thread.
    """

    def __init__(
        self,
        target: nn.Module,
        exit_layer: int = 4,
        *,
        lora_config: LoraConfig | None = None,
        online: bool = False,
        online_config: DVIOnlineLearnerConfig | None = None,
        share_cache: bool | None = None,
    ):
        target = unwrap_peft(target)
        check_tree_attention_support(target.config, role="target model")
        check_online_arguments(online, online_config)
        norm = getattr(target.get_decoder(), "norm", None)
        if norm is None:
            raise ValueError(
                f"DVIDrafter needs the target's final norm at `model.norm` (Llama, Mistral, Qwen, Gemma layouts); "
                f"{type(target).__name__} has none."
            )
        check_output_head_unadapted(target, target.get_output_embeddings())
        self._target_shape = target_shape(target)
        self._num_layers = self._target_shape["num_hidden_layers"]
        check_exit_layer(exit_layer, self._num_layers)
        shallow = truncated_causal_lm(target, exit_layer).get_decoder()
        shallow.norm = nn.Identity().eval()  # the head applies the norm: the shallow output is h_k itself
        self._exit_layer = exit_layer
        self.shallow = shallow
        self._sliding = [i for i in range(exit_layer) if is_sliding_layer(target.config, i)]
        self.share_cache = not self._sliding if share_cache is None else share_cache  # None: where the layers allow
        self.lora_config = check_lora_config(lora_config)
        self._target_name = target.config.name_or_path or None
        self.head = lora_draft_head(
            DVIDraftHead(norm, target.get_output_embeddings(), self._target_name), self.lora_config
        )
        self._lock = threading.RLock()
        self.learner = DVIOnlineLearner(self.head, target.get_output_embeddings(), self._num_layers, self._lock)
        self._sharing = DVISharedCache(self.shallow, exit_layer, self._take_drafted, self._check_owner,
                                       required=share_cache is True)
        if online:
            self.enable_online(online_config)
        self._reset()

    @property
    def exit_layer(self) -> int:
        """The target layers the draft path runs, fixed at construction (the shallow layers and the shared cache are
        built for it, and ``save_pretrained`` writes it)."""
        return self._exit_layer

    @exit_layer.setter
    def exit_layer(self, value: int) -> None:
        raise AttributeError(
            f"DVIDrafter.exit_layer is fixed at construction: this drafter's draft path runs the target's first "
            f"{self._exit_layer} layers, and save_pretrained writes what drafts. For exit_layer={value!r}, build a new "
            f"drafter: DVIDrafter(target, exit_layer={value!r})."
        )

    # ----- online learning (DVIOnlineLearner) ----------------------------------------------------

    def enable_online(self, config: DVIOnlineLearnerConfig | None = None) -> DVIUpdater:
        """Start learning online with a fresh updater (empty buffer, new optimizer)."""
        check_online_arguments(True, config)
        return self.learner.enable(config)

    @property
    def share_cache(self) -> bool:
        """Whether verification runs through the shared first ``exit_layer`` layers (:attr:`cache_sharing`)."""
        return self._share_cache

    @share_cache.setter
    def share_cache(self, share: bool) -> None:
        """Checked as the constructor's argument: a bool (``"no"`` is truthy, and shared), and full attention in the
        shared layers (a sliding-window layer's cache cannot hold a draft tree: it failed inside attention)."""
        check_flag("DVIDrafter", "share_cache", share)
        if share and self._sliding:
            raise ValueError(
                f"DVIDrafter(share_cache=True) needs full attention in the shared layers, but layers {self._sliding} "
                "use a sliding window (their cache cannot hold a draft tree exactly). Pass share_cache=False."
            )
        self._share_cache = share

    @property
    def updater(self) -> DVIUpdater | None:
        return self.learner.updater

    @property
    def online(self) -> bool:
        """Whether an updater is attached (see :meth:`enable_online`)."""
        return self.learner.updater is not None

    @property
    def is_learning(self) -> bool:
        """Online and not frozen: records are logged and updates run."""
        return self.learner.is_learning

    def freeze(self) -> None:
        """Stop logging and updating (the adapter keeps its current weights)."""
        self.learner.freeze()

    def unfreeze(self) -> None:
        """Resume online learning after :meth:`freeze`."""
        self.learner.unfreeze()

    def update(self) -> UpdateMetrics | None:
        """Run one LoRA update now (None when the buffer is empty)."""
        if self.learner.updater is None:
            raise RuntimeError("This DVIDrafter is not online: create it with online=True or call enable_online().")
        return self.learner.updater.step()

    @property
    def feature_layers(self) -> tuple[int, ...]:
        """The target's final-norm output (index ``num_layers``) while learning, for the target logits."""
        return (self._num_layers,) if self.is_learning else ()

    def continue_after(self, cached_length: int) -> None:
        """Nothing to align: the shallow layers see every token in ``input_ids``, and the learner reads target
        features of accepted paths only (:meth:`observe`), never of the prompt."""

    @property
    def cache_sharing(self) -> DVISharedCache | None:
        """Verification through the shared first ``exit_layer`` layers (None with ``share_cache=False``)."""
        return self._sharing if self.share_cache else None

    load_hint = "DVIDrafter.from_pretrained(path, target=model)"

    #: the paper's proposal: a chain of depth 4, ``StaticTreePolicy.chain(DVIDrafter.recommended_depth)``
    recommended_depth = RECOMMENDED_DEPTH

    def __getstate__(self) -> dict:
        """Refused: a copy would duplicate the target's first layers apart from the target (and its lock)."""
        raise TypeError(
            f"A DVIDrafter cannot be copied or pickled (copy.deepcopy, pickle, torch.save): it drafts with its "
            f"target's first {self._exit_layer} layers, which a copy would duplicate apart from the target. For a "
            f"second drafter (each concurrent generate call needs its own), build one on the same target and give it "
            f"this one's adapter: drafter.save_pretrained(folder), then DVIDrafter.from_pretrained(folder, "
            f"target=model); to keep the adapter, save_pretrained alone."
        )

    # ----- the Drafter interface ---------------------------------------------------------------

    def _reset(self) -> None:
        self._cache = DynamicCache()
        self._committed = 0
        self._drafted = DraftedNodes()
        self._owner: int | None = None

    def bind(self, target: PreTrainedModel) -> None:
        target = unwrap_peft(target)
        if decoder_layers(target)[0] is not self.shallow.layers[0]:
            raise ValueError(
                "This DVIDrafter was built from another model: its draft path shares the target's first layers. "
                "Build it from the model that generates: DVIDrafter(model) or "
                "DVIDrafter.from_pretrained(repo, target=model)."
            )
        self._reset()
        self._reset_static_shapes()
        self._owner = threading.get_ident()

    def _check_owner(self) -> None:
        if self._owner != threading.get_ident():
            raise RuntimeError(
                "This DVIDrafter was bound by a generate call in another thread; a drafter serves one generate at a "
                "time. Create one DVIDrafter per concurrent generate."
            )

    def draft_log_probs(self, states: torch.Tensor) -> torch.Tensor:
        """Draft log-probabilities ``[N, vocab]`` (float32) of the head at shallow states ``[N, hidden]``."""
        with self._lock:
            logits = self.head(states)
        return torch.log_softmax(logits.float(), dim=-1)

    _static_step = staticmethod(_shallow_step)

    def _static_model(self) -> nn.Module:
        return self.shallow

    @property
    def _shares_now(self) -> bool:
        """Whether this call drafts in the engine's cache (never on the static path)."""
        return self.share_cache and not self._static_in_use

    @torch.no_grad()
    def begin_tree(self, context: DraftContext) -> torch.Tensor:
        self._check_owner()
        self.learner.step_if_due()
        num_tokens = context.input_ids.shape[1]
        if self._shares_now:
            if context.target_cache is None:
                raise RuntimeError(
                    "DVIDrafter(share_cache=True) needs the engine's cache in DraftContext.target_cache."
                )
            # the target processed the committed prefix; only the root is new to the shallow layers
            self._cache, self._committed, self._drafted.root_fed = context.target_cache, num_tokens - 1, True
        root = self._feed_committed(context.input_ids)
        self._drafted.states = {0: root}
        log_probs = self.draft_log_probs(root[None])
        return log_probs

    def _feed_committed(self, input_ids: torch.LongTensor) -> torch.Tensor:
        """Run the shallow layers on the committed tokens they have not seen; the root's state ``[hidden]``."""
        device, num_tokens = self.shallow.device, input_ids.shape[1]
        tokens = input_ids[:, self._committed :].to(device)
        if self._static_in_use:
            (hidden,) = self._static_committed_step(tokens, self._committed)
        else:
            positions = torch.arange(self._committed, num_tokens, device=device)
            hidden = self.shallow(input_ids=tokens, position_ids=positions[None], past_key_values=self._cache,
                                  use_cache=True).last_hidden_state[0]
        self._committed = num_tokens
        return hidden[-1].clone()

    @torch.no_grad()
    def expand(self, tree: DraftTree, nodes: list[int]) -> torch.Tensor:
        self._check_owner()
        hidden = self._feed_level(tree, nodes)
        drafted = self._drafted
        drafted.fed, drafted.tree = drafted.fed + nodes, tree
        if self.is_learning or self._shares_now:
            drafted.states.update((node, row.clone()) for node, row in zip(nodes, hidden))
        return self.draft_log_probs(hidden)

    def _feed_level(self, tree: DraftTree, nodes: list[int]) -> torch.Tensor:
        """Shallow states ``[len(nodes), hidden]`` of one tree level, its K/V after the fed nodes'."""
        device, fed = self.shallow.device, self._drafted.fed
        if self._static_in_use:
            return self._static_level_step(tree, fed, nodes, self._committed)[0]
        mask, query_positions = tree_extension_mask(
            self.shallow.config, self._cache, tree, fed, nodes, self._committed - 1, self.shallow.dtype, device
        )
        return self.shallow(
            input_ids=torch.tensor([[tree.tokens[node] for node in nodes]], device=device),
            attention_mask=mask,
            position_ids=query_positions[None],
            past_key_values=self._cache,
            use_cache=True,
        ).last_hidden_state[0]

    def end_tree(self) -> None:
        drafted = self._drafted
        self.learner.remember(drafted.tree, drafted.states)  # None when no expand() followed: depth 1
        if not self._shares_now:  # shared: verification reuses the fed nodes' K/V and states
            if not self._static_in_use:  # static slots past the committed prefix are simply overwritten
                drop_tail(self._cache, len(drafted.fed))
            self._drafted = DraftedNodes()

    def observe(self, outcome: DraftOutcome) -> None:
        """Log this cycle's records from what the target kept (while learning)."""
        self._check_owner()
        self.learner.observe(outcome)

    def _take_drafted(self) -> DraftedNodes:
        """This cycle's drafted nodes, for the shared-cache verification (which consumes them)."""
        drafted, self._drafted = self._drafted, DraftedNodes()
        return drafted

