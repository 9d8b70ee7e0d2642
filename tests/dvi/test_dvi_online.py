"""DVI's "Improve" step: the KL->RL schedule, the loss terms, and learning that raises acceptance."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from hf_adaptive_spec.drafters.dvi import (
    DVIDrafter,
    DVIOnlineLearnerConfig,
    KLToRLSchedule,
    LossWeights,
    kl_to_target,
    policy_gradient,
    reward_masked_ce,
)

from .conftest import CHAIN, lora_state, make_drafter, prompts

torch.set_num_threads(1)


def test_schedule_weights_at_given_steps():
    config = DVIOnlineLearnerConfig(
        kl_weight=2.0,
        kl_weight_min=0.5,
        ce_weight=1.0,
        pg_weight=0.2,
        entropy_weight=0.01,
        warmup_updates=10,
        ramp_updates=4,
    )
    schedule = KLToRLSchedule(config)
    expected = {
        0: (2.0, 0.0, 0.0),
        9: (2.0, 0.0, 0.0),
        10: (2.0, 0.0, 0.0),  # the ramp starts at T_warmup with rho = 0
        11: (1.625, 0.25, 0.05),  # rho = 1/4: kl = 2 - 0.25 * 1.5
        12: (1.25, 0.5, 0.1),
        14: (0.5, 1.0, 0.2),  # end of the ramp: the floor and the full RL weights
        1000: (0.5, 1.0, 0.2),
    }
    for step, (kl, ce, pg) in expected.items():
        weights = schedule.weights(step)
        assert (weights.kl, weights.ce, weights.pg) == pytest.approx((kl, ce, pg)), step
        assert weights.entropy == 0.01


def test_schedule_without_ramp_switches_at_warmup():
    schedule = KLToRLSchedule(
        DVIOnlineLearnerConfig(warmup_updates=3, ramp_updates=0, kl_weight=1.0, kl_weight_min=0.1)
    )
    assert schedule.weights(2) == LossWeights(kl=1.0, ce=0.0, pg=0.0, entropy=0.0)
    assert schedule.weights(3) == pytest.approx(LossWeights(kl=0.1, ce=1.0, pg=0.1, entropy=0.0))


def test_loss_terms_by_hand():
    draft = torch.zeros(1, 2)  # p = (1/2, 1/2)
    target = torch.tensor([[0.0, math.log(3.0)]])  # q = (1/4, 3/4) at tau = 1
    assert float(kl_to_target(draft, target, 1.0)) == pytest.approx(0.5 * math.log(2.0) + 0.5 * math.log(2.0 / 3.0))
    # tau = 2 flattens the target: q = softmax((0, log 3) / 2) = (1, sqrt 3) / (1 + sqrt 3)
    q0 = 1 / (1 + math.sqrt(3))
    assert float(kl_to_target(draft, target, 2.0)) == pytest.approx(
        0.5 * math.log(0.5 / q0) + 0.5 * math.log(0.5 / (1 - q0))
    )
    logits = torch.tensor([[0.0, math.log(3.0)], [0.0, 0.0]])  # p(a=1) = 3/4 and p(a=0) = 1/2
    tokens, rewards = torch.tensor([1, 0]), torch.tensor([1.0, 0.0])
    assert float(reward_masked_ce(logits, tokens, rewards)) == pytest.approx(-math.log(0.75))  # accepted row only
    assert float(reward_masked_ce(logits, tokens, torch.zeros(2))) == 0.0
    # -(mean((1 - 0.25) log 3/4 + (0 - 0.25) log 1/2))
    assert float(policy_gradient(logits, tokens, rewards, 0.25)) == pytest.approx(
        -(0.75 * math.log(0.75) - 0.25 * math.log(0.5)) / 2
    )


def test_invalid_online_config_is_refused():
    with pytest.raises(ValueError, match="kl_weight_min"):
        DVIOnlineLearnerConfig(kl_weight=0.1, kl_weight_min=0.5)
    with pytest.raises(ValueError, match="buffer_size"):
        DVIOnlineLearnerConfig(buffer_size=0)


def test_a_value_set_after_construction_is_checked_as_the_constructor_checks_it(target):
    """batch_size = 0 set on a running learner's config failed inside the update (buffer.sample's randperm), and
    kl_weight_min above kl_weight would have made the KL weight grow; both are refused where they are set."""
    config = DVIOnlineLearnerConfig()
    with pytest.raises(ValueError, match=r"batch_size must be an int >= 1, got 0"):
        config.batch_size = 0
    with pytest.raises(ValueError, match="kl_weight_min must not exceed"):
        config.kl_weight_min = 2.0
    config.batch_size = 8  # a value the constructor takes is set
    assert (config.batch_size, config.kl_weight_min) == (8, 0.1)


def test_what_the_learner_read_when_built_is_refused_once_it_is_built(target):
    """learning_rate (and the other fields of BUILT_WITH) set on the config of a running learner kept the old value
    in the optimizer, buffer or generator while the adapter's saved online config wrote the new one."""
    drafter = make_drafter(target)
    config = drafter.updater.config
    for name, value in [("learning_rate", 1e-3), ("buffer_size", 16), ("seed", 3), ("adam_beta1", 0.5)]:
        with pytest.raises(AttributeError, match=rf"DVIOnlineLearnerConfig.{name} is read once.*enable_online"):
            setattr(config, name, value)
    assert drafter.updater.optimizer.param_groups[0]["lr"] == config.learning_rate == 1e-2
    config.update_every = 4  # read at every cycle: set, and followed
    assert drafter.updater.config.update_every == 4
    unbuilt = copy.deepcopy(config)
    unbuilt.learning_rate = 1e-3  # a copy is a config no learner holds yet
    assert drafter.enable_online(unbuilt).optimizer.param_groups[0]["lr"] == 1e-3


def _mean_accepted_tokens(target, drafter, stream) -> float:
    accepted = []
    for ids in stream:
        target.generate(ids, max_new_tokens=32, do_sample=False, assistant_model=drafter, assistant_policy=CHAIN)
        accepted += target.last_speculation.accepted_lengths
    return 1.0 + sum(accepted) / len(accepted)


def _measure(target, drafter) -> float:
    """Mean accepted tokens over the stream with learning paused (learning state restored after)."""
    learning = drafter.is_learning
    drafter.freeze()
    value = _mean_accepted_tokens(target, drafter, prompts(4))
    if learning:
        drafter.unfreeze()
    return value


def test_online_updates_raise_acceptance(target):
    drafter = make_drafter(target)
    before = _measure(target, drafter)
    for _ in range(3):  # the same four prompts, three times
        _mean_accepted_tokens(target, drafter, prompts(4))
    after = _measure(target, drafter)
    assert drafter.updater.num_updates >= 20
    assert after > before + 0.2, (before, after)


def test_a_frozen_drafter_does_not_improve(target):
    drafter = make_drafter(target)
    drafter.freeze()
    weights = lora_state(drafter)
    before = _measure(target, drafter)
    _mean_accepted_tokens(target, drafter, prompts(4))  # a pass that would have updated an online drafter
    assert _measure(target, drafter) == before
    assert drafter.updater.num_updates == 0 and all(v.equal(lora_state(drafter)[n]) for n, v in weights.items())


def test_updates_leave_the_global_rng_alone(target):
    """LoRA dropout draws random numbers during updates; the sampler's RNG stream must not see them."""
    from peft import LoraConfig

    lora = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.5, target_modules=["draft_head"])
    drafter = DVIDrafter(
        target, exit_layer=2, lora_config=lora, online=True, online_config=DVIOnlineLearnerConfig(update_every=0)
    )
    target.generate(prompts(1)[0], max_new_tokens=30, do_sample=False, assistant_model=drafter, assistant_policy=CHAIN)
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    assert drafter.update() is not None
    assert torch.rand(3).equal(expected)


def test_lora_dropout_draws_new_masks_at_each_update(target):
    """Each update forks the global RNG (the caller's stream is untouched) and seeds it from the updater's private
    generator: without that seed every update restarted from the same forked state and drew the same mask."""
    from peft import LoraConfig

    from hf_adaptive_spec.drafters.dvi import DVIRecord

    lora = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.5, target_modules=["draft_head"])
    config = DVIOnlineLearnerConfig(update_every=0, batch_size=8, buffer_size=8)
    drafter = DVIDrafter(target, exit_layer=2, lora_config=lora, online=True, online_config=config, share_cache=False)
    hidden = target.config.hidden_size
    generator = torch.Generator().manual_seed(1)
    records = [
        DVIRecord(torch.randn(hidden, generator=generator), i, torch.randn(hidden, generator=generator), i % 2, 1)
        for i in range(8)
    ]
    drafter.updater.add(records)  # a full buffer: every update reads 8 replayed rows and 1 fresh one
    dropout = next(m for name, m in drafter.head.named_modules() if name.endswith("lora_dropout.default"))
    masks = []
    dropout.register_forward_hook(lambda module, inputs, output: masks.append(output[:8] != 0))
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    for _ in range(3):
        drafter.updater.add(records[:1])  # something fresh, as after each prompt
        drafter.update()
    assert not masks[0].equal(masks[1]) and not masks[1].equal(masks[2])
    assert torch.rand(3).equal(expected)  # the caller's RNG stream saw none of it
