"""``artifact_type`` → class registry, and :class:`AutoArtifact`, which loads by ``config.json``'s type."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from .config import read_artifact_type
from .errors import ArtifactTypeError
from .location import ArtifactLocation

_CLASSES: dict[str, type] = {}


def qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def register_artifact(artifact_type: str, artifact_class: type) -> None:
    """Make ``artifact_type`` (as written in ``config.json``) load as ``artifact_class``.

    Re-registering a class of the same qualified name (a re-run notebook cell) replaces it;
    registering a different class under a taken type raises ``ValueError``.
    """
    existing = _CLASSES.get(artifact_type)
    if existing is not None and qualified_name(existing) != qualified_name(artifact_class):
        raise ValueError(
            f"artifact_type '{artifact_type}' is already registered to {qualified_name(existing)}; "
            f"pick another one for {qualified_name(artifact_class)}."
        )
    _CLASSES[artifact_type] = artifact_class


def registered_class(artifact_type: str) -> type | None:
    """The class registered for ``artifact_type``, or None."""
    return _CLASSES.get(artifact_type)


def load_hint(artifact_class: type) -> str:
    """How ``artifact_class`` loads (its ``load_hint``, e.g. a drafter's ``target=model``)."""
    return getattr(artifact_class, "load_hint", f"{artifact_class.__name__}.from_pretrained(path)")


def check_artifact_type(location: ArtifactLocation, expected_class: type) -> None:
    """Raise :class:`ArtifactTypeError` naming both types unless ``location`` holds ``expected_class.artifact_type``."""
    expected_type = expected_class.artifact_type
    found = read_artifact_type(location)
    if found == expected_type:
        return
    holder = registered_class(found)
    hint = f" Load it with {load_hint(holder)}." if holder else ""
    raise ArtifactTypeError(
        f"{location} holds a '{found}' artifact, not a '{expected_type}' one, so {expected_class.__name__} "
        f"cannot load it.{hint}"
    )


class AutoArtifact:
    """Loads any registered artifact, picking its class from ``config.json``'s ``artifact_type``.

    Subclass and set ``base_class`` to load one family only, e.g. ``AutoDraftPolicy`` with
    ``base_class = DraftPolicy``.

    Example:
        >>> policy = AutoArtifact.from_pretrained("org/ltd-policy")  # LTDPolicy, if registered
    """

    base_class: ClassVar[type] = object
    register = staticmethod(register_artifact)

    @classmethod
    def from_pretrained(
        cls,
        pretrained_model_name_or_path: str | Path,
        *,
        revision: str | None = None,
        cache_dir: str | Path | None = None,
        force_download: bool = False,
        token: str | bool | None = None,
        local_files_only: bool = False,
        subfolder: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """Load the artifact at a folder or Hub repo id (``subfolder``: the folder inside it that holds the artifact);
        ``kwargs`` go to the class's ``from_pretrained``."""
        hub_kwargs = dict(
            revision=revision,
            cache_dir=cache_dir,
            force_download=force_download,
            token=token,
            local_files_only=local_files_only,
        )
        if subfolder is not None:  # passed on only when given: a class registered without the mixin may not take it
            hub_kwargs["subfolder"] = subfolder
        location = ArtifactLocation(str(pretrained_model_name_or_path), **hub_kwargs)
        artifact_type = read_artifact_type(location)
        artifact_class = registered_class(artifact_type)
        if artifact_class is None:
            raise ArtifactTypeError(
                f"{location} holds a '{artifact_type}' artifact, but no class is registered for it "
                f"(registered: {', '.join(sorted(_CLASSES)) or 'none'}). Import the module defining it, or "
                "upgrade hf-adaptive-spec."
            )
        if not issubclass(artifact_class, cls.base_class):
            raise ArtifactTypeError(
                f"{location} holds a '{artifact_type}' artifact ({artifact_class.__name__}), which is not a "
                f"{cls.base_class.__name__}, so {cls.__name__} cannot load it. "
                f"Load it with {load_hint(artifact_class)}."
            )
        return artifact_class.from_pretrained(pretrained_model_name_or_path, **hub_kwargs, **kwargs)
