import importlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

from hf_adaptive_spec.training_data.regenerate import (
    RegenerationConfig,
    copy_conversations,
    generate_reply_ids,
    left_pad,
    prompt_ids,
    regenerate,
)
from hf_adaptive_spec.training_data.sharegpt import Conversation


def generate_replies(model, tokenizer, prompts, config):
    """:func:`generate_reply_ids` with each reply decoded as regeneration writes its text."""
    replies, new_tokens, truncated = generate_reply_ids(model, tokenizer, prompts, config)
    return [tokenizer.decode(ids, skip_special_tokens=True) for ids in replies], new_tokens, truncated


USER_TURNS = ["hello world", "how are you", "what is two plus one", "tell me more", "the cat sat on the mat"]


def _conversations(count: int) -> list[Conversation]:
    return [
        Conversation(
            id=f"conv{i}",
            messages=[
                {"role": "user", "content": USER_TURNS[i % len(USER_TURNS)]},
                {"role": "assistant", "content": "original answer"},
                {"role": "user", "content": "tell me more"},
                {"role": "assistant", "content": "original answer"},
            ],
        )
        for i in range(count)
    ]


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_left_pad_puts_padding_on_the_left() -> None:
    input_ids, attention_mask = left_pad([[5, 6, 7], [8]], pad_token_id=0)
    assert input_ids.tolist() == [[5, 6, 7], [0, 0, 8]]
    assert attention_mask.tolist() == [[1, 1, 1], [0, 0, 1]]


@pytest.mark.parametrize("pad_token", ["<pad>", "<|im_end|>"])  # SmolLM2 pads with its end-of-sequence token
def test_batched_replies_equal_one_prompt_at_a_time(
    tiny_model: LlamaForCausalLM, make_tiny_tokenizer: Callable[[str], PreTrainedTokenizerFast], pad_token: str
) -> None:
    tiny_tokenizer = make_tiny_tokenizer(pad_token)
    config = RegenerationConfig(max_new_tokens=12)
    prompts = [prompt_ids(tiny_tokenizer, [{"role": "user", "content": turn}]) for turn in USER_TURNS]
    assert len({len(prompt) for prompt in prompts}) > 1  # padding is exercised
    batched, _, _ = generate_replies(tiny_model, tiny_tokenizer, prompts, config)
    alone = [generate_replies(tiny_model, tiny_tokenizer, [prompt], config)[0][0] for prompt in prompts]
    assert batched == alone
    assert all(reply.strip() for reply in batched)


def test_regenerate_writes_records_and_resumes_without_redoing_them(
    tiny_model: LlamaForCausalLM, tiny_tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    output = tmp_path / "regenerated.jsonl"
    config = RegenerationConfig(max_new_tokens=6, batch_size=2)
    first = regenerate(tiny_model, tiny_tokenizer, _conversations(3), output, config)
    assert (first.written, first.already_written) == (3, 0)
    assert first.new_tokens > 0
    before = _lines(output)

    second = regenerate(tiny_model, tiny_tokenizer, _conversations(5), output, config)
    assert (second.written, second.already_written) == (2, 3)
    after = _lines(output)
    assert after[:3] == before
    records = [json.loads(line) for line in after]
    assert sorted(record["id"] for record in records) == [f"conv{i}" for i in range(5)]
    for record in records:
        assert set(record) == {"id", "conversation"}
        assert [message["role"] for message in record["conversation"]] == ["user", "assistant"]
        assert record["conversation"][1]["content"] != "original answer"

    third = regenerate(tiny_model, tiny_tokenizer, _conversations(5), output, config)
    assert (third.written, third.already_written) == (0, 5)
    assert _lines(output) == after


def test_a_second_regeneration_of_one_file_is_refused_not_written_twice(
    tiny_model: LlamaForCausalLM, tiny_tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    """Two regenerations of one output file at once (a job started again while the first still ran) each read the
    ids written so far, then each wrote every conversation: every record came twice, and trained twice."""
    output, config = tmp_path / "regenerated.jsonl", RegenerationConfig(max_new_tokens=4, batch_size=2)

    def read_while_another_run_starts():
        regenerate(tiny_model, tiny_tokenizer, _conversations(3), output, config)  # the other process, meanwhile
        yield from _conversations(3)

    with pytest.raises(RuntimeError, match="being written by another process.*Wait for it to end.*another output"):
        regenerate(tiny_model, tiny_tokenizer, read_while_another_run_starts(), output, config)
    with pytest.raises(RuntimeError, match="being written by another process"):
        copy_conversations(read_while_another_run_starts(), output)
    regenerate(tiny_model, tiny_tokenizer, _conversations(3), output, config)
    assert sorted(json.loads(line)["id"] for line in _lines(output)) == ["conv0", "conv1", "conv2"]


def test_regenerate_redoes_a_record_cut_by_a_crash(
    tiny_model: LlamaForCausalLM, tiny_tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    output = tmp_path / "regenerated.jsonl"
    config = RegenerationConfig(max_new_tokens=6, batch_size=4)
    regenerate(tiny_model, tiny_tokenizer, _conversations(2), output, config)
    complete = output.read_text(encoding="utf-8")
    output.write_text(complete + '{"id": "conv2", "conver', encoding="utf-8")

    stats = regenerate(tiny_model, tiny_tokenizer, _conversations(3), output, config)
    assert (stats.written, stats.already_written) == (1, 2)
    records = [json.loads(line) for line in _lines(output)]
    assert [record["id"] for record in records] == ["conv0", "conv1", "conv2"]


def test_regenerate_answers_later_turns_with_its_own_earlier_answers(
    tiny_model: LlamaForCausalLM, tiny_tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    output = tmp_path / "regenerated.jsonl"
    config = RegenerationConfig(max_new_tokens=5, max_turns=2)
    regenerate(tiny_model, tiny_tokenizer, _conversations(1), output, config)
    conversation = json.loads(_lines(output)[0])["conversation"]
    assert [message["role"] for message in conversation] == ["user", "assistant", "user", "assistant"]
    assert [conversation[0]["content"], conversation[2]["content"]] == ["hello world", "tell me more"]

    def reply(history: list[dict[str, str]]) -> str:
        return generate_replies(tiny_model, tiny_tokenizer, [prompt_ids(tiny_tokenizer, history)], config)[0][0]

    assert conversation[1]["content"] == reply(conversation[:1])
    assert conversation[3]["content"] == reply(conversation[:3])


def test_regenerate_skips_prompts_over_the_token_budget(
    tiny_model: LlamaForCausalLM, tiny_tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    output = tmp_path / "regenerated.jsonl"
    short = prompt_ids(tiny_tokenizer, [{"role": "user", "content": "hello world"}])
    config = RegenerationConfig(max_new_tokens=4, max_turns=2, max_prompt_tokens=len(short))
    stats = regenerate(tiny_model, tiny_tokenizer, _conversations(5), output, config)
    # Only conv0 ("hello world") fits, and its second turn would not.
    assert (stats.written, stats.too_long) == (1, 4)
    record = json.loads(_lines(output)[0])
    assert record["id"] == "conv0"
    assert len(record["conversation"]) == 2


def test_sampling_depends_on_the_seed(
    tiny_model: LlamaForCausalLM, tiny_tokenizer: PreTrainedTokenizerFast
) -> None:
    config = RegenerationConfig(max_new_tokens=12, temperature=1.0)
    prompts = [prompt_ids(tiny_tokenizer, [{"role": "user", "content": "hello world"}])] * 4

    def sample(seed: int) -> list[str]:
        torch.manual_seed(seed)
        return generate_replies(tiny_model, tiny_tokenizer, prompts, config)[0]

    assert sample(0) == sample(0)
    assert len(set(sample(0))) > 1


def test_a_sampled_run_resumed_after_a_batch_writes_what_an_uninterrupted_run_writes(
    tiny_model: LlamaForCausalLM, tiny_tokenizer: PreTrainedTokenizerFast, tmp_path: Path, monkeypatch
) -> None:
    """Each batch samples with a seed of its own (the run's seed and the batch's ids). With torch's global generator
    (which the script seeds once at its start) the batches after a resume drew what the first batches had drawn, so
    the resumed file held other answers than an uninterrupted run's."""
    module = importlib.import_module("hf_adaptive_spec.training_data.regenerate")  # the package's name is the function

    config = RegenerationConfig(max_new_tokens=6, batch_size=2, temperature=1.0)
    torch.manual_seed(0)  # as the script's set_seed(--seed) at every start
    regenerate(tiny_model, tiny_tokenizer, _conversations(6), tmp_path / "straight.jsonl", config, seed=3)

    real_append, appended = module.append_records, []

    def stop_after_two_batches(path, records):
        real_append(path, records)
        appended.append(path)
        if len(appended) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(module, "append_records", stop_after_two_batches)
    torch.manual_seed(0)
    with pytest.raises(KeyboardInterrupt):
        regenerate(tiny_model, tiny_tokenizer, _conversations(6), tmp_path / "resumed.jsonl", config, seed=3)
    monkeypatch.setattr(module, "append_records", real_append)
    torch.manual_seed(0)
    stats = regenerate(tiny_model, tiny_tokenizer, _conversations(6), tmp_path / "resumed.jsonl", config, seed=3)
    assert (stats.written, stats.already_written) == (2, 4)
    straight, resumed = (sorted(_lines(tmp_path / name)) for name in ("straight.jsonl", "resumed.jsonl"))
    assert resumed == straight
    torch.manual_seed(0)
    regenerate(tiny_model, tiny_tokenizer, _conversations(6), tmp_path / "other_seed.jsonl", config, seed=4)
    assert sorted(_lines(tmp_path / "other_seed.jsonl")) != straight  # the seed is the run's


def test_copy_conversations_keeps_original_answers_and_skips_ids_already_written(tmp_path: Path) -> None:
    output = tmp_path / "mixed.jsonl"
    conversations = _conversations(3)
    output.write_text(
        json.dumps({"id": conversations[0].id, "conversation": [{"role": "user", "content": "kept"}]}) + "\n"
    )
    stats = copy_conversations(conversations, output)
    assert (stats.written, stats.already_written) == (2, 1)
    records = [json.loads(line) for line in _lines(output)]
    assert [r["id"] for r in records] == [c.id for c in conversations]
    assert records[0]["conversation"][0]["content"] == "kept"  # an earlier (regenerated) record is not replaced
    assert [r["conversation"] for r in records[1:]] == [c.messages for c in conversations[1:]]


def test_the_device_is_the_gpu_when_there_is_one_and_cuda_without_one_is_refused(monkeypatch) -> None:
    from hf_adaptive_spec.default_model import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(ValueError, match="torch sees no CUDA device: use --device cpu"):
        resolve_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")


def test_answers_cut_at_max_new_tokens_are_marked_truncated(
    tiny_model: LlamaForCausalLM, tiny_tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    output = tmp_path / "regenerated.jsonl"
    config = RegenerationConfig(max_new_tokens=3, max_turns=1)
    stats = regenerate(tiny_model, tiny_tokenizer, _conversations(3), output, config)
    answers = [json.loads(line)["conversation"][1] for line in _lines(output)]
    _, _, cut = generate_replies(
        tiny_model, tiny_tokenizer, [prompt_ids(tiny_tokenizer, [{"role": "user", "content": "hello world"}])], config
    )
    assert cut == [True]  # three tokens of a random model: no end-of-sequence token among them
    assert stats.truncated == sum(bool(answer.get("truncated")) for answer in answers) == 3
