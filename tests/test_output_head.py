"""OutputHead: the target's lm_head through a cached transposed weight on CPU float32, else the module."""

from __future__ import annotations

import torch
from torch import nn

from hf_adaptive_spec.core import OutputHead


def _head(bias: bool = False, dtype: torch.dtype = torch.float32) -> nn.Linear:
    torch.manual_seed(0)
    return nn.Linear(64, 1000, bias=bias).to(dtype)


def test_transposed_head_matches_the_module_and_keeps_the_bias():
    for bias in (False, True):
        head = _head(bias)
        hidden = torch.randn(3, 64)
        fast = OutputHead(head)
        assert fast.uses_transposed_weight
        with torch.no_grad():
            expected = head(hidden)
        torch.testing.assert_close(fast(hidden), expected, rtol=0, atol=1e-5)
        assert torch.equal(fast(hidden).argmax(-1), expected.argmax(-1))


def test_the_transposed_weight_is_reused_until_the_weight_changes():
    head = _head()
    hidden = torch.randn(1, 64)
    first = OutputHead(head)
    assert OutputHead(head).weight_t is first.weight_t  # no new copy per generate call
    with torch.no_grad():
        head.weight.mul_(-1.0)  # in place: the version counter moves
    torch.testing.assert_close(OutputHead(head)(hidden), head(hidden).detach(), rtol=0, atol=1e-5)
    head.weight.data.copy_(torch.randn_like(head.weight))  # through .data: the sampled values move
    torch.testing.assert_close(OutputHead(head)(hidden), head(hidden).detach(), rtol=0, atol=1e-5)
    head.weight = nn.Parameter(torch.randn_like(head.weight))  # new storage
    torch.testing.assert_close(OutputHead(head)(hidden), head(hidden).detach(), rtol=0, atol=1e-5)


def test_a_single_row_or_a_row_swap_written_through_data_is_seen():
    """Stock generate reads the weight as it is; a write through .data bumps no version, and the old check sampled
    one value in every numel // 4096: a token's row set after resize_token_embeddings fell between the samples."""
    head = nn.Linear(64, 8192, bias=False)
    hidden = torch.randn(2, 64)
    OutputHead(head)
    head.weight.data[8191] = head.weight.data[8191] * 3 + 1  # one row, not sampled at a stride of 128 elements
    torch.testing.assert_close(OutputHead(head)(hidden), head(hidden).detach(), rtol=0, atol=1e-5)
    head.weight.data[[5, 6]] = head.weight.data[[6, 5]].clone()  # two rows swapped: the total is the same
    torch.testing.assert_close(OutputHead(head)(hidden), head(hidden).detach(), rtol=0, atol=1e-5)


def test_an_edit_that_keeps_every_row_sum_is_seen_once_marked_as_weights_changed_says():
    """Values swapped within a row keep its sum: the README's remedy for writes no version shows,
    weights_changed() (mark_weights_changed), remakes the copy (its key ignored the mark)."""
    from hf_adaptive_spec.core.packaged import mark_weights_changed

    head = _head()
    hidden = torch.randn(2, 64)
    OutputHead(head)
    head.weight.data[3, [0, 1]] = head.weight.data[3, [1, 0]].clone()
    mark_weights_changed(head)
    torch.testing.assert_close(OutputHead(head)(hidden), head(hidden).detach(), rtol=0, atol=1e-5)


def test_other_heads_run_the_module_itself():
    hidden = torch.randn(2, 64)
    hooked = _head()
    hooked.register_forward_hook(lambda module, args, out: out * 2)
    bf16 = _head(dtype=torch.bfloat16)
    wrapped = nn.Sequential(_head())
    for head, rows in ((hooked, hidden), (bf16, hidden.bfloat16()), (wrapped, hidden)):
        fast = OutputHead(head)
        assert not fast.uses_transposed_weight
        with torch.no_grad():
            assert torch.equal(fast(rows), head(rows))
