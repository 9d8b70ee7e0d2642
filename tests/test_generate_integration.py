"""Everything generate users rely on keeps working with assistant_policy."""

from __future__ import annotations

import copy
import itertools

import pytest
import torch
from tiny_models import make_char_tokenizer, prompt, tiny_model
from transformers import (
    GenerationConfig,
    LlamaConfig,
    LlamaForCausalLM,
    LogitsProcessor,
    LogitsProcessorList,
    StaticCache,
    StoppingCriteria,
    StoppingCriteriaList,
)
from transformers.generation.streamers import BaseStreamer, TextIteratorStreamer, TextStreamer

import hf_adaptive_spec as hfas


def _spec(model, depth=4):
    return dict(assistant_model=hfas.CausalLMDrafter(model),
                assistant_policy=hfas.StaticTreePolicy(depth=depth, top_k=2, total_tokens=8))


class RecordingStreamer(BaseStreamer):
    def __init__(self):
        self.puts: list[list[int]] = []
        self.shapes: list[tuple[int, ...]] = []
        self.ended = 0

    def put(self, value):
        self.shapes.append(tuple(value.shape))
        self.puts.append(value.flatten().tolist())

    def end(self):
        self.ended += 1


def test_streamer_receives_prompt_then_exactly_the_generated_tokens(llama):
    ids = prompt(6, seed=11)
    stock, ours = RecordingStreamer(), RecordingStreamer()
    expected = llama.generate(ids, max_new_tokens=20, do_sample=False, streamer=stock)
    out = llama.generate(ids, max_new_tokens=20, do_sample=False, streamer=ours, **_spec(llama))
    assert torch.equal(out, expected)
    assert ours.puts[0] == stock.puts[0] == ids[0].tolist()
    assert (list(itertools.chain(*ours.puts[1:])) == list(itertools.chain(*stock.puts[1:]))
            == expected[0, ids.shape[1] :].tolist())
    assert ours.ended == stock.ended == 1
    assert any(len(chunk) > 1 for chunk in ours.puts[1:])  # accepted blocks arrive together
    # [1, k] per cycle, as transformers' assisted decoding puts them: dimension 0 is the batch, as in stock's [1]
    assert (all(len(shape) == 2 and shape[0] == 1 for shape in ours.shapes[1:])
            and all(s == (1,) for s in stock.shapes[1:]))


def test_gemma_style_hybrid_cache_default_decodes_as_stock(llama):
    """Gemma 2/3 checkpoints ship cache_implementation="hybrid", which generate reads as unset."""
    ids = prompt(6, seed=12)
    llama.generation_config.cache_implementation = "hybrid"
    try:
        expected = llama.generate(ids, max_new_tokens=12, do_sample=False)
        assert torch.equal(llama.generate(ids, max_new_tokens=12, do_sample=False, **_spec(llama)), expected)
    finally:
        llama.generation_config.cache_implementation = None


@pytest.mark.parametrize("option", ["output_attentions", "output_hidden_states"])
def test_outputs_generate_ignores_without_a_dict_are_ignored_as_stock_ignores_them(llama, option):
    """Without return_dict_in_generate, generate returns the sequences only and drops attentions and hidden
    states; the engine decodes too (with a dict it refuses them: tests/test_bad_inputs.py)."""
    ids = prompt(6, seed=13)
    expected = llama.generate(ids, max_new_tokens=12, do_sample=False, **{option: True})
    assert torch.equal(llama.generate(ids, max_new_tokens=12, do_sample=False, **{option: True}, **_spec(llama)),
                       expected)


def test_a_generation_config_without_stop_strings_draws_no_warning(llama, caplog):
    """The engine adds no stop_strings keyword unless a stop string is set (generate warns about keywords passed
    beside a generation_config)."""
    import logging

    from transformers import GenerationConfig

    config = GenerationConfig(max_new_tokens=6, do_sample=False)
    with caplog.at_level(logging.WARNING):
        llama.generate(prompt(6, seed=13), generation_config=config, **_spec(llama))
    assert "generation-related arguments" not in caplog.text


def test_a_generation_config_with_a_static_cache_or_stop_strings_draws_no_warning(llama, char_tokenizer, caplog):
    """The engine takes cache_implementation="static" and stop_strings out of the call; from a generation_config
    passed alone it unsets them in a copy, not with keywords, which generate warns about (an audit found it)."""
    import logging

    from transformers import GenerationConfig

    ids = prompt(6, seed=13)
    for config in (GenerationConfig(max_new_tokens=6, do_sample=False, cache_implementation="static"),
                   GenerationConfig(max_new_tokens=6, do_sample=False, stop_strings=["ab"])):
        given = config.to_dict()
        logging.Logger.warning_once.cache_clear()  # transformers warns once per process
        with caplog.at_level(logging.WARNING):
            out = llama.generate(ids, generation_config=config, tokenizer=char_tokenizer, **_spec(llama))
        assert "generation-related arguments" not in caplog.text
        assert config.to_dict() == given  # the caller's config is left as it was
        assert torch.equal(out, llama.generate(ids, generation_config=config, tokenizer=char_tokenizer))


@pytest.mark.parametrize(
    ("model_default", "call"),
    [
        ({"stop_strings": ["ab"]}, {"stop_strings": None}),  # before: the model's came back, and no tokenizer
        ({"cache_implementation": "static"}, {"cache_implementation": None}),  # before: a cache too short, refused
        ({"cache_implementation": "static"}, {"cache_implementation": "dynamic"}),
        ({"token_healing": True}, {"generation_config": {"token_healing": False}}),  # before: refused as healing
    ],
)
def test_the_call_overrides_the_models_generation_config_as_in_stock(model_default, call):
    """An explicit None or False, as a keyword or in a generation_config passed, overrides the model's default: generate
    fills only the fields a call leaves unset, and the engine resolves them the same way."""
    from transformers import GenerationConfig

    model, ids = tiny_model("llama"), prompt(6, seed=13)
    for name, value in model_default.items():
        setattr(model.generation_config, name, value)
    if "generation_config" in call:
        call = {"generation_config": GenerationConfig(max_new_tokens=30, do_sample=False, **call["generation_config"])}
    else:
        call = {"max_new_tokens": 30, "do_sample": False, **call}
    expected = model.generate(ids, **call)
    assert expected.shape[1] == ids.shape[1] + 30
    assert torch.equal(model.generate(ids, **call, **_spec(model)), expected)


def test_text_streamers_print_the_same_text(llama, char_tokenizer, capsys):
    ids = prompt(6, seed=12)
    llama.generate(ids, max_new_tokens=20, do_sample=False, streamer=TextStreamer(char_tokenizer, skip_prompt=True))
    stock_text = capsys.readouterr().out
    llama.generate(ids, max_new_tokens=20, do_sample=False, streamer=TextStreamer(char_tokenizer, skip_prompt=True),
                   **_spec(llama))
    assert capsys.readouterr().out == stock_text and stock_text.strip()
    iterator = TextIteratorStreamer(char_tokenizer, skip_prompt=True)
    llama.generate(ids, max_new_tokens=20, do_sample=False, streamer=iterator, **_spec(llama))
    assert "".join(iterator) == stock_text.rstrip("\n")


def test_stop_strings_with_tokenizer(llama, char_tokenizer):
    ids = prompt(6, seed=13)
    free = llama.generate(ids, max_new_tokens=40, do_sample=False)
    text = char_tokenizer.decode(free[0, ids.shape[1] :])
    stop = text[14:16]  # a string the model produces mid-way
    expected = llama.generate(ids, max_new_tokens=40, do_sample=False, stop_strings=[stop], tokenizer=char_tokenizer)
    assert expected.shape[1] < free.shape[1]
    out = llama.generate(ids, max_new_tokens=40, do_sample=False, stop_strings=[stop], tokenizer=char_tokenizer,
                         **_spec(llama, depth=6))
    assert torch.equal(out, expected)


def test_stop_strings_without_tokenizer_is_a_clear_error(llama):
    try:
        llama.generate(prompt(4), max_new_tokens=5, stop_strings=["ab"], **_spec(llama))
    except ValueError as error:
        assert "tokenizer=" in str(error)
    else:
        raise AssertionError("expected a ValueError")


class StopAfter(StoppingCriteria):
    def __init__(self, length: int):
        self.length = length

    def __call__(self, input_ids, scores, **kwargs):
        return torch.full((input_ids.shape[0],), input_ids.shape[1] >= self.length, dtype=torch.bool)


class BanToken(LogitsProcessor):
    def __init__(self, token: int):
        self.token = token

    def __call__(self, input_ids, scores):
        scores[:, self.token] = -float("inf")
        return scores


def test_custom_stopping_criteria_and_logits_processors(llama):
    ids = prompt(5, seed=14)
    banned = int(llama.generate(ids, max_new_tokens=3, do_sample=False)[0, -1])
    kwargs = dict(
        max_new_tokens=30,
        do_sample=False,
        stopping_criteria=StoppingCriteriaList([StopAfter(ids.shape[1] + 11)]),
        logits_processor=LogitsProcessorList([BanToken(banned)]),
    )
    expected = llama.generate(ids, **kwargs)
    out = llama.generate(ids, **kwargs, **_spec(llama))
    assert expected.shape[1] == ids.shape[1] + 11
    assert banned not in expected[0, ids.shape[1] :].tolist()
    assert torch.equal(out, expected)


class RecordingProcessor(LogitsProcessor):
    """Logs the length of every prefix it is asked about, and bans nothing: its state is the log."""

    def __init__(self):
        self.lengths: list[int] = []

    def __call__(self, input_ids, scores):
        self.lengths.append(input_ids.shape[1])
        return scores


class BudgetSpent(StoppingCriteria):
    """Stops once the processor it is paired with has been called ``budget`` times (a processor/criterion pair, as
    constrained-decoding libraries pair them)."""

    def __init__(self, processor: RecordingProcessor, budget: int):
        self.processor, self.budget = processor, budget

    def __call__(self, input_ids, scores, **kwargs):
        return torch.full((input_ids.shape[0],), len(self.processor.lengths) >= self.budget, dtype=torch.bool)


@pytest.mark.parametrize("stop", ["criterion", "eos", "paired"])
def test_a_callers_processor_is_asked_as_stock_asks_it_never_past_a_stop(llama, stop):
    """Stock processes a row only while no criterion has stopped. With the target as its own drafter every draft is
    accepted, so each stop falls inside an accepted path; the engine once processed the whole path first (11 calls
    against stock's 9), which a stateful processor reused across calls, or a criterion reading its state, showed."""
    ids = prompt(7, seed=3)
    plain = llama.generate(ids, max_new_tokens=30, do_sample=False)[0, 7:].tolist()
    eos = next(token for i, token in enumerate(plain) if i >= 6 and token not in plain[:i])
    logs = {}
    for who, spec in (("stock", {}), ("engine", _spec(llama))):
        processor = RecordingProcessor()
        criteria = {"criterion": [StopAfter(7 + 9)], "eos": [], "paired": [BudgetSpent(processor, 9)]}[stop]
        outputs = [llama.generate(ids, max_new_tokens=30, do_sample=False, logits_processor=[processor],
                                  stopping_criteria=StoppingCriteriaList(criteria), pad_token_id=0,
                                  eos_token_id=eos if stop == "eos" else None, **spec)[0].tolist() for _ in range(2)]
        logs[who] = (outputs, processor.lengths)
    assert logs["engine"] == logs["stock"]
    assert len(logs["stock"][0][0]) < 7 + 30  # a stop ended the output


class FeedbackLog(hfas.StaticTreePolicy):
    def __init__(self):
        super().__init__(depth=4, top_k=1, total_tokens=5)
        self.feedback: list[hfas.CycleFeedback] = []

    def observe(self, feedback):
        self.feedback.append(feedback)


def test_the_policy_is_told_the_drafts_accepted_up_to_a_stop_on_a_drafted_token(llama):
    """With a caller's processor the walk ends at a stop, emitting the stopping token as its last; where that token
    was a drafted one verification accepted, the policy is told so (it was told one draft fewer: a heuristic shrank
    its chain where the drafts were right). The target drafts for itself: each cycle accepts its 4 drafts, so a stop
    after 1 + 5 + 2 new tokens falls on the second cycle's second draft."""
    ids = prompt(7, seed=3)
    stop = StoppingCriteriaList([StopAfter(7 + 1 + 5 + 2)])
    logs = {}
    for name, processors in (("stateless", []), ("caller's", [RecordingProcessor()])):
        policy = FeedbackLog()
        llama.generate(ids, max_new_tokens=30, do_sample=False, logits_processor=processors, stopping_criteria=stop,
                       assistant_model=hfas.CausalLMDrafter(llama), assistant_policy=policy)
        logs[name] = [(f.accepted_length, f.drafter_accepted_length, f.committed_tokens) for f in policy.feedback]
    assert logs["stateless"] == [(4, 4, 5), (4, 4, 2)]  # verification past the stop is known without processors
    assert logs["caller's"] == [(4, 4, 5), (2, 2, 2)]  # up to the stop: the rows past it are never processed


def test_a_constraint_that_refuses_to_continue_past_the_end_of_sequence_is_never_asked_to(llama):
    """A grammar-style prefix_allowed_tokens_fn may refuse (return no token) once the sequence ended; stock never
    asks it then, and the engine raised transformers' "unsatisfiable constraint" error."""
    ids = prompt(7, seed=3)
    plain = llama.generate(ids, max_new_tokens=30, do_sample=False)[0, 7:].tolist()
    eos = next(token for i, token in enumerate(plain) if i >= 6 and token not in plain[:i])

    def allowed(batch_id, input_ids):
        return [] if eos in input_ids[7:].tolist() else list(range(llama.config.vocab_size))

    kwargs = dict(max_new_tokens=30, do_sample=False, eos_token_id=eos, pad_token_id=0,
                  prefix_allowed_tokens_fn=allowed)
    expected = llama.generate(ids, **kwargs)
    for spec in (_spec(llama), {**_spec(llama), "cache_implementation": "static"}):
        assert torch.equal(llama.generate(ids, **kwargs, **spec), expected)


def test_a_sampled_walk_asks_a_callers_processor_once_per_returned_token(llama):
    """Sampling: the processor sees each prefix of the output once, in order, and none past its end."""
    ids = prompt(7, seed=3)
    processor = RecordingProcessor()
    torch.manual_seed(0)
    out = llama.generate(ids, max_new_tokens=20, do_sample=True, logits_processor=[processor],
                         stopping_criteria=StoppingCriteriaList([StopAfter(7 + 9)]), **_spec(llama))
    assert out.shape[1] == 7 + 9
    assert processor.lengths == list(range(7, 7 + 9))


def test_only_transformers_stateless_processors_are_processed_ahead_of_the_criteria():
    from transformers.generation.logits_process import (
        PrefixConstrainedLogitsProcessor,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
    )

    from hf_adaptive_spec.generation.stopping import processed_together

    assert processed_together(LogitsProcessorList([]))
    assert processed_together(LogitsProcessorList([TemperatureLogitsWarper(0.7), TopKLogitsWarper(5)]))
    assert not processed_together(LogitsProcessorList([TopKLogitsWarper(5), RecordingProcessor()]))
    assert not processed_together(LogitsProcessorList([PrefixConstrainedLogitsProcessor(lambda b, i: [0], 1)]))
    assert not processed_together(LogitsProcessorList([type("MyTopK", (TopKLogitsWarper,), {})(5)]))


def test_generation_config_object(llama):
    ids = prompt(5, seed=15)
    config = GenerationConfig(max_new_tokens=17, do_sample=False, repetition_penalty=1.5)
    expected = llama.generate(ids, generation_config=config)
    out = llama.generate(ids, generation_config=config, **_spec(llama))
    assert torch.equal(out, expected) and out.shape[1] == ids.shape[1] + 17


def test_statistics_on_output_and_after_a_plain_call(llama):
    ids = prompt(5, seed=16)
    out = llama.generate(ids, max_new_tokens=20, do_sample=False, return_dict_in_generate=True, **_spec(llama))
    stats = out.speculation
    assert isinstance(out, hfas.SpeculativeDecoderOnlyOutput)
    assert stats.cycles == len(stats.accepted_lengths) > 0
    assert 1 + sum(stats.accepted_lengths) + stats.cycles == 20  # prefill token + drafts + bonus tokens
    assert stats.mean_accepted_tokens == 1 + sum(stats.accepted_lengths) / stats.cycles
    assert stats.draft_time > 0 and stats.verify_time > 0 and stats.total_time >= stats.draft_time + stats.verify_time
    llama.generate(ids, max_new_tokens=9, do_sample=False, **_spec(llama))
    assert 1 + sum(llama.last_speculation.accepted_lengths) + llama.last_speculation.cycles == 9


def test_statistics_count_only_the_tokens_returned_when_generation_stops_inside_a_cycle(llama):
    """The drafter is the target (every draft accepted, 5 tokens a cycle); an end-of-sequence token met inside a
    cycle's accepted drafts drops the rest, and τ counts what generate returned."""
    ids = prompt(5, seed=16)
    plain = llama.generate(ids, max_new_tokens=20, do_sample=False)[0, ids.shape[1] :].tolist()
    stop = next(i for i in range(2, 20) if plain[i] not in plain[:i] and i % 5 != 0)  # not a cycle's last token
    out = llama.generate(ids, max_new_tokens=20, do_sample=False, eos_token_id=plain[stop], pad_token_id=0,
                         return_dict_in_generate=True, **_spec(llama))
    assert out.sequences[0, ids.shape[1] :].tolist() == plain[: stop + 1]
    stats = out.speculation
    assert 1 + sum(stats.accepted_lengths) + stats.cycles == stop + 1


def test_calls_without_policy_take_the_stock_path(llama, monkeypatch):
    from hf_adaptive_spec.generation import speculative_decoding

    def fail(*args, **kwargs):
        raise AssertionError("speculative loop used without assistant_policy")

    monkeypatch.setattr(speculative_decoding, "speculative_decoding", fail)
    ids = prompt(5, seed=17)
    assert llama.generate(ids, max_new_tokens=5, do_sample=False).shape[1] == ids.shape[1] + 5
    # transformers' own assisted decoding still works with a plain assistant model
    out = llama.generate(ids, max_new_tokens=5, do_sample=False, prompt_lookup_num_tokens=3)
    assert out.shape[1] == ids.shape[1] + 5


def test_enable_is_idempotent_and_leaves_saving_untouched(tmp_path):
    model = tiny_model("llama")
    patched = model.generate
    assert hfas.enable(model) is model and model.generate == patched
    assert type(model).__name__ == "LlamaForCausalLM"
    model.save_pretrained(tmp_path)
    config = (tmp_path / "config.json").read_text()
    assert '"LlamaForCausalLM"' in config and "hf_adaptive_spec" not in config


def test_peft_wrapped_model():
    from peft import LoraConfig, get_peft_model

    base = tiny_model("llama")
    peft_model = get_peft_model(base, LoraConfig(r=2, target_modules=["q_proj"], init_lora_weights=False))
    assert hfas.enable(peft_model) is peft_model
    ids = prompt(5, seed=18)
    expected = peft_model.generate(input_ids=ids, max_new_tokens=15, do_sample=False)
    out = peft_model.generate(
        input_ids=ids, max_new_tokens=15, do_sample=False,
        assistant_model=hfas.CausalLMDrafter.from_target_layers(peft_model, 2),
        assistant_policy=hfas.StaticTreePolicy(depth=3, top_k=2, total_tokens=6),
    )
    assert torch.equal(out, expected)


class _ObservedDrafter(hfas.CausalLMDrafter):
    """A drafter (the target itself: every draft is accepted) that keeps what the engine reports."""

    feature_layers = (4,)  # the tiny model's final-norm output

    def __init__(self, model):
        super().__init__(model)
        self.outcomes: list[hfas.DraftOutcome] = []

    def observe(self, outcome):
        self.outcomes.append(outcome)


def test_the_drafter_observes_every_cycle_as_the_output_received_it(llama):
    """Drafter.observe after each drafted cycle: the accepted path's tokens then the target's next,
    the target states at the root and the accepted nodes, and, when a stopping criterion ends the
    output inside an accepted block, only what the output received."""
    ids = prompt(6, seed=12)
    drafter = _ObservedDrafter(llama)
    policy = hfas.StaticTreePolicy.chain(4)
    stop = StopAfter(ids.shape[1] + 8)  # the prefill token, one block of 5, then 2 of the next
    out = llama.generate(ids, max_new_tokens=30, do_sample=False, assistant_model=drafter, assistant_policy=policy,
                         stopping_criteria=StoppingCriteriaList([stop]))
    assert out.shape[1] == ids.shape[1] + 8
    assert [len(o.committed_tokens) for o in drafter.outcomes] == [5, 2]
    assert [t for o in drafter.outcomes for t in o.committed_tokens] == out[0, ids.shape[1] + 1 :].tolist()
    for outcome in drafter.outcomes:
        path_tokens = [outcome.tree.tokens[i] for i in outcome.accepted_path[1:]]
        assert path_tokens == outcome.committed_tokens[: len(path_tokens)]
        assert outcome.target_features[4].shape == (1, len(outcome.committed_tokens), llama.config.hidden_size)
        final_norm = outcome.target_features[4][0]
        greedy = llama.get_output_embeddings()(final_norm).argmax(-1).tolist()
        assert greedy == outcome.committed_tokens  # the states the target chose each token from


@pytest.mark.parametrize("family, cache", [
    ("llama", "dynamic"), ("mistral-sliding", "dynamic"), ("llama", "engine static"), ("llama", "caller's static"),
])
def test_the_returned_cache_continues_like_stocks_when_generation_stops_inside_a_cycle(family, cache):
    """The drafter is the target (whole cycles accepted) and an end-of-sequence token falls inside a cycle: the
    cache returned holds the sequence minus its last token, as stock's does, so stock generate continues from it.
    The engine's own static cache is reused by its next call: what the first call returned must not change."""
    model = tiny_model(family)
    ids = prompt(5, seed=16)
    plain = model.generate(ids, max_new_tokens=20, do_sample=False)[0, ids.shape[1] :].tolist()
    stop = next(i for i in range(2, 20) if plain[i] not in plain[:i] and i % 5 != 0)  # not a cycle's last token
    kwargs = dict(max_new_tokens=20, do_sample=False, eos_token_id=plain[stop], pad_token_id=0,
                  return_dict_in_generate=True)
    caches = {"engine static": dict(cache_implementation="static"),
              "caller's static": dict(past_key_values=StaticCache(config=model.config, max_cache_len=64))}
    out = model.generate(ids, **kwargs, **caches.get(cache, {}), **_spec(model))
    assert out.sequences[0, ids.shape[1] :].tolist() == plain[: stop + 1]
    assert out.past_key_values.get_seq_length() == out.sequences.shape[1] - 1
    if cache == "engine static":  # a second call of the same size decodes in the engine's cache again
        model.generate(prompt(7, seed=3), **kwargs, cache_implementation="static", **_spec(model))
    follow = torch.cat([out.sequences, prompt(4, seed=9)], dim=1)
    fresh = model.generate(follow, max_new_tokens=10, do_sample=False)
    continued = model.generate(follow, past_key_values=out.past_key_values, max_new_tokens=10, do_sample=False)
    assert torch.equal(continued, fresh)


def test_guidance_scale_with_a_drafter_that_reads_the_targets_features(llama):
    """Classifier-free guidance runs the model itself inside the logits processing, between verification and
    commit; the features the EAGLE-3 drafter reads next are still the verification forward's."""
    from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel

    ids = prompt(6, seed=3)
    expected = llama.generate(ids, max_new_tokens=30, do_sample=False, guidance_scale=1.5)
    torch.manual_seed(1)
    drafter = hfas.Eagle3Drafter(Eagle3DraftModel.from_target(llama, initializer_range=0.3))
    out = llama.generate(ids, max_new_tokens=30, do_sample=False, guidance_scale=1.5, assistant_model=drafter,
                         assistant_policy=hfas.StaticTreePolicy(depth=3, top_k=2, total_tokens=8))
    assert torch.equal(out, expected)


def test_an_assistant_tokenizer_of_the_targets_vocabulary_is_accepted(llama, char_tokenizer):
    """The same vocabulary (another object) is the target's tokenizer; another is refused (tests/test_bad_inputs)."""
    ids = prompt(8, seed=3)
    expected = llama.generate(ids, max_new_tokens=10, do_sample=False)
    out = llama.generate(ids, max_new_tokens=10, do_sample=False, tokenizer=char_tokenizer,
                         assistant_tokenizer=make_char_tokenizer(), **_spec(llama))
    assert torch.equal(out, expected)


def test_a_drafter_padded_to_another_vocab_size_drafts_once_resized_as_the_error_says(llama):
    """One tokenizer, embeddings padded to another size (as Qwen2.5-0.5B and -7B): the error's fix is lossless."""
    torch.manual_seed(0)
    padded = LlamaForCausalLM(LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2)).eval()
    policy = hfas.StaticTreePolicy(depth=3, top_k=2, total_tokens=6)
    ids = prompt(8, seed=4)
    with pytest.raises(ValueError, match=r"differ in padding alone.*resize_token_embeddings\(96\)"):
        llama.generate(ids, max_new_tokens=10, do_sample=False, assistant_model=padded, assistant_policy=policy)
    padded.resize_token_embeddings(llama.config.vocab_size)
    out = llama.generate(ids, max_new_tokens=10, do_sample=False, assistant_model=padded, assistant_policy=policy)
    assert torch.equal(out, llama.generate(ids, max_new_tokens=10, do_sample=False))


class _FailingPolicy(hfas.StaticTreePolicy):
    def tree_config(self, state):
        raise RuntimeError("policy failed")


@pytest.mark.parametrize("failure", ["refused input", "policy error", "after decoding"])
def test_a_call_that_fails_after_the_prompt_was_streamed_ends_the_streamer_once(llama, failure, monkeypatch):
    """Stock generate puts the prompt to the streamer before the engine runs: a refusal or an error from there on
    left a TextIteratorStreamer's consumer thread waiting forever (found by a review); one after the decoding loop
    (copying the cache to return) must not end it twice."""
    from hf_adaptive_spec.generation import speculative_decoding

    ids = prompt(6, seed=14)
    streamer = RecordingStreamer()
    if failure == "after decoding":
        def failing_finish(self, out, seconds):
            raise MemoryError("copying the cache")

        monkeypatch.setattr(speculative_decoding._Decoder, "_finish", failing_finish)
        with pytest.raises(MemoryError):
            llama.generate(ids, max_new_tokens=4, do_sample=False, streamer=streamer, **_spec(llama))
    elif failure == "refused input":
        with pytest.raises(ValueError, match="does not support padded inputs"):
            llama.generate(ids, attention_mask=torch.tensor([[0] + [1] * 5]), max_new_tokens=4, do_sample=False,
                           streamer=streamer, **_spec(llama))
    else:
        with pytest.raises(RuntimeError, match="policy failed"):
            llama.generate(ids, max_new_tokens=4, do_sample=False, streamer=streamer,
                           assistant_model=hfas.CausalLMDrafter(llama), assistant_policy=_FailingPolicy(depth=2))
    assert streamer.puts[0] == ids[0].tolist() and streamer.ended == 1


def test_a_generation_config_passed_by_position_is_honoured(llama, char_tokenizer):
    """generate(input_ids, generation_config) is stock's signature: its stop strings and static cache were missed
    (the engine read the config by name only), and the call failed asking for the tokenizer it was given."""
    ids = prompt(6, seed=15)
    free = llama.generate(ids, max_new_tokens=30, do_sample=False)
    stop = char_tokenizer.decode(free[0, ids.shape[1]:])[10:12]
    for config in (GenerationConfig(max_new_tokens=30, do_sample=False, stop_strings=[stop]),
                   GenerationConfig(max_new_tokens=30, do_sample=False, cache_implementation="static")):
        expected = llama.generate(ids, config, tokenizer=char_tokenizer)
        assert torch.equal(llama.generate(ids, config, tokenizer=char_tokenizer, **_spec(llama)), expected)
    assert llama.generate(ids, GenerationConfig(max_new_tokens=30, stop_strings=[stop]), tokenizer=char_tokenizer,
                          **_spec(llama)).shape[1] < free.shape[1]


def test_a_model_whose_generation_config_turns_the_cache_off_decodes_as_stock(caplog):
    """A checkpoint saved after gradient-checkpointed training says use_cache=False in its config: stock decodes
    without a cache, and the engine refused the call ("do not pass use_cache=False", which the user had not), also
    when the call passed the model's own generation_config. The engine decodes with a cache (same tokens); a
    use_cache=False the call asks for itself is warned about as not applied."""
    import logging

    model = tiny_model("llama")
    model.generation_config.use_cache = False
    ids = prompt(6, seed=16)
    expected = model.generate(ids, max_new_tokens=12, do_sample=False)
    own = copy.deepcopy(model.generation_config)
    own.max_new_tokens, own.do_sample = 12, False
    with caplog.at_level("WARNING"):
        assert torch.equal(model.generate(ids, max_new_tokens=12, do_sample=False, **_spec(model)), expected)
        config = GenerationConfig(max_new_tokens=12, do_sample=False)
        assert torch.equal(model.generate(ids, generation_config=config, **_spec(model)), expected)
        assert torch.equal(model.generate(ids, max_new_tokens=12, do_sample=False,
                                          generation_config=model.generation_config, **_spec(model)), expected)
    assert "use_cache=False is not applied" not in caplog.text  # the model's own setting: overridden as such
    for asked in ({"max_new_tokens": 12, "use_cache": False}, {"generation_config": own}):
        caplog.clear()
        logging.Logger.warning_once.cache_clear()  # transformers warns once per process
        with caplog.at_level("WARNING"):
            assert torch.equal(model.generate(ids, do_sample=False, **asked, **_spec(model)), expected)
        assert "use_cache=False is not applied under assistant_policy" in caplog.text


def test_prefill_chunk_size_is_named_as_not_applied(llama, caplog):
    """The engine prefills the prompt in one forward: a prefill_chunk_size set to bound memory is said to be
    ignored rather than silently so."""
    ids = prompt(6, seed=17)
    with caplog.at_level("WARNING"):
        out = llama.generate(ids, max_new_tokens=6, do_sample=False, prefill_chunk_size=3, **_spec(llama))
    assert torch.equal(out, llama.generate(ids, max_new_tokens=6, do_sample=False))
    assert "prefill_chunk_size=3 is not applied under assistant_policy" in caplog.text


def test_a_generate_that_takes_args_gets_its_positional_arguments_as_given():
    """A subclass's ``generate(self, *args, **kwargs)`` wrapper: binding its positions by name passed ``args=`` on
    as a keyword, which generate refused (found by a review of the positional-config fix)."""

    class Wrapped(LlamaForCausalLM):
        def generate(self, *args, **kwargs):
            return super().generate(*args, **kwargs)

    torch.manual_seed(0)
    model = hfas.enable(Wrapped(tiny_model("llama").config).eval())
    ids = prompt(6, seed=18)
    expected = model.generate(ids, max_new_tokens=10, do_sample=False)
    assert torch.equal(model.generate(ids, max_new_tokens=10, do_sample=False, **_spec(model)), expected)


def test_a_target_training_with_gradient_checkpointing_is_refused_and_training_mode_warns(caplog):
    """transformers drops the key/value cache of a checkpointed model in training mode: the engine decoded tokens
    matching neither stock nor evaluation mode (DVI) or failed inside attention with a shape error."""
    model = tiny_model("llama")
    model.activation_checkpointing_enable() if hasattr(model, "activation_checkpointing_enable") else (
        model.gradient_checkpointing_enable())
    model.train()
    for drafter in (hfas.DVIDrafter(model, exit_layer=2), hfas.CausalLMDrafter.from_target_layers(model, 2)):
        with pytest.raises(ValueError, match=r"training mode with gradient checkpointing.*call model.eval\(\)"):
            model.generate(prompt(6), max_new_tokens=8, do_sample=False, assistant_model=drafter,
                           assistant_policy=hfas.StaticTreePolicy(depth=4, top_k=2, total_tokens=8))
    model.activation_checkpointing_disable() if hasattr(model, "activation_checkpointing_disable") else (
        model.gradient_checkpointing_disable())
    hfas.core.modes.logger.warning_once.cache_clear()
    with caplog.at_level("WARNING"):
        model.generate(prompt(6), max_new_tokens=4, do_sample=False, **_spec(model))
    assert "target model (LlamaForCausalLM) is in training mode" in caplog.text


def test_generate_and_the_drafters_leave_the_callers_modules_in_their_mode():
    """generate(assistant_model=model) switched the target to eval, and building a drafter on the target's layers
    switched those layers, its norm and head (dropout off for training that went on after)."""
    model = tiny_model("llama").train()
    drafter = hfas.CausalLMDrafter.from_target_layers(model, 2)
    dvi = hfas.DVIDrafter(model, exit_layer=2)
    assert all(module.training for module in model.modules())
    assert not any(module.training for name, module in dvi.head.named_modules() if "lora" in name)
    assert not drafter.model.training and not drafter.model.get_decoder().training  # what the drafter built
    draft_model = tiny_model("llama", seed=3, num_hidden_layers=2).train()
    model.generate(prompt(6), max_new_tokens=4, do_sample=False, assistant_model=draft_model,
                   assistant_policy=hfas.StaticTreePolicy(depth=2, top_k=2, total_tokens=4))
    assert all(module.training for module in [*model.modules(), *draft_model.modules()])


def test_transformers_assisted_length_settings_warn_that_the_policy_decides(llama, caplog):
    ids = prompt(6, seed=2)
    expected = llama.generate(ids, max_new_tokens=10, do_sample=False)
    hfas.generation.input_checks.logger.warning_once.cache_clear()
    with caplog.at_level("WARNING"):
        out = llama.generate(ids, max_new_tokens=10, do_sample=False, num_assistant_tokens=3,
                             assistant_confidence_threshold=0.9, **_spec(llama))
    assert torch.equal(out, expected)
    assert "num_assistant_tokens, assistant_confidence_threshold set transformers' assisted generation" in caplog.text
    caplog.clear()
    hfas.generation.input_checks.logger.warning_once.cache_clear()
    with caplog.at_level("WARNING"):  # generate fills in transformers' defaults: they are not the caller's
        llama.generate(ids, max_new_tokens=10, do_sample=False, **_spec(llama))
    assert "assisted generation" not in caplog.text
    llama.generation_config.num_assistant_tokens = 1  # as the bench's hf-early-exit sets it for transformers' drafter
    try:
        with caplog.at_level("WARNING"):
            llama.generate(ids, max_new_tokens=10, do_sample=False, **_spec(llama))
    finally:
        llama.generation_config.num_assistant_tokens = None
    assert "assisted generation" not in caplog.text  # the model's setting, not this call's


@pytest.mark.parametrize("setting", [dict(num_assistant_tokens_schedule="heuristic"), dict(assistant_lookbehind=5),
                                     dict(target_lookbehind=5)], ids=lambda setting: next(iter(setting)))
def test_transformers_other_assisted_length_settings_warn_by_name(llama, caplog, setting):
    """README: the schedule and the lookbehinds warn as num_assistant_tokens does; the tokens are stock's."""
    ids = prompt(6, seed=2)
    hfas.generation.input_checks.logger.warning_once.cache_clear()
    with caplog.at_level("WARNING"):
        out = llama.generate(ids, max_new_tokens=10, do_sample=False, **setting, **_spec(llama))
    assert torch.equal(out, llama.generate(ids, max_new_tokens=10, do_sample=False))
    assert f"{next(iter(setting))} set transformers' assisted generation" in caplog.text


def test_a_draft_model_in_training_mode_warns_once(llama, caplog):
    draft_model = tiny_model("llama", seed=3, num_hidden_layers=2).train()
    hfas.core.modes.logger.warning_once.cache_clear()
    with caplog.at_level("WARNING"):
        for _ in range(2):
            llama.generate(prompt(6), max_new_tokens=4, do_sample=False, assistant_model=draft_model,
                           assistant_policy=hfas.StaticTreePolicy.chain(2))
    assert caplog.text.count("draft model (LlamaForCausalLM) is in training mode") == 1


def test_an_enabled_model_pickles_and_copies_and_each_copy_decodes_as_stock(tmp_path):
    """enable() put a bound method on the instance, which pickles as getattr(model, '_generate'): torch.save of an
    enabled model wrote a file torch.load could not load; after a static call the model's fast path held a lock, so
    copy.deepcopy failed ('cannot pickle _thread.lock'). A copy gets a fresh fast path of the same settings."""
    import pickle

    model, ids = tiny_model("llama"), prompt(6)
    stock = model.generate(ids, max_new_tokens=8, do_sample=False)
    policy = hfas.StaticTreePolicy(depth=3, top_k=2, total_tokens=6)

    def speculative(target, **kwargs):
        drafter = hfas.CausalLMDrafter.from_target_layers(target, 2)
        return target.generate(ids, max_new_tokens=8, do_sample=False, assistant_model=drafter,
                               assistant_policy=policy, **kwargs)

    speculative(model, cache_implementation="static")
    torch.save(model, tmp_path / "model.pt")
    copies = [copy.deepcopy(model), pickle.loads(pickle.dumps(model)),
              torch.load(tmp_path / "model.pt", weights_only=False)]
    for copied in copies:
        assert copied.generate.args[0] is copied  # its own engine, not the original's
        assert "tree speculative decoding" in copied.generate.__doc__  # help(model.generate) shows the engine's
        for cache in ("static", None):
            assert torch.equal(speculative(copied, cache_implementation=cache), stock)
    assert torch.equal(speculative(model, cache_implementation="static"), stock)


def test_enable_after_the_patch_was_removed_enables_again():
    """A flag kept on the instance said 'enabled' after `del model.generate`: enable() did nothing and the next call
    was told to call enable(), which it just had. Whether a model is enabled is read from its generate."""
    from hf_adaptive_spec.generation.enable import is_enabled

    model, ids = tiny_model("llama"), prompt(6)
    del model.generate
    assert not is_enabled(model)
    hfas.enable(model)
    out = model.generate(ids, max_new_tokens=6, do_sample=False, assistant_policy=hfas.StaticTreePolicy(depth=0))
    assert torch.equal(out, model.generate(ids, max_new_tokens=6, do_sample=False))


def test_enable_takes_a_torch_compiled_model_and_enables_the_model_inside():
    """enable(torch.compile(model)) was refused ('got OptimizedModule'), though the compiled module's generate is the
    model's own: the model inside is enabled, and the compiled module is returned."""
    from hf_adaptive_spec.generation.enable import is_enabled

    model = tiny_model("llama")
    del model.generate  # as a model never enabled
    compiled = torch.compile(model, backend="eager")
    assert hfas.enable(compiled) is compiled and is_enabled(model)
