"""The concurrency contract: concurrent generate calls on one enabled model work when each has its
own drafter, policy and cache; a drafter, policy or cache shared with a running call is refused with
a clear error before it touches any state. Never a wrong token without an error.

Each row runs two threads x 100 calls (200 calls) with a short switch interval, so the threads
interleave inside the engine, and counts calls that returned tokens other than stock's without an
error. A barrier starts each pair of calls together, so the two calls of a pair overlap (a refusal
count of zero would mean they never did). The guard-removed variants show the test has power: with
the guard patched out, the shared drafter or the shared capture produces raw errors or wrong tokens.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager

import pytest
import torch
from tiny_models import prompt, tiny_model
from transformers import DynamicCache

import hf_adaptive_spec as hfas
from hf_adaptive_spec.core import features as features_module
from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.generation import speculative_decoding, static_path

CALLS_PER_THREAD = 100
IN_USE = "is in use by another generate call"


def _eagle3(target, seed: int) -> hfas.Eagle3Drafter:
    torch.manual_seed(seed)
    return hfas.Eagle3Drafter(Eagle3DraftModel.from_target(target, initializer_range=0.3))


#: drafters that each concurrent call gets one of (row 2), by kind: ``make(target, seed)``. DVI drafts
#: with the target's own first layer (shared weights) and writes into each call's own engine cache;
#: learning online, it also reads the final norm's output from the call's capture every cycle.
ONE_EACH = {
    "eagle3": _eagle3,
    "dvi": lambda target, seed: hfas.DVIDrafter(target, exit_layer=1),
    "dvi-online": lambda target, seed: hfas.DVIDrafter(target, exit_layer=1, online=True),
}

#: the kinds shared by two threads (rows 1 and 3): ``make(target)`` and the generate kwargs
SHARED = {
    "causal-lm": (lambda target: hfas.CausalLMDrafter.from_target_layers(target, 2), {}),
    "dvi": (lambda target: hfas.DVIDrafter(target, exit_layer=1), {}),
    "eagle3-static": (lambda target: _eagle3(target, 1), {"cache_implementation": "static"}),
}


@contextmanager
def _fast_switching():
    interval = sys.getswitchinterval()
    sys.setswitchinterval(2e-4)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


def _run_threads(model, drafters, policies, prompts, references, **kwargs) -> dict[str, int]:
    """Two threads, each calling generate CALLS_PER_THREAD times, each pair of calls started together
    (a barrier); counts outcomes."""
    counts = {"calls": 0, "identical": 0, "refused": 0, "silent_mismatch": 0, "other_error": 0}
    lock = threading.Lock()
    start_together = threading.Barrier(2, timeout=120)  # a thread that died breaks it instead of hanging the other

    def worker(k: int) -> None:
        for _ in range(CALLS_PER_THREAD):
            start_together.wait()
            try:
                out = model.generate(prompts[k], max_new_tokens=24, do_sample=False, assistant_model=drafters[k],
                                     assistant_policy=policies[k], **kwargs)
                outcome = "identical" if torch.equal(out, references[k]) else "silent_mismatch"
            except RuntimeError as error:
                outcome = "refused" if IN_USE in str(error) else "other_error"
            except Exception:
                outcome = "other_error"
            with lock:
                counts["calls"] += 1
                counts[outcome] += 1

    with _fast_switching():
        threads = [threading.Thread(target=worker, args=(k,)) for k in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return counts


def _setup(family: str = "llama"):
    torch.set_num_threads(1)
    model = tiny_model(family)
    prompts = [prompt(8, seed=0), prompt(11, seed=1)]
    references = [model.generate(p, max_new_tokens=24, do_sample=False) for p in prompts]
    return model, prompts, references


@pytest.mark.parametrize("kind", ONE_EACH)
def test_one_drafter_each_on_one_target_all_work(kind):
    """Row 2: each call's hidden-state capture belongs to its own thread (EAGLE-3 reads features; every
    call reads the final norm's output, and DVI verifies through it and the shared first layer's cache)."""
    model, prompts, references = _setup()
    drafters = [ONE_EACH[kind](model, 1), ONE_EACH[kind](model, 2)]
    policies = [hfas.StaticTreePolicy(depth=3, top_k=2, total_tokens=6) for _ in range(2)]
    counts = _run_threads(model, drafters, policies, prompts, references)
    assert counts == {"calls": 200, "identical": 200, "refused": 0, "silent_mismatch": 0, "other_error": 0}


# Not "dvi": a DVI drafter that is not learning reads the capture once per call (the final norm's
# output in the prefill, to check the logits are lm_head(norm)), so another thread's forward lands
# there only in a window of microseconds: 0 to 2 bad calls in 200 here (a ValueError, a shape error),
# too rare to assert. Learning online it reads the capture every cycle: ~196 of 200 calls fail.
@pytest.mark.parametrize("kind", ["eagle3", "dvi-online"])
def test_one_drafter_each_fails_without_per_thread_capture(monkeypatch, kind):
    """The same run with the capture recording every thread's forwards: calls go wrong."""
    monkeypatch.setattr(features_module.FeatureCapture, "_is_own_forward", lambda self: True)
    model, prompts, references = _setup()
    drafters = [ONE_EACH[kind](model, 1), ONE_EACH[kind](model, 2)]
    policies = [hfas.StaticTreePolicy(depth=3, top_k=2, total_tokens=6) for _ in range(2)]
    counts = _run_threads(model, drafters, policies, prompts, references)
    assert counts["silent_mismatch"] + counts["other_error"] > 0, counts


@pytest.mark.parametrize("kind", SHARED)
def test_a_shared_drafter_is_refused_never_wrong(kind):
    """Rows 1 and 3: one drafter shared by two threads; a static cache too for EAGLE-3. The calls of
    a pair overlap, so some are refused (never zero) and some run (never zero)."""
    model, prompts, references = _setup()
    make, extra = SHARED[kind]
    drafter = make(model)
    policies = [hfas.StaticTreePolicy.chain(3) for _ in range(2)]
    counts = _run_threads(model, [drafter, drafter], policies, prompts, references, **extra)
    assert counts["silent_mismatch"] == 0 and counts["other_error"] == 0, counts
    assert counts["identical"] + counts["refused"] == 200, counts
    assert counts["identical"] > 0 and counts["refused"] > 0, counts


@pytest.mark.parametrize("kind", SHARED)
def test_a_shared_drafter_goes_wrong_without_the_guard(monkeypatch, kind):
    @contextmanager
    def no_guard(objects):
        yield

    monkeypatch.setattr(speculative_decoding, "exclusive_use", no_guard)
    model, prompts, references = _setup()
    make, extra = SHARED[kind]
    drafter = make(model)
    policies = [hfas.StaticTreePolicy.chain(3) for _ in range(2)]
    counts = _run_threads(model, [drafter, drafter], policies, prompts, references, **extra)
    assert counts["silent_mismatch"] + counts["other_error"] > 0, counts


def test_a_shared_policy_is_refused():
    model, prompts, references = _setup()
    policy = hfas.StaticTreePolicy.chain(3)
    drafters = [hfas.CausalLMDrafter.from_target_layers(model, 2) for _ in range(2)]
    counts = _run_threads(model, drafters, [policy, policy], prompts, references)
    assert counts["silent_mismatch"] == 0 and counts["other_error"] == 0 and counts["refused"] > 0, counts


def test_concurrent_calls_each_get_one_of_the_models_own_static_caches(monkeypatch):
    """cache_implementation="static" decodes in the model's own cache of the call's size: two concurrent calls of
    one size were given the same one, and the second was refused, told to pass a cache of its own though it had
    passed none (found by a review). Each now gets one no running call holds, chosen and claimed in one step; with
    the choice ignoring the holders, calls share a cache and go wrong."""
    model, prompts, references = _setup()
    drafters = [hfas.CausalLMDrafter.from_target_layers(model, 2) for _ in range(2)]
    policies = [hfas.StaticTreePolicy.chain(3) for _ in range(2)]
    counts = _run_threads(model, drafters, policies, prompts, references, cache_implementation="static")
    assert counts == {"calls": 200, "identical": 200, "refused": 0, "silent_mismatch": 0, "other_error": 0}
    def first_whatever_holds_it(candidates, make, claim):
        if not candidates:
            candidates.append(make())
        return candidates[0]

    monkeypatch.setattr(static_path, "claim_first_idle", first_whatever_holds_it)
    hfas.fast_path(model).own_caches.clear()
    counts = _run_threads(model, drafters, policies, prompts, references, cache_implementation="static")
    assert counts["silent_mismatch"] + counts["other_error"] > 0, counts


@pytest.mark.parametrize("held", ["drafter", "policy", "cache"])
def test_a_nested_call_with_a_held_drafter_policy_or_cache_is_refused(llama, held):
    """README: a drafter, policy or cache that a running call holds is refused with an error naming it."""
    drafter, cache = hfas.CausalLMDrafter.from_target_layers(llama, 2), DynamicCache(config=llama.config)

    class NestingPolicy(hfas.StaticTreePolicy):
        def observe(self, feedback):
            nested = {"drafter": dict(assistant_model=drafter), "policy": dict(assistant_policy=self),
                      "cache": dict(past_key_values=cache)}[held]
            kwargs = {"assistant_model": hfas.CausalLMDrafter.from_target_layers(llama, 2),
                      "assistant_policy": hfas.StaticTreePolicy.chain(1), **nested}
            llama.generate(prompt(4), max_new_tokens=2, **kwargs)

    with pytest.raises(RuntimeError, match=f"The {held} .* in use by another generate call, in this thread"):
        llama.generate(prompt(5), max_new_tokens=4, assistant_model=drafter, past_key_values=cache,
                       assistant_policy=NestingPolicy(depth=1, top_k=1, total_tokens=2))


def test_a_hook_removed_by_another_thread_mid_forward_is_harmless():
    """The race behind CI's one failure in 200 calls: torch snapshots a layer's pre-hooks, another
    thread's capture then removes its hook (and its with-kwargs mark), and torch calls that hook as
    ``hook(module, args)``. The hook is not this thread's forward, so it must return quietly."""
    model = tiny_model("llama")
    layer = features_module.decoder_layers(model)[1]
    with features_module.FeatureCapture(model, [1]) as capture:
        (hook,) = layer._forward_pre_hooks.values()
    errors = []

    def stale_call():
        try:
            hook(layer, (torch.zeros(1, 2, model.config.hidden_size),))
        except Exception as error:
            errors.append(error)

    thread = threading.Thread(target=stale_call)
    thread.start()
    thread.join()
    assert errors == [] and capture.latest == {}


def test_a_claimed_object_is_kept_alive_so_no_other_object_takes_its_id():
    """The registry of held objects is keyed by id: a claim left unreleased (a direct cache_for(claim=True) without
    exclusive_use) let a later object at the same address read as held, and unrelated calls were refused (found by
    CI: a test's claimed cache, freed, refused test_profiling's drafter and cache). A held object is kept alive
    until released, so its address cannot be reused meanwhile."""
    import gc
    import weakref

    from hf_adaptive_spec.core import exclusive

    class Cache:
        pass

    candidates = []
    leaked = exclusive.claim_first_idle(candidates, Cache)
    alive, leaked_id = weakref.ref(leaked), id(leaked)
    del candidates, leaked
    gc.collect()
    assert alive() is not None and id(alive()) == leaked_id
    exclusive._release([alive()])
    gc.collect()
    assert alive() is None
