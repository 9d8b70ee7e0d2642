"""GreedyChainReplay logs what greedy generate with an online DVIDrafter logs, and updates at the same points."""

from __future__ import annotations

import pytest
import torch
from tiny_models import prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.dvi import DVIDrafter, DVIOnlineLearnerConfig
from hf_adaptive_spec.training.dvi import DVIConfig, DVITrainer
from hf_adaptive_spec.training.dvi.replay import GreedyChainReplay

from .conftest import CHAIN, EXIT_LAYER, TREE, fast_online_config, lora_state, prompts

torch.set_num_threads(1)

MAX_NEW_TOKENS = 40


def _drafter(target, **overrides) -> DVIDrafter:
    torch.manual_seed(0)
    return DVIDrafter(target, exit_layer=EXIT_LAYER, online=True, online_config=fast_online_config(**overrides))


def _live(target, drafter, prompt) -> list[int]:
    """Generate with the online drafter; returns the accepted lengths of the cycles."""
    target.generate(
        prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=MAX_NEW_TOKENS, do_sample=False,
        assistant_model=drafter, assistant_policy=CHAIN,
    )
    return target.last_speculation.accepted_lengths


def _completion(target, prompt) -> list[int]:
    out = target.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=MAX_NEW_TOKENS,
                          do_sample=False)
    return out[0, prompt.shape[1] :].tolist()


def _replay(target, drafter) -> GreedyChainReplay:
    eos = target.generation_config.eos_token_id
    return GreedyChainReplay(target, drafter, depth=4, max_new_tokens=MAX_NEW_TOKENS,
                             eos_token_ids=[eos] if eos is not None else [])


def _records(drafter):
    return [(r.token, r.reward, r.depth) for r in drafter.updater.buffer]


def _live_and_replayed(update_every: int, num_prompts: int) -> tuple[DVIDrafter, DVIDrafter]:
    """Two identical online drafters after the same prompts: one in generate, one replayed; cycles must agree."""
    target = tiny_model("llama")
    live, replayed = _drafter(target, update_every=update_every), _drafter(target, update_every=update_every)
    replay = _replay(target, replayed)
    for ids in prompts(num_prompts):
        live_lengths = _live(target, live, ids)
        assert replay.run(ids[0].tolist(), _completion(target, ids)).accepted_lengths == live_lengths
    return live, replayed


def test_replay_logs_the_records_of_greedy_generate():
    live, replayed = _live_and_replayed(update_every=0, num_prompts=3)
    assert _records(replayed) == _records(live)
    rewards = {reward for _, reward, _ in _records(live)}
    assert rewards == {0.0, 1.0}  # both outcomes occur, so the walk's acceptance rule is exercised
    for a, b in zip(live.updater.buffer, replayed.updater.buffer):
        # batched vs incremental rounding
        torch.testing.assert_close(a.draft_state, b.draft_state, atol=1e-3, rtol=1e-3)
        torch.testing.assert_close(a.target_state, b.target_state, atol=1e-3, rtol=1e-3)


def test_replay_updates_where_the_online_trigger_updates():
    live, replayed = _live_and_replayed(update_every=8, num_prompts=4)
    assert live.updater.num_updates == replayed.updater.num_updates > 2
    assert _records(replayed) == _records(live)
    before, after = lora_state(live), lora_state(replayed)
    for name in before:
        torch.testing.assert_close(before[name], after[name], atol=1e-4, rtol=1e-3)


def test_trainer_replay_rollout_trains_from_completions(tmp_path):
    target = tiny_model("llama")
    data = [{"input_ids": p[0].tolist(), "completion_ids": _completion(target, p)} for p in prompts(4)]
    args = DVIConfig(
        output_dir=str(tmp_path), max_steps=4, exit_layer=EXIT_LAYER, max_new_tokens=MAX_NEW_TOKENS, rollout="replay",
        logging_steps=2, save_strategy="no", report_to=[], disable_tqdm=True, learning_rate=1e-2, update_batch_size=32,
    )
    trainer = DVITrainer(target_model=target, args=args, train_dataset=data)
    trainer.train()
    assert trainer.drafter.updater.num_updates == 4  # one update per prompt, as with generate
    assert all("mean_accepted_tokens" in entry for entry in trainer.state.log_history if "kl" in entry)

    with pytest.raises(ValueError, match="completion_ids"):
        DVITrainer(target_model=target, args=args, train_dataset=[{"input_ids": data[0]["input_ids"]}]).train()
    with pytest.raises(ValueError, match="greedy chains"):
        DVITrainer(target_model=target, args=args, train_dataset=data, policy=TREE)
    with pytest.raises(ValueError, match="rollout"):
        DVIConfig(output_dir=str(tmp_path), rollout="beam")


def test_a_new_lora_head_is_the_seeds_whatever_ran_before(tmp_path):
    """The Trainer seeds after the drafter is built: a new head's LoRA weights came from whatever the global generator
    held."""
    target = tiny_model("llama")
    data = [{"input_ids": p[0].tolist()} for p in prompts(1)]

    def head(seed: int) -> dict[str, torch.Tensor]:
        torch.randn(7)  # whatever ran before moves the global generator
        args = DVIConfig(output_dir=str(tmp_path), exit_layer=EXIT_LAYER, seed=seed, report_to=[])
        return lora_state(DVITrainer(target_model=target, args=args, train_dataset=data).drafter)

    first, again, other = head(3), head(3), head(4)
    assert all(torch.equal(first[name], again[name]) for name in first)
    assert any(not torch.equal(first[name], other[name]) for name in first)


def test_a_frozen_drafter_is_evaluated_without_logging():
    target = tiny_model("llama")
    live, replayed = _drafter(target, update_every=0), _drafter(target, update_every=0)
    live.freeze()
    replayed.freeze()
    replay = _replay(target, replayed)
    for ids in prompts(2):
        assert replay.run(ids[0].tolist(), _completion(target, ids)).accepted_lengths == _live(target, live, ids)
        assert replay.last_greedy_agreement == 1.0  # the completion is the target's greedy output
    assert len(replayed.updater.buffer) == 0


def test_replay_stops_where_a_completion_without_end_of_sequence_stops():
    target = tiny_model("llama")
    drafter = _drafter(target, update_every=0)
    prompt = prompts(1)[0]
    completion = _completion(target, prompt)[:7]
    stats = _replay(target, drafter).run(prompt[0].tolist(), completion)
    emitted = 1 + sum(stats.accepted_lengths) + stats.cycles  # prefill token + every cycle's tokens and bonus
    assert emitted - len(completion) in (0, 1)  # the last cycle's bonus token may lie past the completion


def test_the_exact_replay_stops_at_an_end_of_sequence_token_inside_a_chain_as_generate_does():
    """Data that goes on past an end-of-sequence id (a model with several): the replay logs and counts what live
    generate does, which stops there."""
    target, ids, chain = tiny_model("llama"), prompt(6, seed=0), hfas.StaticTreePolicy.chain(4)
    full = target.generate(ids, max_new_tokens=40, do_sample=False)[0, 6:].tolist()
    config = DVIOnlineLearnerConfig(update_every=0, buffer_size=10_000)
    ends = [full[k] for k in range(3, 30) if full[k] not in full[:k]][:5]
    assert ends
    for end in ends:
        live = DVIDrafter(target, exit_layer=EXIT_LAYER, online=True, online_config=config)
        target.generate(ids, max_new_tokens=40, do_sample=False, eos_token_id=end, pad_token_id=0,
                        assistant_model=live, assistant_policy=chain)
        replayed = DVIDrafter(target, exit_layer=EXIT_LAYER, online=True, online_config=config)
        stats = GreedyChainReplay(target, replayed, 4, 40, [end]).run(ids[0].tolist(), full)
        assert stats.accepted_lengths == target.last_speculation.accepted_lengths, end
        assert [r.token for r in replayed.updater.buffer] == [r.token for r in live.updater.buffer], end
