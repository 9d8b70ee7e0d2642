"""``HubArtifactMixin``: ``save_pretrained`` / ``push_to_hub`` / ``from_pretrained`` for our artifacts."""

from __future__ import annotations

import inspect
import logging
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import torch
from huggingface_hub import ModelCard, ModelHubMixin
from torch import nn

from .cards import CARD_KINDS, docstring_summary, render_card
from .config import ARTIFACT_TYPE_KEY, CONFIG_NAME, check_config_keys, check_required_keys, read_config
from .keywords import (
    HUB_OPTIONS,
    TORCH_DTYPE_FIX,
    check_save_keywords,
    pop_load_dtype,
    refuse_push_keywords,
    refuse_transformers_keywords,
)
from .location import ArtifactLocation, local_path
from .network import reaching_the_hub
from .registry import check_artifact_type, register_artifact
from .saving import (
    cast_keeping_float32,
    check_no_other_artifact,
    drop_generated_card,
    plain_json_value,
    warn_if_saved_as_parent,
)
from .weights import load_weights, save_weights, saved_floating_dtype

logger = logging.getLogger(__name__)

ArtifactT = TypeVar("ArtifactT", bound="HubArtifactMixin")


class HubArtifactMixin(ModelHubMixin):
    """Hub support for hf-adaptive-spec artifacts, on top of ``huggingface_hub.ModelHubMixin``.

    A repo holds ``config.json`` (the ``__init__`` keyword arguments plus ``artifact_type``),
    ``README.md`` (rendered from ``model_cards/<card_kind>.md``) and, when the artifact is a
    ``torch.nn.Module``, ``model.safetensors``. Artifacts that are not modules (a static
    policy) are config-only.

    Formats of their own plug in through three hooks, as EAGLE-3 drafters (SpecForge's layout,
    which vLLM and SGLang load) and DVI adapters (peft's) do: ``_save_pretrained(folder)``
    writes the files (a ``config.json`` it writes is kept as written), ``_check_location``
    refuses a folder of another kind, and ``_load(location, **kwargs)`` builds the object (saving refuses a folder
    holding another artifact, :meth:`_check_save_folder`, whose :meth:`_holds_own_config` a format names). An artifact
    whose settings may change after construction returns them from ``_current_settings()``, and
    ``config.json`` keeps their values at saving time. Saving,
    pushing (one commit, card included) and resolving folders, Hub ids and the offline cache
    stay here.

    Loading is strict: the ``artifact_type`` must match the class, every tensor must match
    (no missing or unexpected keys), and pickle weights are refused. Modules come back in
    ``eval()`` mode on the CPU, in the dtype their weights were saved in (when their floating tensors share one).

    Declare a subclass with class keywords; it is registered for :class:`AutoArtifact`::

        class LTDPolicy(DraftPolicy, nn.Module, HubArtifactMixin,
                        artifact_type="hf_adaptive_spec.policy.ltd", card_kind="policy"):
            def __init__(self, hidden_size: int = 64): ...

    ``__init__`` arguments must be JSON-serialisable (or dataclasses; a ``range`` or a numpy array is written as a
    list): ``save_pretrained`` refuses one JSON cannot encode (a ``TypeError`` naming it) rather than let loading
    rebuild the default, and ``from_pretrained`` refuses a ``config.json`` key no ``__init__`` argument takes
    (:class:`UnknownConfigKeyError`). ``artifact_type`` is
    ``"hf_adaptive_spec.<kind>.<method>"``, and ``<method>`` becomes a card tag.
    Card fields go through ``model_card_kwargs`` (see :func:`render_card`)::

        policy.push_to_hub("org/ltd-llama3", model_card_kwargs={"base_model": "meta-llama/...",
                           "results": [CardResult("MT-Bench", tau=3.1, speedup=2.4)],
                           "reproduce_command": "hf-adaptive-spec train ltd ..."})
    """

    artifact_type: ClassVar[str]
    card_kind: ClassVar[str]
    #: the keywords ``from_pretrained`` takes besides the Hub options, for a format whose checkpoint sets the object
    #: (a drafter: ``target=`` ...); None: any ``__init__`` argument, over ``config.json``'s value
    load_keywords: ClassVar[frozenset[str] | None] = None
    #: for a keyword ``from_pretrained`` refuses, what sets that instead and what to do (a sentence its error adds)
    refused_keyword_hints: ClassVar[dict[str, str]] = {}
    #: state-dict keys a module keeps in float32 whatever its dtype (normalisation statistics, which a bfloat16
    #: cast would round): loading reads the module's dtype from its other tensors
    float32_keys: ClassVar[frozenset[str]] = frozenset()
    #: patterns of files an earlier push to the repo may have left that describe another artifact, deleted in the
    #: push's commit unless it uploads them anew (huggingface_hub keeps an uploaded file a delete pattern matches);
    #: a push given ``allow_patterns`` deletes none. huggingface_hub's ``*`` also matches ``/``: start each pattern
    #: with a literal name, so that it matches the repo's top alone
    stale_repo_files: ClassVar[tuple[str, ...]] = ()
    #: what the card says the artifact does (a policy: what it decides, and when), one Markdown paragraph; None: the
    #: first paragraph of the docstring of the class that declares the ``artifact_type`` (:meth:`card_summary_text`)
    card_summary: ClassVar[str | None] = None

    def __init_subclass__(cls, *, artifact_type: str | None = None, card_kind: str | None = None, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        if card_kind is not None:
            if card_kind not in CARD_KINDS:
                raise ValueError(f"{cls.__name__}: card_kind {card_kind!r} is not one of {', '.join(CARD_KINDS)}.")
            cls.card_kind = card_kind
        if artifact_type is not None:
            if not hasattr(cls, "card_kind"):
                raise TypeError(f"{cls.__name__} declares artifact_type but no card_kind (e.g. card_kind='policy').")
            cls.artifact_type = artifact_type
            register_artifact(artifact_type, cls)

    def save_pretrained(
        self,
        save_directory: str | Path,
        *,
        config: Any = None,
        repo_id: str | None = None,
        push_to_hub: bool = False,
        model_card_kwargs: dict[str, Any] | None = None,
        is_main_process: bool = True,
        state_dict: dict[str, torch.Tensor] | None = None,
        safe_serialization: bool = True,
        max_shard_size: int | str | None = None,
        **push_kwargs: Any,
    ) -> str | None:
        """Write ``config.json`` (with ``artifact_type``), weights and ``README.md`` to ``save_directory`` (a leading
        ``~`` is the home folder, as ``from_pretrained`` reads it), and with ``push_to_hub=True`` push them to
        ``repo_id`` (``push_kwargs``: :meth:`push_to_hub`'s, refused without ``push_to_hub=True``).

        ``config.json`` holds the ``__init__`` arguments the object was built with and, over them, the
        settings it holds now (:meth:`_current_settings`), so ``policy.temperature = 1.5`` is saved.

        Of transformers' keywords: ``is_main_process=False`` writes (and pushes) nothing, as a process of a
        distributed run other than the main one; ``state_dict=`` is written in place of the module's own by a class
        whose format takes one (:attr:`saves_state_dict`: an EAGLE-3 drafter) and refused by the others;
        ``safe_serialization=False`` and ``max_shard_size=`` are refused (one safetensors file, always). A folder
        holding another kind of artifact is refused before anything changes (:meth:`_check_save_folder`)."""
        where = f"{type(self).__name__}.save_pretrained"
        check_save_keywords(where, push_to_hub, repo_id, state_dict, safe_serialization, max_shard_size, push_kwargs,
                            saves_state_dict=self.saves_state_dict, trained=self._is_trained())
        if not is_main_process:  # transformers' rule: the main process writes the folder
            return None
        folder = local_path(save_directory)
        warn_if_saved_as_parent(type(self))
        self._check_save_folder(folder)
        if config is None:
            self._check_settings_encodable()
            fields = self.saved_settings()
        else:
            fields = asdict(config) if is_dataclass(config) else dict(config)
        fields[ARTIFACT_TYPE_KEY] = self.artifact_type
        drop_generated_card(folder)
        before = getattr(self, "_state_dict_to_save", None)
        if state_dict is not None:  # _save_pretrained writes it; a push's own save (a temporary folder) too
            self._state_dict_to_save = state_dict
        try:
            return super().save_pretrained(folder, config=fields, repo_id=repo_id, push_to_hub=push_to_hub,
                                           model_card_kwargs=model_card_kwargs, **push_kwargs)
        finally:
            self._state_dict_to_save = before

    #: whether ``save_pretrained(state_dict=...)`` writes the given state dict in place of the module's own (a format
    #: whose ``_save_pretrained`` reads :meth:`_state_dict_being_saved`); the others refuse it
    saves_state_dict: ClassVar[bool] = False

    def _state_dict_being_saved(self) -> dict[str, torch.Tensor] | None:
        """The ``state_dict=`` the running ``save_pretrained`` was given (None: the module's own), for a
        ``_save_pretrained`` of a class that :attr:`saves_state_dict`."""
        return getattr(self, "_state_dict_to_save", None)

    def _check_save_folder(self, folder: Path) -> None:
        """Refuse, before anything is written, a folder holding another kind of artifact
        (:func:`~.saving.check_no_other_artifact`): ``config.json`` of another ``artifact_type`` or of a transformers
        model. A format of its own extends it (EAGLE-3: no other ``*.safetensors``) or says which ``config.json`` is
        its own (:meth:`_holds_own_config`)."""
        if folder.is_dir():
            check_no_other_artifact(folder, f"{type(self).__name__}.save_pretrained", self._holds_own_config)

    @classmethod
    def _holds_own_config(cls, config: dict[str, Any]) -> bool:
        """Whether a folder's ``config.json`` is this class's artifact (saving again replaces it): the same
        ``artifact_type``."""
        return config.get(ARTIFACT_TYPE_KEY) == cls.artifact_type

    def saved_settings(self) -> dict[str, Any]:
        """The settings ``save_pretrained`` writes to ``config.json`` (without ``artifact_type``): the ``__init__``
        arguments the object was built with and, over them, those it holds now (:meth:`_current_settings`)."""
        base = self._hub_mixin_config
        fields = asdict(base) if is_dataclass(base) else dict(base or {})
        fields.update({key: self._encode_arg(value) for key, value in self._current_settings().items()})
        accepted = self._init_keys()
        # a subclass whose __init__ narrows its parent's would write keys it cannot read back
        return fields if accepted is None else {key: value for key, value in fields.items() if key in accepted}

    @classmethod
    def _init_keys(cls) -> set[str] | None:
        """The ``config.json`` keys ``__init__`` takes, or None when it takes any (``**kwargs``) or a ``config``
        argument, which huggingface_hub writes flattened into ``config.json``."""
        parameters = list(cls._hub_mixin_init_parameters.values())[1:]
        names = {parameter.name for parameter in parameters}
        if "config" in names or any(parameter.kind == inspect.Parameter.VAR_KEYWORD for parameter in parameters):
            return None
        return names

    def __new__(cls, *args: Any, **kwargs: Any):
        """``ModelHubMixin.__new__`` (which records the ``__init__`` arguments JSON can encode), noting those it
        left out: ``save_pretrained`` refuses them, as loading would rebuild their defaults."""
        instance = super().__new__(cls, *args, **kwargs)
        passed = {**dict(zip(list(cls._hub_mixin_init_parameters)[1:], args)), **kwargs}
        instance._hub_mixin_unencoded = {key: value for key, value in passed.items() if not cls._is_jsonable(value)}
        return instance

    @classmethod
    def _is_jsonable(cls, value: Any) -> bool:
        return super()._is_jsonable(plain_json_value(value))

    @classmethod
    def _encode_arg(cls, arg: Any) -> Any:
        return super()._encode_arg(plain_json_value(arg))

    def _check_settings_encodable(self) -> None:
        """Refuse, for an artifact whose ``config.json`` holds its ``__init__`` arguments, one that JSON cannot
        encode: ``huggingface_hub`` would leave it out, and loading would build the default in its place."""
        if self.load_keywords is not None:  # a format of its own: the checkpoint, not config.json, sets the object
            return
        current = self._current_settings()
        lost = {key: value for key, value in getattr(self, "_hub_mixin_unencoded", {}).items() if key not in current}
        lost.update({key: value for key, value in current.items() if not self._is_jsonable(value)})
        if lost:
            named = ", ".join(f"{key}={value!r} (a {type(value).__name__})" for key, value in lost.items())
            raise TypeError(
                f"{type(self).__name__}.save_pretrained cannot write {named} to {CONFIG_NAME}: JSON cannot encode "
                "it, and loading would build the default in its place. Pass JSON values (numbers, strings, bools, "
                "lists, dicts), e.g. a list instead of a set or a tensor."
            )

    def _current_settings(self) -> dict[str, Any]:
        """``__init__`` arguments as the object holds them now, for those a user may change after
        construction (an attribute set, a tree replaced): ``save_pretrained`` writes them over the values
        the object was built with. Override it where an artifact keeps such settings; default none."""
        return {}

    def _save_pretrained(self, save_directory: Path) -> None:
        if isinstance(self, nn.Module):
            save_weights(self, save_directory)

    def push_to_hub(self, repo_id: str, *, model_card_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> str:
        """``ModelHubMixin.push_to_hub``, with ``repo_id`` passed to the card's usage snippet. A trained artifact
        pushed without its training data or command gets a warning: its card would say "not specified".

        ``kwargs`` are huggingface_hub's (:data:`~.keywords.PUSH_KEYWORDS`: ``commit_message``, ``private``, ``token``,
        ``branch``, ``create_pr``, ...); transformers' other ones (``revision``, ``commit_description``, ``tags``,
        ...) are refused before anything is uploaded, naming what does the same here (``branch=`` for
        ``revision=``)."""
        refuse_push_keywords(f"{type(self).__name__}.push_to_hub", kwargs, ("repo_id", "model_card_kwargs"))
        card_kwargs = {"repo_id": repo_id, **(model_card_kwargs or {})}
        if self._is_trained() and not (card_kwargs.get("datasets") or card_kwargs.get("reproduce_command")):
            logger.warning(
                f"{type(self).__name__}.push_to_hub({repo_id!r}) writes a card that names no training data and no "
                "command. Pass model_card_kwargs={'datasets': [...], 'reproduce_command': '...', 'base_model': ...}, "
                "or upload the training run's output folder (huggingface_hub.upload_folder), whose card the "
                "trainer wrote."
            )
        kept = ("Nothing was uploaded: save_pretrained(folder), then upload the folder once online "
                "(huggingface_hub.upload_folder, or `hf upload REPO FOLDER`).")
        delete_patterns = kwargs.pop("delete_patterns", None) or []
        delete_patterns = [delete_patterns] if isinstance(delete_patterns, str) else list(delete_patterns)
        if kwargs.get("allow_patterns") is None:  # a push of some files alone (a card) replaces no artifact
            delete_patterns += self.stale_repo_files
        with reaching_the_hub(f"{type(self).__name__}.push_to_hub({repo_id!r})", kept):
            return super().push_to_hub(repo_id, model_card_kwargs=card_kwargs, delete_patterns=delete_patterns or None,
                                       **kwargs)

    def _is_trained(self) -> bool:
        """Whether the artifact holds learned weights (a drafter, an adapter, a learned policy), whose card should
        say what trained them; a config-only policy (a static tree) holds none."""
        return isinstance(self, nn.Module) or self.card_kind != "policy"

    def generate_model_card(self, **kwargs: Any) -> ModelCard:
        """Render ``model_cards/<card_kind>.md``; ``kwargs`` are :func:`render_card`'s (``summary`` defaults to
        :meth:`card_summary_text`)."""
        kwargs.setdefault("method", self.artifact_type.rsplit(".", 1)[-1])
        kwargs.setdefault("summary", self.card_summary_text())
        return render_card(self.card_kind, **kwargs)

    @classmethod
    def card_summary_text(cls) -> str | None:
        """What the card says the artifact does: the ``card_summary`` of the class that declares its
        ``artifact_type``, else that class's docstring summary (a subclass saved under its parent's type is loaded
        as the parent, so its card describes the parent)."""
        owner = next((klass for klass in cls.__mro__ if "artifact_type" in vars(klass)), cls)
        return vars(owner).get("card_summary") or docstring_summary(vars(owner).get("__doc__"))

    @classmethod
    def from_pretrained(
        cls: type[ArtifactT],
        pretrained_model_name_or_path: str | Path,
        *,
        force_download: bool = False,
        token: str | bool | None = None,
        cache_dir: str | Path | None = None,
        local_files_only: bool = False,
        revision: str | None = None,
        subfolder: str | None = None,
        **model_kwargs: Any,
    ) -> ArtifactT:
        """Load from a folder or a Hub repo id (or the local cache when offline); ``subfolder``: the folder inside it
        that holds the artifact (``hf_hub_download``'s).

        ``model_kwargs`` override ``config.json`` values passed to ``__init__``. ``dtype=`` (transformers' keyword:
        a floating ``torch.dtype``, its name, or ``"auto"``/None for the saved one) casts a module after loading,
        its :attr:`float32_keys` kept float32; a config-only artifact holds no tensors and ignores it. transformers'
        ``torch_dtype=``, ``device_map=`` and ``device=`` are refused, naming ``dtype=`` and ``.to(device)``, and so
        are its other loading keywords (``trust_remote_code``, ``low_cpu_mem_usage``, ``use_safetensors``, ...) and
        any keyword ``__init__`` does not take.

        Raises:
            MissingArtifactFileError: ``config.json`` or ``model.safetensors`` is missing.
            ArtifactTypeError: the repo holds another artifact type.
            PickleWeightsError: the repo only has pickle weights.
            WeightsMismatchError: the weights do not fit the module.
        """
        location = ArtifactLocation(
            str(pretrained_model_name_or_path),
            revision=revision,
            cache_dir=cache_dir,
            force_download=force_download,
            token=token,
            local_files_only=local_files_only,
            subfolder=subfolder,
        )
        return cls._load_from(location, model_kwargs, f"{cls.__name__}.from_pretrained")

    @classmethod
    def _load_from(cls: type[ArtifactT], location: ArtifactLocation, model_kwargs: dict[str, Any], where: str) -> Any:
        """``from_pretrained``'s work once the location is known: the keywords checked (``where`` names the call in
        the errors), the location checked, the artifact loaded and cast to ``dtype=``."""
        dtype = cls._check_load_keywords(model_kwargs, where)
        cls._check_location(location)
        artifact = cls._load_checked(location, model_kwargs)
        if dtype is not None and isinstance(artifact, nn.Module):
            cast_keeping_float32(artifact, dtype, cls.float32_keys)
        return artifact

    @classmethod
    def _check_load_keywords(cls, model_kwargs: dict[str, Any], where: str) -> torch.dtype | None:
        """Refuse a keyword ``from_pretrained`` would not honour (``where`` names the call), and take out
        ``dtype=`` for the default load (:func:`~.keywords.pop_load_dtype`): transformers' loading keywords are refused
        naming what does the same here (:func:`~.keywords.refuse_transformers_keywords`)."""
        init_keys = cls._init_keys()
        refuse_transformers_keywords(model_kwargs, where, cls.load_keywords, init_keys or set())
        dtype = pop_load_dtype(model_kwargs, where, cls.load_keywords, init_keys)
        if cls.load_keywords is not None:
            unknown = sorted(set(model_kwargs) - cls.load_keywords)
            accepted = f"it takes {sorted(cls.load_keywords)} and the checkpoint sets the rest"
        else:
            unknown = [] if init_keys is None else sorted(set(model_kwargs) - init_keys)
            accepted = (f"besides the Hub options ({', '.join(HUB_OPTIONS)}) it takes {cls.__name__}'s __init__ "
                        f"arguments {sorted(init_keys or ())} (over config.json's values) and dtype=")
        if unknown:  # even when equal to the saved value: the checkpoint sets it, the keyword would read as obeyed
            renamed = "torch_dtype" in unknown and "dtype" in (cls.load_keywords or ())
            raise TypeError(
                f"{where} does not take {unknown}: {accepted} (a typo of one of them lands here too)."
                + (f" For torch_dtype=, {TORCH_DTYPE_FIX}." if renamed else "")
                + "".join(f" {cls.refused_keyword_hints[key]}" for key in unknown if key in cls.refused_keyword_hints)
            )
        return dtype

    @classmethod
    def _load_checked(cls: type[ArtifactT], location: ArtifactLocation, model_kwargs: dict[str, Any]) -> ArtifactT:
        """Load the artifact ``_check_location`` accepted: through ``ModelHubMixin.from_pretrained``, which reads
        ``config.json`` into ``model_kwargs``, unless the location has none, as a format of its own may not (a DVI
        adapter saved before ``config.json`` holds ``dvi_config.json``). For a Hub repo without one cached,
        huggingface_hub asks the Hub again and, offline (``HF_HUB_OFFLINE=1``, ``local_files_only``) or without a
        connection, raises its bare ``LocalEntryNotFoundError``: such a location goes to ``_from_pretrained``
        directly, as huggingface_hub's own does online when the repo has no ``config.json``. ``_from_pretrained`` is
        given ``location`` itself (``_location``)."""
        config_file = location.cached_path(CONFIG_NAME)
        if config_file is None:
            return cls._from_pretrained(model_id=location.name, **location.hub_options(), _location=location,
                                        **model_kwargs)
        # ModelHubMixin reads config.json from the folder that holds it (the folder or subfolder, or the cache's
        # snapshot of it, where _check_location put it): a home folder expanded, a subfolder honoured
        return super().from_pretrained(str(config_file.parent), **location.hub_options(), _location=location,
                                       **model_kwargs)

    @classmethod
    def _check_location(cls, location: ArtifactLocation) -> None:
        """Refuse, before anything is built, a location that does not hold this class's artifact.

        The default reads ``config.json``'s ``artifact_type`` and refuses a key no ``__init__`` argument takes (a
        typo, or a field of a newer version, would otherwise be dropped); a format of its own (EAGLE-3's,
        DVI's) overrides it with the checks of that format."""
        check_artifact_type(location, cls)
        check_config_keys(cls.__name__, location, read_config(location), cls._config_keys())

    @classmethod
    def _config_keys(cls) -> set[str] | None:
        """The keys ``config.json`` may hold besides ``artifact_type``, or None for any: the ``__init__`` arguments
        (:meth:`_init_keys`). A format of its own whose ``config.json`` holds other settings (DVI's split point and
        target shape) names them."""
        return cls._init_keys()

    @classmethod
    def _from_pretrained(
        cls: type[ArtifactT],
        *,
        model_id: str,
        revision: str | None,
        cache_dir: str | Path | None,
        force_download: bool,
        local_files_only: bool,
        token: str | bool | None,
        _location: ArtifactLocation | None = None,
        **model_kwargs: Any,
    ) -> ArtifactT:
        location = _location or ArtifactLocation(
            model_id,
            revision=revision,
            cache_dir=cache_dir,
            force_download=force_download,
            token=token,
            local_files_only=local_files_only,
        )
        return cls._load(location, **model_kwargs)

    @classmethod
    def _load(cls: type[ArtifactT], location: ArtifactLocation, **init_kwargs: Any) -> ArtifactT:
        """Build the artifact at ``location``: ``init_kwargs`` are ``config.json``'s values for
        ``__init__`` with the caller's keyword arguments over them. The default constructs the class
        and, for a module, loads ``model.safetensors`` strictly; formats of their own override it."""
        init_kwargs.pop(ARTIFACT_TYPE_KEY, None)  # present when __init__ takes **kwargs
        check_required_keys(cls.__name__, location, init_kwargs, cls._hub_mixin_init_parameters)
        artifact = cls(**init_kwargs)
        if isinstance(artifact, nn.Module):
            dtype = saved_floating_dtype(location, ignore=cls.float32_keys)
            if dtype is not None:
                # as transformers' dtype="auto": a bfloat16 policy comes back in bfloat16, its float32_keys float32
                cast_keeping_float32(artifact, dtype, cls.float32_keys)
            load_weights(artifact, location)
            artifact.eval()
        return artifact
