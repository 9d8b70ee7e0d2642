"""Live speculative generation as an environment: replay's result structure, with measured times.

:class:`OnlineEnvironment` runs real greedy ``model.generate`` calls with a drafter and a
policy, and returns what :class:`ReplayEnvironment` returns, one :class:`ReplayedCycle` per
cycle, built from the engine's own ``CycleFeedback`` (wall-clock draft, verify and policy times).
For greedy decoding the accepted lengths equal replay's; only the times differ.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

from ..core.values import check_number
from ..drafters.base import Drafter
from ..generation.enable import enable
from ..policies.base import CycleFeedback, CycleState, DraftPolicy, DraftStepInfo, TreeConfig, VerifySizeInfo
from .replay import ReplayedCycle, ReplayResult


class _FeedbackRecorder(DraftPolicy):
    """Delegates every hook to ``policy`` and keeps the ``CycleFeedback`` of each cycle.

    It shows the engine what ``policy`` declares (``DraftPolicy``'s attributes: the hidden states it reads, the cost
    curve, drafter and prompt-lookup branch it was trained for), so ``generate`` gives it the same features and
    reports the same mismatches; make one with :func:`feedback_recorder`, whose class bears the policy's name, which
    the reports give."""

    def __init__(self, policy: DraftPolicy):
        self.policy = policy
        for name in DraftPolicy.__annotations__:
            setattr(self, name, getattr(policy, name))
        self.feedback: list[CycleFeedback] = []

    def check_settings(self) -> None:
        self.policy.check_settings()

    def begin_generation(self) -> None:
        self.policy.begin_generation()

    def tree_config(self, state: CycleState) -> TreeConfig:
        return self.policy.tree_config(state)

    def continue_drafting(self, step: DraftStepInfo) -> bool:
        return self.policy.continue_drafting(step)

    def num_tokens_to_verify(self, info: VerifySizeInfo) -> int:
        return self.policy.num_tokens_to_verify(info)

    def observe(self, feedback: CycleFeedback) -> None:
        self.feedback.append(feedback)
        self.policy.observe(feedback)


def feedback_recorder(policy: DraftPolicy) -> _FeedbackRecorder:
    """A :class:`_FeedbackRecorder` of ``policy`` whose class is named as ``policy``'s: ``generate`` names the policy
    it reports as misused by its class."""
    named = type(type(policy).__name__, (_FeedbackRecorder,), {"__module__": __name__})
    return named(policy)


def _checked_prompts(prompts: list[torch.LongTensor]) -> list[torch.LongTensor]:
    """``prompts`` as a list, refused unless there is one and each is a ``[1, T]`` LongTensor of token ids (a 1-D
    tensor or a list of ints failed in ``generate``, at ``run``)."""
    prompts = list(prompts)
    if not prompts:
        raise ValueError("OnlineEnvironment needs at least one prompt: pass prompts=[tokenizer(text, "
                         "return_tensors='pt').input_ids, ...].")
    for index, ids in enumerate(prompts):
        is_tensor = isinstance(ids, torch.Tensor)
        if is_tensor and ids.dtype == torch.long and ids.dim() == 2 and ids.shape[0] == 1 <= ids.shape[1]:
            continue
        got = f"a {ids.dtype} tensor of shape {list(ids.shape)}" if is_tensor else repr(ids)[:80]
        raise ValueError(f"OnlineEnvironment: prompts[{index}] is {got}; each prompt must be a [1, T] LongTensor of "
                         "token ids (one sequence, T >= 1): make it with tokenizer(text, return_tensors='pt')"
                         ".input_ids, or torch.tensor([ids]) from a list of ints.")
    return prompts


class OnlineEnvironment:
    """Runs draft policies in real greedy speculative ``generate`` calls of ``model`` and ``drafter``.

    Args:
        model: the target causal LM (``hf_adaptive_spec.enable`` is applied).
        drafter: the drafter every generation uses (re-bound at each call).
        prompts: ``[1, T]`` token ids per prompt (``tokenizer(text, return_tensors="pt").input_ids``), at least one.
        max_new_tokens: generation length per prompt, an int >= 1; generation also stops at the model's EOS.
    """

    def __init__(self, model: PreTrainedModel, drafter: Drafter, prompts: list[torch.LongTensor], max_new_tokens: int):
        self.prompts = _checked_prompts(prompts)
        self.max_new_tokens = int(check_number("OnlineEnvironment", "max_new_tokens", max_new_tokens, at_least=1,
                                               integer=True, meaning="the tokens each prompt's generation adds"))
        self.model = enable(model)
        self.drafter = drafter

    def run_prompt(self, prompt: int, policy: DraftPolicy) -> list[ReplayedCycle]:
        """Every cycle of one live generation under ``policy`` (which also gets ``observe`` calls)."""
        if not 0 <= prompt < len(self.prompts):  # a negative index would run another prompt as this one
            raise ValueError(f"prompt {prompt} is outside the environment's {len(self.prompts)} prompts: give 0 to "
                             f"{len(self.prompts) - 1}.")
        recorder = feedback_recorder(policy)
        self.model.generate(
            self.prompts[prompt], max_new_tokens=self.max_new_tokens, do_sample=False,
            assistant_model=self.drafter, assistant_policy=recorder,
        )
        return [ReplayedCycle.from_feedback(feedback) for feedback in recorder.feedback]

    def run(self, policy: DraftPolicy, prompts: list[int] | None = None) -> ReplayResult:
        """Generate the given prompts (all by default) under ``policy``."""
        indices = range(len(self.prompts)) if prompts is None else list(prompts)
        if not indices:
            raise ValueError(f"run(policy, prompts=[]) chooses no prompt: pass indices 0 to {len(self.prompts) - 1}, "
                             "or None for all of them.")
        return ReplayResult([self.run_prompt(p, policy) for p in indices])
