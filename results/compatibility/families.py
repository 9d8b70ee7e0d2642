"""Tiny random configs per family (vocab 96, hidden 64, initializer_range 0.3, eos/bos/pad None)."""
import torch
import transformers as tf

V = 96
BASE = dict(vocab_size=V, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=512, initializer_range=0.3, eos_token_id=None, bos_token_id=None, pad_token_id=None)
NOKV = {k: v for k, v in BASE.items() if k != "num_key_value_heads"}


def _layers(n, pattern):
    return [pattern[i % len(pattern)] for i in range(n)]


def cfg(family, L):
    if family == "llama":
        return tf.LlamaForCausalLM, tf.LlamaConfig(num_hidden_layers=L, **BASE)
    if family == "gemma":
        return tf.GemmaForCausalLM, tf.GemmaConfig(head_dim=16, num_hidden_layers=L, **BASE)
    if family == "gemma2":
        return tf.Gemma2ForCausalLM, tf.Gemma2Config(head_dim=16, num_hidden_layers=L, sliding_window=8, tie_word_embeddings=False, **BASE)
    if family == "gemma3_text":
        return tf.Gemma3ForCausalLM, tf.Gemma3TextConfig(head_dim=16, num_hidden_layers=L, sliding_window=8,
            layer_types=_layers(L, ["sliding_attention", "full_attention"]), tie_word_embeddings=False, **BASE)
    if family == "phi":
        return tf.PhiForCausalLM, tf.PhiConfig(num_hidden_layers=L, **BASE)
    if family == "phi3":
        return tf.Phi3ForCausalLM, tf.Phi3Config(num_hidden_layers=L, **BASE)
    if family == "gpt2":
        return tf.GPT2LMHeadModel, tf.GPT2Config(vocab_size=V, n_embd=64, n_layer=L, n_head=4, n_positions=512,
            initializer_range=0.3, eos_token_id=None, bos_token_id=None, pad_token_id=None)
    if family == "gpt_neox":
        return tf.GPTNeoXForCausalLM, tf.GPTNeoXConfig(num_hidden_layers=L, **NOKV)
    if family == "gptj":
        return tf.GPTJForCausalLM, tf.GPTJConfig(vocab_size=V, n_embd=64, n_layer=L, n_head=4, rotary_dim=8, n_positions=512,
            initializer_range=0.3, eos_token_id=None, bos_token_id=None, pad_token_id=None)
    if family == "olmo":
        return tf.OlmoForCausalLM, tf.OlmoConfig(num_hidden_layers=L, **BASE)
    if family == "olmo2":
        return tf.Olmo2ForCausalLM, tf.Olmo2Config(num_hidden_layers=L, **BASE)
    if family == "olmo3":
        return tf.Olmo3ForCausalLM, tf.Olmo3Config(num_hidden_layers=L, sliding_window=8,
            layer_types=_layers(L, ["sliding_attention", "full_attention"]), **BASE)
    if family == "granite":
        return tf.GraniteForCausalLM, tf.GraniteConfig(num_hidden_layers=L, embedding_multiplier=3.0, logits_scaling=2.0,
            residual_multiplier=0.5, attention_multiplier=0.2, **BASE)
    if family == "cohere":
        return tf.CohereForCausalLM, tf.CohereConfig(num_hidden_layers=L, logit_scale=0.5, **BASE)
    if family == "cohere2":
        return tf.Cohere2ForCausalLM, tf.Cohere2Config(num_hidden_layers=L, logit_scale=0.5, sliding_window=8,
            layer_types=_layers(L, ["sliding_attention", "full_attention"]), **BASE)
    if family == "starcoder2":
        return tf.Starcoder2ForCausalLM, tf.Starcoder2Config(num_hidden_layers=L, sliding_window=8, **BASE)
    if family == "stablelm":
        return tf.StableLmForCausalLM, tf.StableLmConfig(num_hidden_layers=L, **BASE)
    if family == "falcon":
        return tf.FalconForCausalLM, tf.FalconConfig(num_hidden_layers=L, hidden_size=64, num_attention_heads=4, vocab_size=V,
            initializer_range=0.3, eos_token_id=None, bos_token_id=None, pad_token_id=None)
    if family == "falcon_alibi":
        return tf.FalconForCausalLM, tf.FalconConfig(num_hidden_layers=L, hidden_size=64, num_attention_heads=4, vocab_size=V,
            alibi=True, initializer_range=0.3, eos_token_id=None, bos_token_id=None, pad_token_id=None)
    if family == "mixtral":
        return tf.MixtralForCausalLM, tf.MixtralConfig(num_hidden_layers=L, num_local_experts=4, num_experts_per_tok=2, **BASE)
    if family == "qwen2_moe":
        return tf.Qwen2MoeForCausalLM, tf.Qwen2MoeConfig(num_hidden_layers=L, num_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=32, shared_expert_intermediate_size=64, **BASE)
    if family == "qwen3_moe":
        return tf.Qwen3MoeForCausalLM, tf.Qwen3MoeConfig(num_hidden_layers=L, head_dim=16, num_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=32, **BASE)
    if family == "deepseek_v3":
        return tf.DeepseekV3ForCausalLM, tf.DeepseekV3Config(num_hidden_layers=L, n_routed_experts=4, num_experts_per_tok=2,
            n_group=1, topk_group=1, moe_intermediate_size=32, first_k_dense_replace=1, q_lora_rank=32, kv_lora_rank=16,
            qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, **{**BASE, 'num_key_value_heads': 4})
    if family == "smollm3":
        return tf.SmolLM3ForCausalLM, tf.SmolLM3Config(num_hidden_layers=L, **BASE)
    if family == "glm":
        return tf.GlmForCausalLM, tf.GlmConfig(num_hidden_layers=L, head_dim=16, **BASE)
    if family == "glm4":
        return tf.Glm4ForCausalLM, tf.Glm4Config(num_hidden_layers=L, head_dim=16, **BASE)
    if family == "exaone4":
        return tf.Exaone4ForCausalLM, tf.Exaone4Config(num_hidden_layers=L, sliding_window=8,
            layer_types=_layers(L, ["sliding_attention", "full_attention"]), **BASE)
    if family == "phi3_sw":
        return tf.Phi3ForCausalLM, tf.Phi3Config(num_hidden_layers=L, sliding_window=8, **BASE)
    if family == "mixtral_sw":
        return tf.MixtralForCausalLM, tf.MixtralConfig(num_hidden_layers=L, num_local_experts=4, num_experts_per_tok=2, sliding_window=8, **BASE)
    if family == "qwen3_moe_sw":
        return tf.Qwen3MoeForCausalLM, tf.Qwen3MoeConfig(num_hidden_layers=L, head_dim=16, num_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=32, use_sliding_window=True, sliding_window=8, **BASE)
    if family == "qwen2_moe_sw":
        return tf.Qwen2MoeForCausalLM, tf.Qwen2MoeConfig(num_hidden_layers=L, num_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=32, shared_expert_intermediate_size=64, use_sliding_window=True, sliding_window=8, max_window_layers=4, **BASE)
    if family == "gemma3_allsliding":
        return tf.Gemma3ForCausalLM, tf.Gemma3TextConfig(head_dim=16, num_hidden_layers=L, sliding_window=8, tie_word_embeddings=False, **BASE)
    if family == "smollm3_sw":
        return tf.SmolLM3ForCausalLM, tf.SmolLM3Config(num_hidden_layers=L, use_sliding_window=True, sliding_window=8, **BASE)
    if family == "exaone4_default":
        return tf.Exaone4ForCausalLM, tf.Exaone4Config(num_hidden_layers=L, sliding_window=8, **BASE)
    raise KeyError(family)


def build(family, L, seed):
    torch.manual_seed(seed)
    cls, config = cfg(family, L)
    model = cls(config).eval()
    try:
        model.set_attn_implementation("sdpa")
        attn = "sdpa"
    except Exception:
        model.set_attn_implementation("eager")
        attn = "eager"
    return model, attn
