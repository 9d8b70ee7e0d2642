"""What DVI refuses or keeps safe: a peft target's own head adapter, non-finite learning, ill-typed learner settings,
LoRA settings peft would fail on, a restarted schedule said out loud, the learning rate a save records, and the
trainer's flags and log telling what ran."""

from __future__ import annotations

import hashlib
import json
import logging
import math

import pytest
import torch
from peft import LoraConfig, get_peft_model
from tiny_models import prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.dvi import DVIDrafter, DVIOnlineLearnerConfig
from hf_adaptive_spec.training.dvi import DVIConfig, DVITrainer

from .conftest import CHAIN, EXIT_LAYER, fast_online_config, lora_state, make_drafter, prompts

torch.set_num_threads(1)


def _digest(model: torch.nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().float().contiguous().numpy().tobytes())
    return digest.hexdigest()


def _greedy(model, ids, **kwargs) -> torch.Tensor:
    return model.generate(input_ids=ids, do_sample=False, max_new_tokens=16, **kwargs)


def _peft_target(adapter_name: str = "default", **lora) -> torch.nn.Module:
    torch.manual_seed(3)
    model = get_peft_model(tiny_model("llama"), LoraConfig(r=4, init_lora_weights=False, **lora),
                           adapter_name=adapter_name)
    if lora.get("modules_to_save"):
        with torch.no_grad():  # the user's own trained head: not the original one
            model.base_model.model.lm_head.modules_to_save[adapter_name].weight.mul_(1.5)
    return hfas.enable(model.eval())


# ---- 1. a peft target ----------------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("adapter_name, lora", [
    ("default", {"target_modules": ["q_proj", "lm_head"]}),  # DVI's adapter name: peft overwrote the user's
    ("mine", {"target_modules": ["q_proj", "lm_head"]}),  # another name: both active, the updater trained the user's
    ("default", {"target_modules": ["q_proj"], "modules_to_save": ["lm_head"]}),  # peft's raw error
], ids=["lora-default", "lora-other-name", "modules-to-save"])
def test_a_target_whose_output_head_holds_a_peft_adapter_is_refused_before_anything_changes(adapter_name, lora):
    model = _peft_target(adapter_name, **lora)
    before, tokens = _digest(model), _greedy(model, prompt(8))
    with pytest.raises(ValueError, match=r"the target's output head 'lm_head' holds a peft adapter of its own .*"
                                         rf"adapters \['{adapter_name}'\].*model.merge_and_unload\(\).*model.unload\(\)"
                                         r".*leave out 'lm_head'"):
        DVIDrafter(model, exit_layer=EXIT_LAYER, online=True, online_config=fast_online_config())
    assert _digest(model) == before
    assert torch.equal(_greedy(model, prompt(8)), tokens)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_peft_target_whose_adapter_leaves_the_head_out_is_never_changed():
    """The user's adapter on q_proj/v_proj, named 'default' as DVI's is: building the drafter, generating with
    online learning and its updates change nothing of the target, and plain generate keeps its tokens."""
    model = _peft_target(target_modules=["q_proj", "v_proj"])
    before = _digest(model)
    plain = [_greedy(model, ids) for ids in prompts(3, 8)]
    drafter = DVIDrafter(model, exit_layer=EXIT_LAYER, online=True, online_config=fast_online_config(update_every=4))
    assert _digest(model) == before
    drafted = [_greedy(model, ids, assistant_model=drafter, assistant_policy=CHAIN) for ids in prompts(3, 8)]
    assert drafter.updater.num_updates > 0
    assert all(torch.equal(a, b) for a, b in zip(plain, drafted))  # lossless
    assert _digest(model) == before
    assert all(torch.equal(a, _greedy(model, ids)) for a, ids in zip(plain, prompts(3, 8)))
    assert model.active_adapters == ["default"]


# ---- 2. non-finite learning ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("setting", [{"learning_rate": math.inf}, {"kl_temperature": math.inf},
                                     {"adam_epsilon": math.nan}, {"adam_epsilon": math.inf}])
def test_a_setting_that_is_not_finite_is_refused(setting):
    (name, value), = setting.items()
    with pytest.raises(ValueError, match=rf"DVIOnlineLearnerConfig.{name} must be a number .*< inf.*got {value}"):
        DVIOnlineLearnerConfig(**setting)
    with pytest.raises(ValueError, match=rf"{name} \(--{name}\) must be a number"):
        DVIConfig(output_dir="unused", report_to=[], **setting)


def test_an_update_that_is_not_finite_writes_nothing_and_warns_once(target, caplog):
    """A learning rate of 1e30 (finite, taken) overflows the head's logits after the first update: the next losses are
    NaN, and their updates turned the adapter NaN, which was saved so. Those updates are skipped, the schedule stays,
    the first skip warns naming the learning rate, and generation stays lossless."""
    drafter = make_drafter(target, learning_rate=1e30, update_every=4)
    plain = [_greedy(target, ids) for ids in prompts(3)]
    with caplog.at_level(logging.WARNING):
        drafted = [_greedy(target, ids, assistant_model=drafter, assistant_policy=CHAIN) for ids in prompts(3)]
    assert all(torch.equal(a, b) for a, b in zip(plain, drafted))
    assert drafter.updater.skipped_updates >= 1
    assert all(bool(torch.isfinite(weights).all()) for weights in lora_state(drafter).values())
    assert caplog.text.count("DVI's online update was skipped") == 1
    assert "The likely cause is the learning rate (1e+30)" in caplog.text


def test_a_rate_above_float32s_range_skips_the_update_rather_than_fail_generate(target):
    """A finite learning rate of 1e39 passed the check and overflowed inside AdamW's step ('value cannot be converted
    to type float without overflow'), which came out of generate (found by the review): the update is skipped, the
    adapter left as it was, and generation stays lossless."""
    drafter = make_drafter(target, learning_rate=1e39, update_every=4)
    weights = lora_state(drafter)
    plain = [_greedy(target, ids) for ids in prompts(3)]
    drafted = [_greedy(target, ids, assistant_model=drafter, assistant_policy=CHAIN) for ids in prompts(3)]
    assert all(torch.equal(a, b) for a, b in zip(plain, drafted))
    assert drafter.updater.skipped_updates >= 1 and drafter.updater.num_updates == 0
    assert all(torch.equal(weights[name], now) for name, now in lora_state(drafter).items())


def test_an_update_whose_loss_is_not_finite_is_skipped(target):
    """A NaN in the records (here put there by hand) gave a NaN loss, whose step wrote NaN into the adapter."""
    drafter = make_drafter(target, update_every=0)
    _greedy(target, prompts(1)[0], assistant_model=drafter, assistant_policy=CHAIN)
    updater = drafter.updater
    for record in updater.buffer.newest(len(updater.buffer)):
        record.target_state.fill_(math.nan)
    weights, optimizer_state = lora_state(drafter), str(updater.optimizer.state_dict())
    metrics = drafter.update()
    assert metrics.skipped and math.isnan(metrics.loss)
    assert (updater.num_updates, updater.skipped_updates, len(updater.history)) == (0, 1, 0)
    assert all(torch.equal(weights[name], now) for name, now in lora_state(drafter).items())
    assert str(updater.optimizer.state_dict()) == optimizer_state


# ---- 3. a restarted schedule ---------------------------------------------------------------------------------------


def test_loading_an_offline_adapter_online_says_the_schedule_starts_again(target, tmp_path, caplog):
    """The shipped adapter has no dvi_online_state.json: from_pretrained(online=True) went back to KL-only updates
    without a word, where the trainer's --init_from warned."""
    make_drafter(target, online=False).save_pretrained(tmp_path / "offline")
    with caplog.at_level(logging.WARNING):
        loaded = DVIDrafter.from_pretrained(tmp_path / "offline", target=target, online=True)
    assert loaded.updater.num_updates == 0
    assert "offline' has no dvi_online_state.json: the KL->RL schedule starts again from KL-only updates" in caplog.text
    assert "online_config=DVIOnlineLearnerConfig(warmup_updates=0, ramp_updates=0)" in caplog.text
    caplog.clear()
    make_drafter(target).save_pretrained(tmp_path / "online")
    with caplog.at_level(logging.WARNING):
        DVIDrafter.from_pretrained(tmp_path / "online", target=target, online=True)
    assert "starts again" not in caplog.text


# ---- 4. the learning rate a save records ---------------------------------------------------------------------------


def test_a_save_records_the_learning_rate_the_optimizer_runs_at(target, tmp_path):
    """The documented way to change a running learner's rate (the optimizer's param group) saved the config's old rate,
    and the reloaded learner ran at it; a scheduler's decayed rate is not what a loaded learner runs at: its base is."""
    drafter = make_drafter(target, learning_rate=1e-2)
    drafter.updater.optimizer.param_groups[0]["lr"] = 3e-3
    _greedy(target, prompts(1)[0], assistant_model=drafter, assistant_policy=CHAIN)
    drafter.save_pretrained(tmp_path / "changed")
    saved = json.loads((tmp_path / "changed" / "dvi_online_state.json").read_text())
    assert saved["online_config"]["learning_rate"] == 3e-3
    loaded = DVIDrafter.from_pretrained(tmp_path / "changed", target=target, online=True)
    assert loaded.updater.optimizer.param_groups[0]["lr"] == 3e-3

    scheduled = make_drafter(target, learning_rate=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(scheduled.updater.optimizer, lambda step: 0.0)  # decayed to 0
    scheduler.step()
    scheduled.save_pretrained(tmp_path / "scheduled")
    saved = json.loads((tmp_path / "scheduled" / "dvi_online_state.json").read_text())
    assert saved["online_config"]["learning_rate"] == 1e-2  # the schedule's base: a loaded learner runs it, not 0
    assert DVIDrafter.from_pretrained(tmp_path / "scheduled", target=target,
                                      online=True).updater.optimizer.param_groups[0]["lr"] == 1e-2


# ---- 5. counts and the seed ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("setting, message", [
    ({"buffer_size": 2.5}, r"buffer_size must be an int >= 1, got 2.5"),  # a raw TypeError inside the buffer
    ({"batch_size": True}, r"batch_size must be an int >= 1, got True"),
    ({"update_every": 4.0}, r"update_every must be an int >= 0, got 4.0"),
    ({"warmup_updates": 1.5}, r"warmup_updates must be an int >= 0"),
    ({"seed": -1}, r"seed must be an int >= 0 \(the seed of the buffer sampling and dropout masks\), got -1"),
    ({"seed": 1.5}, r"seed must be an int >= 0"),
])
def test_counts_and_the_seed_must_be_ints(setting, message):
    with pytest.raises(ValueError, match=r"DVIOnlineLearnerConfig\." + message):
        DVIOnlineLearnerConfig(**setting)


def test_a_float_buffer_size_is_refused_by_the_trainers_config_under_its_flag(tmp_path):
    with pytest.raises(ValueError, match=r"DVIConfig.update_batch_size \(--update_batch_size\) must be an int >= 1"):
        DVIConfig(output_dir=str(tmp_path), report_to=[], update_batch_size=2.5)


# ---- 6. LoRA settings ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("setting, message", [
    ({"lora_r": 0}, r"DVIConfig: lora_r \(--lora_r\) must be an int >= 1"),
    ({"lora_dropout": 1.5}, r"DVIConfig: lora_dropout \(--lora_dropout\) must be a number >= 0 and < 1"),
    ({"lora_dropout": -0.1}, r"lora_dropout \(--lora_dropout\) must be a number >= 0 and < 1"),
    ({"lora_alpha": 0}, r"lora_alpha \(--lora_alpha\) must be a number > 0"),
])
def test_lora_flags_peft_would_fail_on_are_refused_by_the_config(tmp_path, setting, message):
    """Refused when the config is built, before any model loads (peft and torch failed after the target loaded)."""
    with pytest.raises(ValueError, match=message):
        DVIConfig(output_dir=str(tmp_path), report_to=[], **setting)


@pytest.mark.parametrize("setting, message", [
    ({"r": 0}, r"DVIDrafter: lora_config.r must be an int >= 1"),
    ({"lora_dropout": 1.5}, r"DVIDrafter: lora_config.lora_dropout must be a number >= 0 and < 1"),
])
def test_a_lora_config_peft_would_fail_on_is_refused_by_the_drafter(target, setting, message):
    with pytest.raises(ValueError, match=message):
        DVIDrafter(target, exit_layer=EXIT_LAYER, lora_config=LoraConfig(target_modules=["draft_head"], **setting))


# ---- 7. the trainer's flags and log --------------------------------------------------------------------------------


def test_init_schedule_restart_without_init_from_is_refused():
    """It was read with --init_from alone, and ignored without it."""
    from hf_adaptive_spec.training.dvi.script import DVIScriptArguments

    with pytest.raises(ValueError, match=r"--init_schedule restart restarts the KL->RL schedule of --init_from's "
                                         r"adapter, and no --init_from is given.*Drop --init_schedule, or pass "
                                         r"--init_from"):
        DVIScriptArguments(init_schedule="restart")
    assert DVIScriptArguments(init_schedule="restart", init_from="adapter").init_schedule == "restart"


def test_the_logged_grad_norm_is_the_updates_own(tmp_path):
    """The Trainer measured the head after the updater had stepped and cleared its gradients: 0 at every step."""
    data = [{"input_ids": prompt(6, seed=seed)[0].tolist()} for seed in range(2)]
    args = DVIConfig(output_dir=str(tmp_path), max_steps=2, exit_layer=EXIT_LAYER, max_new_tokens=16, logging_steps=1,
                     save_strategy="no", report_to=[], seed=0, disable_tqdm=True, learning_rate=1e-2)
    trainer = DVITrainer(target_model=tiny_model("llama"), args=args, train_dataset=data)
    trainer.train()
    norms = [log["grad_norm"] for log in trainer.state.log_history if "grad_norm" in log]
    history = list(trainer.drafter.updater.history)
    assert len(norms) == 2 and all(norm > 0 for norm in norms)
    assert norms == pytest.approx([metrics.grad_norm for metrics in history])
