"""Model shape configuration (one frozen dataclass per concern; see bookft/config.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from bookft.errors import ConfigError

RopeType = Literal["default", "linear", "dynamic", "yarn", "llama3"]
RematPolicy = Literal["none", "full", "save_dots", "offload"]
ModelType = Literal["llama", "mistral", "qwen2", "qwen3"]


@dataclass(frozen=True, kw_only=True)
class RopeConfig:
    theta: float = 10000.0
    type: RopeType = "default"
    factor: float = 1.0
    original_max_position_embeddings: int | None = None
    # llama3
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    # yarn
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float | None = None
    mscale_all_dim: float | None = None
    attention_factor: float | None = None


@dataclass(frozen=True, kw_only=True)
class LoraConfig:
    rank: int = 0  # 0 = LoRA off (full fine-tuning)
    alpha: float = 16.0
    targets: tuple[str, ...] = ("q", "k", "v", "o")
    train_embeddings: bool = False
    train_norms: bool = False


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    model_type: ModelType = "llama"
    vocab_size: int = 512
    hidden_size: int = 128
    intermediate_size: int = 352
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 4
    head_dim: int | None = None  # default hidden_size // num_heads
    rms_norm_eps: float = 1e-5
    max_position_embeddings: int = 8192
    tie_embeddings: bool = False
    qkv_bias: bool = False  # qwen2
    qk_norm: bool = False  # qwen3
    rope: RopeConfig = field(default_factory=RopeConfig)
    param_dtype: Literal["float32", "bfloat16"] = "float32"
    compute_dtype: Literal["float32", "bfloat16"] = "bfloat16"
    remat: RematPolicy = "full"
    scan_layers: bool = True
    lora: LoraConfig = field(default_factory=LoraConfig)
    init_std: float = 0.02

    @property
    def dim_per_head(self) -> int:
        return self.head_dim or self.hidden_size // self.num_heads

    def validate(self) -> None:
        if self.num_heads % self.num_kv_heads:
            raise ConfigError(
                f"model.num_heads ({self.num_heads}) must be a multiple of model.num_kv_heads "
                f"({self.num_kv_heads})")
        if self.head_dim is None and self.hidden_size % self.num_heads:
            raise ConfigError(
                f"model.hidden_size ({self.hidden_size}) is not divisible by model.num_heads "
                f"({self.num_heads}); set model.head_dim")
