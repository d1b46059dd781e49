"""Tiny random transformers models for model tests (torch is a test-only dependency)."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

FAMILIES = {
    # name: (model_type, extra config kwargs)
    "llama": ("llama", dict(num_key_value_heads=2, tie_word_embeddings=False)),
    "mistral": ("mistral", dict(num_key_value_heads=2, tie_word_embeddings=True, sliding_window=None)),
    "qwen2": ("qwen2", dict(num_key_value_heads=2, tie_word_embeddings=True)),
    "qwen3": ("qwen3", dict(num_key_value_heads=1, tie_word_embeddings=False, head_dim=16)),
}


def make_hf_model(family: str, rope: dict | None = None, num_layers: int = 2, seed: int = 0,
                  max_position_embeddings: int = 64):
    """A random transformers model (hidden 64, 4 heads, vocab 300) in eval mode."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    model_type, extra = FAMILIES[family]
    rope = {"rope_type": "default", "rope_theta": 10000.0, **(rope or {})}
    cfg = AutoConfig.for_model(model_type, vocab_size=300, hidden_size=64, intermediate_size=128,
                               num_hidden_layers=num_layers, num_attention_heads=4,
                               max_position_embeddings=max_position_embeddings, rope_parameters=rope,
                               rms_norm_eps=1e-6, **extra)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg).eval()
    with torch.no_grad():  # non-trivial norms and biases, so their loading is really tested
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or name.endswith(".bias"):
                p.add_(0.1 * torch.randn_like(p))
    return model


def torch_logits(model, ids, positions):
    import torch

    with torch.no_grad():
        out = model(input_ids=torch.as_tensor(ids), position_ids=torch.as_tensor(positions))
    return out.logits.float().numpy()
