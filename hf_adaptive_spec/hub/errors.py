"""Errors raised while saving or loading Hub artifacts; each names the file and the repo."""


class ArtifactError(Exception):
    """Base class: an artifact could not be loaded as asked."""


class MissingArtifactFileError(ArtifactError, FileNotFoundError):
    """A file the artifact needs is not in the repo, folder or local cache."""


class PickleWeightsError(ArtifactError, ValueError):
    """The repo only has pickle weights (``pytorch_model.bin``, ``*.pt`` …); only safetensors are loaded."""


class WeightsMismatchError(ArtifactError, ValueError):
    """The weights file does not match the module: missing, unexpected or mis-shaped tensors."""


class ArtifactTypeError(ArtifactError, TypeError):
    """``config.json`` declares another artifact type than the class asked for, or none, or an unknown one."""


class UnknownConfigKeyError(ArtifactError, ValueError):
    """``config.json`` holds a key the artifact's ``__init__`` does not take (a typo, or a newer version's field)."""


class MissingConfigKeyError(ArtifactError, ValueError):
    """``config.json`` lacks an argument the artifact's ``__init__`` needs (one without a default)."""


class HubUnreachableError(ArtifactError, ConnectionError):
    """An upload could not reach the Hub (no connection, a name that does not resolve, a timeout); says where the
    artifact is kept meanwhile."""
