"""The shared PPO pieces on hand-computed cases."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hf_adaptive_spec.training.rl import RolloutBatch, gae, ppo_loss


def test_gae_matches_hand_computation():
    rewards = torch.tensor([1.0, 0.0, 2.0])
    values = torch.tensor([0.5, 0.2, 1.0])
    dones = torch.tensor([0.0, 1.0, 0.0])
    advantages, returns = gae(rewards, values, dones, gamma=0.9, lam=0.8, last_value=3.0)
    a2 = 2.0 + 0.9 * 3.0 - 1.0  # the episode goes on past the rollout: bootstrap from last_value
    a1 = 0.0 - 0.2  # done: no bootstrap, no carry
    a0 = (1.0 + 0.9 * 0.2 - 0.5) + 0.9 * 0.8 * a1
    assert advantages.tolist() == pytest.approx([a0, a1, a2])
    assert returns.tolist() == pytest.approx([a0 + 0.5, a1 + 0.2, a2 + 1.0])


class _Table(nn.Module):
    def __init__(self, logits, values):
        super().__init__()
        self.logits = nn.Parameter(torch.tensor(logits))
        self.values = nn.Parameter(torch.tensor(values))

    def forward(self, observations):
        return self.logits.expand(observations.shape[0], -1), self.values.expand(observations.shape[0])


def test_clipped_surrogate_on_hand_computed_case():
    model = _Table([0.0, 0.0], [1.0])  # π(a) = 0.5 for both actions
    batch = RolloutBatch(
        observations=torch.zeros(2, 1),
        actions=torch.tensor([0, 1]),
        log_probs=torch.log(torch.tensor([0.25, 0.75])),  # ratios 2.0 and 2/3
        values=torch.zeros(2),
        rewards=torch.zeros(2),
        dones=torch.ones(2),
    )
    advantages = torch.tensor([1.0, -1.0])
    out = ppo_loss(model, batch, advantages, returns=torch.tensor([3.0, 1.0]), clip_range=0.2, value_coef=0.5,
                   entropy_coef=0.1, normalize_advantages=False)
    surrogate = [min(2.0 * 1.0, 1.2 * 1.0), min((2 / 3) * -1.0, 0.8 * -1.0)]  # [1.2, -0.8]
    expected_policy = -sum(surrogate) / 2
    expected_value = ((1.0 - 3.0) ** 2 + (1.0 - 1.0) ** 2) / 2
    entropy = float(torch.log(torch.tensor(2.0)))
    assert out.policy_loss == pytest.approx(expected_policy)
    assert out.value_loss == pytest.approx(expected_value)
    assert float(out.loss.detach()) == pytest.approx(expected_policy + 0.5 * expected_value - 0.1 * entropy)
    assert out.clip_fraction == pytest.approx(1.0)


def test_ppo_steps_raise_the_probability_of_the_rewarded_action():
    torch.manual_seed(0)
    model = _Table([0.0, 0.0, 0.0], [0.0])
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(30):
        with torch.no_grad():
            logits, values = model(torch.zeros(64, 1))
            distribution = torch.distributions.Categorical(logits=logits)
            actions = distribution.sample()
        rewards = (actions == 2).float()
        batch = RolloutBatch(torch.zeros(64, 1), actions, distribution.log_prob(actions), values, rewards,
                             torch.ones(64))
        advantages, returns = gae(rewards, values, batch.dones, gamma=0.99, lam=0.95)
        optimizer.zero_grad()
        ppo_loss(model, batch, advantages, returns).loss.backward()
        optimizer.step()
    assert torch.softmax(model.logits, -1)[2] > 0.8


def test_resps_checkpoints_must_fall_between_ppo_updates(tmp_path):
    """Re-SpS: save_steps given as a ratio is checked as the steps Trainer makes of it (ceil(max_steps * ratio)), and
    a checkpoint taken inside an update (Trainer's last one, at a max_steps that is no multiple) is not resumed: the
    rest of that update's rollout is not saved, and resuming would drop it."""
    from types import SimpleNamespace

    from transformers import TrainerState

    from hf_adaptive_spec.training.resps import ReSpSConfig, ReSpSTrainer

    schedule = dict(output_dir=str(tmp_path), max_steps=16, n_steps=32, per_device_train_batch_size=16, report_to=[])
    config = ReSpSConfig(**schedule)
    assert config.steps_per_update == 8  # 4 PPO epochs of 2 minibatches
    with pytest.raises(ValueError, match=r"save_steps=0.375 \(a checkpoint every 6 of max_steps=16 steps\) must be"):
        ReSpSConfig(**schedule, save_strategy="steps", save_steps=0.375)
    assert ReSpSConfig(**schedule, save_strategy="steps", save_steps=0.5).save_steps == 0.5  # every 8 steps

    checkpoint = tmp_path / "checkpoint-3"
    checkpoint.mkdir()
    TrainerState(global_step=3).save_to_json(str(checkpoint / "trainer_state.json"))
    with pytest.raises(ValueError, match="saved at step 3, inside a PPO update of 8 steps"):
        ReSpSTrainer._load_from_checkpoint(SimpleNamespace(args=config), str(checkpoint))


class _PerRowCritic(nn.Module):
    """Uniform logits and a critic that reads its value from the observation, as ``[N, 1]`` (an ``nn.Linear(h, 1)``
    head) or squeezed to ``[N]``."""

    def __init__(self, squeeze: bool):
        super().__init__()
        self.squeeze = squeeze

    def forward(self, observations):
        logits = torch.zeros(observations.shape[0], 2)
        return logits, observations[:, 0] if self.squeeze else observations


def test_ppo_loss_refuses_shapes_that_broadcast_into_a_wrong_loss():
    """Values [N, 1] against returns [N] broadcast to an [N, N] value loss: 2.5 here instead of 4.0."""
    batch = RolloutBatch(
        observations=torch.tensor([[1.0], [2.0]]), actions=torch.tensor([0, 1]),
        log_probs=torch.log(torch.full((2,), 0.5)), values=torch.zeros(2), rewards=torch.zeros(2), dones=torch.ones(2),
    )
    advantages, returns = torch.tensor([1.0, -1.0]), torch.tensor([3.0, 0.0])
    assert ppo_loss(_PerRowCritic(squeeze=True), batch, advantages, returns).value_loss == pytest.approx(4.0)
    with pytest.raises(ValueError, match=r"got \{'values': \(2, 1\)\}.*squeeze its last dimension"):
        ppo_loss(_PerRowCritic(squeeze=False), batch, advantages, returns)
    with pytest.raises(ValueError, match=r"'advantages': \(2, 1\), 'returns': \(1,\)"):
        ppo_loss(_PerRowCritic(squeeze=True), batch, advantages[:, None], returns[:1])
    with pytest.raises(ValueError, match=r"'batch.actions': \(2, 1\)"):
        ppo_loss(_PerRowCritic(squeeze=True), RolloutBatch(**{**vars(batch), "actions": batch.actions[:, None]}),
                 advantages, returns)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"clip_range": 0.0}, "clip_range must be > 0"),  # every ratio clamped to 1: no policy gradient
        ({"clip_range": -0.2}, "clip_range must be > 0"),  # clamp(ρ, 1.2, 0.8) pins every ratio at 0.8
        ({"gamma": 1.5}, "gamma must be in \\[0, 1\\]"),
        ({"gae_lambda": -0.5}, "gae_lambda must be in \\[0, 1\\]"),
    ],
)
@pytest.mark.parametrize("config", ["LTDConfig", "ReSpSConfig"])
def test_ppo_settings_that_train_another_objective_are_refused(tmp_path, config, setting, message):
    from hf_adaptive_spec.training.ltd import LTDConfig
    from hf_adaptive_spec.training.resps import ReSpSConfig

    config_class = {"LTDConfig": LTDConfig, "ReSpSConfig": ReSpSConfig}[config]
    with pytest.raises(ValueError, match=f"{config}.{message}"):
        config_class(output_dir=str(tmp_path), report_to=[], **setting)


@pytest.mark.parametrize("name", ["n_steps", "ppo_epochs"])
def test_resps_refuses_an_empty_rollout_by_name(tmp_path, name):
    """Either at 0 failed as 'integer modulo by zero'."""
    from hf_adaptive_spec.training.resps import ReSpSConfig

    with pytest.raises(ValueError, match=f"ReSpSConfig.{name} must be >= 1, got 0"):
        ReSpSConfig(output_dir=str(tmp_path), report_to=[], **{name: 0})


def test_resps_warns_at_configuration_of_a_max_steps_ending_inside_an_update(tmp_path, recwarn):
    """A max_steps that is no multiple of one PPO update's steps stopped training inside its last update, and its
    final checkpoint was refused only when resumed: now the configuration says so, with the multiples around it."""
    from hf_adaptive_spec.training.resps import ReSpSConfig

    schedule = dict(output_dir=str(tmp_path), n_steps=32, per_device_train_batch_size=16, report_to=[])
    with pytest.warns(UserWarning, match=r"max_steps=20 is no multiple of the 8 steps .* after 4 of its steps.* "
                                         r"Use max_steps=16 or 24"):
        ReSpSConfig(**schedule, max_steps=20)
    recwarn.clear()
    ReSpSConfig(**schedule, max_steps=24)
    assert not [w for w in recwarn if "PPO update" in str(w.message)]
