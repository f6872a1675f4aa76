"""Tiny randomly initialised models (no downloads) and a short text, shared by the capture tests."""

from __future__ import annotations

VOCAB = 257  # 256 byte tokens + <s>
SEQ = 64

TEXT = (
    "Attention kernels are timed on activations a real model produced, because the clock depends on the "
    "data. A Gaussian control with a small standard deviation gives nearly uniform attention. "
) * 12


def tiny_configs() -> dict:
    """Configs small enough to build, save and run in well under a second each."""
    from transformers import DeepseekV2Config, LlamaConfig, Qwen3Config

    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                  max_position_embeddings=256, bos_token_id=256, eos_token_id=None, pad_token_id=None)
    return {
        "llama": LlamaConfig(**common, num_attention_heads=4, num_key_value_heads=2, rope_theta=10000.0),
        "qwen3": Qwen3Config(**common, num_attention_heads=4, num_key_value_heads=2, head_dim=16, rope_theta=10000.0),
        # MLA: dqk = 16 nope + 8 rope = 24, dv = 16, so head_dim_v != head_dim_qk is exercised.
        "deepseek_v2": DeepseekV2Config(
            **common, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=32, q_lora_rank=None,
            qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, moe_intermediate_size=32, n_routed_experts=4,
            num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1,
        ),
        # The same with DeepSeek-V2-Lite's kind of yarn scaling, which changes the softmax scale.
        "deepseek_v2_yarn": DeepseekV2Config(
            **common, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=32, q_lora_rank=None,
            qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, moe_intermediate_size=32, n_routed_experts=4,
            num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1,
            rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                             "original_max_position_embeddings": 64, "beta_fast": 32, "beta_slow": 1,
                             "mscale": 0.707, "mscale_all_dim": 0.707},
        ),
    }


def byte_tokenizer(*, bos: bool):
    """A byte-level tokenizer (one token per UTF-8 byte), optionally adding <s> in front like Llama's."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    vocab["<s>"] = 256
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    if bos:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 256)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>")


def build_model(kind: str):
    """A randomly initialised causal LM (seeded), loaded with the capture hook's attention name."""
    import torch
    from transformers import AutoModelForCausalLM

    from harness.capture._hook import ATTN_IMPLEMENTATION, register_attention

    register_attention()
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(tiny_configs()[kind], attn_implementation=ATTN_IMPLEMENTATION)
    # Random init gives near-uniform attention; larger q/k projections make the test's attention peaked,
    # closer to a trained model's and harder to pass by accident.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if any(s in name for s in ("q_proj", "k_proj", "kv_a_proj", "kv_b_proj")):
                p.mul_(4.0)
    return model.eval()
