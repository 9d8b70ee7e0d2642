"""A replay recording, as data: :class:`ReplayTree` (one position's maximal tree, what the target kept of it and the
hidden states a policy reads) and :class:`ReplayRecording` (the trees of several prompts, saved, loaded, concatenated),
with the checks on what may be pooled. ``recording.py`` makes them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..core.tree import DraftTree
from ..policies.base import CycleState, TreeConfig

RECORDING_FORMAT = "hf_adaptive_spec.replay_recording.v1"


@dataclass
class ReplayTree:
    """The cycle that starts at one position of a recorded greedy generation.

    Args:
        context_length: committed tokens at cycle start (the root is the last of them).
        tokens / parents / depths / scores: the maximal draft tree, as a :class:`DraftTree`.
        target_next: the target's greedy next token after each node; ``-1`` for nodes no
            allowed choice can send to verification (never needed).
        features: the target hidden states the recording kept (``hidden_states`` numbering) at
            the last processed token, ``[hidden]`` each, as a policy sees them in ``CycleState``.
    """

    context_length: int
    tokens: list[int]
    parents: list[int]
    depths: list[int]
    scores: list[float]
    target_next: list[int]
    features: dict[int, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Refuse a tree whose per-node lists differ in length (a damaged row): a short ``target_next`` would
        replay its missing nodes as never verified, or as another node's token."""
        lengths = {name: len(getattr(self, name)) for name in ("parents", "depths", "scores", "target_next")}
        uneven = {name: length for name, length in lengths.items() if length != len(self.tokens)}
        if uneven:
            raise ValueError(f"a recorded tree holds {len(self.tokens)} tokens but {uneven} of the other per-node "
                             "lists (each node has one of each)")

    def draft_tree(self) -> DraftTree:
        return DraftTree(
            tokens=list(self.tokens), parents=list(self.parents), depths=list(self.depths), scores=list(self.scores)
        )

    def cycle_state(self, lookup_length: int = 0, feature_layers: Iterable[int] | None = None) -> CycleState:
        """What a policy reading ``feature_layers`` (None: every layer the recording kept) saw at this cycle's start,
        as ``generate`` shows it: those hidden states and no other; ``lookup_length``: the prompt-lookup chain the
        replay grafts."""
        layers = tuple(self.features if feature_layers is None else feature_layers)
        try:
            features = {layer: self.features[layer] for layer in layers}
        except KeyError:  # a caller of one cycle, which no replay's start checked: the same refusal
            check_feature_layers(layers, tuple(self.features))
            raise
        return CycleState(self.context_length, features, lookup_length=lookup_length)


def check_feature_layers(wanted: Iterable[int], kept: Iterable[int]) -> None:
    """Refuse a policy reading target hidden states ``wanted`` (its ``feature_layers``) that a recording keeping
    ``kept`` does not hold: replayed, it would fail inside its own code, or read another layer than live."""
    wanted, kept = tuple(wanted), tuple(kept)
    missing = sorted(set(wanted) - set(kept))
    if missing:
        raise ValueError(
            f"The policy reads the target's hidden states {missing} (its feature_layers {list(wanted)}), but the "
            f"recording keeps {list(kept)}: record it again keeping them (`hf-adaptive-spec record --feature-layers "
            f"{','.join(str(layer) for layer in sorted(set(wanted) | set(kept)))}`), or replay a policy that reads "
            "the recorded layers."
        )


@dataclass
class ReplayRecording:
    """Recorded greedy generations of several prompts with one drafter.

    Args:
        tree_config: the maximal tree: ``depth`` and ``top_k`` of every recorded tree, and
            ``total_tokens``, the largest verification (root included) the recording covers.
        vocab_size: the target's vocabulary size.
        max_new_tokens: the generation length each prompt was recorded for.
        prompts: per prompt, one :class:`ReplayTree` per cycle start (position), in order.
        feature_layers: the hidden states kept in each tree's ``features``.
        eos_token_ids: tokens that ended a generation.
        prompt_ids: per prompt, its token ids (what a prompt-lookup branch searches); empty in
            recordings made before they were kept.
        target_weights / drafter_weights: digests of the target's and the drafter's weights
            (:func:`~hf_adaptive_spec.core.drafter_identity.weights_digest`), by which recordings of other
            models are refused where they would be pooled; None where unknown (recordings made before they were
            kept, a drafter that has no digest), and then not compared.
    """

    tree_config: TreeConfig
    vocab_size: int
    max_new_tokens: int
    prompts: list[list[ReplayTree]]
    feature_layers: tuple[int, ...] = ()
    eos_token_ids: tuple[int, ...] = ()
    prompt_ids: list[list[int]] = field(default_factory=list)
    target_weights: str | None = None
    drafter_weights: str | None = None

    @property
    def num_positions(self) -> int:
        return sum(len(trees) for trees in self.prompts)

    @property
    def keeps_prompt_ids(self) -> bool:
        """Whether every prompt's ids are kept (a recording of no prompts keeps all of its none)."""
        return len(self.prompt_ids) == len(self.prompts)

    @classmethod
    def concatenate(cls, recordings: list[ReplayRecording]) -> ReplayRecording:
        """The prompts of every recording, in order (e.g. shards of one run); all settings must agree."""
        if not recordings:
            raise ValueError("No recordings to concatenate.")

        def settings(recording: ReplayRecording) -> tuple:
            r = recording
            return r.tree_config, r.vocab_size, r.max_new_tokens, r.feature_layers, r.eos_token_ids

        for recording in recordings[1:]:
            if settings(recording) != settings(recordings[0]):
                raise ValueError(
                    f"Recordings made with different settings cannot be concatenated: {settings(recordings[0])} vs "
                    f"{settings(recording)} (tree config, vocab, max_new_tokens, feature layers, eos). Record every "
                    "shard with the same options."
                )
        target_weights, drafter_weights = check_same_models(recordings, "concatenated")
        with_ids = all(recording.keeps_prompt_ids for recording in recordings)
        return replace(
            recordings[0],
            prompts=[trees for recording in recordings for trees in recording.prompts],
            prompt_ids=[ids for recording in recordings for ids in recording.prompt_ids] if with_ids else [],
            target_weights=target_weights,
            drafter_weights=drafter_weights,
        )

    def sequence(self, prompt: int) -> list[int]:
        """Prompt ``prompt``'s ids followed by its whole greedy generation."""
        if not self.keeps_prompt_ids:
            raise ValueError(
                "This recording does not keep its prompts' ids (recorded before they were kept): record it again "
                "with `hf-adaptive-spec record` to replay a prompt-lookup branch."
            )
        trees = self.prompts[prompt]
        last = [trees[-1].target_next[0]] if trees else []
        return self.prompt_ids[prompt] + [tree.tokens[0] for tree in trees] + last

    def save(self, directory: str | Path) -> None:
        """``recording.json`` (trees) and ``features.safetensors`` (hidden states, if any)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tensors: dict[str, torch.Tensor] = {}
        prompts = []
        for p, trees in enumerate(self.prompts):
            rows = []
            for t, tree in enumerate(trees):
                rows.append(
                    [tree.context_length, tree.tokens, tree.parents, tree.depths, tree.scores, tree.target_next]
                )
                for layer, value in tree.features.items():
                    tensors[f"{p}.{t}.{layer}"] = value.detach().float().contiguous()
            prompts.append(rows)
        c = self.tree_config
        meta = {
            "format": RECORDING_FORMAT,
            "tree_config": {"depth": c.depth, "top_k": c.top_k, "total_tokens": c.total_tokens},
            "vocab_size": self.vocab_size,
            "max_new_tokens": self.max_new_tokens,
            "feature_layers": list(self.feature_layers),
            "eos_token_ids": list(self.eos_token_ids),
            "prompt_ids": self.prompt_ids,
            **{key: value for key, value in self.model_digests().items() if value is not None},
            "prompts": prompts,
        }
        (directory / "recording.json").write_text(json.dumps(meta), encoding="utf-8")
        if tensors:
            save_file(tensors, str(directory / "features.safetensors"))

    @classmethod
    def load(cls, directory: str | Path) -> ReplayRecording:
        """The recording saved in ``directory``; one damaged or saved in part (a file cut short or missing, a row
        without its fields) is refused naming the folder, never loaded as another recording."""
        directory = Path(directory)
        try:
            meta = json.loads((directory / "recording.json").read_text(encoding="utf-8"))
        except ValueError as error:  # JSONDecodeError, UnicodeDecodeError: the file was cut short or overwritten
            raise damaged_recording(directory, f"recording.json does not parse: {error}") from error
        if not isinstance(meta, dict) or meta.get("format") != RECORDING_FORMAT:
            raise ValueError(
                f"{directory} is not a replay recording ({RECORDING_FORMAT}); record one with record_replay()."
            )
        try:
            return cls.from_saved(directory, meta)
        except (KeyError, TypeError, ValueError, SafetensorError) as error:
            what = f"no entry {error}" if isinstance(error, KeyError) else str(error)
            raise damaged_recording(directory, what) from error

    @classmethod
    def from_saved(cls, directory: Path, meta: dict) -> ReplayRecording:
        """The recording of ``meta`` (``recording.json``'s contents) and ``directory``'s feature file."""
        layers = tuple(meta["feature_layers"])
        feature_file = directory / "features.safetensors"
        if layers and any(meta["prompts"]) and not feature_file.exists():  # saved with its first tree's features
            raise ValueError(f"features.safetensors is missing, and the recording keeps hidden states {list(layers)}")
        tensors = load_file(str(feature_file)) if feature_file.exists() else {}
        prompts = [
            [
                ReplayTree(*row, features={layer: tensors[f"{p}.{t}.{layer}"] for layer in layers})
                for t, row in enumerate(rows)
            ]
            for p, rows in enumerate(meta["prompts"])
        ]
        prompt_ids = meta.get("prompt_ids", [])
        if prompt_ids and len(prompt_ids) != len(prompts):
            raise ValueError(f"it keeps the ids of {len(prompt_ids)} prompts and the trees of {len(prompts)}")
        return cls(
            tree_config=TreeConfig(**meta["tree_config"]),
            vocab_size=meta["vocab_size"],
            max_new_tokens=meta["max_new_tokens"],
            prompts=prompts,
            feature_layers=layers,
            eos_token_ids=tuple(meta["eos_token_ids"]),
            prompt_ids=prompt_ids,
            target_weights=meta.get("target_weights"),
            drafter_weights=meta.get("drafter_weights"),
        )

    def model_digests(self) -> dict[str, str | None]:
        """``target_weights`` and ``drafter_weights`` by name, as ``recording.json`` keeps them."""
        return {"target_weights": self.target_weights, "drafter_weights": self.drafter_weights}


def check_same_models(recordings: Iterable[ReplayRecording], pooled: str) -> tuple[str | None, str | None]:
    """Refuse recordings of other targets or drafters where they are ``pooled`` (concatenated, replayed as one): a
    policy or a ranking over them would mix two drafters' acceptance, or two targets' generations. Returns the
    target and drafter digests they share (None where no recording keeps one); an unknown digest is not compared."""
    recordings, shared = list(recordings), []
    for role in ("target", "drafter"):
        digests = {getattr(recording, f"{role}_weights") for recording in recordings} - {None}
        if len(digests) > 1:
            raise ValueError(
                f"Recordings made with other {role} weights cannot be {pooled}: their {role}s' digests are "
                f"{sorted(digests)}. Record every recording with the same target and drafter (`hf-adaptive-spec "
                "record` keeps their digests), or use them apart."
            )
        shared.append(next(iter(digests), None))
    return shared[0], shared[1]


def check_timed_drafter(timed: str | None, recorded: str | None, what: str, recording: str) -> None:
    """Refuse a hardware profile (``what``) that timed drafter weights of digest ``timed`` for ``recording``, drafted by
    weights of digest ``recorded`` (either None: unknown, not compared): a replay would price the recorded drafter's
    cycles with another drafter's step costs, and a policy or ranking would learn from them."""
    if timed is not None and recorded is not None and recorded != timed:
        raise ValueError(
            f"{what} timed drafter weights with digest {timed}, and {recording} was drafted by weights with digest "
            f"{recorded}: another drafter, or the same one retrained or replaced between them, so its costs are not "
            "those of the drafter whose acceptance was recorded. Record again with this drafter (`hf-adaptive-spec "
            "record --output NEW ...`), or profile the drafter the recording was made with."
        )


def damaged_recording(directory: Path, what: str) -> ValueError:
    """The refusal of the recording in ``directory``, damaged or saved in part as ``what`` says."""
    return ValueError(
        f"The recording in {directory} is damaged or was saved in part ({what}): delete that folder and record it "
        "again (`hf-adaptive-spec record` with the same --output and options records the shards missing)."
    )
