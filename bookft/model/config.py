"""Model configuration: one frozen, keyword-only dataclass per concern (see bookft/config.py).

Design choices:
- `ModelConfig` describes the shape (read from an HF config.json by `bookft.model.hf_config`, or
  from a preset under configs/models/) plus the training knobs that an HF folder does not carry
  (dtypes, remat, scan, LoRA, init). `KNOBS` names the latter so that `load_hf(..., like=cfg)` can
  take the shape from config.json and the knobs from the run config.
- `hf_path` (optional) points at a local HF folder whose config.json and weights replace the shape
  given here; `rope_theta_override` raises/lowers RoPE theta on top of whatever was loaded (how
  many million-token models were made).
- RoPE fields mirror transformers 5's `rope_parameters` names so that round trips are lossless.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from bookft.errors import ConfigError

RopeType = Literal["default", "linear", "dynamic", "yarn", "llama3"]
RematPolicy = Literal["none", "full", "save_dots", "offload", "offload_input"]
ModelType = Literal["llama", "mistral", "qwen2", "qwen3"]
DType = Literal["float32", "bfloat16"]
LORA_TARGETS = ("q", "k", "v", "o", "gate", "up", "down")


@dataclass(frozen=True, kw_only=True)
class RopeConfig:
    theta: float = 10000.0
    type: RopeType = "default"
    factor: float = 1.0
    # llama3 / yarn: the pre-training context; None = max_position_embeddings (as transformers)
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
    truncate: bool = True

    def validate(self) -> None:
        if self.theta <= 0:
            raise ConfigError(f"model.rope.theta must be > 0, got {self.theta}")
        if self.type != "default" and self.factor <= 0:
            raise ConfigError(f"model.rope.factor must be > 0 for rope type {self.type!r}")
        if self.type == "llama3" and self.high_freq_factor <= self.low_freq_factor:
            raise ConfigError("model.rope.high_freq_factor must be > model.rope.low_freq_factor (llama3)")


@dataclass(frozen=True, kw_only=True)
class RopeScaling:
    """Context extension put over a loaded HF model's RoPE (`model.rope_scaling`): the type and factor
    replace the folder's, theta stays, and the folder's native length becomes
    `original_max_position_embeddings` (or the one it already names, when its RoPE is scaled
    already, so the same preset over an exported folder gives the same RoPE again);
    max_position_embeddings becomes original x factor. YaRN's beta_fast / beta_slow keep
    transformers' defaults (Peng et al. 2023: factor 4 extends an 8K model to 32K)."""
    type: Literal["linear", "dynamic", "yarn", "llama3"] = "yarn"
    factor: float = 4.0
    original_max_position_embeddings: int | None = None  # None: the folder's native length
    low_freq_factor: float = 1.0   # llama3
    high_freq_factor: float = 4.0  # llama3

    def validate(self) -> None:
        if self.factor <= 1.0:
            raise ConfigError(f"model.rope_scaling.factor must be > 1 (an extension), got {self.factor}")
        if self.original_max_position_embeddings is not None and self.original_max_position_embeddings <= 0:
            raise ConfigError("model.rope_scaling.original_max_position_embeddings must be > 0")

    def apply(self, rope: RopeConfig, max_position_embeddings: int) -> tuple[RopeConfig, int]:
        """(the extended RoPE, the extended max_position_embeddings) for a model whose RoPE is `rope`."""
        native = (self.original_max_position_embeddings
                  or (rope.original_max_position_embeddings if rope.type in ("yarn", "llama3") else None)
                  or (int(round(max_position_embeddings / rope.factor)) if rope.type != "default" else None)
                  or max_position_embeddings)
        out = RopeConfig(theta=rope.theta, type=self.type, factor=self.factor,
                         original_max_position_embeddings=native, low_freq_factor=self.low_freq_factor,
                         high_freq_factor=self.high_freq_factor)
        return out, int(native * self.factor)


@dataclass(frozen=True, kw_only=True)
class LoraConfig:
    rank: int = 0  # 0 = LoRA off (full fine-tuning)
    alpha: float = 16.0
    targets: tuple[str, ...] = ("q", "k", "v", "o")
    train_embeddings: bool = False  # LongLoRA: embeddings (and untied lm_head) trainable too
    train_norms: bool = False  # LongLoRA: RMSNorm weights trainable too

    @property
    def scale(self) -> float:
        return self.alpha / self.rank if self.rank else 0.0

    def validate(self) -> None:
        if self.rank < 0:
            raise ConfigError(f"model.lora.rank must be >= 0, got {self.rank}")
        bad = [t for t in self.targets if t not in LORA_TARGETS]
        if bad:
            raise ConfigError(f"model.lora.targets: unknown target {bad[0]!r} (known: {', '.join(LORA_TARGETS)})")
        if len(set(self.targets)) != len(self.targets):
            raise ConfigError("model.lora.targets: duplicate entries")


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
    param_dtype: DType = "float32"
    compute_dtype: DType = "bfloat16"
    remat: RematPolicy = "full"
    scan_layers: bool = True
    lora: LoraConfig = field(default_factory=LoraConfig)
    init_std: float = 0.02
    hf_path: str | None = None  # a local HF folder; its config.json gives the shape, its weights the init
    rope_theta_override: float | None = None
    rope_scaling: RopeScaling | None = None  # context extension over a loaded HF folder's RoPE (RopeScaling)
    # width of a causal short conv on the embeddings (short_conv.py), a full matrix per tap (w [W, E, E]),
    # so earlier tokens can sit in subspaces of their own; 0 = off
    short_conv: int = 0
    # tokens per device per step of a scan over the MLP (each step rematerialised): bounds the
    # [tokens, intermediate] buffers at long context; 0 = the whole sequence at once
    mlp_chunk: int = 0
    # sliding-window attention (Mistral/Gemma-style local layers): a query sees keys at most
    # sliding_window - 1 tokens back; layer_types says which layers ("sliding_attention" or
    # "full_attention", HF's names); empty = every layer sliding when sliding_window > 0
    sliding_window: int = 0
    layer_types: tuple[str, ...] = ()

    @property
    def layer_windows(self) -> tuple[int, ...]:
        """Per layer: its window (0 = full causal attention)."""
        if not self.sliding_window:
            return (0,) * self.num_layers
        types = self.layer_types or ("sliding_attention",) * self.num_layers
        return tuple(self.sliding_window if t == "sliding_attention" else 0 for t in types)

    @property
    def dim_per_head(self) -> int:
        return self.head_dim or self.hidden_size // self.num_heads

    @property
    def rope_theta(self) -> float:
        return self.rope_theta_override or self.rope.theta

    def validate(self) -> None:
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads",
                     "num_kv_heads", "max_position_embeddings"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"model.{name} must be > 0, got {getattr(self, name)}")
        if self.num_heads % self.num_kv_heads:
            raise ConfigError(
                f"model.num_heads ({self.num_heads}) must be a multiple of model.num_kv_heads "
                f"({self.num_kv_heads})")
        if self.head_dim is None and self.hidden_size % self.num_heads:
            raise ConfigError(
                f"model.hidden_size ({self.hidden_size}) is not divisible by model.num_heads "
                f"({self.num_heads}); set model.head_dim")
        if self.dim_per_head % 2:
            raise ConfigError(f"model.head_dim must be even for RoPE, got {self.dim_per_head}")
        if not 0 <= self.short_conv <= 64:
            raise ConfigError(f"model.short_conv must be in 0..64 (a conv width; 0 = off), got {self.short_conv}")
        if self.sliding_window < 0:
            raise ConfigError(f"model.sliding_window must be >= 0 (0 = off), got {self.sliding_window}")
        if self.layer_types:
            bad = [t for t in self.layer_types if t not in ("sliding_attention", "full_attention")]
            if bad:
                raise ConfigError(f"model.layer_types: unknown type {bad[0]!r} "
                                  "(use sliding_attention or full_attention)")
            if len(self.layer_types) != self.num_layers:
                raise ConfigError(f"model.layer_types has {len(self.layer_types)} entries for "
                                  f"{self.num_layers} layers")
            if "sliding_attention" in self.layer_types and not self.sliding_window:
                raise ConfigError("model.layer_types names sliding_attention layers but model.sliding_window is 0")
        if self.mlp_chunk < 0:
            raise ConfigError(f"model.mlp_chunk must be >= 0 (tokens per device per MLP step), got {self.mlp_chunk}")
        if self.rope_theta_override is not None and self.rope_theta_override <= 0:
            raise ConfigError(f"model.rope_theta_override must be > 0, got {self.rope_theta_override}")


# Fields an HF config.json does not carry: taken from the run config when loading an HF folder.
KNOBS = ("param_dtype", "compute_dtype", "remat", "scan_layers", "lora", "init_std", "hf_path",
         "rope_theta_override", "rope_scaling", "mlp_chunk")
