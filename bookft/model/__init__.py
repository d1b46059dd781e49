"""bookft.model: a Flax NNX Llama-family decoder, HF checkpoint load/save, RoPE scalings, LoRA."""

from bookft.model.axes import constrain, use_rules
from bookft.model.config import LoraConfig, ModelConfig, RopeConfig
from bookft.model.decoder import Decoder, EmbedParam, LoraParam, NormParam, abstract_model, init_model
from bookft.model.flops import flops_per_token
from bookft.model.generate import forward_logits, generate_greedy
from bookft.model.hf_config import config_from_hf, config_to_hf
from bookft.model.hf_io import load_hf, read_hf_config, save_hf
from bookft.model.layers import reference_attention
from bookft.model.lora import merge_lora, trainable_filter, trainable_mask

__all__ = [
    "Decoder", "EmbedParam", "LoraConfig", "LoraParam", "ModelConfig", "NormParam", "RopeConfig",
    "abstract_model", "config_from_hf", "config_to_hf", "constrain", "flops_per_token", "forward_logits",
    "generate_greedy", "init_model", "load_hf", "merge_lora", "read_hf_config", "reference_attention",
    "save_hf", "trainable_filter", "trainable_mask", "use_rules",
]
