"""The online learner's state beside a DVI adapter and in a training checkpoint: the KL->RL schedule position, reward
baseline and online config (``dvi_online_state.json``), and the rollout buffer and generator
(``dvi_rollout_state.safetensors``), with the warnings when a continued schedule restarts or changes."""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, fields
from typing import Any

import safetensors.torch

from ...hub.config import read_json_object
from ...hub.errors import MissingArtifactFileError
from ...hub.location import ArtifactLocation, local_path
from ...hub.weights import read_safetensors
from .config import SCHEDULE_FIELDS, DVIOnlineLearnerConfig

#: the online learner's KL->RL schedule position, reward baseline and config, saved beside an online drafter's adapter
ONLINE_STATE_NAME = "dvi_online_state.json"
#: the online learner's rollout buffer and generator, saved in a training checkpoint (not beside a saved adapter)
ROLLOUT_STATE_NAME = "dvi_rollout_state.safetensors"
#: the learner's files beside an adapter: a save removes earlier ones (it writes the online state when online)
LEARNER_STATE_NAMES = (ONLINE_STATE_NAME, ROLLOUT_STATE_NAME)

logger = logging.getLogger(__name__)


class DVILearnerStateMixin:
    """The online learner's state of a DVI drafter (its ``updater`` and ``_lock``): continued from beside an adapter,
    and saved and restored with a training checkpoint's rollout buffer."""

    def load_online_state(self, path_or_repo: str | os.PathLike, **location_kwargs: Any) -> bool:
        """Continue the online learner's KL->RL schedule position and reward baseline from the
        ``dvi_online_state.json`` saved beside an adapter (folder or Hub repo), as ``from_pretrained(..., online=True)``
        does. Returns False, changing nothing, when there is none (the schedule stays where it is)."""
        return self._load_online_state(ArtifactLocation(str(path_or_repo), **location_kwargs))

    def _load_online_state(self, location: ArtifactLocation) -> bool:
        self._check_online()
        try:
            state = read_json_object(location.resolve(ONLINE_STATE_NAME))
        except MissingArtifactFileError:
            return False
        _warn_on_another_schedule(location, state, self.updater.config)
        with self._lock:
            self.updater.load_state_dict(state)
        return True

    def save_rollout_state(self, directory: str | os.PathLike) -> None:
        """Write the online learner's rollout buffer, fresh-record mark and generator (``ROLLOUT_STATE_NAME``,
        safetensors) into a training checkpoint: with the adapter, ``dvi_online_state.json`` and the optimizer's
        state, a resumed run makes the updates an uninterrupted one makes
        (``~`` is the home folder)."""
        self._check_online()
        with self._lock:
            state = {name: tensor.detach().cpu().contiguous() for name, tensor in self.updater.rollout_state().items()}
        safetensors.torch.save_file(state, local_path(directory) / ROLLOUT_STATE_NAME)

    def load_rollout_state(self, directory: str | os.PathLike) -> bool:
        """Restore what :meth:`save_rollout_state` wrote; False, changing nothing, when the folder has none."""
        self._check_online()
        path = local_path(directory) / ROLLOUT_STATE_NAME
        if not path.is_file():
            return False
        state = read_safetensors(path)
        with self._lock:
            self.updater.load_rollout_state(state)
        return True

    def _check_online(self) -> None:
        if self.updater is None:
            raise RuntimeError(
                "This DVIDrafter is not online: create it with online=True or call enable_online() first."
            )


def saved_online_config(location: ArtifactLocation) -> DVIOnlineLearnerConfig | None:
    """The online config saved in ``dvi_online_state.json`` beside an adapter; None (the defaults then) when the
    adapter has no online state, or one saved before the config was (a log message says so)."""
    try:
        state = read_json_object(location.resolve(ONLINE_STATE_NAME))
    except MissingArtifactFileError:
        return None
    saved = state.get("online_config")
    if not isinstance(saved, dict):
        logger.warning(
            f"{location}'s {ONLINE_STATE_NAME} was saved before it held the online config: the learner continues its "
            "schedule position under DVIOnlineLearnerConfig's defaults. Pass online_config= with the schedule it was "
            "trained with (the training_config.json of its run names it)."
        )
        return None
    known = {f.name for f in fields(DVIOnlineLearnerConfig)}
    unknown = sorted(saved.keys() - known)
    if unknown:
        logger.warning(f"{location}'s online config has settings this version does not know, not used: {unknown}.")
    return DVIOnlineLearnerConfig(**{name: value for name, value in saved.items() if name in known})


def warn_schedule_restarts(source: object, config: DVIOnlineLearnerConfig, keep: str) -> None:
    """Warn that a learner continuing the adapter of ``source`` (a folder or repo) starts its KL->RL schedule again:
    the adapter has no ``dvi_online_state.json`` (saved offline). ``keep`` says how the caller gets the schedule's
    final weights (``from_pretrained``'s ``online_config``, the trainer's flags)."""
    logger.warning(
        f"{source} has no {ONLINE_STATE_NAME}: the KL->RL schedule starts again from KL-only updates (update 0 of "
        f"{config.warmup_updates} KL-only updates, then a {config.ramp_updates}-update ramp to the RL weights) with a "
        "new reward baseline, not where the adapter's training left it: the adapter was saved offline (an online "
        f"drafter's save_pretrained and DVITrainer write the file, which continues the schedule). To go on, {keep}."
    )


def _warn_on_another_schedule(
    location: ArtifactLocation, state: dict[str, Any], config: DVIOnlineLearnerConfig
) -> None:
    """Warn when the learner continues a saved schedule position under other schedule settings than the saved ones:
    update ``num_updates`` of another schedule gives other loss weights."""
    saved = state.get("online_config")
    if not isinstance(saved, dict):
        return
    now = asdict(config)
    changed = [f"{name}: {saved[name]} -> {now[name]}" for name in SCHEDULE_FIELDS
               if name in saved and saved[name] != now[name]]
    if changed:
        logger.warning(
            f"Continuing {location}'s KL->RL schedule at update {state.get('num_updates')} under other schedule "
            f"settings than it was saved with ({'; '.join(changed)}): the loss weights follow the new ones. Leave "
            "online_config unset to keep the saved schedule (training with --init_from: pass the saved values of "
            "those flags, or --init_schedule restart to start the schedule afresh)."
        )
