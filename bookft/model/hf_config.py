"""Hugging Face config.json <-> ModelConfig, and HF tensor names <-> our parameters.

Design choices:
- Supported `model_type`s: llama, mistral, qwen2 (q/k/v bias), qwen3 (per-head q/k RMSNorm). Other
  types, `auto_map` (custom code), partial rotary, llama's attention/mlp bias and Qwen2's sliding
  window are refused with a ModelError rather than loaded wrong. Mistral's `sliding_window` is
  ignored: we attend over the full (segment-masked) causal context.
- RoPE is read from transformers 5's `rope_parameters` or from the older top-level `rope_theta` +
  `rope_scaling` (`type` or `rope_type`); config.json is written in the transformers 5 form.
- HF weights are [out, in]; ours keep that orientation, split into heads (see layers.py), so the
  mapping is a reshape.
"""

from __future__ import annotations

from typing import Any

from bookft.config import from_dict
from bookft.errors import ConfigError, ModelError
from bookft.model.config import ModelConfig, RopeConfig, RopeScaling

ARCHITECTURES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
                 "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}
_ROPE_KEYS = {"factor": "factor", "original_max_position_embeddings": "original_max_position_embeddings",
              "low_freq_factor": "low_freq_factor", "high_freq_factor": "high_freq_factor",
              "beta_fast": "beta_fast", "beta_slow": "beta_slow", "mscale": "mscale",
              "mscale_all_dim": "mscale_all_dim", "attention_factor": "attention_factor",
              "truncate": "truncate"}


def _rope_from_hf(hf: dict[str, Any], where: str) -> RopeConfig:
    params = hf.get("rope_parameters")
    if params is None:
        params = dict(hf.get("rope_scaling") or {})
        if "rope_theta" in hf:
            params.setdefault("rope_theta", hf["rope_theta"])
    params = dict(params)
    if any(isinstance(v, dict) for v in params.values()):
        raise ModelError(f"{where}: per-layer-type rope_parameters are not supported")
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type not in ("default", "linear", "dynamic", "yarn", "llama3"):
        raise ModelError(f"{where}: rope type {rope_type!r} is not supported "
                         "(supported: default, linear, dynamic, yarn, llama3)")
    if params.get("partial_rotary_factor", hf.get("partial_rotary_factor", 1.0)) not in (1, 1.0, None):
        raise ModelError(f"{where}: partial_rotary_factor != 1 is not supported")
    out: dict[str, Any] = {"type": rope_type, "theta": float(params.get("rope_theta") or 10000.0)}
    for hf_key, key in _ROPE_KEYS.items():
        if params.get(hf_key) is not None:
            out[key] = params[hf_key]
    try:
        return from_dict(RopeConfig, out, "rope_parameters")
    except ConfigError as e:
        raise ModelError(f"{where}: {e}") from None


def config_from_hf(hf: dict[str, Any], where: str = "config.json", **knobs: Any) -> ModelConfig:
    """ModelConfig from a parsed HF config.json; `knobs` (dtypes, remat, lora, ...) are added."""
    if hf.get("auto_map") or hf.get("trust_remote_code"):
        raise ModelError(f"{where}: this model needs custom code (auto_map / trust_remote_code); bookft "
                         "never runs code from a model folder. Use a llama/mistral/qwen2/qwen3 model.")
    model_type = hf.get("model_type")
    if model_type not in ARCHITECTURES:
        raise ModelError(f"{where}: model_type {model_type!r} is not supported "
                         f"(supported: {', '.join(ARCHITECTURES)})")
    if hf.get("mlp_bias"):
        raise ModelError(f"{where}: mlp_bias=true is not supported")
    if hf.get("attention_bias") and model_type != "qwen2":
        raise ModelError(f"{where}: attention_bias=true (bias on o_proj) is not supported for {model_type}")
    if model_type == "qwen2" and hf.get("use_sliding_window"):
        raise ModelError(f"{where}: use_sliding_window=true is not supported")
    try:
        heads = int(hf["num_attention_heads"])
        fields: dict[str, Any] = {
            "model_type": model_type,
            "vocab_size": int(hf["vocab_size"]),
            "hidden_size": int(hf["hidden_size"]),
            "intermediate_size": int(hf["intermediate_size"]),
            "num_layers": int(hf["num_hidden_layers"]),
            "num_heads": heads,
            "num_kv_heads": int(hf.get("num_key_value_heads") or heads),
            "head_dim": hf.get("head_dim"),
            "rms_norm_eps": float(hf.get("rms_norm_eps", 1e-6)),
            "max_position_embeddings": int(hf.get("max_position_embeddings", 2048)),
            "tie_embeddings": bool(hf.get("tie_word_embeddings", False)),
            "qkv_bias": model_type == "qwen2",
            "qk_norm": model_type == "qwen3",
            "short_conv": int(hf.get("bookft_short_conv", 0)),
            "sliding_window": int(hf.get("bookft_sliding_window", 0)),
            "layer_types": tuple(hf.get("bookft_layer_types", ())),
        }
    except KeyError as e:
        raise ModelError(f"{where}: missing key {e.args[0]!r}") from None
    if fields["head_dim"] is not None and int(fields["head_dim"]) * heads == fields["hidden_size"]:
        fields["head_dim"] = None  # the implied value: keep configs comparable
    fields["rope"] = _rope_from_hf(hf, where)
    fields.update(knobs)
    scaling = knobs.get("rope_scaling")
    if scaling is not None:  # model.rope_scaling: the context extension over the folder's RoPE
        if isinstance(scaling, dict):
            scaling = from_dict(RopeScaling, scaling, "model.rope_scaling")
        fields["rope"], fields["max_position_embeddings"] = scaling.apply(fields["rope"],
                                                                          fields["max_position_embeddings"])
    try:
        return from_dict(ModelConfig, fields, "model")
    except ConfigError as e:
        raise ModelError(f"{where}: {e}") from None


def config_to_hf(config: ModelConfig, dtype: str | None = None) -> dict[str, Any]:
    """A transformers 5 config.json dict for `config` (rope in `rope_parameters`)."""
    rope = config.rope
    params: dict[str, Any] = {"rope_type": rope.type, "rope_theta": config.rope_theta}
    if rope.type != "default":
        params["factor"] = rope.factor
    if rope.type in ("llama3", "yarn"):
        params["original_max_position_embeddings"] = (rope.original_max_position_embeddings
                                                      or config.max_position_embeddings)
    if rope.type == "llama3":
        params.update(low_freq_factor=rope.low_freq_factor, high_freq_factor=rope.high_freq_factor)
    if rope.type == "yarn":
        params.update(beta_fast=rope.beta_fast, beta_slow=rope.beta_slow, truncate=rope.truncate)
        for key in ("mscale", "mscale_all_dim", "attention_factor"):
            if getattr(rope, key) is not None:
                params[key] = getattr(rope, key)
    hf: dict[str, Any] = {
        "architectures": [ARCHITECTURES[config.model_type]],
        "model_type": config.model_type,
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads,
        "num_key_value_heads": config.num_kv_heads,
        "head_dim": config.dim_per_head,
        "rms_norm_eps": config.rms_norm_eps,
        "max_position_embeddings": config.max_position_embeddings,
        "tie_word_embeddings": config.tie_embeddings,
        "hidden_act": "silu",
        "rope_parameters": params,
        "dtype": dtype or config.param_dtype,
    }
    if config.model_type in ("llama", "qwen3"):
        hf["attention_bias"] = False
    if config.model_type == "llama":
        hf["mlp_bias"] = False
    if config.model_type in ("mistral", "qwen2", "qwen3"):
        hf["sliding_window"] = None
        hf["use_sliding_window"] = False
    if config.short_conv:  # read back by bookft (config_from_hf); transformers would ignore the layer
        hf["bookft_short_conv"] = config.short_conv
    if config.sliding_window:  # bookft's own keys: read back by config_from_hf, refused by export
        hf["bookft_sliding_window"] = config.sliding_window
        hf["bookft_layer_types"] = list(config.layer_types)
    return hf


_LAYER_NAMES = {
    "attn_norm": "input_layernorm.weight", "mlp_norm": "post_attention_layernorm.weight",
    "wq": "self_attn.q_proj.weight", "wk": "self_attn.k_proj.weight", "wv": "self_attn.v_proj.weight",
    "wo": "self_attn.o_proj.weight", "bq": "self_attn.q_proj.bias", "bk": "self_attn.k_proj.bias",
    "bv": "self_attn.v_proj.bias", "q_norm": "self_attn.q_norm.weight", "k_norm": "self_attn.k_norm.weight",
    "w_gate": "mlp.gate_proj.weight", "w_up": "mlp.up_proj.weight", "w_down": "mlp.down_proj.weight",
}


def hf_tensor_names(config: ModelConfig, layer_params: tuple[str, ...]) -> dict[str, tuple[str, int | None]]:
    """HF tensor name -> (our parameter path, layer index or None), LoRA params excluded."""
    names: dict[str, tuple[str, int | None]] = {
        "model.embed_tokens.weight": ("embed", None), "model.norm.weight": ("final_norm", None)}
    if not config.tie_embeddings:
        names["lm_head.weight"] = ("lm_head", None)
    if config.short_conv:  # bookft's own tensor (model.short_conv); transformers has no such layer
        names["model.embed_conv.weight"] = ("conv", None)
    for i in range(config.num_layers):
        for ours in layer_params:
            if ours in _LAYER_NAMES:
                names[f"model.layers.{i}.{_LAYER_NAMES[ours]}"] = (f"layers.{ours}", i)
    return names
