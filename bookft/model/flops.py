"""Model FLOPs per trained token, for MFU.

Formula (training = forward + backward = 3 x forward; a multiply-add is 2 FLOPs):
    N = L * (E*Hq*D + 2*E*Hkv*D + Hq*D*E + 3*E*F) + V*E     (matmul weights incl. lm_head;
        the embedding lookup, norms and biases are not matmuls and are not counted)
    dense  = 6 * N
    attn   = 6 * L * S * Hq * D    (QK^T and PV: 2 * 2 * S * Hq * D per token per layer in the
             forward pass for full attention; causal masking halves it -> 2 * S * Hq * D)
    flops_per_token = dense + attn
LoRA adapters are not counted (the usual MFU convention counts the base model's 6N).
Packed documents attend less than S tokens; the formula counts the causal S, an upper bound.
"""

from __future__ import annotations

from bookft.model.config import ModelConfig


def matmul_params(config: ModelConfig) -> int:
    e, f, d = config.hidden_size, config.intermediate_size, config.dim_per_head
    hq, hkv = config.num_heads, config.num_kv_heads
    per_layer = e * hq * d + 2 * e * hkv * d + hq * d * e + 3 * e * f
    return config.num_layers * per_layer + config.vocab_size * e


def flops_per_token(config: ModelConfig, seq_len: int) -> float:
    """Training FLOPs per token at sequence length seq_len (see the module docstring)."""
    attention = 6 * config.num_layers * seq_len * config.num_heads * config.dim_per_head
    return float(6 * matmul_params(config) + attention)
