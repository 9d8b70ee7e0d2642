"""Real-model tier: SmolLM2-135M-Instruct (embedded GGUF, fp32), run by CI.

Deselect locally with ``-m 'not slow'``.
"""

from __future__ import annotations

import pytest
import torch
from transformers import TextStreamer

import hf_adaptive_spec as hfas

pytestmark = pytest.mark.slow

PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain recursion to a child in two sentences.",
    "List three prime numbers and explain why they are prime.",
    "Translate 'good morning' into Spanish and German.",
]


@pytest.fixture(scope="module")
def smollm2():
    model, tokenizer = hfas.load_default_model(dtype=torch.float32)
    return hfas.enable(model), tokenizer


def _chat(tokenizer, text: str) -> torch.Tensor:
    messages = [{"role": "user", "content": text}]
    return tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )["input_ids"]


_STOCK_OUTPUTS: dict[tuple[str, int], torch.Tensor] = {}


def _identical_to_stock(
    model, tokenizer, drafter, policy, prompts: list[str], max_new_tokens: int = 48, **generate_kwargs
) -> list:
    """Greedy speculative generate on each prompt, asserted token-identical to stock (generated once per
    prompt and length for the module); its speculation stats."""
    stats = []
    for text in prompts:
        ids = _chat(tokenizer, text)
        if (text, max_new_tokens) not in _STOCK_OUTPUTS:
            _STOCK_OUTPUTS[text, max_new_tokens] = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False)
        expected = _STOCK_OUTPUTS[text, max_new_tokens]
        out = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False, assistant_model=drafter,
                             assistant_policy=policy, return_dict_in_generate=True, **generate_kwargs)
        assert torch.equal(out.sequences, expected), (text, policy)
        stats.append(out.speculation)
    return stats


def test_default_model_is_smollm2(smollm2):
    model, tokenizer = smollm2
    assert model.config.num_hidden_layers == 30 and model.config.hidden_size == 576
    assert model.config.vocab_size == 49152 and model.dtype == torch.float32
    assert tokenizer.eos_token == "<|im_end|>"
    assert model.config.name_or_path == "HuggingFaceTB/SmolLM2-135M-Instruct"  # what cards and adapters record


def test_greedy_identity_on_real_prompts(smollm2):
    model, tokenizer = smollm2
    drafter = hfas.CausalLMDrafter.from_target_layers(model, num_layers=4)
    policy = hfas.StaticTreePolicy(depth=3, top_k=4, total_tokens=10)
    for text in PROMPTS:
        ids = _chat(tokenizer, text)
        expected = model.generate(ids, max_new_tokens=64, do_sample=False)
        out = model.generate(ids, max_new_tokens=64, do_sample=False, assistant_model=drafter, assistant_policy=policy)
        assert torch.equal(out, expected), text


def test_long_accepted_blocks_stay_identical(smollm2):
    """The target drafting for itself: every draft is accepted, so whole blocks commit at once."""
    model, tokenizer = smollm2
    ids = _chat(tokenizer, PROMPTS[2])
    expected = model.generate(ids, max_new_tokens=48, do_sample=False)
    out = model.generate(
        ids, max_new_tokens=48, do_sample=False, return_dict_in_generate=True,
        assistant_model=hfas.CausalLMDrafter(model), assistant_policy=hfas.StaticTreePolicy.chain(6),
    )
    assert torch.equal(out.sequences, expected)
    assert out.speculation.mean_accepted_tokens > 5


def test_text_streamer_and_stop_strings(smollm2, capsys):
    model, tokenizer = smollm2
    ids = _chat(tokenizer, PROMPTS[1])
    drafter = hfas.CausalLMDrafter.from_target_layers(model, num_layers=4)
    policy = hfas.StaticTreePolicy(depth=3, top_k=2, total_tokens=6)
    kwargs = dict(max_new_tokens=40, do_sample=False, stop_strings=["\n"], tokenizer=tokenizer)
    expected = model.generate(ids, streamer=TextStreamer(tokenizer, skip_prompt=True), **kwargs)
    stock_text = capsys.readouterr().out
    out = model.generate(ids, streamer=TextStreamer(tokenizer, skip_prompt=True), assistant_model=drafter,
                         assistant_policy=policy, **kwargs)
    assert torch.equal(out, expected)
    assert capsys.readouterr().out == stock_text and stock_text.strip()


def test_shipped_eagle3_drafter_is_lossless(smollm2):
    model, tokenizer = smollm2
    drafter = hfas.Eagle3Drafter.from_pretrained(hfas.shipped_checkpoint("eagle3"), target=model)
    assert drafter.model.config.draft_vocab_size == 12288 and drafter.feature_layers == (2, 15, 27)
    for policy in (hfas.StaticTreePolicy(depth=3, top_k=1, total_tokens=4),
                   hfas.StaticTreePolicy(depth=5, top_k=4, total_tokens=12)):
        for stats in _identical_to_stock(model, tokenizer, drafter, policy, PROMPTS[:3], max_new_tokens=64):
            assert stats.mean_accepted_tokens > 1.0  # the trained drafter is right some of the time


def test_lookup_branch_accepts_copied_text_losslessly(smollm2):
    """Copying from the prompt is where the drafter is weak and the prompt-lookup branch is right."""
    model, tokenizer = smollm2
    drafter = hfas.Eagle3Drafter.from_pretrained(hfas.shipped_checkpoint("eagle3"), target=model)
    policy = hfas.StaticTreePolicy(depth=1, top_k=8, total_tokens=6)
    copy = ["Repeat this sentence exactly: The quick brown fox jumps over the lazy dog beside the quiet river."]
    (tree,) = _identical_to_stock(model, tokenizer, drafter, policy, copy)
    (with_lookup,) = _identical_to_stock(model, tokenizer, drafter, policy, copy, prompt_lookup_num_tokens=4)
    assert with_lookup.mean_accepted_tokens > tree.mean_accepted_tokens + 0.5
    assert max(with_lookup.accepted_lengths) > 1  # deeper than the depth-1 tree can reach


def test_shipped_dvi_adapter_learning_online_is_lossless(smollm2):
    model, tokenizer = smollm2
    drafter = hfas.DVIDrafter.from_pretrained(hfas.shipped_checkpoint("dvi"), target=model, online=True)
    policy = hfas.StaticTreePolicy.chain(2)
    accepted = sum(sum(stats.accepted_lengths)
                   for stats in _identical_to_stock(model, tokenizer, drafter, policy, PROMPTS[:3]))
    assert accepted > 0 and len(drafter.updater.buffer) > 0  # the trained head is right some of the time, and logs


def test_dvi_replay_is_exact_on_smollm2(smollm2):
    """DVITrainer's replay rollout gives the accepted lengths live generate gives, on the real model."""
    from hf_adaptive_spec.training.dvi.replay import GreedyChainReplay

    model, tokenizer = smollm2
    drafter = hfas.DVIDrafter.from_pretrained(hfas.shipped_checkpoint("dvi"), target=model)
    replay = GreedyChainReplay(model, drafter, depth=3, max_new_tokens=48, eos_token_ids=[tokenizer.eos_token_id])
    for text in PROMPTS[3:]:
        ids = _chat(tokenizer, text)
        completion = model.generate(ids, max_new_tokens=48, do_sample=False)[0, ids.shape[1] :].tolist()
        model.generate(ids, max_new_tokens=48, do_sample=False, assistant_model=drafter,
                       assistant_policy=hfas.StaticTreePolicy.chain(3))
        assert replay.run(ids[0].tolist(), completion).accepted_lengths == model.last_speculation.accepted_lengths, text


@pytest.mark.parametrize(
    ("name", "policy_type"),
    [("ltd", hfas.LTDPolicy), ("resps", hfas.ReSpSPolicy), ("radar", hfas.RadarPolicy)],
)
def test_shipped_policies_drive_the_shipped_drafter_losslessly(smollm2, name, policy_type):
    """What `bench --methods eagle3-<name>` and the quickstart load: the package's policy for this drafter, trained
    with its weights (no drafter mismatch reported), with the prompt-lookup branch it was trained with and without it
    (then reported as another branch)."""
    model, tokenizer = smollm2
    drafter = hfas.Eagle3Drafter.from_pretrained(hfas.shipped_checkpoint("eagle3"), target=model)
    policy = hfas.AutoDraftPolicy.from_pretrained(str(hfas.shipped_checkpoint(name)))
    assert type(policy) is policy_type
    without = _identical_to_stock(model, tokenizer, drafter, policy, PROMPTS[:3])
    with_branch = _identical_to_stock(model, tokenizer, drafter, policy, PROMPTS[:2], prompt_lookup_num_tokens=4)
    stats = without + with_branch
    assert max(n for s in stats for n in s.verified_tokens) > 1  # it speculates on some cycles
    assert all(s.policy_drafter_mismatch is None for s in stats)  # trained with the shipped drafter's weights
    assert all(s.policy_lookup_mismatch is None for s in with_branch)  # and with the 4-token branch
    assert all("trained with the 4-token prompt-lookup branch" in s.policy_lookup_mismatch for s in without)
