"""Regeneration settings that silently changed the data: the sampling distribution, bad values, repeated ids."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import LlamaForCausalLM, PreTrainedTokenizerFast, TemperatureLogitsWarper

from hf_adaptive_spec.core.settings import sampling_kwargs
from hf_adaptive_spec.training_data.regenerate import (
    RegenerationConfig,
    copy_conversations,
    generate_reply_ids,
    prompt_ids,
    regenerate,
)
from hf_adaptive_spec.training_data.sharegpt import Conversation


@pytest.mark.parametrize("setting", [{"top_k": 1}, {"top_p": 0.01}])
def test_sampling_draws_from_the_whole_distribution_whatever_the_generation_config_says(
    tiny_model: LlamaForCausalLM, tiny_tokenizer: PreTrainedTokenizerFast, monkeypatch, setting: dict
) -> None:
    """A target whose generation_config truncates sampling (or generate's own default top-k of 50) must not narrow
    the regenerated answers: temperature > 0 samples softmax(logits / T), as the benchmark does. With top-k 1 (or a
    tiny top-p) left on, every sample was the greedy answer."""
    for name, value in setting.items():
        monkeypatch.setattr(tiny_model.generation_config, name, value)
    prompts = [prompt_ids(tiny_tokenizer, [{"role": "user", "content": "hello world"}])] * 4
    torch.manual_seed(0)
    replies, _, _ = generate_reply_ids(tiny_model, tiny_tokenizer, prompts, RegenerationConfig(max_new_tokens=8,
                                                                                               temperature=1.0))
    assert len({tuple(reply) for reply in replies}) > 1


TRUNCATING = [{"top_k": 1}, {"top_p": 0.01}, {"min_p": 0.5}, {"typical_p": 0.2}, {"epsilon_cutoff": 0.1},
              {"eta_cutoff": 0.1}, {"top_h": 0.3}]


@pytest.mark.parametrize("setting", TRUNCATING, ids=lambda setting: next(iter(setting)))
def test_the_sampling_kwargs_leave_generate_only_the_temperature_whatever_the_generation_config_says(
    tiny_model: LlamaForCausalLM, monkeypatch, setting: dict
) -> None:
    """The processors ``generate`` builds with :func:`sampling_kwargs` over a generation_config that truncates: only
    the temperature, so the scores are ``logits / T`` with no token cut. min_p, typical_p, epsilon_cutoff, eta_cutoff
    and top_h were left on (their warper cut the distribution the bench and the regenerated data sample)."""
    for name, value in setting.items():
        monkeypatch.setattr(tiny_model.generation_config, name, value)
    captured = []

    def capture(model, input_ids, logits_processor, **kwargs):
        captured.append(logits_processor)
        return input_ids

    input_ids = torch.tensor([[5, 6, 7]])
    tiny_model.generate(input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=4, use_cache=False,
                        custom_generate=capture, **sampling_kwargs(0.7))
    assert [type(processor) for processor in captured[0]] == [TemperatureLogitsWarper]
    logits = torch.randn(1, tiny_model.config.vocab_size, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(captured[0](input_ids, logits.clone()), logits / 0.7)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"max_turns": 0}, "max_turns must be >= 1"),  # wrote every conversation empty and marked it done
        ({"batch_size": 0}, "batch_size must be >= 1"),
        ({"max_new_tokens": 0}, "max_new_tokens must be >= 1"),
        ({"max_prompt_tokens": 0}, "max_prompt_tokens must be >= 1"),
        ({"temperature": -0.5}, "temperature must be 0 \\(greedy\\) or positive"),  # decoded greedily
    ],
)
def test_settings_that_would_write_wrong_data_are_refused(setting: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RegenerationConfig(**setting)


def _conversation(conversation_id: str, question: str) -> Conversation:
    return Conversation(id=conversation_id, messages=[{"role": "user", "content": question},
                                                      {"role": "assistant", "content": "original answer"}])


def test_a_repeated_id_is_refused_before_anything_is_written(
    tiny_model: LlamaForCausalLM, tiny_tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    """Each record was written once per occurrence of its id (two records under one id, and a resumed run could
    not tell which was done)."""
    conversations = [_conversation("a", "hello world"), _conversation("b", "how are you"),
                     _conversation("a", "the cat sat on the mat")]
    output = tmp_path / "regenerated.jsonl"
    with pytest.raises(ValueError, match="'a' comes twice"):
        regenerate(tiny_model, tiny_tokenizer, conversations, output, RegenerationConfig(max_new_tokens=2))
    with pytest.raises(ValueError, match="'a' comes twice"):
        copy_conversations(conversations, output)
    assert not output.exists()


def test_a_sampled_file_made_before_per_batch_seeds_is_not_added_to(tmp_path: Path, monkeypatch) -> None:
    """A file sampled from one global generator (its settings name no sampling_seed) is refused: a resumed run's
    answers would be seeded otherwise than its first records'. A greedy file draws nothing and is still added to."""
    import json

    monkeypatch.syspath_prepend("trainers")
    import regenerate_sharegpt

    parse = regenerate_sharegpt.make_parser().parse_args_into_dataclasses
    old = {"answers": "target", "task": "chat", "model": None, "dtype": "float32", "seed": 0, "sharegpt_file": None,
           "eval_data_dir": None, "max_new_tokens": 4, "temperature": 0.0, "max_turns": 1, "max_prompt_tokens": 512}
    greedy, sampled = tmp_path / "greedy.jsonl", tmp_path / "sampled.jsonl"
    for output, settings in ((greedy, old), (sampled, {**old, "temperature": 1.0, "sampling": {
            "do_sample": True, "temperature": 1.0, "top_k": 0, "top_p": 1.0}})):
        output.write_text('{"id": "a", "conversation": []}\n', encoding="utf-8")
        Path(f"{output}.settings.json").write_text(json.dumps(settings), encoding="utf-8")
    regenerate_sharegpt.check_resumed_output(*parse(["--output", str(greedy), "--max-new-tokens", "4"]))
    with pytest.raises(ValueError, match=r"sampling_seed: None -> \"per batch, from --seed and the batch's"):
        regenerate_sharegpt.check_resumed_output(*parse(["--output", str(sampled), "--max-new-tokens", "4",
                                                         "--temperature", "1"]))
