"""LTDPolicy: observations, decisions in generate and in replay, save/load."""

from __future__ import annotations

import json

import pytest
import torch
from tiny_models import prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.environments import ReplayEnvironment, record_replay
from hf_adaptive_spec.policies.base import DraftStepInfo, TreeConfig, VerifySizeInfo
from hf_adaptive_spec.policies.ltd import LTDPolicy, depth_observation, size_action_mask, size_observation
from hf_adaptive_spec.policies.serialization import AutoDraftPolicy
from hf_adaptive_spec.profiling import HardwareProfile

torch.set_num_threads(1)

TREE = TreeConfig(depth=4, top_k=3, total_tokens=9)
MAX_NEW = 24
SMALL = dict(depth_actor=(32,), depth_critic=(32,), size_actor=(32,), size_critic=(32,))


class RecordingLTD(LTDPolicy):
    """Keeps every observation the policy builds, in order."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seen: list[tuple[str, torch.Tensor]] = []

    def depth_observation(self, step):
        observation = super().depth_observation(step)
        self.seen.append(("depth", observation))
        return observation

    def size_observation(self, info):
        observation = super().size_observation(info)
        self.seen.append(("size", observation))
        return observation


def _varied_policy(seed: int = 0, cls: type[RecordingLTD] | None = None, **settings) -> RecordingLTD:
    """A small random policy whose greedy decisions depend on the observation (large output weights); ``settings``
    are further ``LTDPolicy`` arguments."""
    torch.manual_seed(seed)
    shape = dict(depth=TREE.depth, top_k=TREE.top_k, total_tokens=TREE.total_tokens)
    policy = (cls or RecordingLTD)(**shape, **settings, **SMALL)
    with torch.no_grad():
        for head in (policy.depth_head, policy.size_head):
            head.actor[-1].weight.normal_(0.0, 3.0)
    return policy


def _profile() -> HardwareProfile:
    return HardwareProfile(
        device="cpu", dtype="float32", num_threads=1, context_length=64,
        verify_tokens=[1, 4, 8, 16], verify_seconds=[1.0, 1.2, 1.6, 2.4], draft_step_seconds=0.1,
    )


@pytest.fixture(scope="module")
def setup():
    target = tiny_model("llama")
    prompts = [prompt(7, seed=21), prompt(12, seed=22)]
    recording = record_replay(target, hfas.CausalLMDrafter.from_target_layers(target, 2), prompts, TREE, MAX_NEW)
    return target, prompts, ReplayEnvironment(recording, _profile())


def test_observations_in_replay_equal_live_generate(setup):
    target, prompts, environment = setup
    for index, ids in enumerate(prompts):
        live_policy, replay_policy = _varied_policy(), _varied_policy()
        live = target.generate(
            ids, max_new_tokens=MAX_NEW, do_sample=False, return_dict_in_generate=True,
            assistant_model=hfas.CausalLMDrafter.from_target_layers(target, 2), assistant_policy=live_policy,
        ).speculation
        replayed = environment.replay_prompt(index, replay_policy)
        assert [c.accepted_length for c in replayed] == live.accepted_lengths
        assert [c.draft_depth for c in replayed] == live.draft_depths
        assert [c.verified_tokens for c in replayed] == live.verified_tokens
        assert len(set(live.draft_depths)) > 1 and len(set(live.verified_tokens)) > 1  # the decisions vary
        assert [kind for kind, _ in replay_policy.seen] == [kind for kind, _ in live_policy.seen]
        for (_, replay_obs), (_, live_obs) in zip(replay_policy.seen, live_policy.seen):
            torch.testing.assert_close(replay_obs, live_obs, rtol=1e-5, atol=1e-6)
        first = live_policy.seen[0][1]  # depth 1 of the first cycle: the prompt plus the prefill's token
        assert first[0] == pytest.approx(1 / TREE.depth)
        assert first[1] == pytest.approx((ids.shape[1] + 1) / 1000)  # the real context length, not 0.01


def test_lookup_feature_in_replay_equals_live_generate(setup):
    target, prompts, environment = setup
    with_branch = ReplayEnvironment(environment.recording, _profile(), lookup_tokens=4)
    lookup_lengths = set()
    for index, ids in enumerate(prompts):
        live_policy, replay_policy = _varied_policy(lookup_feature=True), _varied_policy(lookup_feature=True)
        live = target.generate(
            ids, max_new_tokens=MAX_NEW, do_sample=False, return_dict_in_generate=True, prompt_lookup_num_tokens=4,
            assistant_model=hfas.CausalLMDrafter.from_target_layers(target, 2), assistant_policy=live_policy,
        ).speculation
        replayed = with_branch.replay_prompt(index, replay_policy)
        assert [c.accepted_length for c in replayed] == live.accepted_lengths
        assert [c.verified_tokens for c in replayed] == live.verified_tokens
        assert [kind for kind, _ in replay_policy.seen] == [kind for kind, _ in live_policy.seen]
        for (_, replay_obs), (_, live_obs) in zip(replay_policy.seen, live_policy.seen):
            torch.testing.assert_close(replay_obs, live_obs, rtol=1e-5, atol=1e-6)
        lookup_lengths |= {round(float(obs[2]) * TREE.depth) for _, obs in live_policy.seen}
    assert len(lookup_lengths) > 1 and max(lookup_lengths) == 4  # the chain's length, as the branch found it


class WatchingLTD(RecordingLTD):
    """Keeps each cycle's prompt-lookup chain length as the policy saw it at cycle start."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.lookup_lengths: list[int] = []

    def tree_config(self, state):
        self.lookup_lengths.append(state.lookup_length)
        return super().tree_config(state)


def test_lookup_first_verifies_a_matched_chain_alone_live_and_in_replay(setup):
    target, prompts, environment = setup
    with_branch = ReplayEnvironment(environment.recording, _profile(), lookup_tokens=4)
    for index, ids in enumerate(prompts):
        expected = target.generate(ids, max_new_tokens=MAX_NEW, do_sample=False)
        live_policy, replay_policy = (_varied_policy(cls=WatchingLTD, lookup_first=True) for _ in range(2))
        out = target.generate(
            ids, max_new_tokens=MAX_NEW, do_sample=False, return_dict_in_generate=True, prompt_lookup_num_tokens=4,
            assistant_model=hfas.CausalLMDrafter.from_target_layers(target, 2), assistant_policy=live_policy,
        )
        assert torch.equal(out.sequences, expected)
        live, matched = out.speculation, live_policy.lookup_lengths
        assert 0 in matched and any(matched)  # some cycles matched, some did not
        assert [d for d, n in zip(live.draft_depths, matched) if n] == [0] * (len(matched) - matched.count(0))
        assert [v for v, n in zip(live.verified_tokens, matched) if n] == [1 + n for n in matched if n]
        drafted = sum(1 for d, n in zip(live.draft_depths, matched) if d and not n)
        asked = sum(1 for kind, _ in live_policy.seen if kind == "size")
        assert drafted and asked == drafted  # the heads decide only the cycles lookup could not fill
        replayed = with_branch.replay_prompt(index, replay_policy)
        assert [c.accepted_length for c in replayed] == live.accepted_lengths
        assert [c.draft_depth for c in replayed] == live.draft_depths
        assert [c.verified_tokens for c in replayed] == live.verified_tokens
        assert replay_policy.lookup_lengths == matched


def test_greedy_output_equals_stock_generate():
    target = tiny_model("llama")
    ids = prompt(9, seed=5)
    expected = target.generate(ids, max_new_tokens=30, do_sample=False)
    policy = _varied_policy(seed=3)
    out = target.generate(
        ids, max_new_tokens=30, do_sample=False,
        assistant_model=hfas.CausalLMDrafter.from_target_layers(target, 2), assistant_policy=policy,
    )
    assert out.tolist() == expected.tolist()


def test_save_load_round_trip_gives_identical_decisions(setup, tmp_path):
    _, _, environment = setup
    policy = _varied_policy(seed=4)
    policy.save_pretrained(tmp_path)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["README.md", "config.json", "model.safetensors"]
    assert json.loads((tmp_path / "config.json").read_text())["artifact_type"] == "hf_adaptive_spec.policy.ltd"
    loaded = AutoDraftPolicy.from_pretrained(tmp_path)
    assert type(loaded) is LTDPolicy and not loaded.training
    for key, value in policy.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    original, reloaded = environment.replay(policy), environment.replay(loaded)
    for name in ("accepted_length", "draft_depth", "verified_tokens"):
        assert [getattr(c, name) for c in reloaded.all_cycles] == [getattr(c, name) for c in original.all_cycles]


def test_custom_shape_round_trips(tmp_path):
    policy = LTDPolicy(
        depth=3, top_k=2, total_tokens=7, size_choices=[0, 2, 6], context_scale=500.0, lookup_first=True, **SMALL
    )
    policy.save_pretrained(tmp_path)
    loaded = LTDPolicy.from_pretrained(tmp_path)
    assert loaded.tree == policy.tree and loaded.size_choices == [0, 2, 6] and loaded.context_scale == 500.0
    assert loaded.lookup_first
    policy.lookup_first = False  # a setting changed after construction is saved as it is now
    policy.save_pretrained(tmp_path)
    assert not LTDPolicy.from_pretrained(tmp_path).lookup_first


def test_lookup_first_refuses_the_lookup_feature_it_would_never_read():
    with pytest.raises(ValueError, match="lookup_feature would always read 0"):
        LTDPolicy(lookup_feature=True, lookup_first=True, **SMALL)


def test_observation_layout():
    step = DraftStepInfo(depth=2, context_length=250, step_scores=torch.log(torch.tensor([0.1, 0.5, 0.2])), config=TREE)
    obs = depth_observation(step, TREE, 1000.0)
    expected = [2 / 4, 0.25, 0.5, 0.2, 0.1] + [0.0] * 6  # probabilities sorted, padded to top_k² = 9
    torch.testing.assert_close(obs, torch.tensor(expected))
    info = VerifySizeInfo(
        context_length=100, scores=torch.log(torch.tensor([0.6, 0.3, 0.1, 0.2])), depths=torch.tensor([1, 1, 1, 2]),
        config=TREE,
    )
    obs = size_observation(info, TREE, 1000.0)
    assert obs.shape == (2 + 3 + 3 * 9,)
    torch.testing.assert_close(obs[:8], torch.tensor([2 / 4, 0.1, 0.6, 0.3, 0.1, 0.2, 0.0, 0.0]))
    assert obs[8:].abs().sum() < 1e-6  # the rest of level 2, and the empty levels 3 and 4


def test_observations_keep_each_levels_most_likely_candidates():
    probabilities = [0.05, 0.3, 0.01, 0.2, 0.4, 0.02, 0.06, 0.07, 0.08, 0.09, 0.5]  # 11 at level 2: 9 fit
    scores = torch.log(torch.tensor([0.9, 0.0] + probabilities + [0.7]))  # a -inf score reads as probability 0
    depths = torch.tensor([1, 1] + [2] * len(probabilities) + [5])  # a level past the tree's depth is not seen
    info = VerifySizeInfo(context_length=0, scores=scores, depths=depths, config=TREE)
    obs = size_observation(info, TREE, 1000.0)
    kept = sorted(probabilities, reverse=True)[:9]
    torch.testing.assert_close(obs[2:14], torch.tensor([0.9, 0.0, 0.0] + kept))
    assert obs[0] == 5 / 4 and obs[14:].abs().sum() == 0
    step = DraftStepInfo(depth=2, context_length=0, step_scores=scores[2:13], config=TREE)
    torch.testing.assert_close(depth_observation(step, TREE, 1000.0)[2:], torch.tensor(kept))


def test_size_mask_keeps_one_choice_per_verified_size():
    info = VerifySizeInfo(context_length=10, scores=torch.zeros(3), depths=torch.ones(3, dtype=torch.long), config=TREE)
    mask = size_action_mask(info, TREE, torch.tensor([1, 2, 4, 8]))
    assert mask.tolist() == [True, True, True, False]  # 4 and 8 both verify the 3 candidates


def test_a_policy_on_another_device_masks_there_in_training_and_on_the_host_in_eval():
    """``policy.to("cuda")`` moves the ``choices`` buffer: the mask mixed a CPU tensor with it (torch.cat raised), and
    an eval-mode decision, made on the host, read the mask back from the device every cycle. "meta" stands in for
    CUDA here: a device whose values the host cannot read."""
    info = VerifySizeInfo(context_length=10, scores=torch.zeros(3), depths=torch.ones(3, dtype=torch.long), config=TREE)
    on_device = size_action_mask(info, TREE, torch.tensor([1, 2, 4, 8], device="meta"))
    assert on_device.device.type == "meta" and on_device.shape == (4,)
    policy = _varied_policy(seed=3)
    scores = torch.log(torch.tensor([0.6, 0.2, 0.1, 0.05]))
    info = VerifySizeInfo(context_length=40, scores=scores, depths=torch.tensor([1, 1, 1, 2]), config=TREE)
    expected = policy.num_tokens_to_verify(info)
    policy.choices = policy.choices.to("meta")  # where .to(device) puts the buffer
    assert policy.num_tokens_to_verify(info) == expected


def test_training_mode_samples_and_logs_decisions():
    policy = LTDPolicy(**SMALL)
    policy.train()
    policy.generator = torch.Generator().manual_seed(0)
    scores = torch.log(torch.tensor([0.7, 0.2, 0.1]))
    step = DraftStepInfo(depth=1, context_length=40, step_scores=scores, config=policy.tree)
    decisions = [policy.continue_drafting(step) for _ in range(40)]
    assert len(policy.decisions) == 40 and len(set(decisions)) == 2  # near-uniform at initialisation
    logged = policy.decisions[0]
    with torch.no_grad():
        logits, value = policy(logged.observation[None], head="depth")
    assert logged.log_prob == pytest.approx(float(torch.log_softmax(logits, -1)[0, logged.action]), abs=1e-6)
    assert logged.value == pytest.approx(float(value[0]), abs=1e-6)
    policy.eval()
    policy.decisions.clear()
    assert len({policy.continue_drafting(step) for _ in range(5)}) == 1 and not policy.decisions


def test_a_head_in_train_mode_under_an_eval_policy_takes_its_argmax():
    """A trainer left policy.training False with its size head in train() mode: the policy read as in eval mode but
    sampled, and logged every decision. The policy's mode now decides for its heads."""
    policy = LTDPolicy(**SMALL)
    policy.size_head.train()
    policy.generator = torch.Generator().manual_seed(0)
    info = VerifySizeInfo(context_length=40, scores=torch.zeros(8), depths=torch.tensor([1, 1, 1, 2, 2, 2, 3, 3]),
                          config=policy.tree)
    assert not policy.training and len({policy.num_tokens_to_verify(info) for _ in range(40)}) == 1
    assert not policy.decisions
    policy.train()
    policy.depth_head.eval()  # as the trainer's size phases set it
    assert len({policy.num_tokens_to_verify(info) for _ in range(40)}) > 1 and len(policy.decisions) == 40


@pytest.mark.parametrize("setting, message", [
    (dict(depth=0), "at depth 0 nothing is drafted"),
    (dict(context_scale=float("inf")), "context_scale must be a number > 0 and < inf"),
])
def test_a_shape_or_scale_no_head_would_read_is_refused(setting, message):
    """At depth 0 the engine drafts nothing and asks neither head (the policy was a plain step every cycle); an
    infinite context_scale read every context length as 0."""
    with pytest.raises(ValueError, match=message):
        LTDPolicy(**{"depth": 3, "top_k": 2, "total_tokens": 6, **setting}, **SMALL)


@pytest.mark.parametrize("choices", [[], [3, 2], [1, 9], [-1, 2]])
def test_bad_size_choices_are_refused(choices):
    with pytest.raises(ValueError, match="size_choices"):
        LTDPolicy(total_tokens=9, size_choices=choices, **SMALL)


def test_the_engines_host_decisions_are_the_actors_argmax():
    """In eval mode a head decides with its actor copied to the host (numpy, float32): every decision must be the
    torch actor's argmax (masked for the size head), and follow the weights from the next generation on however they
    change: an optimiser's step, a ``.data`` assignment, a load."""
    policy = _varied_policy(seed=6)
    generator = torch.Generator().manual_seed(7)
    policy.begin_generation()
    decisions = set()
    for _ in range(50):
        scores = torch.log(torch.rand(TREE.top_k**2, generator=generator))
        step = DraftStepInfo(depth=2, context_length=int(torch.randint(1, 900, (1,), generator=generator)),
                             step_scores=scores, config=TREE)
        observation = policy.depth_observation(step)
        with torch.no_grad():
            want = int(policy.depth_head.actor(observation[None])[0].argmax())
        assert policy.continue_drafting(step) == (want == 1)
        decisions.add(want)
        candidates = int(torch.randint(1, TREE.top_k**2 + 1, (1,), generator=generator))  # some choices clamp
        info = VerifySizeInfo(context_length=step.context_length, scores=scores[:candidates],
                              depths=torch.ones(candidates, dtype=torch.long), config=TREE)
        mask = size_action_mask(info, TREE, policy.choices)
        with torch.no_grad():
            logits = policy.size_head.actor(policy.size_observation(info)[None])[0]
        assert policy.num_tokens_to_verify(info) == policy.size_choices[
            int(logits.masked_fill(~mask, -torch.inf).argmax())
        ]
    assert decisions == {0, 1}  # observations that flip the depth head: the comparison can fail
    step = DraftStepInfo(depth=1, context_length=10, step_scores=torch.log(torch.full((3,), 0.3)), config=TREE)
    bias = policy.depth_head.actor[-1].bias
    optimizer = torch.optim.SGD([bias], lr=1.0, foreach=True)  # a trainer's step: no version bump is promised
    for stop_bias in (50.0, -50.0):
        bias.grad = bias.detach() - torch.tensor([stop_bias, -stop_bias])  # one step lands on the target bias
        optimizer.step()
        policy.begin_generation()
        assert policy.continue_drafting(step) == (stop_bias < 0)
    bias.data = torch.tensor([50.0, -50.0])  # a .data assignment (as some loaders do) bumps no version either
    policy.begin_generation()
    assert policy.continue_drafting(step) is False
    state = {key: value.clone() for key, value in policy.state_dict().items()}
    state["depth_head.actor.2.bias"] = torch.tensor([-50.0, 50.0])
    policy.load_state_dict(state)
    policy.begin_generation()
    assert policy.continue_drafting(step) is True
