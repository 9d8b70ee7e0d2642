"""Tree speculation on a fixed-size StaticCache (transformers' fast path): identity with stock greedy
generate, padded buckets, the compiled forward, and the errors of the static layout."""

from __future__ import annotations

import contextlib
import itertools

import pytest
import torch
from tiny_models import prompt, tiny_compile_config, tiny_drafter, tiny_eagle3, tiny_model
from torch._dynamo.exc import FailOnRecompileLimitHit
from torch_calls import TorchCalls
from transformers import CompileConfig, DynamicCache, StaticCache

import hf_adaptive_spec as hfas
from hf_adaptive_spec.core.static_cache import compact_static_cache, static_tree_mask
from hf_adaptive_spec.generation.static_path import fast_path

POLICIES = {
    "chain": hfas.StaticTreePolicy.chain(4),
    "tree": hfas.StaticTreePolicy(depth=3, top_k=3, total_tokens=8),
    "wide": hfas.StaticTreePolicy(depth=2, top_k=8, total_tokens=16),
    "plain": hfas.StaticTreePolicy(depth=0, top_k=1, total_tokens=1),
}


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_static_cache_matches_stock_greedy(family):
    """The engine's own cache (cache_implementation='static'), reused across prompts of other
    lengths, and a StaticCache the caller passes; with and without the prompt-lookup branch."""
    model = tiny_model(family)
    drafters = {"early-exit": hfas.CausalLMDrafter.from_target_layers(model, 2), "eagle3": tiny_eagle3(model)}
    user_cache = StaticCache(config=model.config, max_cache_len=128)
    for length in (1, 9, 30):
        ids = prompt(length, seed=length)
        expected = model.generate(ids, max_new_tokens=24, do_sample=False)
        for (drafter_name, drafter), (shape, policy) in zip(list(drafters.items()) * 2, POLICIES.items()):
            for lookup in (0, 3):
                out = model.generate(
                    ids, max_new_tokens=24, do_sample=False, assistant_model=drafter, assistant_policy=policy,
                    cache_implementation="static", prompt_lookup_num_tokens=lookup or None,
                    return_dict_in_generate=True,
                )
                assert torch.equal(out.sequences, expected), (family, drafter_name, shape, lookup, length)
                assert out.speculation.cache == "static" and out.speculation.compiled is False
            user_cache.reset()
            out = model.generate(
                ids, max_new_tokens=24, do_sample=False, assistant_model=drafter, assistant_policy=policy,
                past_key_values=user_cache,
            )
            assert torch.equal(out, expected), (family, drafter_name, shape, "user cache")


@pytest.mark.parametrize("kind", ["eagle3", "eagle3-2-layers", "causal-lm", "dvi"])
def test_compiled_static_path_matches_stock_and_keeps_its_graphs(kind):
    """One compiled graph per bucket, kept on the model and the drafter: a second prompt of another
    length compiles nothing more. Trees of <= 8 nodes use the smallest bucket only, which keeps the
    compile short."""
    model = tiny_model("llama")
    drafter = tiny_drafter(kind, model)
    policy = hfas.StaticTreePolicy(depth=2, top_k=3, total_tokens=8)
    runs = []
    for length in (6, 17):
        ids = prompt(length, seed=length)
        expected = model.generate(ids, max_new_tokens=20, do_sample=False)
        out = model.generate(
            ids, max_new_tokens=20, do_sample=False, assistant_model=drafter, assistant_policy=policy,
            cache_implementation="static", compile_config=tiny_compile_config(), return_dict_in_generate=True,
        )
        assert torch.equal(out.sequences, expected), length
        assert max(out.speculation.verified_tokens) <= 8
        runs.append(out.speculation)
    assert all(stats.compiled and stats.cache == "static" for stats in runs)
    assert runs[0].compile_time > 0 and runs[1].compile_time == 0


def test_a_graph_compiled_again_for_a_seen_shape_is_compile_time():
    """dynamo compiles a seen shape's graph again when one of its guards fails (here the training flag, which the
    attention reads): that call's seconds are compile time, not verification time (only each shape's first compile
    was counted)."""
    model = tiny_model("llama")
    config = CompileConfig(fullgraph=True, dynamic=False, backend="eager")  # dynamo's graphs, without inductor's
    config._compile_all_devices = True

    def compile_time() -> float:
        out = model.generate(prompt(6), max_new_tokens=8, do_sample=False, assistant_policy=POLICIES["plain"],
                             cache_implementation="static", compile_config=config, return_dict_in_generate=True)
        return out.speculation.compile_time

    assert compile_time() > 0 and compile_time() == 0
    model.train()
    assert compile_time() > 0


def test_a_new_cache_of_the_same_shapes_takes_no_compile_time():
    """A caller passing a fresh StaticCache per call reuses the graphs (nothing compiles), but each bucket's first
    verification was booked as compile time and taken out of the verification time a policy observes (the graphs'
    key holds the cache; found by a review)."""
    model = tiny_model("llama")
    config = CompileConfig(fullgraph=True, dynamic=False, backend="eager")
    config._compile_all_devices = True

    def compile_time() -> float:
        out = model.generate(prompt(6), max_new_tokens=8, do_sample=False, assistant_policy=POLICIES["plain"],
                             past_key_values=StaticCache(config=model.config, max_cache_len=128),
                             compile_config=config, return_dict_in_generate=True)
        return out.speculation.compile_time

    assert compile_time() > 0
    assert [compile_time() for _ in range(3)] == [0, 0, 0]


def test_padded_draft_rows_are_contiguous_whatever_they_were_sliced_from():
    """A step's rows sliced from the growing sequence carry its length as a stride; passed on as
    they are when they fill a bucket exactly, they recompiled the compiled step at every new
    length (found with the prompt-lookup branch: 30-50 ms of recompiling per cycle, then dynamo's
    graph limit)."""
    from hf_adaptive_spec.core.static_steps import _pad_rows

    sequence = torch.arange(830)[None]
    for n, bucket in ((4, 4), (3, 4), (8, 8)):
        padded = _pad_rows(sequence[:, -n:], bucket)
        assert padded.shape == (1, bucket) and padded.stride() == (bucket, 1)


@pytest.mark.parametrize("kind", ["eagle3", "causal-lm"])
def test_a_drafters_static_cache_grows_geometrically(kind):
    """Each cache length compiles a drafter's step graphs anew, and dynamo fails past 64 graphs of
    one step function, shared by every drafter of that kind (found by a Spec-Bench run with two
    EAGLE-3 drafters whose prompts grew): growing calls make a logarithmic number of caches."""
    drafter = tiny_drafter(kind, tiny_model("llama"))
    lengths = []
    for max_length in range(200, 6200, 200):
        drafter.use_static_shapes(max_length, None)
        if not lengths or drafter._static.max_cache_len != lengths[-1]:
            lengths.append(drafter._static.max_cache_len)
    assert len(lengths) <= 5 and all(b >= 2 * a for a, b in itertools.pairwise(lengths)), lengths


@pytest.mark.parametrize("kind", ["eagle3", "causal-lm"])
def test_a_drafters_frozen_steps_are_rebuilt_once_its_weights_change(kind):
    """Inductor's freezing (the CPU fast path's) bakes the weights into the step graphs: after an in-place write
    (a fine-tuned drafter, or the target whose layers an early-exit drafter shares) the kept graphs drafted with the
    old weights, silently less often right (found by a review: compiled argmax 68 against eager 13). Graphs that
    read the weights at run time are kept."""
    target = tiny_model("llama")
    drafter = tiny_drafter(kind, target)
    frozen = hfas.fast_path_compile_config("cpu").to_dict()
    weights = drafter.model if kind == "eagle3" else drafter._static_model()
    for options, rebuilt in ((frozen, True), ({"backend": "eager"}, False)):
        drafter.use_static_shapes(64, options)
        first = drafter._static
        drafter.use_static_shapes(64, options)
        assert drafter._static is first  # unchanged weights: the compiled steps are kept
        with torch.no_grad():
            next(weights.parameters()).mul_(1.5)
        drafter.use_static_shapes(64, options)
        assert (drafter._static is not first) is rebuilt


@pytest.mark.parametrize(
    ("kind", "told_by"),
    [("eagle3", "drafter"), ("causal-lm", "drafter"), ("dvi", "drafter"), ("causal-lm", "target"), ("dvi", "target")],
)
def test_a_write_no_version_shows_rebuilds_a_drafters_frozen_steps_once_told(kind, told_by):
    """A write through ``.data`` bumps no version, so the frozen steps kept drafting with the old weights, and
    ``fast_path(target).weights_changed()`` reached only the target's graphs: now ``drafter.weights_changed()``
    rebuilds them, and the target's call does for a drafter sharing the target's layers (DVI's exit layers, a
    causal LM made of the target's first layers)."""
    from hf_adaptive_spec.core.features import decoder_layers

    target = tiny_model("llama")
    drafter = tiny_drafter(kind, target)
    frozen = hfas.fast_path_compile_config("cpu").to_dict()
    written = drafter.model if kind == "eagle3" else decoder_layers(target)[0]
    drafter.use_static_shapes(64, frozen)
    first = drafter._static
    with torch.no_grad():
        next(written.parameters()).data.mul_(1.5)
    drafter.use_static_shapes(64, frozen)
    assert drafter._static is first  # the limit: no version shows the write
    (drafter.weights_changed if told_by == "drafter" else fast_path(target).weights_changed)()
    drafter.use_static_shapes(64, frozen)
    rebuilt = drafter._static
    drafter.use_static_shapes(64, frozen)
    assert rebuilt is not first and drafter._static is rebuilt  # rebuilt once, then kept


def test_a_drafter_kept_for_a_longer_call_keeps_room_for_its_tree():
    """Found by a Spec-Bench run racing trees: a drafter's static cache built for a short call (512 slots) was kept
    for a call of 490 tokens, which left no room for one cycle's tree nodes (48 at depth 6, top-k 8), and drafting
    failed at slot 505. A kept cache must hold the call, a cycle's tree room and a padded step."""
    model = tiny_model("llama")
    drafter = tiny_drafter("eagle3", model)
    drafter.use_static_shapes(200, None)
    first = drafter._static
    drafter.use_static_shapes(240, None)
    assert drafter._static is first and first.max_cache_len == 512 == 240 + first.tree_room + 16
    policy = hfas.StaticTreePolicy(depth=6, top_k=8, total_tokens=16)
    for length, new_tokens in ((5, 8), (466, 24)):
        ids = prompt(length, seed=length)
        out = model.generate(ids, max_new_tokens=new_tokens, do_sample=False, assistant_model=drafter,
                             assistant_policy=policy, cache_implementation="static", return_dict_in_generate=True)
        assert out.speculation.cache == "static"
        assert torch.equal(out.sequences, model.generate(ids, max_new_tokens=new_tokens, do_sample=False))
    assert drafter._static.max_cache_len >= 466 + 24 + drafter._static.tree_room + 16


@pytest.mark.parametrize("kind", ["causal-lm", "eagle3", "eagle3-2-layers", "dvi"])
def test_drafters_on_the_static_path_draft_what_they_draft_on_the_dynamic_one(kind, monkeypatch):
    """The drafters' fixed-shape steps (padded to 4, 8 or 16 rows in a StaticCache) propose the same
    trees as their growing-cache steps: the same accepted lengths cycle by cycle (fp32), not merely
    the same output, which verification would give any drafter. Steps fit the buckets, but the
    first of each call (the prompt). DVI drafts in the target's cache on the dynamic path and in
    its own static cache here."""
    from hf_adaptive_spec.core import static_steps

    model = tiny_model("llama")
    drafter = tiny_drafter(kind, model)
    policy = hfas.StaticTreePolicy(depth=3, top_k=3, total_tokens=8)
    shapes = []
    original = static_steps.StaticDraftSteps.run
    monkeypatch.setattr(static_steps.StaticDraftSteps, "run",
                        lambda self, kind, constants, rows, *args, **kwargs: shapes.append(rows[0].shape[1])
                        or original(self, kind, constants, rows, *args, **kwargs))
    for length in (5, 19):
        ids = prompt(length, seed=length)
        runs = {}
        for cache in ("dynamic", "static"):
            extra = {"cache_implementation": "static"} if cache == "static" else {}
            out = model.generate(ids, max_new_tokens=24, do_sample=False, assistant_model=drafter,
                                 assistant_policy=policy, return_dict_in_generate=True, **extra)
            assert out.speculation.cache == cache
            runs[cache] = (out.sequences, out.speculation.accepted_lengths)
        assert torch.equal(runs["static"][0], runs["dynamic"][0])
        assert runs["static"][1] == runs["dynamic"][1], (kind, length)
    assert len(shapes) > 10 and sum(n > 16 for n in shapes) <= 2  # longer: at most each call's prompt step


def test_uncompiled_static_path_says_so():
    """disable_compile (or no compile_config on a CPU) runs eager, and the stats say so: no silent fallback."""
    model = tiny_model("llama")
    out = model.generate(
        prompt(5), max_new_tokens=8, do_sample=False, assistant_policy=POLICIES["plain"],
        cache_implementation="static", compile_config=tiny_compile_config(), disable_compile=True,
        return_dict_in_generate=True,
    )
    assert out.speculation.compiled is False and out.speculation.compile_time == 0


def test_trees_never_exceed_the_largest_bucket_by_construction(monkeypatch):
    """The engine lowers the policy's total_tokens to the largest bucket less the lookup chain, so a
    policy asking for 60 nodes verifies at most 8 here, and says so (capped_trees, a warning);
    without that cap the tree would not fit."""
    model = tiny_model("llama")
    assert fast_path(model, buckets=(4, 8)).buckets == (4, 8) and fast_path(model).buckets == (4, 8)
    ids = prompt(12, seed=3)
    expected = model.generate(ids, max_new_tokens=30, do_sample=False)
    out = model.generate(
        ids, max_new_tokens=30, do_sample=False, assistant_model=hfas.CausalLMDrafter(model),
        assistant_policy=hfas.StaticTreePolicy(), prompt_lookup_num_tokens=3, cache_implementation="static",
        return_dict_in_generate=True,
    )
    assert torch.equal(out.sequences, expected)
    assert max(out.speculation.verified_tokens) == 8
    assert out.speculation.capped_trees == out.speculation.cycles > 0
    small = model.generate(ids, max_new_tokens=10, do_sample=False, assistant_model=hfas.CausalLMDrafter(model),
                           assistant_policy=hfas.StaticTreePolicy.chain(3), cache_implementation="static",
                           return_dict_in_generate=True)
    assert small.speculation.capped_trees == 0
    from hf_adaptive_spec.generation import speculative_decoding

    original = speculative_decoding._Decoder.__init__

    def uncapped(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.capacity = None

    monkeypatch.setattr(speculative_decoding._Decoder, "__init__", uncapped)
    with pytest.raises(ValueError, match="exceeds the largest verification bucket 8"):
        model.generate(
            ids, max_new_tokens=30, do_sample=False, assistant_model=hfas.CausalLMDrafter(model),
            assistant_policy=hfas.StaticTreePolicy(), cache_implementation="static",
        )


def test_padding_rows_are_invisible_to_tree_nodes():
    ancestors = torch.tensor([[1, 0, 0], [1, 1, 0], [1, 0, 1]], dtype=torch.bool)
    mask = static_tree_mask(ancestors, past_length=5, bucket=4, max_cache_len=12, dtype=torch.float32,
                            device="cpu")[0, 0]
    visible = mask == 0
    assert visible[:, :5].all()  # every row sees the committed prefix
    assert visible[:3, 5:8].equal(ancestors)  # tree rows see their ancestors and themselves
    assert not visible[:3, 8].any()  # ... never the padding slot
    assert visible[3, 8] and not visible[3, 5:8].any()  # the padding row sees itself only
    assert not visible[:, 9:].any()  # nor anything past the bucket


def test_compaction_moves_the_accepted_path_after_the_prefix():
    model = tiny_model("llama")
    cache = StaticCache(config=model.config, max_cache_len=16)
    with torch.no_grad():
        model(prompt(10), past_key_values=cache, use_cache=True)
    keys = cache.layers[1].keys.clone()
    with TorchCalls() as calls:
        compact_static_cache(cache, past_length=4, keep=torch.tensor([0, 2, 5]))
    assert torch.equal(cache.layers[1].keys[:, :, 4:7], keys[:, :, [4, 6, 9]])
    assert torch.equal(cache.layers[1].keys[:, :, :4], keys[:, :, :4])
    assert int(cache.get_seq_length()) == 7
    additions = sum(calls.counts[f] for f in (torch.add, torch.Tensor.add, torch.Tensor.__add__, torch.Tensor.__radd__))
    assert additions == 1, calls.counts  # the slots to move, once for every layer on the device


@pytest.mark.parametrize("path", [[0, 2, 5], [0, 1, 5], [0, 1, 2], [0]])
def test_compaction_moves_only_the_nodes_out_of_place(path):
    """The leading nodes already at their slot (``nodes_in_place``) are not moved: the cache is the one a full
    compaction gives, and a path entirely in place copies nothing (two kernels per layer fewer on a GPU)."""
    model = tiny_model("llama")
    caches = [StaticCache(config=model.config, max_cache_len=16) for _ in range(2)]
    with torch.no_grad():
        for cache in caches:
            model(prompt(10), past_key_values=cache, use_cache=True)
    compact_static_cache(caches[0], past_length=4, keep=torch.tensor(path))
    with TorchCalls() as calls:
        compact_static_cache(caches[1], past_length=4, keep=torch.tensor(path), in_place=hfas.core.nodes_in_place(path))
    in_place = hfas.core.nodes_in_place(path) == len(path)
    assert calls.counts[torch.Tensor.__setitem__] == (0 if in_place else 2 * len(caches[1].layers)), calls.counts
    for layer, full in zip(caches[1].layers, caches[0].layers):
        assert torch.equal(layer.keys, full.keys) and torch.equal(layer.values, full.values)
    assert int(caches[1].get_seq_length()) == 4 + len(path)


@pytest.mark.parametrize(("top_k", "moves"), [(1, False), (2, True)])
def test_a_cycle_moves_cache_slots_only_for_a_path_out_of_place(top_k, moves, monkeypatch):
    """With the target as its own drafter every drafted token is accepted: a chain (top-k 1), numbered in order, is
    kept where verification wrote it, so no cycle moves a slot; a wider tree's path leaves its first child's branch
    and is moved. Both give stock greedy ``generate``'s tokens."""
    from hf_adaptive_spec.core import static_cache

    calls, move_slots = [], static_cache._move_slots
    monkeypatch.setattr(static_cache, "_move_slots", lambda *args: calls.append(args) or move_slots(*args))
    model = tiny_model("llama")
    expected = model.generate(prompt(9), max_new_tokens=20, do_sample=False)
    out = model.generate(prompt(9), max_new_tokens=20, do_sample=False, assistant_model=hfas.CausalLMDrafter(model),
                         assistant_policy=hfas.StaticTreePolicy(depth=3, top_k=top_k, total_tokens=6),
                         cache_implementation="static")
    assert torch.equal(out, expected)
    assert bool(calls) == moves, len(calls)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(past_key_values="short"), r"max_cache_len=32, but this call needs \d+ slots"),
        (dict(past_key_values="holding-the-whole-input"), r"already holds 5 tokens, but input_ids has 5"),
        (dict(cache_implementation="offloaded"), "supports cache_implementation='static' or 'dynamic'"),
        (dict(cache_implementation="static", past_key_values="fresh"),
         "either cache_implementation='static' or a past_key_values"),
        (dict(past_key_values="fewer-layers"),
         "The static cache has 2 layers and the model 4: build it from this model"),
        (dict(past_key_values="laid-out-in-bfloat16"), r"laid out by an earlier call for batch 1 in torch.bfloat16"),
        (dict(past_key_values="laid-out-for-batch-2"), r"laid out by an earlier call for batch 2 in torch.float32"),
        # on a CPU transformers' own update failed ('Torch not compiled with CUDA'); on a GPU it ran unrefused
        (dict(past_key_values="offloaded-static"), r"StaticCache passed offloads its layers \(offloading=True\)"),
        (dict(past_key_values="offloaded-dynamic"), r"DynamicCache passed offloads its layers \(offloading=True\)"),
    ],
)
def test_static_cache_bad_inputs(kwargs, message):
    model = tiny_model("llama")
    caches = {
        "short": lambda: StaticCache(config=model.config, max_cache_len=32),
        "fresh": lambda: StaticCache(config=model.config, max_cache_len=256),
        "holding-the-whole-input": lambda: _prefilled(model, 5),
        "fewer-layers": lambda: StaticCache(config=tiny_model("llama", num_hidden_layers=2).config, max_cache_len=256),
        "laid-out-in-bfloat16": lambda: _laid_out(model, dtype=torch.bfloat16),
        "laid-out-for-batch-2": lambda: _laid_out(model, batch_size=2),
        "offloaded-static": lambda: StaticCache(config=model.config, max_cache_len=256, offloading=True),
        "offloaded-dynamic": lambda: DynamicCache(config=model.config, offloading=True),
    }
    kwargs = {k: caches[v]() if k == "past_key_values" else v for k, v in kwargs.items()}
    with pytest.raises(ValueError, match=message):
        model.generate(prompt(5), max_new_tokens=8, do_sample=False, assistant_policy=POLICIES["plain"], **kwargs)


def _prefilled(model, length: int) -> StaticCache:
    cache = StaticCache(config=model.config, max_cache_len=256)
    with torch.no_grad():
        model(prompt(length), past_key_values=cache, use_cache=True)
    return cache


def _laid_out(model, dtype=torch.float32, batch_size=1) -> StaticCache:
    """A cache an earlier call used (in ``dtype``, for ``batch_size`` rows), then reset: its layers keep that layout."""
    cache = StaticCache(config=model.config, max_cache_len=256)
    with torch.no_grad():
        model.to(dtype)(prompt(3).repeat(batch_size, 1), past_key_values=cache, use_cache=True)
    model.to(torch.float32)
    cache.reset()
    return cache


def test_the_engines_own_cache_follows_the_models_dtype():
    model, ids = tiny_model("llama"), prompt(6)
    kwargs = dict(max_new_tokens=8, do_sample=False, assistant_policy=POLICIES["plain"], cache_implementation="static")
    model.generate(ids, **kwargs)
    model.to(torch.bfloat16)  # its float32 cache of this size must not serve the next call
    assert model.generate(ids, **kwargs).shape == (1, ids.shape[1] + 8)


@pytest.mark.parametrize(("kind", "moved"), [("causal-lm", "target"), ("dvi", "target"), ("causal-lm", "drafter"),
                                             ("eagle3", "drafter")])
def test_a_drafters_static_cache_follows_a_dtype_change_between_calls(kind, moved):
    """After one static call, the target converted to bfloat16 (a drafter on its layers) or the drafter's own model
    converted failed the next static call inside the drafter's step (index_copy_ of a bfloat16 row into the kept
    float32 cache): the steps are rebuilt in the weights' dtype, and the call gives a fresh drafter's tokens."""
    def run(target, drafter):
        return target.generate(prompt(8), max_new_tokens=12, do_sample=False, assistant_model=drafter,
                               assistant_policy=POLICIES["tree"], cache_implementation="static")

    def convert(target, drafter):
        (target if moved == "target" else drafter.model).to(torch.bfloat16)

    def make_drafter(target):  # a drafter converted alone has its own model
        own = moved == "drafter" and kind == "causal-lm"
        return hfas.CausalLMDrafter(tiny_model("llama", seed=3, num_hidden_layers=1)) if own else tiny_drafter(
            kind, target)

    target = tiny_model("llama")
    drafter = make_drafter(target)
    run(target, drafter)
    convert(target, drafter)
    fresh_target = tiny_model("llama")
    fresh = make_drafter(fresh_target)
    convert(fresh_target, fresh)
    assert torch.equal(run(target, drafter), run(fresh_target, fresh))


@pytest.mark.parametrize("kind", ["eagle3", "causal-lm"])
def test_a_copied_drafter_builds_its_own_step_graphs(kind):
    """After a compiled static call, pickling an EAGLE-3 drafter failed in its compiled step function ('Can't pickle
    <function _draft_step>: it's not the same object'), and a deep copy carried graphs holding the original's weights
    that it could never use: a copy leaves the graphs behind, builds its own, and drafts what the original drafts."""
    import copy
    import pickle

    target = tiny_model("llama")
    drafter = tiny_drafter(kind, target)
    kwargs = dict(max_new_tokens=12, do_sample=False, cache_implementation="static",
                  compile_config=hfas.fast_path_compile_config("cpu"))
    expected = target.generate(prompt(8), assistant_model=drafter, assistant_policy=POLICIES["tree"], **kwargs)
    for copied in (copy.deepcopy(drafter), pickle.loads(pickle.dumps(drafter))):
        assert copied._static is None and not copied._static_in_use
        out = target.generate(prompt(8), assistant_model=copied, assistant_policy=POLICIES["tree"], **kwargs)
        assert torch.equal(out, expected)


@pytest.mark.parametrize("family", ["mistral-sliding", "qwen2-hybrid"])
def test_sliding_window_models_decode_in_a_static_cache_of_full_length_layers(family):
    """The engine's own cache keeps every layer full-length, and each verification mask applies its layer kind's
    window (Mistral: one kind; Qwen2's hybrid: a mask per kind, passed as a dict). Windows of 6 and 5 tokens, so
    every prompt here outgrows them; without the windows in the masks the tokens differ."""
    model = tiny_model(family)
    drafter = hfas.CausalLMDrafter.from_target_layers(model, 2)
    for length, compiled in ((9, False), (30, False), (12, True)):
        ids = prompt(length, seed=length)
        expected = model.generate(ids, max_new_tokens=24, do_sample=False)
        for policy in (POLICIES["plain"], hfas.StaticTreePolicy(depth=4, top_k=3, total_tokens=12)):
            out = model.generate(
                ids, max_new_tokens=24, do_sample=False, assistant_model=drafter, assistant_policy=policy,
                cache_implementation="static", return_dict_in_generate=True,
                **({"compile_config": tiny_compile_config()} if compiled else {}),
            )
            assert torch.equal(out.sequences, expected), (family, length, compiled)
            assert out.speculation.cache == "static" and out.speculation.compiled is compiled


def test_a_callers_sliding_window_static_cache_is_refused_and_a_full_length_one_decodes():
    from hf_adaptive_spec.core import full_length_static_cache

    model = tiny_model("mistral-sliding")
    ids, kwargs = prompt(9), dict(max_new_tokens=16, do_sample=False, assistant_policy=POLICIES["plain"],
                                  assistant_model=hfas.CausalLMDrafter.from_target_layers(model, 2))
    with pytest.raises(ValueError, match="StaticSlidingWindowLayer.*Pass cache_implementation='static'"):
        model.generate(ids, past_key_values=StaticCache(config=model.config, max_cache_len=128), **kwargs)
    out = model.generate(ids, past_key_values=full_length_static_cache(model.config, 128), **kwargs)
    assert torch.equal(out, model.generate(ids, max_new_tokens=16, do_sample=False))


def test_dvi_drafts_in_its_own_cache_on_the_static_path_and_learns_there():
    """DVI's default cache sharing gives way to its own static cache (identical output, online
    learning still logs records); sharing asked for explicitly is refused with the way out."""
    model = tiny_model("llama")
    drafter = hfas.DVIDrafter(model, exit_layer=2, online=True)
    for length in (4, 13):
        ids = prompt(length, seed=length)
        out = model.generate(ids, max_new_tokens=20, do_sample=False, assistant_model=drafter,
                             assistant_policy=hfas.StaticTreePolicy.chain(3), cache_implementation="static",
                             return_dict_in_generate=True)
        assert torch.equal(out.sequences, model.generate(ids, max_new_tokens=20, do_sample=False))
        assert out.speculation.cache == "static"
    assert len(drafter.updater.buffer) > 0
    with pytest.raises(ValueError, match="asked to share the target's KV cache.*leave cache sharing at its default"):
        model.generate(
            prompt(5), max_new_tokens=8, do_sample=False,
            assistant_model=hfas.DVIDrafter(model, exit_layer=1, share_cache=True),
            assistant_policy=hfas.StaticTreePolicy.chain(2), cache_implementation="static",
        )


def test_weight_freezing_is_applied_around_calls_not_through_torch_compile_options():
    """Inductor reads ``freezing`` before it applies torch.compile's options, so the engine moves it
    into a config patch around each compiled call (measured: compiled bf16 stock 22.5 tok/s with
    the option passed to torch.compile, 29.2 with the patch; eager 23-26)."""
    from hf_adaptive_spec.core.compiled import split_inductor_patches

    kwargs, patches = split_inductor_patches(hfas.fast_path_compile_config("cpu").to_dict())
    assert patches == {"freezing": True} and kwargs["options"] is None and kwargs["dynamic"] is False
    kwargs, patches = split_inductor_patches({"options": {"freezing": False, "max_autotune": True}})
    assert patches == {"freezing": False} and kwargs["options"] == {"max_autotune": True}
    gpu = hfas.fast_path_compile_config("cuda").to_dict()
    assert gpu["mode"] == "reduce-overhead" and split_inductor_patches(gpu)[1] == {}


@pytest.mark.parametrize(
    "error, message",
    [
        (RuntimeError("inductor could not lower aten.foo"),
         r"Compiling .* failed \(RuntimeError: inductor could not lower aten.foo\).*disable_compile=True"),
        (FailOnRecompileLimitHit("Hard failure due to fail_on_recompile_limit_hit"),
         r"compiled 64 graphs of one .*Each drafter object compiles its own.*Reuse one drafter"),
    ],
    ids=["lowering", "graph-limit"],
)
def test_a_compile_failure_names_the_cause_and_the_way_out(monkeypatch, error, message):
    from hf_adaptive_spec.core import compiled

    def failing_compile(fn, **kwargs):
        def run(*args):
            raise error

        return run

    monkeypatch.setattr(compiled.torch, "compile", failing_compile)
    model = tiny_model("llama")
    with pytest.raises(RuntimeError, match=message):
        model.generate(
            prompt(5), max_new_tokens=8, do_sample=False, assistant_policy=POLICIES["plain"],
            cache_implementation="static", compile_config=tiny_compile_config(),
        )


def test_the_engines_own_cache_is_sized_for_each_call():
    """A short call after a long one decodes in a short cache (a static cache attends over every slot), one cache
    kept per size, sizes doubling from 512 so that a process makes few (each has its own graphs)."""
    path = fast_path(tiny_model("llama"))
    assert [path.rounded_cache_length(n) for n in (1, 512, 513, 1025, 3000)] == [512, 512, 1024, 2048, 4096]
    short, long_ = path.cache_for(100), path.cache_for(700)
    assert short.layers[0].max_cache_len == 512 and long_.layers[0].max_cache_len == 1024
    assert path.cache_for(200) is short and path.cache_for(1024) is long_


def test_a_model_made_under_inference_mode_decodes_on_the_static_path():
    """Its weights keep no version count, which the fast path reads to notice changed weights."""
    with torch.inference_mode():
        model = tiny_model("llama")
    ids = prompt(6)
    out = model.generate(ids, max_new_tokens=8, do_sample=False, assistant_policy=POLICIES["plain"],
                         cache_implementation="static")
    assert torch.equal(out, model.generate(ids, max_new_tokens=8, do_sample=False))


@pytest.mark.parametrize("kind", ["eagle3", "causal-lm", "dvi"])
@pytest.mark.parametrize("second", [contextlib.nullcontext, torch.enable_grad])
def test_a_call_outside_inference_mode_after_one_inside_it_decodes_as_stock(kind, second):
    """The first static call under torch.inference_mode made the engine's and the drafter's kept caches of inference
    tensors, and the next call outside that mode failed at their first in-place write ('Inplace update to inference
    tensor outside InferenceMode'), with the engine's cache or a caller's; stock decodes in every order."""
    model, ids = tiny_model("llama"), prompt(6)
    drafter = tiny_drafter(kind, model)
    stock = model.generate(ids, max_new_tokens=10, do_sample=False)
    kwargs = dict(max_new_tokens=10, do_sample=False, assistant_model=drafter, assistant_policy=POLICIES["tree"])
    with torch.inference_mode():
        model.generate(ids, cache_implementation="static", **kwargs)
    with second():
        assert torch.equal(model.generate(ids, cache_implementation="static", **kwargs), stock)
        assert torch.equal(model.generate(ids, past_key_values=StaticCache(config=model.config, max_cache_len=64),
                                          **kwargs), stock)


def test_a_drafters_static_cache_is_allocated_before_any_compiled_step():
    """A first step inside a compiled graph would allocate the cache there, unmarked as static addresses (on CUDA, in
    the CUDA-graph pool the next replay overwrites)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from hf_adaptive_spec.core.static_steps import StaticDraftSteps
    from hf_adaptive_spec.drafters.causal_lm import _causal_step

    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, attn_implementation="sdpa")
    model = LlamaForCausalLM(config).eval()
    steps = StaticDraftSteps(_causal_step, config, model.device, model.dtype, 64,
                             {"backend": "eager", "dynamic": False})
    with torch.no_grad():
        steps.run(None, (model,), (torch.randint(0, 64, (1, 3)),), torch.arange(3),
                  torch.ones(3, 3, dtype=torch.bool).tril(), 0)
    layer = steps.cache.layers[0]
    assert (hasattr(layer.keys, "_dynamo_static_input_type")
            and hasattr(layer.cumulative_length, "_dynamo_static_input_type"))


def test_a_drafters_first_step_runs_eagerly_and_the_next_ones_compiled():
    """The first step allocates the cache from the keys and values it writes (eagerly); every later one runs the
    compiled graph, so a cache that never reported itself initialised would show here as steps that stay eager."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from hf_adaptive_spec.core.static_steps import StaticDraftSteps
    from hf_adaptive_spec.drafters.causal_lm import _causal_step

    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, attn_implementation="sdpa")
    model = LlamaForCausalLM(config).eval()
    steps = StaticDraftSteps(_causal_step, config, model.device, model.dtype, 64,
                             {"backend": "eager", "dynamic": False})
    compiled, calls = steps.compiled, []
    steps.compiled = lambda key, *args: calls.append(key) or compiled(key, *args)
    causal = torch.ones(3, 3, dtype=torch.bool).tril()
    with torch.no_grad():
        steps.run(None, (model,), (torch.randint(0, 64, (1, 3)),), torch.arange(3), causal, 0)
        assert calls == [] and steps.cache.is_initialized
        steps.run(None, (model,), (torch.randint(0, 64, (1, 3)),), torch.arange(3, 6), causal, 3)
    assert calls == [(4, None)]


def test_returned_logits_and_scores_own_their_storage():
    """Verification rows can be views of a compiled graph's output, which its next replay overwrites on a GPU."""
    model, ids = tiny_model("llama"), prompt(6)
    out = model.generate(ids, max_new_tokens=6, do_sample=False, assistant_policy=hfas.StaticTreePolicy(2, 2, 4),
                         assistant_model=hfas.CausalLMDrafter.from_target_layers(model, 2),
                         cache_implementation="static", return_dict_in_generate=True, output_logits=True,
                         output_scores=True)
    assert all(row._base is None for row in (*out.logits, *out.scores))


def test_a_committed_step_returns_its_last_rows_outputs_alone():
    """A step over committed tokens gives the drafter's head the last row only (``last_row_only``): the same
    log-probs as that row of the full step, in every bucket and past the largest (run eagerly, unpadded)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from hf_adaptive_spec.core.static_steps import StaticDraftSteps
    from hf_adaptive_spec.drafters.causal_lm import _causal_step

    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, attn_implementation="sdpa")
    model = LlamaForCausalLM(config).eval()
    steps = StaticDraftSteps(_causal_step, config, model.device, model.dtype, 64, None)
    for new in (1, 3, 6, 11, 20):
        tokens, causal = torch.randint(0, 64, (1, new)), torch.ones(new, new, dtype=torch.bool).tril()
        with torch.no_grad():
            (every,) = steps.run("committed", (model,), (tokens,), torch.arange(new), causal, 0)
            (last,) = steps.run("committed", (model,), (tokens,), torch.arange(new), causal, 0, last_row_only=True)
        assert every.shape[0] == new and last.shape[0] == 1
        torch.testing.assert_close(last, every[-1:])


def test_a_lookup_branch_longer_than_the_largest_bucket_holds_is_refused_before_decoding():
    """The chain and the root must fit the largest bucket; otherwise the first long match would fail mid-call."""
    model = tiny_model("llama")
    fast_path(model, buckets=(4, 8))
    ids = prompt(12, seed=3)
    kwargs = dict(max_new_tokens=12, do_sample=False, assistant_model=hfas.CausalLMDrafter(model),
                  assistant_policy=hfas.StaticTreePolicy.chain(2), cache_implementation="static")
    refusal = r"prompt_lookup_num_tokens=8 verifies up to 9 .* at most 8 .*prompt_lookup_num_tokens <= 7, or add a "
    with pytest.raises(ValueError, match=refusal + r"bucket of at least 9: .*buckets=\(4, 8, 9\)"):
        model.generate(ids, prompt_lookup_num_tokens=8, **kwargs)
    out = model.generate(ids, prompt_lookup_num_tokens=7, **kwargs)
    assert torch.equal(out, model.generate(ids, max_new_tokens=12, do_sample=False))



@pytest.mark.parametrize("buckets", [(2.5, 8), (True, 8), (8.0,), "2,4,8", (4, 2), (0, 8), ()])
def test_verification_buckets_other_than_distinct_ascending_ints_are_refused(buckets):
    """Floats and bools were accepted and failed inside the first verification (a TypeError in the cache's slot
    arithmetic); the command line's text was split into characters."""
    with pytest.raises(ValueError, match="Verification buckets (must be distinct positive ints|are ints, got the)"):
        hfas.fast_path(tiny_model("llama"), buckets=buckets)
    assert hfas.fast_path(tiny_model("llama"), buckets=torch.tensor([2, 4])).buckets == (2, 4)


def test_max_cache_len_sizes_the_engines_static_cache_as_stocks(caplog):
    """It was ignored: the engine returned a cache of its own size (512), which a later turn of stock's overran, and
    transformers warned that max_cache_len was ignored 'with cache_implementation=None', though the call asked for
    'static'. As stock's, the cache holds at least max_cache_len slots (rounded up to the engine's sizes, which keep
    their graphs), and a max_cache_len below what the call needs is no refusal: the call's need wins."""
    model = tiny_model("llama")
    ids = prompt(9, seed=4)
    kwargs = dict(max_new_tokens=12, do_sample=False, cache_implementation="static", return_dict_in_generate=True)
    spec = lambda: dict(assistant_model=hfas.CausalLMDrafter(model),  # noqa: E731
                        assistant_policy=hfas.StaticTreePolicy(depth=2, top_k=2, total_tokens=4))
    stock = model.generate(ids, **kwargs, max_cache_len=640)
    with caplog.at_level("WARNING"):
        out = model.generate(ids, **kwargs, max_cache_len=640, **spec())
    assert torch.equal(out.sequences, stock.sequences)
    assert out.past_key_values.layers[0].max_cache_len >= stock.past_key_values.layers[0].max_cache_len == 640
    assert "max_cache_len" not in caplog.text
    short = model.generate(ids, **kwargs, max_cache_len=10, **spec())  # stock runs with it too
    assert torch.equal(short.sequences, stock.sequences)
