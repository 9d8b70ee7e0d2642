"""Every tensor the decoding path creates names its device: a host tensor ``device="cpu"``, one that meets the model's
tensors the model's device (or the drafter's, or the input's). A tensor made without one lands on the default device:
on a GPU the CPU beside CUDA tensors, or the GPU for a host tensor where the caller set
``torch.set_default_device("cuda")``.

The CPU proxy: ``generate`` under ``torch.set_default_device("meta")``, the models built on the CPU before. A tensor
made without a device is then a meta tensor and fails where it meets a real one; every case must give the tokens of
the same call without the meta default."""

from __future__ import annotations

import contextlib

import pytest
import torch
import transformers.cache_utils
from tiny_models import SMALL_LTD, prompt, tiny_drafter, tiny_model
from transformers.generation.streamers import BaseStreamer

import hf_adaptive_spec as hfas
from hf_adaptive_spec.core.packaged import PACKAGE_DIR_ENV

KINDS = ["eagle3", "dvi", "causal-lm"]
CACHES = {"dynamic": {}, "static": {"cache_implementation": "static"}}

#: name -> (drafter kind, cache, do_sample, policy, extra generate kwargs); drafter and policy built fresh per call
CASES = {
    **{f"{kind}-{cache}-{mode}": (kind, cache, mode == "sample", "tree", {})
       for kind in KINDS for cache in CACHES for mode in ("greedy", "sample")},
    # compiled with weight freezing, each call building its own package (about 30 s): one drafter kind
    "eagle3-static-compiled": ("eagle3", "static", False, "tree", {"compile": True}),
    "eagle3-dynamic-sampled-drafts": ("eagle3", "dynamic", True, "sampled-tree", {}),
    **{f"{kind}-{cache}-lookup": (kind, cache, False, "lookup-first", {"prompt_lookup_num_tokens": 4})
       for kind, cache in (("eagle3", "dynamic"), ("causal-lm", "static"))},
    **{f"{policy}-{cache}": ("eagle3", cache, False, policy, {}) for policy in ("ltd", "resps", "radar")
       for cache in CACHES},
    "eagle3-dynamic-streamer": ("eagle3", "dynamic", False, "tree", {"streamer": True}),
    "dvi-online-dynamic-greedy": ("dvi-online", "dynamic", False, "tree", {}),
    "dvi-online-static-sample": ("dvi-online", "static", True, "tree", {}),
}


def _policy(name: str, target):
    torch.manual_seed(0)
    if name == "tree":
        return hfas.StaticTreePolicy(depth=3, top_k=2, total_tokens=6)
    if name == "sampled-tree":
        return hfas.StaticTreePolicy(depth=3, top_k=2, total_tokens=6, sample_drafts=True)
    if name == "lookup-first":
        return hfas.LookupFirstPolicy(2, 4, 8)
    if name == "ltd":
        return hfas.LTDPolicy(**SMALL_LTD)
    if name == "radar":
        return hfas.RadarPolicy(depth=2, top_k=2, total_tokens=4)
    return hfas.ReSpSPolicy.for_target(target.config)


def _drafter(kind: str, target):
    if kind == "dvi-online":  # updates every two records, so that the learner steps inside the call
        torch.manual_seed(1)
        config = hfas.DVIOnlineLearnerConfig(update_every=2, batch_size=2)
        return hfas.DVIDrafter(target, exit_layer=2, online=True, online_config=config)
    return tiny_drafter(kind, target)


class _Recorder(BaseStreamer):
    """The tokens streamed, read on the host as a streamer reads them."""

    def __init__(self):
        self.tokens: list[int] = []

    def put(self, value: torch.Tensor) -> None:
        self.tokens += value.reshape(-1).tolist()

    def end(self) -> None:
        pass


@contextlib.contextmanager
def _meta_default_device():
    assert torch.get_default_device() == torch.device("cpu")
    torch.set_default_device("meta")
    try:
        yield
    finally:
        torch.set_default_device(None)


def _generate(case: str, meta: bool, package_dir, monkeypatch) -> tuple[torch.Tensor, list[int] | None]:
    """The case's tokens (and those it streamed), from a fresh model, drafter and policy (an online learner or a
    learned policy carries state from call to call; a compiled model keeps its graphs and packages)."""
    kind, cache, do_sample, policy, extra = CASES[case]
    extra = dict(extra)
    target = tiny_model("llama")
    kwargs = dict(max_new_tokens=12, do_sample=do_sample, assistant_model=_drafter(kind, target),
                  assistant_policy=_policy(policy, target), **CACHES[cache])
    if extra.pop("compile", False):
        kwargs["compile_config"] = hfas.fast_path_compile_config("cpu")
        monkeypatch.setenv(PACKAGE_DIR_ENV, str(package_dir))  # each call builds its own package
    streamer = kwargs["streamer"] = _Recorder() if extra.pop("streamer", False) else None
    ids = prompt(4, seed=3).repeat(1, 3) if "prompt_lookup_num_tokens" in extra else prompt(8)  # lookup matches
    torch.manual_seed(7)
    with _meta_default_device() if meta else contextlib.nullcontext():
        out = target.generate(ids, **kwargs, **extra)
    return out, None if streamer is None else streamer.tokens


@pytest.mark.parametrize("case", list(CASES))
def test_generate_under_a_meta_default_device_gives_the_same_tokens(case, tmp_path, monkeypatch):
    # transformers' StaticLayer makes its write position as torch.tensor(0) (no device) and moves it to the keys'
    # device at the first write: a meta tensor cannot be moved, so it is made on the host here as without the default
    init = transformers.cache_utils.StaticLayer.__init__

    def on_the_host(self, *args, **kwargs):
        with torch.device("cpu"):
            init(self, *args, **kwargs)

    monkeypatch.setattr(transformers.cache_utils.StaticLayer, "__init__", on_the_host)
    expected, expected_streamed = _generate(case, False, tmp_path / "reference", monkeypatch)
    out, streamed = _generate(case, True, tmp_path / "meta", monkeypatch)
    assert out.device.type == "cpu" and torch.equal(out, expected)
    assert streamed == expected_streamed
