"""Regeneration keeps the ids the target generated for each answer, beside the answer's text."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

from hf_adaptive_spec.training_data.regenerate import (
    RegenerationConfig,
    answer_token_ids,
    closing_ids,
    prompt_ids,
    regenerate,
)
from hf_adaptive_spec.training_data.sharegpt import Conversation

#: the token the tiny model repeats after "how are you"; ``ending_model`` ends its answers there instead
REPEATED = "plus"


@pytest.fixture(scope="module")
def ending_model(tiny_model: LlamaForCausalLM, tiny_tokenizer: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    """The tiny model with end-of-sequence scored a little above ``REPEATED``: some answers end, others run on."""
    model = copy.deepcopy(tiny_model)
    weight = model.lm_head.weight.data
    weight[tiny_tokenizer.eos_token_id] = 1.5 * weight[tiny_tokenizer.convert_tokens_to_ids(REPEATED)]
    return model


def _generate(model, tokenizer, prompt: list[int], max_new_tokens: int) -> list[int]:
    output = model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                            max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id,
                            eos_token_id=tokenizer.eos_token_id)
    return output[0, len(prompt) :].tolist()


def test_answers_keep_the_ids_generate_produced_without_the_end_of_sequence_token(
    ending_model: LlamaForCausalLM, tiny_tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    tokenizer, output = tiny_tokenizer, tmp_path / "regenerated.jsonl"
    questions = {"finished": "how are you", "cut": "hello world"}
    conversations = [Conversation(id=key, messages=[{"role": "user", "content": q}]) for key, q in questions.items()]
    regenerate(ending_model, tokenizer, conversations, output, RegenerationConfig(max_new_tokens=12, batch_size=2))
    answers = {json.loads(line)["id"]: json.loads(line)["conversation"][1] for line in output.read_text().splitlines()}
    for key, question in questions.items():
        prompt = prompt_ids(tokenizer, [{"role": "user", "content": question}])
        generated = _generate(ending_model, tokenizer, prompt, 12)
        finished = tokenizer.eos_token_id in generated
        assert finished == (key == "finished")  # the test covers both cases
        expected = generated[: generated.index(tokenizer.eos_token_id)] if finished else generated
        assert answers[key]["token_ids"] == expected and len(expected) > 0
        assert answers[key]["content"] == tokenizer.decode(expected, skip_special_tokens=True)
        assert answers[key].get("truncated", False) == (not finished)
        assert answer_token_ids(tokenizer, answers[key]) == expected


def test_a_later_turn_keeps_its_ids_and_is_asked_with_the_earlier_answer_as_text(
    ending_model: LlamaForCausalLM, tiny_tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    tokenizer, output = tiny_tokenizer, tmp_path / "regenerated.jsonl"
    turns = [{"role": "user", "content": "how are you"}, {"role": "assistant", "content": "x"},
             {"role": "user", "content": "tell me more"}]
    regenerate(ending_model, tokenizer, [Conversation(id="c", messages=turns)], output,
               RegenerationConfig(max_new_tokens=8, max_turns=2))
    conversation = json.loads(output.read_text())["conversation"]
    text_history = [{key: m[key] for key in ("role", "content")} for m in conversation[:3]]
    generated = _generate(ending_model, tokenizer, prompt_ids(tokenizer, text_history), 8)
    eos = tokenizer.eos_token_id
    assert conversation[3]["token_ids"] == (generated[: generated.index(eos)] if eos in generated else generated)
    assert answer_token_ids(tokenizer, conversation[1]) is not None


def test_ids_another_tokenizer_wrote_are_refused(tiny_tokenizer: PreTrainedTokenizerFast) -> None:
    answer = {"role": "assistant", "content": "hello world", "token_ids": tiny_tokenizer.encode("the cat")}
    with pytest.raises(ValueError, match="do not decode to its content.*regenerated with another tokenizer"):
        answer_token_ids(tiny_tokenizer, answer)
    assert answer_token_ids(tiny_tokenizer, {"role": "assistant", "content": "hello world"}) is None


def test_closing_ids_are_the_tokens_the_template_ends_the_answer_with(make_tiny_tokenizer) -> None:
    """What EAGLE-3, PPOW and DVI train after an answer's ``token_ids``; a template whose closing merges with the
    answer's last token (no token boundary between them) is refused rather than cut inside a token."""
    tokenizer = make_tiny_tokenizer()
    turns = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "the cat"}]
    assert closing_ids(tokenizer, turns) == [tokenizer.eos_token_id]
    glued = tokenizer.chat_template.replace("{{ m['content'] }} <|im_end|>", "{{ m['content'] }}mat <|im_end|>")
    tokenizer.chat_template = glued
    with pytest.raises(ValueError, match="does not render an open final message as a prefix of the closed one"):
        closing_ids(tokenizer, turns)


def test_ids_outside_the_tokenizer_are_refused(tiny_tokenizer: PreTrainedTokenizerFast) -> None:
    """decode drops unknown ids, so an id past the vocabulary passed the decode check and failed later inside torch
    (DVI's embedding) or as a draft vocabulary 'd2t' error (EAGLE-3)."""
    ids = tiny_tokenizer.encode("hello world")
    for bad in (len(tiny_tokenizer), -1, 2.0):
        answer = {"role": "assistant", "content": "hello world", "token_ids": [*ids, bad]}
        with pytest.raises(ValueError, match=r"token_ids \[.*\] that are not ids of this tokenizer"):
            answer_token_ids(tiny_tokenizer, answer)
    assert answer_token_ids(tiny_tokenizer, {"role": "assistant", "content": "hello world", "token_ids": ids}) == ids
