"""``examples/quickstart.py`` and ``examples/static_tree_grid.py`` decode in a StaticCache of their own that holds every
call: a fixed one of 512 or 1024 slots failed in transformers' ``index_copy_`` (IndexError) for a longer
``--max-new-tokens``, in stock's call, which the package does not check."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from example_scripts import load_example
from transformers import LlamaConfig

from hf_adaptive_spec.generation.static_path import DEFAULT_BUCKETS


class Tokenizer:
    """A chat template of 40 tokens plus one per 10 characters of the message."""

    def apply_chat_template(self, messages, **kwargs) -> dict:
        return {"input_ids": torch.ones(1, 40 + len(messages[0]["content"]) // 10, dtype=torch.long)}

    def decode(self, tokens, **kwargs) -> str:
        return "an answer"


class Model:
    """Stands for SmolLM2 (a real config, for the StaticCache): ``generate`` records each cache passed to it and the
    slots the call writes (prompt and new tokens, and the largest bucket for a tree), and returns zeros."""

    def __init__(self):
        self.config = LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2)
        self.device, self.dtype = torch.device("cpu"), torch.float32
        self.last_speculation = SimpleNamespace(cycles=1, accepted_lengths=[0])
        self.cache_calls: list[tuple[int, int]] = []

    def to(self, device):
        return self

    def generate(self, ids, max_new_tokens, past_key_values=None, return_dict_in_generate=False, **kwargs):
        if past_key_values is not None:
            tree = DEFAULT_BUCKETS[-1] if "assistant_model" in kwargs else 0
            self.cache_calls.append((past_key_values.layers[0].max_cache_len, ids.shape[1] + max_new_tokens + tree))
        sequences = torch.cat([ids, torch.zeros(1, max_new_tokens, dtype=torch.long)], dim=1)
        return SimpleNamespace(sequences=sequences) if return_dict_in_generate else sequences


def fake_models(example, monkeypatch) -> list[Model]:
    models = []

    def load_default_model(**kwargs):
        models.append(Model())
        return models[-1], Tokenizer()

    monkeypatch.setattr(example.hfas, "load_default_model", load_default_model)
    monkeypatch.setattr(example.hfas, "enable", lambda model: model)
    monkeypatch.setattr(example.hfas.Eagle3Drafter, "from_pretrained", lambda *args, **kwargs: "drafter")
    return models


def test_quickstart_s_stock_cache_holds_the_longest_prompt_and_its_answer(monkeypatch):
    example = load_example("quickstart")
    models = fake_models(example, monkeypatch)
    monkeypatch.setattr(example, "_speculation", lambda args, model, drafter: {})
    example.main(["--max-new-tokens", "600"])
    calls = [call for model in models for call in model.cache_calls]
    assert len(calls) == len(example.PROMPTS) + 1  # the warm-up and each prompt's compiled stock
    assert all(slots >= needed for slots, needed in calls), calls


def test_static_tree_grid_s_cache_holds_the_longest_prompt_its_answer_and_a_tree(monkeypatch):
    example = load_example("static_tree_grid")
    models = fake_models(example, monkeypatch)
    monkeypatch.setattr("sys.argv", ["static_tree_grid.py", "--compile", "--questions", "2",
                                     "--max-new-tokens", "1000", "--shapes", "1,1,2"])
    example.main()
    calls = models[0].cache_calls
    assert len(calls) == 6  # stock and the tree: a warm-up on the first question, then timed on both
    assert all(slots >= needed for slots, needed in calls), calls


@pytest.mark.parametrize(("name", "argv", "slots"), [
    ("quickstart", ["--max-new-tokens", "96"], 512),
    ("static_tree_grid", ["--compile", "--questions", "1", "--max-new-tokens", "96"], 1024),
])
def test_the_caches_keep_their_lengths_where_the_answers_fit(name, argv, slots, monkeypatch):
    """One fixed cache: the default runs' graphs are still those of 512 and 1024 slots."""
    example = load_example(name)
    models = fake_models(example, monkeypatch)
    if name == "quickstart":
        monkeypatch.setattr(example, "_speculation", lambda args, model, drafter: {})
        example.main(argv)
    else:
        monkeypatch.setattr("sys.argv", [f"{name}.py", *argv])
        example.main()
    assert {call[0] for model in models for call in model.cache_calls} == {slots}
