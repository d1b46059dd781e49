"""bookft.model: a Flax NNX Llama-family decoder, HF checkpoint load/save, RoPE scalings, LoRA."""

from bookft._lazy import lazy

# Lazy (bookft/_lazy.py), measured: CPU seconds of a fresh interpreter, 2-core host at load 1.1-1.3, median of
# 5 interleaved rounds: `import bookft.train.config` (it reads bookft.model.config) 0.24 s; 2.15 s with plain
# imports here (jax, flax).
# public name -> defining module, imported on first use
__getattr__, __dir__, __all__ = lazy(__name__, {
    "bookft.model.axes": ["constrain", "use_rules"],
    "bookft.model.config": ["LoraConfig", "ModelConfig", "RopeConfig"],
    "bookft.model.decoder": ["Decoder", "EmbedParam", "LoraParam", "NormParam", "abstract_model", "init_model"],
    "bookft.model.flops": ["flops_per_token"],
    "bookft.model.generate": ["forward_logits", "generate_greedy"],
    "bookft.model.hf_config": ["config_from_hf", "config_to_hf"],
    "bookft.model.hf_io": ["load_hf", "read_hf_config", "save_hf"],
    "bookft.model.layers": ["reference_attention"],
    "bookft.model.lora": ["merge_lora", "trainable_filter", "trainable_mask"],
})
