"""Teacher-forced replay of DVI's greedy online loop: the same records, without running ``generate``.

For greedy decoding with chains, everything the online drafter logs is a function of the
target's committed tokens. The drafter's shallow state at an accepted draft token is the
target's shallow state at that token (the token *is* the committed one), and positions after
the first reject are never logged. So one forward of the target over ``prompt + completion``
gives every ``h_k`` and every target state the online loop would read, and the cycles (where
each starts, how many drafts it accepts) follow from the head's argmax at those states. When
``completion`` is the target's own greedy output (as ``generate`` would produce it, same dtype),
the records, accepted lengths and update points equal those of
``generate(..., assistant_model=drafter)`` with the drafter learning online; with any other
completion the loop walks the given text and judges each draft against the text's next token.
"""

from __future__ import annotations

from collections.abc import Collection

import torch
from transformers import PreTrainedModel

from ...core.features import FeatureCapture, decoder_layers
from ...core.tree import DraftTree
from ...drafters.dvi.buffer import outcome_records
from ...drafters.dvi.drafter import DVIDrafter
from ...generation.statistics import SpeculationStats


class GreedyChainReplay:
    """Replays DVI's online loop (greedy, chains of ``depth``) over given completions.

    Each :meth:`run` is one ``generate`` call. While the drafter learns, the cycles' records go
    to its updater exactly when the online loop logs them (after each drafting cycle, as the
    engine's ``Drafter.observe`` reports it) and automatic updates run when due (at the start of
    a drafting cycle, ``update_every > 0``). A frozen or offline drafter is only evaluated.

    Args:
        target: the target model (the drafter's own).
        drafter: a :class:`DVIDrafter` of ``target``.
        depth: chain length per cycle.
        max_new_tokens: the ``generate`` length limit being replayed.
        eos_token_ids: tokens that end generation.
    """

    def __init__(
        self,
        target: PreTrainedModel,
        drafter: DVIDrafter,
        depth: int,
        max_new_tokens: int,
        eos_token_ids: Collection[int],
    ):
        if depth < 1:
            raise ValueError(f"GreedyChainReplay needs a chain depth >= 1, got {depth}.")
        self.target = target
        self.drafter = drafter
        self.depth = depth
        self.max_new_tokens = max_new_tokens
        self.eos_token_ids = set(eos_token_ids)
        self._final_index = len(decoder_layers(target))
        self.last_greedy_agreement: float | None = None  # of the latest run, see run()

    @torch.no_grad()
    def _states(self, ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """``h_k`` and the final-norm output at every position of ``ids``, ``[len(ids), hidden]`` each."""
        indices = (self.drafter.exit_layer, self._final_index)
        with FeatureCapture(self.target, indices) as capture:
            self.target(torch.tensor([ids], device=self.target.device), use_cache=False)
        return capture.latest[indices[0]][0], capture.latest[indices[1]][0]

    def _drafts(self, shallow: torch.Tensor, start: int) -> list[int]:
        """The head's greedy draft after every position (positions before ``start`` are never roots: -1)."""
        with torch.no_grad():
            return [-1] * start + self.drafter.draft_log_probs(shallow[start:]).argmax(-1).tolist()

    def run(self, prompt_ids: list[int], completion_ids: list[int]) -> SpeculationStats:
        """Replay one ``generate(prompt, max_new_tokens)`` whose output is ``completion_ids``.

        Returns the cycles' accepted lengths and draft depths (no times). Stops where the
        completion ends if it ends before an end-of-sequence token or the length limit. Sets
        :attr:`last_greedy_agreement`: the share of completion tokens that are the target's greedy
        choice in this forward (1.0 when the replay is exact).
        """
        if not prompt_ids or not completion_ids:
            raise ValueError("GreedyChainReplay.run needs a non-empty prompt and completion.")
        ids = list(prompt_ids) + list(completion_ids[: self.max_new_tokens])
        max_length = len(prompt_ids) + self.max_new_tokens
        shallow, final = self._states(ids)
        with torch.no_grad():
            greedy = self.target.get_output_embeddings()(final[len(prompt_ids) - 1 : -1]).argmax(-1)
        completion = torch.tensor(ids[len(prompt_ids) :], device=greedy.device)
        self.last_greedy_agreement = float((greedy == completion).float().mean())
        drafts = self._drafts(shallow, len(prompt_ids))
        updater = self.drafter.updater if self.drafter.is_learning else None
        stats = SpeculationStats()
        length = len(prompt_ids) + 1  # the prefill emits the first token
        finished = ids[length - 1] in self.eos_token_ids or length >= max_length
        while not finished and length < len(ids):
            depth = min(self.depth, max_length - length - 1)
            if depth >= 1 and updater is not None and updater.due():  # a drafting cycle updates first if due
                updater.step()
                drafts = self._drafts(shallow, len(prompt_ids))
            root = length - 1
            tree = DraftTree.with_root(ids[root])
            node, states = 0, {}
            for step in range(min(depth, len(ids) - root)):  # drafts past the completion's end are never verified
                states[node] = shallow[root + step]
                (node,) = tree.add_children(node, [drafts[root + step]], [0.0])
            accepted = 0
            while (
                accepted < depth
                and root + accepted + 1 < len(ids)
                and drafts[root + accepted] == ids[root + accepted + 1]
            ):
                accepted += 1
            committed = ids[root + 1 : root + accepted + 2]
            # generate stops at an end-of-sequence token inside the accepted path: nothing after it is committed
            committed = committed[: next((i + 1 for i, t in enumerate(committed) if t in self.eos_token_ids), None)]
            if depth >= 1 and updater is not None:  # the outcome, as the engine reports it after verification
                updater.add(outcome_records(tree, states, committed, final[root : root + len(committed)]))
            stats.record(accepted=len(committed) - 1, depth=depth, verified=depth + 1)  # as SpeculationStats counts
            length += len(committed)
            finished = bool(self.eos_token_ids.intersection(committed)) or length >= max_length
        return stats
