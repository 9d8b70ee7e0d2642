"""Training configs refuse, when they are built (before any model loads), the values that would train a silently
other objective or fail deep inside training: a negative loss decay (gradient ascent on odd steps), a negative
drafter cost (an infinite reward), a reward term flipped, a schedule shortened past its phases, a chain of 0, NaN
(which passes every ``value < 0`` check), a float where a count is meant; and two settings of one number."""

from __future__ import annotations

import math

import pytest

from hf_adaptive_spec.training.dvi.config import DVIConfig
from hf_adaptive_spec.training.eagle3.config import Eagle3Config
from hf_adaptive_spec.training.ltd.config import LTDConfig
from hf_adaptive_spec.training.ppow.config import PPOWConfig
from hf_adaptive_spec.training.radar.config import RadarConfig
from hf_adaptive_spec.training.resps.config import ReSpSConfig

REFUSED = [
    (Eagle3Config, dict(ploss_decay=-0.8), "ploss_decay must be a number >= 0"),
    (Eagle3Config, dict(ploss_decay=math.nan), "ploss_decay must be a number >= 0"),
    (Eagle3Config, dict(ttt_steps=0), "ttt_steps must be an int >= 1"),
    (Eagle3Config, dict(max_length=-1), "max_length must be an int >= 2"),
    (Eagle3Config, dict(draft_vocab_size=0), "draft_vocab_size must be an int >= 1"),
    (Eagle3Config, dict(initialization="target_last_layer"), "initialization must be one of"),
    (PPOWConfig, dict(relative_cost=-0.25), "relative_cost must be a number >= 0"),
    (PPOWConfig, dict(relative_cost=0.2, hardware_profile="profile.json"), "both set the reward's drafter cost"),
    (PPOWConfig, dict(beta=math.nan), "beta must be a number >= 0"),
    (PPOWConfig, dict(proximity_scale=-1.0), "proximity_scale must be a number >= 0"),
    (PPOWConfig, dict(window_size=2.5), "window_size must be an int >= 1"),
    (PPOWConfig, dict(max_length=0), "max_length must be an int >= 2"),
    (LTDConfig, dict(collaborative_rounds=-1), "collaborative_rounds must be an int >= 0"),
    (LTDConfig, dict(vf_coef=-0.5), "vf_coef must be a number >= 0"),
    (LTDConfig, dict(reward_scale=math.inf), "reward_scale must be a number > 0 and < inf"),
    (RadarConfig, dict(alpha=-0.02), "alpha must be a number >= 0"),
    (RadarConfig, dict(beta=0.0), "beta must be a number > 0"),
    (RadarConfig, dict(policy_step_seconds=-1.0), "policy_step_seconds must be a number >= 0"),
    (RadarConfig, dict(dropout=math.nan), "dropout must be a number >= 0 and < 1"),
    (RadarConfig, dict(mlp_hidden=0), "mlp_hidden must be an int >= 1"),
    (ReSpSConfig, dict(decision_interval=0), "decision_interval must be an int >= 1"),
    (ReSpSConfig, dict(inference_temperature=-1.0), "inference_temperature must be a number >= 0"),
    (ReSpSConfig, dict(grid_total_tokens=[-4], grid_depths=[2], grid_top_ks=[2]), "each of grid_total_tokens"),
    (ReSpSConfig, dict(net_arch=[0]), "each of net_arch must be an int >= 1"),
    (ReSpSConfig, dict(grid_total_tokens=[4], grid_depths=[-1], grid_top_ks=[2]), "each of grid_depths must be an int"),
    (ReSpSConfig, dict(vf_coef=-0.5), "vf_coef must be a number >= 0"),
    (DVIConfig, dict(draft_depth=0), "draft_depth must be an int >= 1"),
    (DVIConfig, dict(pg_weight=math.nan), r"pg_weight \(--pg_weight\) must be a number >= 0"),
    (DVIConfig, dict(adam_beta1=1.5), "adam_beta1 .* must be a number >= 0 and < 1"),
    (DVIConfig, dict(update_every=2.5), "update_every .* must be an int >= 0"),
]


@pytest.mark.parametrize("config, setting, message", REFUSED,
                         ids=[f"{c.__name__}-{'-'.join(map(str, s))}" for c, s, _ in REFUSED])
def test_a_value_that_would_train_something_else_is_refused_when_the_config_is_built(tmp_path, config, setting,
                                                                                     message):
    with pytest.raises(ValueError, match=message):
        config(output_dir=str(tmp_path), report_to=[], **setting)


CONFIGS = [Eagle3Config, PPOWConfig, LTDConfig, RadarConfig, ReSpSConfig, DVIConfig]


@pytest.mark.parametrize("config", CONFIGS)
def test_the_defaults_pass(tmp_path, config):
    config(output_dir=str(tmp_path), report_to=[])


@pytest.mark.parametrize("config", CONFIGS)
def test_fp16_is_refused_where_training_runs_on_the_cpu(tmp_path, config):
    """accelerate ignores fp16 on the CPU: the run trained in float32 while training_config.json recorded fp16."""
    with pytest.raises(ValueError, match=r"fp16=True trains on the CPU \(use_cpu=True.*Use bf16=True, the CPU's half"):
        config(output_dir=str(tmp_path), report_to=[], fp16=True)
    if config not in (LTDConfig, DVIConfig):  # their own training step runs outside autocast: they refuse bf16 too
        assert config(output_dir=str(tmp_path), report_to=[], bf16=True).bf16


WHOLE_RUN_WARMUPS = [
    (Eagle3Config, dict(max_steps=1), r"warmup_ratio=0.015 \(1 step, rounded up\) warms up for the whole run of "
     "max_steps=1"),
    (PPOWConfig, dict(max_steps=1), r"warmup_ratio=0.05 \(1 step, rounded up\) warms up for the whole run"),
    (Eagle3Config, dict(max_steps=4, warmup_ratio=0.8), r"warmup_ratio=0.8 \(4 steps, rounded up\)"),
    (Eagle3Config, dict(max_steps=3, warmup_ratio=0.0, warmup_steps=3), "warmup_steps=3 warms up for the whole run"),
    (RadarConfig, dict(max_steps=2, warmup_steps=5), "warmup_steps=5 warms up for the whole run of max_steps=2"),
    (DVIConfig, dict(max_steps=1, warmup_steps=1), "warmup_steps=1 warms up for the whole run of max_steps=1"),
]


@pytest.mark.parametrize("config, setting, message", WHOLE_RUN_WARMUPS,
                         ids=[f"{c.__name__}-{'-'.join(map(str, s.values()))}" for c, s, _ in WHOLE_RUN_WARMUPS])
def test_a_warmup_as_long_as_a_step_counted_run_is_refused(tmp_path, config, setting, message):
    """With max_steps=1 and the default warmup_ratio, the only step ran at learning rate 0 and changed nothing (the
    ratio becomes a fractional warmup_steps that transformers rounds up), yet the card said it trained 1 step."""
    with pytest.raises(ValueError, match=message + ".*Lower warmup_.* or raise max_steps"):
        config(output_dir=str(tmp_path), report_to=[], **setting)


def test_a_warmup_shorter_than_the_run_passes_and_an_unknown_length_is_not_checked(tmp_path):
    assert Eagle3Config(output_dir=str(tmp_path), report_to=[], max_steps=2).get_warmup_steps(2) == 1
    Eagle3Config(output_dir=str(tmp_path), report_to=[], max_steps=1, warmup_ratio=0.0)
    RadarConfig(output_dir=str(tmp_path), report_to=[], warmup_steps=5)  # epochs: the length is not known yet


def test_ppow_takes_the_papers_cost_unless_one_is_given_or_measured(tmp_path):
    assert PPOWConfig(output_dir=str(tmp_path), report_to=[]).drafter_cost == 0.12
    assert PPOWConfig(output_dir=str(tmp_path), report_to=[], relative_cost=0.3).drafter_cost == 0.3
    assert PPOWConfig(output_dir=str(tmp_path), report_to=[], relative_cost=0.0).drafter_cost == 0.0
