"""Uploads that cannot reach the Hub fail with :class:`~hf_adaptive_spec.hub.errors.HubUnreachableError`, which names
the Hub, the cause and where the artifact is kept, instead of the HTTP client's bare transport error ("Name or
service not known")."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager

from huggingface_hub import constants

from .errors import HubUnreachableError

#: the transport errors of the HTTP clients huggingface_hub may use (module, class), those installed
_TRANSPORT_ERRORS = (("httpx2", "TransportError"), ("httpx", "TransportError"), ("requests", "ConnectionError"))


def transport_errors() -> tuple[type[BaseException], ...]:
    """The installed HTTP clients' errors for a request that reached no server."""
    found = []
    for module_name, class_name in _TRANSPORT_ERRORS:
        try:
            found.append(getattr(importlib.import_module(module_name), class_name))
        except (ImportError, AttributeError):
            continue
    return tuple(found)


@contextmanager
def reaching_the_hub(action: str, kept: str) -> Iterator[None]:
    """Run ``action`` (e.g. ``"push_to_hub('org/name')"``); a request that reaches no server is raised as
    :class:`HubUnreachableError`, saying ``kept`` (where the artifact is meanwhile, and how to upload it later)."""
    try:
        yield
    except transport_errors() as error:
        raise HubUnreachableError(
            f"{action} could not reach the Hub at {constants.ENDPOINT} ({type(error).__name__}: {error}): check the "
            f"connection (and HF_ENDPOINT if set). {kept}"
        ) from error
