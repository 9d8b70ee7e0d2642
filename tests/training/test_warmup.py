"""The warm-up a training configuration asks for (hf_adaptive_spec.training.warmup)."""

from __future__ import annotations

import pytest

from hf_adaptive_spec.training.eagle3 import Eagle3Config


def test_warmup_steps_given_alone_replaces_the_configs_default_ratio(tmp_path):
    """transformers 5 counts the warm-up in warmup_steps alone: setting it was refused as "warmup_ratio=0.015 and
    warmup_steps=100 both set the warm-up", though 0.015 was the configuration's default, not the user's."""
    for steps in (100, 0.1):
        config = Eagle3Config(output_dir=str(tmp_path), warmup_steps=steps, max_steps=1000, report_to=[])
        assert (config.warmup_steps, config.warmup_ratio) == (steps, 0.0)
    assert Eagle3Config(output_dir=str(tmp_path), report_to=[]).warmup_steps == 0.015  # the default, carried
    with pytest.raises(ValueError, match=r"warmup_ratio=0.05 and warmup_steps=100 both set the warm-up"):
        Eagle3Config(output_dir=str(tmp_path), warmup_ratio=0.05, warmup_steps=100, max_steps=1000, report_to=[])
