"""Tiny random models of several families and a tiny tokenizer, for the fast test tier."""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    CompileConfig,
    DeepseekV3Config,
    DeepseekV3ForCausalLM,
    FalconConfig,
    FalconForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

import hf_adaptive_spec as hfas

torch.set_num_threads(1)  # tiny models: threads only add overhead

VOCAB = 96
_COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
    initializer_range=0.3,  # peaked next-token distributions, so drafts are sometimes right
    eos_token_id=None,
    bos_token_id=None,
    pad_token_id=None,
)

FAMILIES = {
    "llama": lambda common: LlamaForCausalLM(LlamaConfig(**common)),
    "qwen3": lambda common: Qwen3ForCausalLM(Qwen3Config(head_dim=16, **common)),
    "mistral-sliding": lambda common: MistralForCausalLM(MistralConfig(sliding_window=6, **common)),
    "qwen2-hybrid": lambda common: Qwen2ForCausalLM(
        Qwen2Config(use_sliding_window=True, sliding_window=5, max_window_layers=2, **common)
    ),
}

#: other layouts, in the greedy-identity tests only: layers in ``.h`` and learned positions (GPT-2), one key/value
#: head whatever the config's head count (Falcon's multi-query attention), a latent KV cache (DeepSeek-V3's MLA)
OTHER_LAYOUTS = {
    "gpt2": lambda common: GPT2LMHeadModel(GPT2Config(
        vocab_size=VOCAB, n_embd=64, n_layer=common["num_hidden_layers"], n_head=4, n_positions=512,
        initializer_range=0.3, eos_token_id=None, bos_token_id=None, pad_token_id=None,
    )),
    "falcon-multi-query": lambda common: FalconForCausalLM(FalconConfig(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=common["num_hidden_layers"], num_attention_heads=4,
        multi_query=True, initializer_range=0.3, eos_token_id=None, bos_token_id=None, pad_token_id=None,
    )),
    "deepseek-latent": lambda common: DeepseekV3ForCausalLM(DeepseekV3Config(
        n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1, moe_intermediate_size=32,
        first_k_dense_replace=1, q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8,
        v_head_dim=16, **{**common, "num_key_value_heads": 4},
    )),
}


def tiny_model(family: str = "llama", seed: int = 0, attn_implementation: str = "sdpa", num_hidden_layers: int = 4):
    """A fresh, enabled tiny random model of ``family``."""
    torch.manual_seed(seed)
    model = {**FAMILIES, **OTHER_LAYOUTS}[family]({**_COMMON, "num_hidden_layers": num_hidden_layers})
    model.set_attn_implementation(attn_implementation)
    return hfas.enable(model.eval())


def tiny_compile_config() -> CompileConfig:
    """Static shapes, inductor's default mode, on every device (transformers compiles on CUDA only by default)."""
    config = CompileConfig(fullgraph=True, dynamic=False, mode="default")
    config._compile_all_devices = True
    return config


def tiny_eagle3(target, num_layers: int = 1) -> hfas.Eagle3Drafter:
    """A random EAGLE-3 drafter for ``target``, peaked enough to be right sometimes."""
    torch.manual_seed(1)
    return hfas.Eagle3Drafter(
        hfas.Eagle3DraftModel.from_target(target, initializer_range=0.3, num_hidden_layers=num_layers)
    )


def tiny_drafter(kind: str, target):
    """A drafter of each kind for ``target``: ``eagle3``, ``eagle3-2-layers``, ``dvi`` (exit at layer 2) or
    ``causal-lm`` (the target's first two layers)."""
    if kind.startswith("eagle3"):
        return tiny_eagle3(target, num_layers=2 if kind == "eagle3-2-layers" else 1)
    if kind == "dvi":
        return hfas.DVIDrafter(target, exit_layer=2)
    return hfas.CausalLMDrafter.from_target_layers(target, 2)


def newline_merging_tokenizer(characters: str, chat_template: str) -> PreTrainedTokenizerFast:
    """Single characters plus one merge, two newlines into one token (as byte-level BPE vocabularies have ``ĊĊ``),
    with ChatML's special tokens and ``chat_template``: re-encoding a text need not give back the tokens generated."""
    vocab = {token: index for index, token in enumerate(["<|im_start|>", "<|im_end|>", *characters, "\n\n"])}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[("\n", "\n")]))
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<|im_end|>", additional_special_tokens=["<|im_start|>"]
    )
    tokenizer.chat_template = chat_template
    return tokenizer


def make_char_tokenizer() -> PreTrainedTokenizerFast:
    """A word-level tokenizer over VOCAB single-character and two-character tokens."""
    chars = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [str(d) for d in range(10)] + [" ", ".", ",", "!"]
    pairs = [a + b for a in "abcdefghijklm" for b in "aeiou"][: VOCAB - len(chars) - 1]
    vocab = {token: i for i, token in enumerate(["<unk>"] + chars + pairs)}
    assert len(vocab) == VOCAB
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tokenizer.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>")


def prompt(length: int, seed: int = 0) -> torch.LongTensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(1, VOCAB, (1, length), generator=generator)


class PlainStepsBetweenTrees(hfas.DraftPolicy):
    """A plain decoding step (depth 0: nothing drafted) unless the context length is a multiple of 3,
    then ``tree``. Stateless, so live and replayed runs choose alike; runs of plain steps make the
    drafter catch up on several committed tokens at once."""

    def __init__(self, tree: hfas.TreeConfig | None = None):
        self.tree = tree or hfas.TreeConfig(depth=3, top_k=3, total_tokens=8)

    def tree_config(self, state: hfas.CycleState) -> hfas.TreeConfig:
        return self.tree if state.context_length % 3 == 0 else hfas.TreeConfig(depth=0, top_k=1, total_tokens=1)


#: an LTDPolicy's arguments at a size tests build in milliseconds
SMALL_LTD = dict(depth=2, top_k=2, total_tokens=4, depth_actor=(8,), depth_critic=(8,), size_actor=(8,),
                 size_critic=(8,))
#: (class, arguments) of each learned policy at such a size: what tests of what every learned policy records run over
SMALL_LEARNED_POLICIES = [
    (hfas.LTDPolicy, SMALL_LTD),
    (hfas.RadarPolicy, dict(depth=2, top_k=2, total_tokens=4)),
    (hfas.ReSpSPolicy, dict(hidden_size=16, num_target_layers=2)),
]
