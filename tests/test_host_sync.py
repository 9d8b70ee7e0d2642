"""Host work per cycle grows with the tree's depth, not with depth × top_k: the engine reads drafts
back to the host once per level (one top-k for the whole level), not once per frontier node. On a
GPU each read or upload is a device synchronisation, so a per-node count would make a cycle
host-bound. Counted with a TorchFunctionMode on the static-cache path (the GPU-shaped one)."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from tiny_models import prompt, tiny_eagle3, tiny_model
from torch.overrides import TorchFunctionMode
from torch_calls import TorchCalls
from transformers import StoppingCriteria, StoppingCriteriaList

import hf_adaptive_spec as hfas
from hf_adaptive_spec.generation import emission, prompt_lookup, speculative_decoding, targets

READS = {torch.Tensor.tolist, torch.Tensor.item, torch.Tensor.__bool__, torch.Tensor.__int__, torch.Tensor.__float__,
         torch.Tensor.__index__}  # fmt: skip
UPLOADS = {torch.tensor, torch.as_tensor, torch.Tensor.new_tensor}
HOST_FACTORIES = {torch.zeros, torch.ones, torch.empty, torch.full, torch.arange}  # on the host unless given a device


def _on_host(value) -> bool:
    return getattr(value, "_built_on_host", False)


def _tensors(values):
    for value in values:
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            yield from _tensors(value)


def _names_a_device(kwargs) -> bool:
    """A factory's device other than the host named as the string ``"cpu"`` (a host tensor: a copy's source)."""
    device = kwargs.get("device")
    return device is not None and device != "cpu"


def _to_device(args, kwargs) -> bool:
    return any(isinstance(a, torch.device) for a in (*args[1:], kwargs.get("device")))


class HostTraffic(TorchFunctionMode):
    """Counts tensor reads to Python values and tensors built from Python data; and, as ``blocking``, the uploads
    that wait for the device's queued work on CUDA (a synchronisation): tensors built from Python data on a device
    (``torch.tensor(..., device=)``, ``new_tensor``), and ``.to(device)`` without ``non_blocking`` of one built on
    the host: from Python data, by a factory without a device or with the host named as such (``torch.arange(n)``,
    ``device="cpu"``), or by ops on such tensors alone (a padded copy of them). A copy of no elements copies nothing,
    waiting for nothing. A device read from the model (a ``torch.device``, here the CPU too) counts as the device."""

    def __init__(self):
        super().__init__()
        self.counts = Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func in READS:
            self.counts["read"] += 1
        elif func in UPLOADS:
            self.counts["upload"] += 1
            on_device = _names_a_device(kwargs) or func is torch.Tensor.new_tensor
            self.counts["blocking"] += on_device and out.numel() > 0
            out._built_on_host = not on_device
        elif func is torch.Tensor.to and _on_host(args[0]) and _to_device(args, kwargs):
            self.counts["blocking"] += not kwargs.get("non_blocking") and out.numel() > 0
            out._built_on_host = False  # on the device now (the same tensor on the CPU: a no-op copy)
        elif func in HOST_FACTORIES:
            out._built_on_host = not _names_a_device(kwargs)
        else:  # built by ops on host tensors alone: on the host too
            inputs = list(_tensors((*args, *kwargs.values())))
            on_host = bool(inputs) and all(map(_on_host, inputs))
            for tensor in _tensors(out if isinstance(out, (list, tuple)) else (out,)):
                tensor._built_on_host = on_host
        return out


def _per_cycle(model, depth: int, top_k: int) -> dict[str, float]:
    """Reads and uploads per cycle with the target itself as drafter (its top draft is always the
    target's choice, so every tree accepts about ``depth`` tokens whatever ``top_k``)."""
    policy = hfas.StaticTreePolicy(depth=depth, top_k=top_k, total_tokens=32)
    with HostTraffic() as traffic:
        out = model.generate(
            prompt(9), max_new_tokens=31, do_sample=False, assistant_model=hfas.CausalLMDrafter(model),
            assistant_policy=policy, cache_implementation="static", return_dict_in_generate=True,
        )
    cycles = out.speculation.cycles
    return {kind: traffic.counts[kind] / cycles for kind in ("read", "upload")}


def test_host_reads_and_uploads_grow_with_depth_not_with_top_k():
    model = tiny_model("llama")
    narrow, wide, deep = _per_cycle(model, 3, 2), _per_cycle(model, 3, 8), _per_cycle(model, 5, 2)
    for kind in ("read", "upload"):
        # 8 frontier nodes instead of 2 on two levels: per-node reads would add >= 12 per cycle
        assert abs(wide[kind] - narrow[kind]) < 3, (kind, narrow, wide)
        assert deep[kind] > narrow[kind] + 2, (kind, narrow, deep)  # two more levels, a few reads each
    assert narrow["read"] < 25 and narrow["upload"] < 25, narrow


def _cycle_traffic(model, policy, cache: str | None, monkeypatch, max_new_tokens: int = 12,
                   drafter=None) -> dict[str, float]:
    """Reads, uploads and blocking copies per cycle (in the decoder's ``cycle``, the drafter's steps included) with
    ``drafter`` (default: the target itself); the output is checked to be stock greedy ``generate``'s."""
    cycles, per_cycle = [], Counter()

    def counted(decoder, *args):
        with HostTraffic() as traffic:
            cycles.append(cycle(decoder, *args))
        per_cycle.update(traffic.counts)
        return cycles[-1]

    cycle = speculative_decoding._Decoder.cycle
    monkeypatch.setattr(speculative_decoding._Decoder, "cycle", counted)
    kwargs = {"cache_implementation": cache} if cache else {}
    expected = model.generate(prompt(9), max_new_tokens=max_new_tokens, do_sample=False)
    out = model.generate(prompt(9), max_new_tokens=max_new_tokens, do_sample=False,
                         assistant_model=drafter or hfas.CausalLMDrafter(model), assistant_policy=policy, **kwargs)
    assert torch.equal(out, expected)
    return {kind: count / len(cycles) for kind, count in per_cycle.items()}


def _plain_steps(model, cache: str | None, monkeypatch) -> dict[str, float]:
    """Reads, uploads and blocking copies per cycle of plain decoding steps: a tree of the root alone."""
    return _cycle_traffic(model, hfas.StaticTreePolicy(depth=0, top_k=1, total_tokens=1), cache, monkeypatch)


@pytest.mark.parametrize("cache", ["static", None])
def test_a_cycle_reads_and_waits_only_where_it_must(cache, monkeypatch):
    """A plain step reads the root's argmax and the stopping criteria's verdict on its one token, nothing else: the
    root's token is known on the host (no read of the sequence). Its uploads (the verified tokens and positions, the
    emitted token and the path the cache keeps) do not wait for the device's queued work."""
    per_cycle = _plain_steps(tiny_model("llama"), cache, monkeypatch)
    assert per_cycle["read"] == 2, per_cycle
    assert per_cycle.get("blocking", 0) == 0, per_cycle
    assert per_cycle["upload"] <= 3, per_cycle  # verified tokens, positions; emitted tokens and kept path together


@pytest.mark.parametrize("drafter", ["causal-lm", "eagle3"])
@pytest.mark.parametrize("cache", ["static", None])
def test_drafting_a_tree_does_not_wait_for_the_device(cache, drafter, monkeypatch):
    """A cycle with a real tree (the drafter's steps over the accepted tokens and each level, the verification, the
    cache's compaction) makes no upload that waits for the device's queued work: the drafter's tokens, positions
    and masks are copies of fresh host tensors that do not wait, its last-row index is filled on the device once,
    dropping its tree from a growing cache is a crop (no index to upload)."""
    policy = hfas.StaticTreePolicy(depth=3, top_k=2, total_tokens=8)
    model = tiny_model("llama")
    drafting = tiny_eagle3(model) if drafter == "eagle3" else None
    per_cycle = _cycle_traffic(model, policy, cache, monkeypatch, max_new_tokens=24, drafter=drafting)
    assert per_cycle.get("blocking", 0) == 0, per_cycle
    assert per_cycle["upload"] >= 5, per_cycle  # the drafter's levels and the verification did upload


@pytest.mark.parametrize("cache", ["static", None])
@pytest.mark.parametrize("processing", [{}, {"repetition_penalty": 1.2}])
def test_the_acceptance_walk_uploads_nothing(cache, processing, monkeypatch):
    """Logits processors see each visited node's path, built on the device from its parent's and the verification's
    tokens, not uploaded node by node; without processors a node's scores are its logits row. The output is stock
    generate's."""
    model = tiny_model("llama")
    walks = Counter()

    def counted(tree, scores_at, *argmaxes):
        with HostTraffic() as traffic, TorchCalls() as calls:
            result = accept(tree, scores_at, *argmaxes)
        walks.update(traffic.counts)
        walks.update({"cat": calls.counts[torch.cat]})
        return result

    accept = speculative_decoding.accept_greedy
    monkeypatch.setattr(speculative_decoding, "accept_greedy", counted)
    kwargs = {"cache_implementation": cache} if cache else {}
    expected = model.generate(prompt(9), max_new_tokens=24, do_sample=False, **processing)
    out = model.generate(
        prompt(9), max_new_tokens=24, do_sample=False, assistant_model=hfas.CausalLMDrafter(model),
        assistant_policy=hfas.StaticTreePolicy(depth=4, top_k=2, total_tokens=12), return_dict_in_generate=True,
        **processing, **kwargs,
    )
    assert torch.equal(out.sequences, expected)
    assert walks["read"] >= 3 * out.speculation.cycles  # the walks went several nodes deep
    assert walks["upload"] == 0, walks
    if not processing:  # the rows themselves: no path built, no copy
        assert walks["cat"] == 0, walks


def test_the_lookup_branch_reads_nothing_per_cycle(monkeypatch):
    """The prompt-lookup branch looks up in the host's copy of the sequence, read once per call."""
    model = tiny_model("llama")
    chains, found = Counter(), []

    def counted(self, sequence, room):
        with HostTraffic() as traffic:
            found.append(chain(self, sequence, room))
        chains.update(traffic.counts)
        return found[-1]

    chain = prompt_lookup.LookupBranch.chain
    monkeypatch.setattr(prompt_lookup.LookupBranch, "chain", counted)
    ids = torch.cat([prompt(12), prompt(12)], dim=1)  # repeats: lookups find matches
    model.generate(ids, max_new_tokens=24, do_sample=False, assistant_model=hfas.CausalLMDrafter(model),
                   assistant_policy=hfas.StaticTreePolicy(depth=1, top_k=2, total_tokens=3),
                   prompt_lookup_num_tokens=4, cache_implementation="static")
    assert sum(map(bool, found)) >= 3, found
    assert chains["read"] == 0 and chains["upload"] == 0, chains


def _walk_traffic(model, cache: str | None, at_once: bool) -> tuple[torch.Tensor, Counter, int]:
    """(output, reads and ``nonzero`` calls in the acceptance walks and their argmax reads, cycles), the walk reading
    every row's argmax at once (``at_once``: as on an accelerator) or row by row (as on the CPU)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        return _walk_traffic_patched(model, cache, at_once, monkeypatch)


def _walk_traffic_patched(model, cache: str | None, at_once: bool, monkeypatch) -> tuple[torch.Tensor, Counter, int]:
    monkeypatch.setattr(targets, "reads_rows_at_once", lambda device: at_once)
    walks = Counter()

    def counted(decoder, tree, scores, stops_after=None):
        with HostTraffic() as traffic, TorchCalls() as calls:
            result = accept(decoder, tree, scores, stops_after)
        walks.update(traffic.counts)
        walks.update({"nonzero": calls.counts[torch.Tensor.nonzero]})
        return result

    accept = speculative_decoding._Decoder._accept
    monkeypatch.setattr(speculative_decoding._Decoder, "_accept", counted)
    kwargs = {"cache_implementation": cache} if cache else {}
    out = model.generate(
        prompt(9), max_new_tokens=24, do_sample=False, assistant_model=hfas.CausalLMDrafter(model),
        assistant_policy=hfas.StaticTreePolicy(depth=4, top_k=2, total_tokens=12), return_dict_in_generate=True,
        **kwargs,
    )
    return out.sequences, walks, out.speculation.cycles


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("cache", ["static", None])
def test_on_an_accelerator_the_walk_reads_once_per_tree(dtype, cache):
    """Where each read is a synchronisation, the greedy walk reads every node's argmax at once (a half-precision
    row's rescored in float32 on the device, with no ``nonzero``): one read per tree however deep it accepts, where
    the row-by-row walk reads each visited node (and a half-precision row's ``nonzero``). The tokens are the
    row-by-row walk's, and in float32 stock generate's."""
    model = tiny_model("llama").to(dtype)
    row_by_row, rows_walks, _ = _walk_traffic(model, cache, at_once=False)
    at_once, once_walks, cycles = _walk_traffic(model, cache, at_once=True)
    assert torch.equal(at_once, row_by_row)
    if dtype == torch.float32:
        assert torch.equal(at_once, model.generate(prompt(9), max_new_tokens=24, do_sample=False))
    assert once_walks["read"] == cycles + 1, once_walks  # the prefill's row, then one per tree
    assert once_walks["nonzero"] == 0, once_walks
    assert rows_walks["read"] >= 3 * cycles, rows_walks  # the control: the walks went several nodes deep
    assert (rows_walks["nonzero"] >= 3 * cycles) == (dtype == torch.bfloat16), rows_walks


def test_scores_are_computed_only_when_returned(monkeypatch):
    """A walk that read its choices at once computes no row for the output unless output_scores asks for them;
    with it, the rows are stock's."""
    model = tiny_model("llama")
    monkeypatch.setattr(targets, "reads_rows_at_once", lambda device: True)
    rows = Counter()
    getitem = targets.TreeLogits.__getitem__

    def counted(self, node):
        rows["row"] += 1
        return getitem(self, node)

    monkeypatch.setattr(targets.TreeLogits, "__getitem__", counted)
    spec = dict(assistant_model=hfas.CausalLMDrafter(model), cache_implementation="static",
                assistant_policy=hfas.StaticTreePolicy(depth=4, top_k=2, total_tokens=12))
    model.generate(prompt(9), max_new_tokens=16, do_sample=False, **spec)
    assert rows["row"] == 0, rows
    kwargs = dict(max_new_tokens=16, do_sample=False, return_dict_in_generate=True, output_scores=True,
                  output_logits=True)
    out, expected = model.generate(prompt(9), **kwargs, **spec), model.generate(prompt(9), **kwargs)
    assert rows["row"] >= 16
    for got, want in zip((out.scores, out.logits), (expected.scores, expected.logits)):
        assert len(got) == len(want) == 16
        assert all(torch.allclose(a, b, atol=1e-4) for a, b in zip(got, want))


class _RecordingCriterion(StoppingCriteria):
    """A caller's criterion that records the lengths it is asked about (it may keep state between calls)."""

    def __init__(self, stop_at: int):
        self.stop_at, self.asked = stop_at, []

    def __call__(self, input_ids, scores, **kwargs):
        self.asked.append(input_ids.shape[1])
        return torch.full((input_ids.shape[0],), input_ids.shape[1] >= self.stop_at, dtype=torch.bool)


def test_stopping_criteria_are_read_once_per_cycle(monkeypatch):
    """transformers' own criteria are asked about every token of a cycle before one read of their verdicts; the
    first stop ends the output where stock's ends (an end-of-sequence token inside an accepted block)."""
    model = tiny_model("llama")
    free = model.generate(prompt(9), max_new_tokens=30, do_sample=False)[0].tolist()
    eos = free[9 + 14]
    reads, calls = Counter(), Counter()

    def counted(*args):
        with HostTraffic() as traffic:
            stop = first_stop(*args)
        reads.update(traffic.counts)
        calls["call"] += 1
        return stop

    first_stop = emission.first_stop
    monkeypatch.setattr(emission, "first_stop", counted)
    expected = model.generate(prompt(9), max_new_tokens=30, do_sample=False, eos_token_id=eos)
    out = model.generate(prompt(9), max_new_tokens=30, do_sample=False, eos_token_id=eos,
                         assistant_model=hfas.CausalLMDrafter(model),
                         assistant_policy=hfas.StaticTreePolicy(depth=4, top_k=2, total_tokens=8))
    assert torch.equal(out, expected) and out.shape[1] < 9 + 30
    assert reads["read"] == calls["call"], (reads, calls)  # one per emit, however many tokens it appends
    assert out.shape[1] - 9 > 2 * calls["call"] - 1  # the control: emits appended several tokens each


def test_a_callers_criterion_is_asked_as_stock_asks_it():
    """A criterion passed in ``stopping_criteria`` may keep state: it is asked about each token in turn and not
    beyond the first stop, the lengths stock asks about."""
    model = tiny_model("llama")
    stock, spec = _RecordingCriterion(9 + 13), _RecordingCriterion(9 + 13)
    expected = model.generate(prompt(9), max_new_tokens=30, do_sample=False,
                              stopping_criteria=StoppingCriteriaList([stock]))
    out = model.generate(prompt(9), max_new_tokens=30, do_sample=False, stopping_criteria=StoppingCriteriaList([spec]),
                         assistant_model=hfas.CausalLMDrafter(model),
                         assistant_policy=hfas.StaticTreePolicy(depth=4, top_k=2, total_tokens=8))
    assert torch.equal(out, expected) and out.shape[1] == 9 + 13
    assert spec.asked == stock.asked == list(range(10, 9 + 14)), (spec.asked, stock.asked)
