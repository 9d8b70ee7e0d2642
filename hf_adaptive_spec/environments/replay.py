"""Exact offline replay of draft policies on a :class:`ReplayRecording`.

A replayed cycle runs the engine's own :class:`TreeBuilder` with the policy, fed by a
:class:`ReplayDrafter` that serves the recorded draft log-probs; the accepted length is the
greedy walk over the recorded target tokens. So a policy sees exactly the ``CycleState``,
``DraftStepInfo`` and ``VerifySizeInfo`` it sees inside ``generate``, and for greedy decoding
gets exactly the accepted lengths. Time is modelled from a :class:`HardwareProfile` (draft
levels and verified tokens); the policy's own time is measured. With ``lookup_tokens`` the
replay grafts the engine's prompt-lookup branch (``prompt_lookup_num_tokens``) onto every tree:
the recorded generation makes its accepted length exact too.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable

import torch
from transformers import PreTrainedModel

from ..core.sequences import common_prefix_length
from ..core.tree import DraftTree
from ..drafters.base import DraftContext, Drafter
from ..generation.prompt_lookup import graft_chain, lookup_continuation
from ..generation.tree_builder import DraftTimes, TreeBuilder, fit_largest_bucket
from ..policies.base import DraftPolicy, TreeConfig
from ..profiling.hardware import HardwareProfile
from .recorded import ReplayRecording, ReplayTree, check_feature_layers, check_timed_drafter
from .replay_checks import check_lookup, check_measured_sizes
from .replayed import ReplayedCycle, ReplayResult


class ReplayDrafter(Drafter):
    """A drafter that answers from one recorded tree instead of running a model.

    Its vocabulary is the recorded tree's tokens (``draft_to_target`` maps them back), so the
    rows it serves are a few dozen entries wide, not the target's vocabulary.
    """

    def __init__(self, recorded: ReplayTree):
        self.recorded = recorded
        vocabulary = sorted(set(recorded.tokens[1:]))
        self.draft_to_target = torch.tensor(vocabulary, dtype=torch.long)
        self.draft_id = {token: index for index, token in enumerate(vocabulary)}
        self.children: dict[int, list[int]] = defaultdict(list)
        for node, parent in enumerate(recorded.parents[1:], start=1):
            self.children[parent].append(node)
        self.recorded_ids: dict[int, int] = {0: 0}
        self.levels = 0  # draft levels served this cycle (begin_tree and each expand)

    def bind(self, target: PreTrainedModel) -> None:
        self.recorded_ids = {0: 0}

    def begin_tree(self, context: DraftContext) -> torch.Tensor:
        self.recorded_ids, self.levels = {0: 0}, 1
        return self._rows([0])

    def expand(self, tree: DraftTree, nodes: list[int]) -> torch.Tensor:
        self.levels += 1
        return self._rows([self.recorded_id(tree, node) for node in nodes])

    def recorded_id(self, tree: DraftTree, node: int) -> int:
        """The recorded node with the same path as ``tree``'s ``node``."""
        if node not in self.recorded_ids:
            parent = self.recorded_id(tree, tree.parents[node])
            token = tree.tokens[node]
            self.recorded_ids[node] = next(c for c in self.children[parent] if self.recorded.tokens[c] == token)
        return self.recorded_ids[node]

    def _rows(self, nodes: list[int]) -> torch.Tensor:
        rows = torch.full((len(nodes), len(self.draft_id)), float("-inf"), dtype=torch.float64)
        scores = self.recorded.scores
        for row, node in enumerate(nodes):
            children = self.children[node]
            if not children:
                raise ValueError(
                    f"The recording never expanded this node (depth {self.recorded.depths[node]}): the policy asked "
                    "for a tree the recording does not contain. Record with the policy's top_k and at least its depth."
                )
            rows[row, [self.draft_id[self.recorded.tokens[c]] for c in children]] = torch.tensor(
                [scores[c] - scores[node] for c in children], dtype=torch.float64
            )
        return rows


def accepted_length(tree: DraftTree, drafter: ReplayDrafter) -> int:
    """Greedy acceptance over ``tree`` (the pruned tree) with the recorded target tokens."""
    recorded = drafter.recorded
    node, recorded_node, accepted = 0, 0, 0
    while True:
        wanted = recorded.target_next[recorded_node]
        if wanted < 0:
            raise ValueError(
                "The recording did not verify a node this policy verifies: record with a larger total_tokens."
            )
        child = next((c for c in tree.children(node) if tree.tokens[c] == wanted), None)
        if child is None:
            return accepted
        recorded_node = next(c for c in drafter.children[recorded_node] if recorded.tokens[c] == wanted)
        node, accepted = child, accepted + 1


class ReplayLoop:
    """Whole generations from single cycles: subclasses give ``replay_cycle``, ``num_prompts`` and ``num_positions``."""

    num_prompts: int
    #: how errors name the prompts the loop replays, ``{}`` their count
    prompts_named: str = "the loop's {} prompts"
    #: the target hidden states the replayed cycle states hold (a policy may read any of them); None: a loop that
    #: does not say, whose policies' layers are not checked before the replay
    feature_layers: tuple[int, ...] | None = None

    def num_positions(self, prompt: int) -> int:
        """Recorded cycle starts of ``prompt``."""
        raise NotImplementedError

    def replay_cycle(
        self, prompt: int, position: int, policy: DraftPolicy, unread_tokens: int | None = None
    ) -> ReplayedCycle:
        """The cycle at ``position`` of ``prompt`` under ``policy``; ``unread_tokens``: the committed tokens the drafter
        has not read when it begins (None: the prompt at position 0, else 1, as after a drafted cycle that accepted
        nothing). Callers walking a generation pass :meth:`ReplayedCycle.unread_after` of the cycle before."""
        raise NotImplementedError

    def check_prompt(self, prompt: int) -> None:
        """Raise, naming the valid range, unless ``prompt`` indexes a replayed prompt (a negative index would count
        from the end and replay another prompt as this one)."""
        if not 0 <= prompt < self.num_prompts:
            raise ValueError(f"prompt {prompt} is outside {self.prompts_named.format(self.num_prompts)}: give 0 to "
                             f"{self.num_prompts - 1}.")

    def prompts_with_cycles(self, prompts: Iterable[int]) -> list[int]:
        """``prompts`` less those with no cycle start to replay (a generation that ended at its first token): a
        replay of one has no cycle, and a walk over cycles (the gym environments, the trainers) leaves it out."""
        return [prompt for prompt in prompts if self.num_positions(prompt)]

    def replay_prompt(self, prompt: int, policy: DraftPolicy) -> list[ReplayedCycle]:
        """Every cycle of one recorded generation under ``policy`` (calling ``policy.observe`` as generate does)."""
        self.check_prompt(prompt)
        cycles, position, unread = [], 0, None
        policy.check_settings()
        if self.feature_layers is not None:
            check_feature_layers(policy.feature_layers, self.feature_layers)
        policy.begin_generation()
        while position < self.num_positions(prompt):
            cycle = self.replay_cycle(prompt, position, policy, unread)
            tick = time.perf_counter()
            policy.observe(cycle.feedback())
            cycle.policy_time += time.perf_counter() - tick
            cycles.append(cycle)
            position += cycle.accepted_length + 1
            unread = cycle.unread_after()
        return cycles

    def replay(self, policy: DraftPolicy, prompts: Iterable[int] | None = None) -> ReplayResult:
        """Replay ``policy`` on the given prompts (all by default)."""
        indices = range(self.num_prompts) if prompts is None else prompts
        return ReplayResult([self.replay_prompt(p, policy) for p in indices])


class ReplayEnvironment(ReplayLoop):
    """Replays draft policies on a recording with costs from a hardware profile.

    Args:
        recording: what :func:`record_replay` produced.
        profile: measured verification times and draft-step time (``hf-adaptive-spec profile``); refused when it
            timed other drafter weights than the recording's (both digests known).
        lookup_tokens: graft the prompt-lookup branch of this many tokens onto every tree, as
            ``generate(..., prompt_lookup_num_tokens=lookup_tokens)`` does (0: none). Needs a
            recording that keeps its prompt ids.
        lookup_ngram_size: the branch's ``max_matching_ngram_size``.
    """

    prompts_named = "the recording's {} prompts"

    def __init__(
        self, recording: ReplayRecording, profile: HardwareProfile, lookup_tokens: int = 0, lookup_ngram_size: int = 2
    ):
        if profile.draft_step_seconds is None:
            raise ValueError(
                "The hardware profile has no draft_step_seconds: run `hf-adaptive-spec profile` with a drafter."
            )
        check_timed_drafter(profile.drafter_weights, recording.drafter_weights, "The hardware profile", "the recording")
        check_lookup(lookup_tokens, lookup_ngram_size, profile)
        check_measured_sizes(profile, [recording], lookup_tokens=lookup_tokens)
        self.recording = recording
        self.profile = profile
        self.lookup_tokens = lookup_tokens
        self.lookup_ngram_size = lookup_ngram_size
        self.sequences: list[torch.Tensor] = []  # per prompt, its ids and generation ([T]), for the lookup
        if lookup_tokens:
            self.sequences = [torch.tensor(recording.sequence(p)) for p in range(len(recording.prompts))]
        #: (prompt, position, lookup_tokens, ngram size) -> the cycle's lookup chain, found once; environments replaying
        #: the same generations may share one (MultiReplayEnvironment does)
        self.lookup_chains: dict[tuple[int, int, int, int], tuple[int, ...]] = {}

    def check_config(self, config: TreeConfig) -> None:
        """Raise unless the recording contains every tree ``config`` can build (depth 0 builds none)."""
        if not isinstance(config, TreeConfig):
            raise ValueError(f"The policy's tree_config returned {config!r}; expected a TreeConfig.")
        recorded = self.recording.tree_config
        if config.depth and (
            config.sample_drafts
            or config.top_k != recorded.top_k
            or config.depth > recorded.depth
            or config.total_tokens > recorded.total_tokens
        ):
            raise ValueError(
                f"{config} is outside the recording's trees (top_k {recorded.top_k}, depth <= {recorded.depth}, "
                f"total_tokens <= {recorded.total_tokens}, deterministic): record again with this shape."
            )

    def replay_cycle(
        self, prompt: int, position: int, policy: DraftPolicy, unread_tokens: int | None = None
    ) -> ReplayedCycle:
        """The cycle starting at ``position`` of prompt ``prompt``, drafted and pruned by ``policy``
        (``unread_tokens``: see :meth:`ReplayLoop.replay_cycle`)."""
        self.check_position(prompt, position)
        trees = self.recording.prompts[prompt]
        recorded = trees[position]
        if unread_tokens is None:
            unread_tokens = self.prompt_length(prompt) if position == 0 else 1
        room = self._room(prompt, position)
        chain = self.lookup_chain(prompt, position)
        times = DraftTimes()
        tick = time.perf_counter()
        config = policy.tree_config(recorded.cycle_state(len(chain), policy.feature_layers))
        times.policy += time.perf_counter() - tick
        self.check_config(config)
        if config.sample_drafts:  # as generate: no chain among sampled sibling groups (a depth-0 cycle's root alone)
            chain = []
        max_depth = min(config.depth, room)
        drafter = ReplayDrafter(recorded)
        context = DraftContext(torch.full((1, recorded.context_length), recorded.tokens[0], dtype=torch.long))
        if self.profile.buckets:  # the static-cache path caps trees as generate does (its largest bucket)
            config = fit_largest_bucket(config, self.profile.buckets[-1], len(chain))
        builder = TreeBuilder(drafter, policy, self.recording.vocab_size)
        tree = builder.build(context, config, max_depth, times, lookup_length=len(chain))
        draft_depth = tree.max_depth
        accepted = drafter_accepted = accepted_length(tree, drafter)
        if chain:
            graft_chain(tree, chain)
            # greedy acceptance walks the union of the tree's paths and the chain: the longer match wins
            following = self.sequences[prompt][recorded.context_length : recorded.context_length + len(chain)]
            accepted = max(accepted, common_prefix_length(chain, following.tolist()))
        return ReplayedCycle(
            context_length=recorded.context_length,
            draft_depth=draft_depth,
            verified_tokens=len(tree),
            accepted_length=accepted,
            draft_time=self.profile.draft_time(drafter.levels, unread_tokens),
            verify_time=self.profile.verify_time(len(tree)),
            policy_time=times.policy,
            drafter_accepted_length=drafter_accepted,
            remaining_tokens=len(trees) - position,
            draft_levels=drafter.levels,
            unread_tokens=unread_tokens,
        )

    def check_position(self, prompt: int, position: int) -> None:
        """Raise, naming the valid range, unless ``prompt`` and ``position`` name a recorded cycle start (a negative
        index would count from the end and replay another cycle as this one)."""
        self.check_prompt(prompt)
        positions = self.num_positions(prompt)
        if not 0 <= position < positions:
            raise ValueError(f"position {position} is outside prompt {prompt}'s {positions} recorded cycle starts: "
                             f"give 0 to {positions - 1}.")

    def _room(self, prompt: int, position: int) -> int:
        """Draft tokens the generation has room for after the cycle at ``position`` commits its bonus token."""
        trees = self.recording.prompts[prompt]
        max_length = trees[0].context_length - 1 + self.recording.max_new_tokens
        return max_length - trees[position].context_length - 1

    def lookup_chain(self, prompt: int, position: int) -> list[int]:
        """The prompt-lookup chain the cycle at ``position`` grafts (none without ``lookup_tokens``), computed before
        the policy as ``generate`` computes it: at most ``lookup_tokens``, and no longer than the generation's room.
        Found once per cycle: a policy's state and its replay, and every later epoch over the recording, reuse it."""
        room = self._room(prompt, position)
        if not self.lookup_tokens or room <= 0:
            return []
        key = (prompt, position, self.lookup_tokens, self.lookup_ngram_size)
        if key not in self.lookup_chains:
            context_tokens = self.sequences[prompt][: self.recording.prompts[prompt][position].context_length]
            chain = lookup_continuation(context_tokens, self.lookup_ngram_size, min(self.lookup_tokens, room))
            self.lookup_chains[key] = tuple(chain)
        return list(self.lookup_chains[key])

    @property
    def num_prompts(self) -> int:
        return len(self.recording.prompts)

    @property
    def feature_layers(self) -> tuple[int, ...]:
        return self.recording.feature_layers

    def num_positions(self, prompt: int) -> int:
        return len(self.recording.prompts[prompt])

    def prompt_length(self, prompt: int) -> int:
        return self.recording.prompts[prompt][0].context_length - 1
