"""Continuing from a cache, as stock ``generate`` does (transformers' "re-use the cache to continue
generation"): a second turn passes an earlier call's ``past_key_values`` with the whole sequence, the
prefill runs only the tokens after the cached ones, and the output is stock's (greedy, float32). The
refusals (a cache holding the whole input, a feature-reading drafter that cannot start mid-prompt) are
in the bad-input catalogues (tests/test_bad_inputs.py, tests/test_static_cache.py)."""

from __future__ import annotations

import pytest
import torch
from tiny_models import prompt, tiny_compile_config, tiny_drafter, tiny_model
from transformers import DynamicCache, StaticCache

import hf_adaptive_spec as hfas
from hf_adaptive_spec.core.compiled import graphs_compiled

POLICY = hfas.StaticTreePolicy(depth=3, top_k=3, total_tokens=8)


def _cache(kind: str, model):
    return (DynamicCache(config=model.config) if kind == "dynamic"
            else StaticCache(config=model.config, max_cache_len=128))


def _speculate(model, ids, drafter, **kwargs):
    return model.generate(ids, max_new_tokens=12, do_sample=False, assistant_model=drafter, assistant_policy=POLICY,
                          return_dict_in_generate=True, **kwargs)


def _stock(model, ids, **kwargs):
    return model.generate(ids, max_new_tokens=12, do_sample=False, return_dict_in_generate=True, **kwargs)


class _PrefillLengths:
    """The length of every forward's input ids through the target's embeddings; the first one of a call is the
    target's prefill (nothing runs the embeddings before it)."""

    def __init__(self, model):
        self.lengths: list[int] = []
        self.handle = model.get_input_embeddings().register_forward_pre_hook(
            lambda module, args: self.lengths.append(args[0].shape[-1])
        )

    def __enter__(self) -> list[int]:
        return self.lengths

    def __exit__(self, *exc) -> None:
        self.handle.remove()


def _second_turn(first_sequences: torch.LongTensor) -> torch.LongTensor:
    return torch.cat([first_sequences, prompt(5, seed=2)], dim=-1)


@pytest.mark.parametrize("cache_kind", ["dynamic", "static"])
@pytest.mark.parametrize("kind", ["causal-lm", "eagle3", "eagle3-2-layers", "dvi"])
def test_a_second_turn_continues_from_the_first_calls_cache(kind, cache_kind):
    """Three turns in one cache: each call's prefill runs only the new tokens, and each output is stock's from
    scratch. DVI shares the target's cache on the dynamic path and drafts in its own on the static one;
    EAGLE-3 drafts from the features of the tokens after the cached ones."""
    model = tiny_model("llama")
    drafter = tiny_drafter(kind, model)
    ids, cache = prompt(9, seed=1), _cache(cache_kind, model)
    for turn in range(3):
        cached = int(cache.get_seq_length())
        with _PrefillLengths(model) as lengths:
            out = _speculate(model, ids, drafter, past_key_values=cache)
        assert torch.equal(out.sequences, _stock(model, ids).sequences), (kind, cache_kind, turn)
        assert lengths[0] == ids.shape[1] - cached, (kind, cache_kind, turn)
        assert out.past_key_values is cache and cache.get_seq_length() == out.sequences.shape[1] - 1
        assert out.speculation.cache == cache_kind
        if kind.startswith("eagle3"):  # its positions count from the cached length: it holds only this call's tokens
            assert 0 < drafter._committed <= out.sequences.shape[1] - 1 - cached
        ids = _second_turn(out.sequences)


@pytest.mark.parametrize(("family", "cache_kind"), [("llama", "dynamic"), ("llama", "static"),
                                                    ("mistral-sliding", "dynamic"), ("qwen2-hybrid", "dynamic")])
def test_stock_and_the_engine_continue_from_each_others_caches(family, cache_kind):
    """A cache filled by stock generate continues in the engine, and the engine's in stock generate (which
    reads its length to place the new tokens): both outputs are stock's from scratch. Stock's sliding-window
    layers keep only each window's tail; the prompts are longer than the windows."""
    model = tiny_model(family)
    drafter = tiny_drafter("eagle3", model)
    first_ids = prompt(9, seed=1)

    stock_first = _stock(model, first_ids, past_key_values=_cache(cache_kind, model))
    second_ids = _second_turn(stock_first.sequences)
    engine_second = _speculate(model, second_ids, drafter, past_key_values=stock_first.past_key_values)
    assert torch.equal(engine_second.sequences, _stock(model, second_ids).sequences)

    engine_first = _speculate(model, first_ids, drafter, past_key_values=_cache(cache_kind, model))
    second_ids = _second_turn(engine_first.sequences)
    stock_second = _stock(model, second_ids, past_key_values=engine_first.past_key_values)
    assert torch.equal(stock_second.sequences, _stock(model, second_ids).sequences)


@pytest.mark.parametrize("cache_kind", ["dynamic", "static"])
def test_a_cache_reused_for_another_prompt_is_refused_until_reset(cache_kind):
    """A cache the engine filled remembers its tokens: reused for a prompt that does not begin with them (a
    StaticCache kept across prompts without reset, which stock generate would silently continue from), the call
    is refused with the fix named; after cache.reset() the same call decodes stock's tokens."""
    model = tiny_model("llama")
    drafter = tiny_drafter("eagle3", model)
    cache = _cache(cache_kind, model)
    _speculate(model, prompt(9, seed=1), drafter, past_key_values=cache)
    other = prompt(30, seed=3)
    crop = "" if cache_kind == "static" else r"call cache.crop\(-20\); "
    with pytest.raises(ValueError,
                       match=f"holds the 20 tokens .* differs from them at token 0 .*{crop}.*call cache.reset"):
        _speculate(model, other, drafter, past_key_values=cache)
    cache.reset()
    assert torch.equal(_speculate(model, other, drafter, past_key_values=cache).sequences,
                       _stock(model, other).sequences)


@pytest.mark.parametrize("cache_kind", ["dynamic", "static"])
def test_a_cache_written_elsewhere_since_is_taken_as_stock_takes_it(cache_kind):
    """The engine's record holds only while nothing wrote to the cache: after stock extends it, or after reset()
    and stock refilling it to the very length the engine left (another prompt), the engine continues from it as
    stock would, never refusing a right input."""
    model = tiny_model("llama")
    drafter = tiny_drafter("eagle3", model)
    ids, cache = prompt(9, seed=1), _cache(cache_kind, model)
    ids = _second_turn(_speculate(model, ids, drafter, past_key_values=cache).sequences)
    ids = _second_turn(_stock(model, ids, past_key_values=cache).sequences)
    assert torch.equal(_speculate(model, ids, drafter, past_key_values=cache).sequences, _stock(model, ids).sequences)

    cache = _cache(cache_kind, model)
    _speculate(model, prompt(9, seed=1), drafter, past_key_values=cache)
    cache.reset()
    refilled = _stock(model, prompt(9, seed=4), past_key_values=cache).sequences
    assert cache.get_seq_length() == 20
    ids = _second_turn(refilled)
    assert torch.equal(_speculate(model, ids, drafter, past_key_values=cache).sequences, _stock(model, ids).sequences)


@pytest.mark.parametrize("cache_kind", ["dynamic", "static"])
def test_continuing_inside_inference_mode(cache_kind):
    """Tensors made under torch.inference_mode keep no version, so such a cache is not remembered (and not
    checked): the turns still continue and give stock's tokens."""
    model = tiny_model("llama")
    drafter = tiny_drafter("eagle3", model)
    with torch.inference_mode():
        ids, cache = prompt(9, seed=1), _cache(cache_kind, model)
        for turn in range(2):
            out = _speculate(model, ids, drafter, past_key_values=cache)
            assert torch.equal(out.sequences, _stock(model, ids).sequences), (cache_kind, turn)
            ids = _second_turn(out.sequences)


def test_a_compiled_static_path_continues_in_the_callers_cache():
    """The compiled verification keeps its graphs for the caller's StaticCache across turns; the prefill (eager)
    starts at the cached length."""
    model = tiny_model("llama")
    drafter = tiny_drafter("eagle3", model)
    ids, cache, graphs = prompt(9, seed=1), _cache("static", model), []
    for turn in range(2):
        before = graphs_compiled()
        out = _speculate(model, ids, drafter, past_key_values=cache, compile_config=tiny_compile_config())
        assert torch.equal(out.sequences, _stock(model, ids).sequences), turn
        assert out.speculation.compiled
        graphs.append(graphs_compiled() - before)
        ids = _second_turn(out.sequences)
    # The first turn's graphs serve the second (counted, not timed): the second compiles only the draft step for
    # the shape of its new prompt tokens, which the first turn never drafted from.
    assert graphs[1] < graphs[0], graphs


@pytest.mark.parametrize("family", ["mistral-sliding", "qwen2-hybrid"])
def test_sliding_window_models_continue_from_a_cache(family):
    """Sliding-window layers: the dynamic cache keeps only each window's tail between calls, and the engine's own
    static cache (``cache_implementation="static"``, returned as a copy) holds full-length layers that the second
    call takes as a caller's cache. Prompts longer than the windows."""
    model = tiny_model(family)
    drafter = tiny_drafter("eagle3", model)
    first_ids = prompt(9, seed=1)
    for first_kwargs in (dict(past_key_values=DynamicCache(config=model.config)), dict(cache_implementation="static")):
        first = _speculate(model, first_ids, drafter, **first_kwargs)
        second_ids = _second_turn(first.sequences)
        second = _speculate(model, second_ids, drafter, past_key_values=first.past_key_values)
        assert torch.equal(second.sequences, _stock(model, second_ids).sequences), (family, first_kwargs)


def test_sampling_continues_from_a_cache():
    """Sampling reads the same prefill path: a continued call runs, stays in the vocabulary and extends the input.
    (Its distribution is the engine's sampling rule, tested in tests/test_sampling.py.)"""
    model = tiny_model("llama")
    drafter = tiny_drafter("eagle3", model)
    first = _speculate(model, prompt(9, seed=1), drafter, past_key_values=DynamicCache(config=model.config))
    second_ids = _second_turn(first.sequences)
    torch.manual_seed(0)
    with _PrefillLengths(model) as lengths:
        second = model.generate(second_ids, max_new_tokens=12, do_sample=True, assistant_model=drafter,
                                assistant_policy=POLICY, past_key_values=first.past_key_values)
    assert lengths[0] == second_ids.shape[1] - (first.sequences.shape[1] - 1)
    assert torch.equal(second[:, : second_ids.shape[1]], second_ids) and second.shape[1] == second_ids.shape[1] + 12
