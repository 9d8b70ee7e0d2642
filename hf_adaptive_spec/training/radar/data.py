"""RADAR's offline dataset: per recorded cycle, the beam scores of every draft step and the
accepted-length distribution for every number of draft calls (and for a skip), built by exact replay."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch.utils.data import Dataset

from ...core.files import write_text_atomically
from ...environments import ReplayEnvironment, ReplayRecording
from ...policies.base import CycleState, DraftPolicy, DraftStepInfo, TreeConfig, VerifySizeInfo
from ...policies.radar.policy import beam_scores
from ...policies.static import StaticTreePolicy
from ...profiling.hardware import HardwareProfile

#: v3: accepted lengths end at the generation's end-of-sequence token (v2 counted past it); older datasets are rebuilt
DATASET_FORMAT = "hf_adaptive_spec.radar_dataset.v3"
_TENSORS = (
    "beam_scores", "accept_probs", "verified_tokens", "prompt_index", "position", "skip_accepted",
    "skip_verified_tokens"
)
_ITEM_TENSORS = tuple(name for name in _TENSORS if name not in ("prompt_index", "position"))  # what training reads


@dataclass(eq=False)
class RadarDataset(Dataset):
    """RADAR training records, one per recorded cycle start, ``N`` rows; tree depth ``D``, beam width ``K``.

    Args:
        tree_config: the policy's tree: ``depth`` = ``D`` (most draft calls), ``top_k`` = ``K``, ``total_tokens``.
        beam_scores: ``[N, D - 1, K]`` float, the beam scores the policy sees after draft calls
            ``1 .. D - 1`` (:func:`~hf_adaptive_spec.policies.radar.beam_scores`; no decision follows call ``D``).
        accept_probs: ``[N, D, A + 1]`` float, ``accept_probs[n, k - 1, a]`` = P(``a`` drafted tokens
            accepted, bonus token excluded | ``k`` draft calls), ``A`` = :attr:`max_accepted` (``D``, or
            the lookup chain's length when longer), none counted past the generation's end (as ``generate``
            stops at its end-of-sequence token). Greedy replay makes each row one-hot; the format
            holds any distribution (RADAR's sampled data, temperature > 0).
        verified_tokens: ``[N, D]`` long, tokens verified (root included) after ``k`` draft calls.
        prompt_index / position: ``[N]`` long, where the cycle starts in the recording.
        skip_accepted / skip_verified_tokens: ``[N]`` long, tokens accepted (bonus excluded) and
            verified by a cycle that skips after its first draft call (``RadarPolicy(allow_skip=True)``):
            the root alone, so 0 and 1 (the defaults), unless the prompt-lookup branch adds its chain.
        lookup_tokens / lookup_ngram_size: the prompt-lookup branch every replayed cycle carried
            (``generate``'s ``prompt_lookup_num_tokens`` / ``max_matching_ngram_size``; 0 tokens: none).
        lookup_first: the positions where that branch matched are left out: a lookup-first policy
            (``RadarPolicy(lookup_first=True)``) verifies the chain alone there and takes no decision.
    """

    tree_config: TreeConfig
    beam_scores: torch.Tensor
    accept_probs: torch.Tensor
    verified_tokens: torch.LongTensor
    prompt_index: torch.LongTensor
    position: torch.LongTensor
    skip_accepted: torch.LongTensor | None = None
    skip_verified_tokens: torch.LongTensor | None = None
    lookup_tokens: int = 0
    lookup_ngram_size: int = 2
    lookup_first: bool = False

    def __post_init__(self) -> None:
        _check_lookup_first(self.lookup_first, self.lookup_tokens)
        n, depth, k = len(self.prompt_index), self.tree_config.depth, self.tree_config.top_k
        if self.skip_accepted is None:
            self.skip_accepted = torch.zeros(n, dtype=torch.long)
        if self.skip_verified_tokens is None:
            self.skip_verified_tokens = torch.ones(n, dtype=torch.long)
        expected = {
            "beam_scores": (n, depth - 1, k), "accept_probs": (n, depth, self.max_accepted + 1),
            "verified_tokens": (n, depth),
            "prompt_index": (n,), "position": (n,), "skip_accepted": (n,), "skip_verified_tokens": (n,),
        }
        for name, shape in expected.items():
            if tuple(getattr(self, name).shape) != shape:
                raise ValueError(f"RadarDataset.{name} has shape {tuple(getattr(self, name).shape)}, expected {shape}.")

    @property
    def max_accepted(self) -> int:
        """Most tokens a cycle can accept: the tree's depth, or the lookup chain's length when longer."""
        return max(self.tree_config.depth, self.lookup_tokens)

    def __len__(self) -> int:
        return len(self.prompt_index)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {name: getattr(self, name)[index] for name in _ITEM_TENSORS}

    def select(self, indices: torch.LongTensor) -> RadarDataset:
        tensors = {name: getattr(self, name)[indices] for name in _TENSORS}
        return RadarDataset(self.tree_config, **tensors, **self.lookup_kwargs(), lookup_first=self.lookup_first)

    def lookup_kwargs(self) -> dict[str, int]:
        """``lookup_tokens`` and ``lookup_ngram_size``, as :class:`ReplayEnvironment` takes them."""
        return {"lookup_tokens": self.lookup_tokens, "lookup_ngram_size": self.lookup_ngram_size}

    def split_by_prompt(self, eval_fraction: float, seed: int = 0) -> tuple[RadarDataset, RadarDataset]:
        """``(train, held_out)``: about ``eval_fraction`` of the prompts held out, whole prompts only
        (consecutive positions of one generation are nearly the same record)."""
        prompts = self.prompt_index.unique()
        num_held_out = round(eval_fraction * len(prompts))
        if eval_fraction > 0 and not 0 < num_held_out < len(prompts):
            raise ValueError(
                f"Cannot hold out {eval_fraction:.0%} of {len(prompts)} recorded prompts as whole prompts: record more "
                "prompts or change eval_fraction."
            )
        order = torch.randperm(len(prompts), generator=torch.Generator().manual_seed(seed))
        held_out = torch.isin(self.prompt_index, prompts[order[:num_held_out]])
        return self.select(torch.nonzero(~held_out).flatten()), self.select(torch.nonzero(held_out).flatten())

    def save(self, directory: str | Path, built_from: str | None = None) -> None:
        """``radar_dataset.safetensors`` (the tensors) and ``radar_dataset.json`` (tree and lookup branch, and the
        recording it was ``built_from`` when given); no pickle."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        # the JSON, written last and whole, marks a whole dataset: a crash never leaves an older one's beside these
        (directory / "radar_dataset.json").unlink(missing_ok=True)
        tensors = {name: getattr(self, name).contiguous() for name in _TENSORS}
        save_file(tensors, str(directory / "radar_dataset.safetensors"))
        c = self.tree_config
        tree = {"depth": c.depth, "top_k": c.top_k, "total_tokens": c.total_tokens}
        meta = {"format": DATASET_FORMAT, "tree_config": tree, **self.lookup_kwargs()}
        meta["lookup_first"] = self.lookup_first
        if built_from is not None:
            meta["built_from"] = str(built_from)
        write_text_atomically(directory / "radar_dataset.json", json.dumps(meta, indent=2) + "\n")

    @staticmethod
    def built_from(directory: str | Path) -> str | None:
        """The recording the dataset in ``directory`` was built from (None when it was not saved with one)."""
        return json.loads((Path(directory) / "radar_dataset.json").read_text(encoding="utf-8")).get("built_from")

    @classmethod
    def load(cls, directory: str | Path) -> RadarDataset:
        directory = Path(directory)
        meta_path = directory / "radar_dataset.json"
        meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
        if meta.get("format") != DATASET_FORMAT:
            raise ValueError(
                f"{directory} holds no RADAR dataset of format {DATASET_FORMAT} (found {meta.get('format')}): delete "
                "the folder and run the RADAR script again with recording_path set (it builds the dataset when the "
                "folder holds none), or call build_radar_dataset()."
            )
        tensors = load_file(str(directory / "radar_dataset.safetensors"))
        lookup = {name: meta[name] for name in ("lookup_tokens", "lookup_ngram_size")}
        lookup["lookup_first"] = meta.get("lookup_first", False)  # saved before 2026-12-03: every position kept
        return cls(TreeConfig(**meta["tree_config"]), **{name: tensors[name] for name in _TENSORS}, **lookup)


def _check_lookup_first(lookup_first: bool, lookup_tokens: int) -> None:
    if lookup_first and not lookup_tokens:
        raise ValueError(
            "A lookup_first RADAR dataset leaves out the positions where the prompt-lookup branch matched, so it "
            "needs the branch: pass lookup_tokens=N (script: --lookup_tokens N; or a ReplayEnvironment built with it), "
            "or drop lookup_first."
        )


class _BeamScoreRecorder(DraftPolicy):
    """Drafts the full tree and keeps the beam scores a RADAR policy would see at each decision."""

    def __init__(self, config: TreeConfig):
        self.config = config
        self.rows: list[torch.Tensor] = []

    def tree_config(self, state: CycleState) -> TreeConfig:
        return self.config

    def continue_drafting(self, step: DraftStepInfo) -> bool:
        self.rows.append(beam_scores(step.step_scores, self.config.top_k))
        return True


class _SkipAfterFirstCall(StaticTreePolicy):
    """RADAR's skip: one draft call, then no drafted candidate verified (a lookup chain still is)."""

    def continue_drafting(self, step: DraftStepInfo) -> bool:
        return False

    def num_tokens_to_verify(self, info: VerifySizeInfo) -> int:
        return 0


def _untimed(recording: ReplayRecording, lookup_tokens: int, lookup_ngram_size: int) -> ReplayEnvironment:
    """A replay environment whose times are placeholders (the dataset reads what the cycles accept, never their
    seconds): one second per forward of any size it verifies, drafting free."""
    largest = recording.tree_config.total_tokens + lookup_tokens
    profile = HardwareProfile(
        device="none", dtype="none", num_threads=1, context_length=0, verify_tokens=sorted({1, largest}),
        verify_seconds=[1.0] * len({1, largest}), draft_step_seconds=0.0,
    )
    return ReplayEnvironment(recording, profile, lookup_tokens, lookup_ngram_size)


def _radar_environment(
    source: ReplayEnvironment | ReplayRecording, lookup_tokens: int, lookup_ngram_size: int
) -> ReplayEnvironment:
    if not isinstance(source, ReplayEnvironment):
        return _untimed(source, lookup_tokens, lookup_ngram_size)
    if lookup_tokens:
        raise ValueError(
            "build_radar_dataset got a ReplayEnvironment and lookup_tokens: the environment brings its own branch. "
            "Build it with ReplayEnvironment(..., lookup_tokens=N), or pass the recording with lookup_tokens."
        )
    return source


def _radar_tree_config(environment: ReplayEnvironment, depth: int | None, total_tokens: int | None) -> TreeConfig:
    recorded = environment.recording.tree_config
    config = TreeConfig(
        depth=recorded.depth if depth is None else depth,
        top_k=recorded.top_k,
        total_tokens=recorded.total_tokens if total_tokens is None else total_tokens,
    )
    if config.depth < 2:
        raise ValueError(f"RADAR decides between draft calls, so it needs depth >= 2; got depth={config.depth}.")
    if config.reachable_depth < config.depth:  # the engine drafts no deeper than a tree of total_tokens nodes
        raise ValueError(
            f"RADAR's depth={config.depth} cannot be drafted with total_tokens={config.total_tokens}: a tree of "
            f"{config.total_tokens} nodes is at most {config.reachable_depth} deep. Lower depth or raise total_tokens."
        )
    environment.check_config(config)
    return config


def _add_position(rows: dict[str, list[torch.Tensor]], environment: ReplayEnvironment, config: TreeConfig,
                  prompt: int, position: int) -> None:
    """Replay one position with 1 .. depth draft calls and the skip; append its rows (none when
    the generation ends within ``depth`` tokens: generate drafts less there)."""
    recorder = _BeamScoreRecorder(config)
    deepest = environment.replay_cycle(prompt, position, recorder)
    if len(recorder.rows) < config.depth - 1:
        return
    shallower = [StaticTreePolicy(k, config.top_k, config.total_tokens) for k in range(1, config.depth)]
    cycles = [environment.replay_cycle(prompt, position, policy) for policy in shallower] + [deepest]
    skipping = _SkipAfterFirstCall(config.depth, config.top_k, config.total_tokens)
    skip = environment.replay_cycle(prompt, position, skipping)
    accepted = torch.tensor([cycle.committed_tokens - 1 for cycle in cycles])  # none past the generation's end
    max_accepted = max(config.depth, environment.lookup_tokens)
    rows["beam_scores"].append(torch.stack(recorder.rows))
    rows["accept_probs"].append(torch.nn.functional.one_hot(accepted, max_accepted + 1).float())
    rows["verified_tokens"].append(torch.tensor([cycle.verified_tokens for cycle in cycles]))
    rows["prompt_index"].append(torch.tensor(prompt))
    rows["position"].append(torch.tensor(position))
    rows["skip_accepted"].append(torch.tensor(skip.committed_tokens - 1))
    rows["skip_verified_tokens"].append(torch.tensor(skip.verified_tokens))


def build_radar_dataset(
    source: ReplayEnvironment | ReplayRecording,
    depth: int | None = None,
    total_tokens: int | None = None,
    prompts: list[int] | None = None,
    lookup_tokens: int = 0,
    lookup_ngram_size: int = 2,
    lookup_first: bool = False,
) -> RadarDataset:
    """RADAR's dataset from a replay recording (greedy decoding, so every distribution is one-hot).

    At every recorded position, replays the engine's tree building with a fixed number of draft
    calls ``k = 1 .. depth`` (``StaticTreePolicy(k, top_k, total_tokens)``) and records the exact
    accepted length and verified size of each; the depth-``depth`` replay also records the beam
    scores, and a skip replay (one draft call, nothing drafted verified) gives the skip's outcome.
    Positions so close to the end of a generation that ``generate`` could not draft
    ``depth`` levels are skipped.

    Args:
        source: a :class:`ReplayEnvironment` (with its prompt-lookup branch) or a :class:`ReplayRecording`
            (times are not used).
        depth: most draft calls ``D`` (default: the recording's depth); at least 2.
        total_tokens: verified tokens per cycle, root included (default: the recording's).
        prompts: recorded prompts to use (default: all).
        lookup_tokens / lookup_ngram_size: the prompt-lookup branch replayed on every cycle, for a
            recording ``source`` (an environment brings its own).
        lookup_first: leave out the positions where the branch matched, which a lookup-first policy does not
            decide (``RadarPolicy(lookup_first=True)``); needs the branch.
    """
    environment = _radar_environment(source, lookup_tokens, lookup_ngram_size)
    config = _radar_tree_config(environment, depth, total_tokens)
    _check_lookup_first(lookup_first, environment.lookup_tokens)  # before the replays, not after them
    rows: dict[str, list[torch.Tensor]] = {name: [] for name in _TENSORS}
    for p in range(len(environment.recording.prompts)) if prompts is None else prompts:
        for position in range(len(environment.recording.prompts[p])):
            if not (lookup_first and environment.lookup_chain(p, position)):
                _add_position(rows, environment, config, p, position)
    if not rows["position"]:
        raise ValueError(
            f"No recorded position leaves room for {config.depth} draft levels: record longer generations."
        )
    lookup = {"lookup_tokens": environment.lookup_tokens, "lookup_ngram_size": environment.lookup_ngram_size}
    tensors = {name: torch.stack(rows[name]) for name in _TENSORS}
    return RadarDataset(config, **tensors, **lookup, lookup_first=lookup_first)
