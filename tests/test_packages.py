"""Ahead-of-time packages of the verification forward (CPU + inductor weight freezing): built once,
loaded by later processes instead of compiled, never stale, and never a silent change of path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import torch
from tiny_models import prompt, tiny_model
from transformers import StaticCache

import hf_adaptive_spec as hfas
from hf_adaptive_spec.core.packaged import PackagedForward, weights_digest
from hf_adaptive_spec.generation.static_path import fast_path

#: the prompt-lookup chain alone (<= 4 rows), so every call verifies in the smallest bucket: one package.
PLAIN = hfas.StaticTreePolicy(depth=0, top_k=1, total_tokens=1)


def _frozen_generate(model, ids, **kwargs):
    """Greedy, the lookup chain, on the static path compiled with weight freezing (the engine's own
    cache unless ``past_key_values`` is given)."""
    cache = {} if "past_key_values" in kwargs else {"cache_implementation": "static"}
    return model.generate(
        ids, max_new_tokens=24, do_sample=False, assistant_policy=PLAIN, prompt_lookup_num_tokens=3,
        compile_config=hfas.fast_path_compile_config("cpu"), return_dict_in_generate=True, **cache, **kwargs,
    )


def _packages(folder) -> list:
    return sorted(p.name for p in folder.glob("*.pt2"))


def test_a_new_process_loads_the_package_instead_of_compiling(tmp_path):
    """The first call builds one package per bucket (float32 tokens identical to stock); another
    process with the same model finds it by its digest and compiles nothing."""
    model = tiny_model("llama")
    model.save_pretrained(tmp_path / "model")
    fast_path(model, package_dir=tmp_path / "packages")
    ids = prompt(9, seed=3)
    expected = model.generate(ids, max_new_tokens=24, do_sample=False)
    out = _frozen_generate(model, ids)
    assert torch.equal(out.sequences, expected)
    assert out.speculation.compiled and out.speculation.packaged and out.speculation.compile_time > 0
    assert len(_packages(tmp_path / "packages")) == 1 and fast_path(model).packaged_forward.built == 1
    (package,) = (tmp_path / "packages").glob("*.pt2")  # described for `hf-adaptive-spec packages`
    described = json.loads(package.with_suffix(".json").read_text())
    assert (described["model_type"], described["dtype"], described["torch"]) == ("llama", "float32", torch.__version__)
    assert described["key"].startswith("(") and described["built"].endswith("Z")
    long_ago = time.time() - 30 * 86400
    os.utime(package, (long_ago, long_ago))

    child = textwrap.dedent(f"""
        import torch, hf_adaptive_spec as hfas
        from transformers import AutoModelForCausalLM
        torch.set_num_threads({torch.get_num_threads()})  # a package is built for its builder's thread count
        from hf_adaptive_spec.generation.static_path import fast_path
        model = hfas.enable(AutoModelForCausalLM.from_pretrained({str(tmp_path / "model")!r}).eval())
        path = fast_path(model, package_dir={str(tmp_path / "packages")!r})
        out = model.generate(torch.tensor({ids.tolist()}), max_new_tokens=24, do_sample=False,
            assistant_policy=hfas.StaticTreePolicy(depth=0, top_k=1, total_tokens=1), prompt_lookup_num_tokens=3,
            cache_implementation="static", compile_config=hfas.fast_path_compile_config("cpu"),
            return_dict_in_generate=True)
        print(path.packaged_forward.built, path.packaged_forward.loaded, out.speculation.packaged,
              out.sequences.tolist())
    """)
    result = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300, check=True)
    built, loaded, packaged, sequences = result.stdout.strip().splitlines()[-1].split(" ", 3)
    assert (built, loaded, packaged) == ("0", "1", "True"), result.stdout
    assert sequences == str(expected.tolist())
    assert time.time() - package.stat().st_mtime < 600  # loading marked it used: not pruned as unused


def test_changed_weights_never_load_a_stale_package(tmp_path):
    """A package bakes in the weights, so its digest covers them: a model changed in place after packaging (a
    training step, load_state_dict) builds a package of its own in the same process and gives its own tokens,
    and the package of its old weights stays theirs (never overwritten by the new ones)."""
    model = tiny_model("llama", seed=1)
    fast_path(model, package_dir=tmp_path)
    ids = prompt(7, seed=1)
    first = _frozen_generate(model, ids).sequences
    before = weights_digest(model)
    with torch.no_grad():
        model.lm_head.weight.mul_(-1.0)
    assert weights_digest(model) != before
    expected = model.generate(ids, max_new_tokens=24, do_sample=False)
    assert not torch.equal(expected, first)  # the change matters, so a stale package would show
    out = _frozen_generate(model, ids)
    assert torch.equal(out.sequences, expected)
    assert fast_path(model).packaged_forward.built == 1 and len(_packages(tmp_path)) == 2
    with torch.no_grad():
        model.lm_head.weight.mul_(-1.0)  # back to the first weights: their package, loaded
    assert torch.equal(_frozen_generate(model, ids).sequences, first)
    assert fast_path(model).packaged_forward.loaded == 1 and len(_packages(tmp_path)) == 2


def test_in_process_graphs_follow_changed_weights_and_each_callers_cache():
    """Without packages, a frozen graph holds the weights and the static cache it was compiled with as constants,
    and dynamo guards on neither: weights changed in place and a second caller cache need graphs of their own."""
    model, other = tiny_model("llama", seed=3), tiny_model("llama", seed=4)
    fast_path(model, package_dir=None)
    ids = prompt(7, seed=3)
    assert torch.equal(_frozen_generate(model, ids).sequences, model.generate(ids, max_new_tokens=24, do_sample=False))
    with torch.no_grad():
        for mine, theirs in zip(model.parameters(), other.parameters()):
            mine.copy_(theirs)
    expected = model.generate(ids, max_new_tokens=24, do_sample=False)
    assert torch.equal(_frozen_generate(model, ids).sequences, expected)
    caches = [StaticCache(config=model.config, max_cache_len=512) for _ in range(2)]  # one length, both alive
    for cache in (*caches, caches[0]):
        if cache.get_seq_length():
            cache.reset()
        assert torch.equal(_frozen_generate(model, ids, past_key_values=cache).sequences, expected)


def test_a_damaged_package_is_rebuilt_with_a_warning(tmp_path):
    model = tiny_model("llama", seed=2)
    fast_path(model, package_dir=tmp_path)
    ids = prompt(8, seed=2)
    _frozen_generate(model, ids)
    (package,) = tmp_path.glob("*.pt2")
    package.write_bytes(b"not a package")
    model._hf_adaptive_spec_fast_path = None
    fast_path(model, package_dir=tmp_path)
    with pytest.warns(UserWarning, match="does not load .*building it again"):
        out = _frozen_generate(model, ids)
    assert torch.equal(out.sequences, model.generate(ids, max_new_tokens=24, do_sample=False))
    assert fast_path(model).packaged_forward.built == 1


def test_a_model_that_does_not_export_compiles_in_process_and_says_so(tmp_path, monkeypatch):
    def failing_export(*args, **kwargs):
        raise RuntimeError("data-dependent control flow")

    monkeypatch.setattr(torch.export, "export", failing_export)
    model = tiny_model("llama", seed=3)
    fast_path(model, package_dir=tmp_path)
    ids = prompt(6, seed=4)
    with pytest.warns(UserWarning, match=r"ahead-of-time package.*failed.*data-dependent control flow"
                                         r".*package_dir=None.*in-process"):
        out = _frozen_generate(model, ids)
    assert torch.equal(out.sequences, model.generate(ids, max_new_tokens=24, do_sample=False))
    assert out.speculation.compiled and not out.speculation.packaged and not _packages(tmp_path)


def test_other_calls_on_the_model_run_while_a_package_builds(tmp_path):
    """Export swaps the traced module's weights for fake tensors while it traces (tens of seconds for
    a real model); it traces a twin sharing the weights, so another thread's generate on the same
    model meanwhile computes with the real ones."""
    model = tiny_model("llama", seed=4)
    fast_path(model, package_dir=tmp_path)
    ids, other = prompt(7, seed=5), prompt(11, seed=6)
    expected = model.generate(other, max_new_tokens=12, do_sample=False)
    building, outcomes = threading.Event(), []

    def decode_meanwhile():
        while not building.is_set():
            pass
        while building.is_set():
            try:
                outcomes.append(torch.equal(model.generate(other, max_new_tokens=12, do_sample=False), expected))
            except Exception as error:
                outcomes.append(repr(error))

    thread = threading.Thread(target=decode_meanwhile)
    thread.start()
    building.set()
    try:
        out = _frozen_generate(model, ids)
    finally:
        building.clear()
        thread.join()
    assert torch.equal(out.sequences, model.generate(ids, max_new_tokens=24, do_sample=False))
    assert len(outcomes) >= 3 and all(outcome is True for outcome in outcomes), outcomes[:5]


def test_what_a_package_name_depends_on(tmp_path):
    """Besides the weights: the attention implementation (not in the config's JSON), the CPU's
    thread count (a package runs with its builder's) and the cache tensors' layout (a package does
    not check its inputs). A caller's cache of another length gets a package of its own."""
    model = tiny_model("llama", seed=5)
    path = fast_path(model, package_dir=tmp_path)
    frozen = hfas.fast_path_compile_config("cpu").to_dict()
    identity = path.package_identity(frozen)
    model.config._attn_implementation = "eager"
    assert path.package_identity(frozen) != identity
    model.config._attn_implementation = "sdpa"
    forward = PackagedForward(tmp_path, identity, {"freezing": True})
    threads = torch.get_num_threads()
    try:
        named = forward.path_for("key")
        torch.set_num_threads(threads + 1)
        assert forward.path_for("key") != named
    finally:
        torch.set_num_threads(threads)
    ids = prompt(9, seed=7)
    expected = model.generate(ids, max_new_tokens=24, do_sample=False)
    for length in (128, 256):
        out = _frozen_generate(model, ids, past_key_values=StaticCache(config=model.config, max_cache_len=length))
        assert torch.equal(out.sequences, expected)
    assert path.packaged_forward.built == 2 and len(_packages(tmp_path)) == 2


def test_which_calls_use_packages(tmp_path):
    """Only frozen CPU graphs (inductor's caches cannot keep them); CUDA-graph and unfrozen
    configurations compile in-process, and package_dir=None turns packages off."""
    model = tiny_model("llama")
    path = fast_path(model, package_dir=tmp_path)
    frozen = hfas.fast_path_compile_config("cpu").to_dict()
    assert path.packages(frozen)
    assert not path.packages({**frozen, "options": None}) and not path.packages(None)
    assert not path.packages({**frozen, "mode": "reduce-overhead"})
    assert not fast_path(model, package_dir=None).packages(frozen)
    assert fast_path(model).package_dir is None  # left out: kept
    assert fast_path(model, package_dir=str(tmp_path)).package_dir == tmp_path


def test_a_package_key_covers_what_the_forward_depends_on(tmp_path):
    forward = PackagedForward(tmp_path, {"weights": "a", "config": "{}"}, {"freezing": True})
    same = PackagedForward(tmp_path, {"weights": "a", "config": "{}"}, {"freezing": True})
    assert forward.path_for(((1, 8),)) == same.path_for(((1, 8),))
    assert forward.path_for(((1, 8),)) != forward.path_for(((1, 12),))
    assert forward.path_for(((1, 8),)) != PackagedForward(
        tmp_path, {"weights": "b", "config": "{}"}, {"freezing": True}
    ).path_for(((1, 8),))
    assert forward.path_for(((1, 8),)) != PackagedForward(
        tmp_path, {"weights": "a", "config": "{}"}, {}
    ).path_for(((1, 8),))


def test_a_hooked_forward_is_compiled_in_process_not_run_from_a_package(tmp_path):
    """A package is traced from a twin of the model without its hooks: a steering hook added before the first
    call or between calls (found by an audit: the output was the unhooked model's after the prefill) moves the
    verification forward in-process, with a warning, and the tokens are the hooked model's stock tokens. Removing
    the hook brings the package back. The feature capture's read-only hooks do not count."""
    from hf_adaptive_spec.core.features import FeatureCapture
    from hf_adaptive_spec.core.packaged import forward_changes

    model = tiny_model("llama", seed=2)
    fast_path(model, package_dir=tmp_path)
    ids = prompt(9, seed=3)
    assert _frozen_generate(model, ids).speculation.packaged  # the package exists from here on
    steer = torch.randn(model.config.hidden_size, generator=torch.Generator().manual_seed(7)) * 2.0
    handle = model.model.layers[1].register_forward_hook(lambda module, args, output: output + steer)
    hooked = model.generate(ids, max_new_tokens=24, do_sample=False)
    with pytest.warns(UserWarning, match="model.layers.1 of LlamaForCausalLM change its forward"):
        out = _frozen_generate(model, ids)
    assert torch.equal(out.sequences, hooked) and not out.speculation.packaged
    handle.remove()
    unhooked = _frozen_generate(model, ids)
    assert unhooked.speculation.packaged and torch.equal(unhooked.sequences, model.generate(ids, max_new_tokens=24))
    with FeatureCapture(model, [1, 2]):
        assert forward_changes(model) == {}
    model.model.norm.forward = model.model.norm.forward  # a forward set on the instance (accelerate's offloading)
    assert list(forward_changes(model)) == ["model.norm"]


def test_a_write_through_data_is_dropped_with_weights_changed(tmp_path):
    """``p.data.add_`` bumps no tensor version, so the next call cannot see it (README: stock compiled with
    freezing has the same limit); ``fast_path(model).weights_changed()`` drops the package of the old weights."""
    model = tiny_model("llama", seed=4)
    path = fast_path(model, package_dir=tmp_path)
    ids = prompt(9, seed=3)
    _frozen_generate(model, ids)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.mlp.down_proj.weight.data.add_(torch.randn_like(layer.mlp.down_proj.weight) * 0.3)
    expected = model.generate(ids, max_new_tokens=24, do_sample=False)
    assert not torch.equal(_frozen_generate(model, ids).sequences, expected)  # the limit the README states
    path.weights_changed()
    out = _frozen_generate(model, ids)
    assert torch.equal(out.sequences, expected) and out.speculation.packaged and len(_packages(tmp_path)) == 2


def _eagle3(model):
    from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel

    torch.manual_seed(1)
    return hfas.Eagle3Drafter(Eagle3DraftModel.from_target(model, initializer_range=0.3))


def test_transformers_own_capture_hooks_keep_the_packages(tmp_path):
    """A forward asked for hidden states (an EAGLE-3 drafter's features) makes transformers add read-only capture
    hooks to every layer for good: they are no reason to leave the packages (a review found every call after the
    first compiled in-process)."""
    model = tiny_model("llama", seed=5)
    fast_path(model, package_dir=tmp_path)
    ids, drafter = prompt(9, seed=3), _eagle3(model)
    expected = model.generate(ids, max_new_tokens=24, do_sample=False)
    for _ in range(2):
        out = _frozen_generate(model, ids, assistant_model=drafter)
        assert out.speculation.packaged and torch.equal(out.sequences, expected)


def test_in_process_graphs_are_rebuilt_when_hooks_change():
    """dynamo does not guard on hooks: a graph keeps those it was traced with. Without packages (a GPU, or
    package_dir=None) a hook added between calls must reach verification, as it reaches the eager prefill."""
    model = tiny_model("llama", seed=6)
    fast_path(model, package_dir=None)
    ids = prompt(9, seed=3)
    assert not _frozen_generate(model, ids).speculation.packaged
    steer = torch.randn(model.config.hidden_size, generator=torch.Generator().manual_seed(8)) * 2.0
    model.model.layers[0].register_forward_hook(lambda module, args, output: output + steer)
    out = _frozen_generate(model, ids)
    assert torch.equal(out.sequences, model.generate(ids, max_new_tokens=24, do_sample=False))
    assert out.speculation.compile_time > 0  # the rebuilt graphs' compile is no verification time


def test_a_module_swapped_on_the_instance_is_not_packaged_until_it_is_swapped_back(tmp_path):
    """The package is traced from a twin built from the config: a submodule replaced on the instance (another
    activation, a custom norm) would be left out. The build is refused and verification compiles in-process; packages
    are tried again once the modules change (they were off for good after one refusal)."""
    model = tiny_model("llama", seed=7)
    model.model.layers[1].mlp.act_fn = torch.nn.ReLU()
    fast_path(model, package_dir=tmp_path)
    ids = prompt(9, seed=3)
    with pytest.warns(UserWarning, match=r"modules its config does not build \(model.layers.1.mlp.act_fn: swapped"):
        out = _frozen_generate(model, ids)
    assert not out.speculation.packaged and torch.equal(out.sequences, model.generate(ids, max_new_tokens=24))
    assert not _frozen_generate(model, ids).speculation.packaged  # the same modules: not tried again
    model.model.layers[1].mlp.act_fn = type(model.model.layers[0].mlp.act_fn)()
    out = _frozen_generate(model, ids)
    assert out.speculation.packaged and torch.equal(out.sequences, model.generate(ids, max_new_tokens=24))


def _set_on_every_layer(model, name: str, value) -> None:
    for layer in model.model.layers:
        setattr(layer.mlp if name == "act_fn" else layer.post_attention_layernorm, name, value)


@pytest.mark.parametrize("name, value", [("act_fn", torch.nn.ReLU()), ("variance_epsilon", 0.5)])
def test_a_module_swapped_or_reset_after_a_package_ran_is_noticed_and_no_stale_package_loads(tmp_path, name, value):
    """A package's name digested the weights alone: an activation swapped (or a norm's epsilon set) after it ran kept
    it running, weights_changed() reloaded it, and a new instance swapped before its first call loaded the old
    package from disk; each returned the old model's tokens. A swapped module compiles in-process; a setting is
    traced into the twin, so the package built with it (under a name of its own) computes what the model does."""
    ids = prompt(9, seed=3)
    model = tiny_model("llama", seed=7)
    fast_path(model, package_dir=tmp_path)
    before = _frozen_generate(model, ids)
    assert before.speculation.packaged
    twin = tiny_model("llama", seed=7)  # the same weights: the package on disk is found by their digest
    for instance in (model, twin):
        _set_on_every_layer(instance, name, value)
    fast_path(twin, package_dir=tmp_path)
    for instance in (model, twin):
        if name == "act_fn":
            with pytest.warns(UserWarning, match="modules its config does not build"):
                out = _frozen_generate(instance, ids)
        else:
            out = _frozen_generate(instance, ids)
        assert out.speculation.packaged == (name != "act_fn")
        assert torch.equal(out.sequences, instance.generate(ids, max_new_tokens=24, do_sample=False))
        assert not torch.equal(out.sequences, before.sequences)  # the change changes the tokens
    if name == "act_fn":
        assert fast_path(twin).packaged_forward is None or fast_path(twin).packaged_forward.loaded == 0
    else:  # the model built the package of the new settings, and its twin loaded that one
        assert fast_path(model).packaged_forward.built > 0 and fast_path(twin).packaged_forward.built == 0


def test_a_setting_changed_while_a_package_is_identified_is_not_saved_under_the_old_name(tmp_path, monkeypatch):
    """The twin carries the model's settings as they are when it is traced: one changed after the package's name was
    made (another thread's edit mid-call) would be traced into a package saved under the old settings' name, which a
    model of the old settings then loads. The build checks the settings as it checks the weights, drops the stale
    identity and builds for the new one."""
    ids = prompt(9, seed=3)
    model = tiny_model("llama", seed=7)  # whose tokens the epsilon changes
    original, edited = PackagedForward._load_or_build, []

    def edit_then_build(self, key, make_module, args):
        if not edited:  # once, between the identity and the build
            edited.append(True)
            _set_on_every_layer(model, "variance_epsilon", 0.5)
        return original(self, key, make_module, args)

    monkeypatch.setattr(PackagedForward, "_load_or_build", edit_then_build)
    fast_path(model, package_dir=tmp_path)
    with pytest.warns(UserWarning, match="changed while a call was verifying"):
        _frozen_generate(model, ids)
    monkeypatch.setattr(PackagedForward, "_load_or_build", original)
    old_settings = tiny_model("llama", seed=7)  # the same weights, the old epsilon: it must not load the new one's
    fast_path(old_settings, package_dir=tmp_path)
    out = _frozen_generate(old_settings, ids)
    assert out.speculation.packaged
    assert torch.equal(out.sequences, old_settings.generate(ids, max_new_tokens=24, do_sample=False))


def test_settings_that_change_no_output_keep_packages(tmp_path):
    """A pad token id set on the config after the model was built, or gradient checkpointing enabled and the model
    put back in evaluation mode, change module settings but no output: they were refused as modules the config does
    not build, and packages stayed off for good; now the twin carries them."""
    ids = prompt(9, seed=3)
    model = tiny_model("llama", seed=7)
    model.gradient_checkpointing_enable()
    model.eval()
    model.config.pad_token_id = 3
    fast_path(model, package_dir=tmp_path)
    out = _frozen_generate(model, ids)
    assert out.speculation.packaged and torch.equal(out.sequences, model.generate(ids, max_new_tokens=24))


def test_a_package_is_never_saved_under_the_digest_of_weights_written_since(tmp_path):
    """After a write through .data (no version bump), a package built for a new shape would be traced from the new
    weights but named by the old ones' digest, and a later process with the old weights would load it. The build
    digests the weights again, and the identity is renewed with a warning."""
    model = tiny_model("llama", seed=8)
    fast_path(model, package_dir=tmp_path)
    ids = prompt(9, seed=3)
    _frozen_generate(model, ids)
    with torch.no_grad():
        model.lm_head.weight.data.mul_(-1.0)
    other_length = StaticCache(config=model.config, max_cache_len=96)
    with pytest.warns(UserWarning, match="changed in place without a version bump"):
        out = _frozen_generate(model, ids, past_key_values=other_length)
    assert torch.equal(out.sequences, model.generate(ids, max_new_tokens=24, do_sample=False))

    old_weights = tiny_model("llama", seed=8)  # what the old digest names
    path = fast_path(old_weights, package_dir=tmp_path)
    out = _frozen_generate(old_weights, ids, past_key_values=StaticCache(config=old_weights.config, max_cache_len=96))
    assert torch.equal(out.sequences, old_weights.generate(ids, max_new_tokens=24, do_sample=False))
    assert path.packaged_forward.built == 1  # nothing of the new weights was saved under its digest
