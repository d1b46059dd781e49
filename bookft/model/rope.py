"""Rotary position embeddings with the context-extension scalings of transformers 5.

Design choices:
- Positions are global token positions passed in by the caller ([B, S] int32), never implied by
  array index, so a sequence-sharded or zig-zag-ordered batch gets the right angles.
- Inverse frequencies follow `transformers.modeling_rope_utils` exactly (float32 arithmetic in the
  same order): default, linear (position interpolation), dynamic NTK, YaRN and llama3. YaRN's
  attention factor multiplies cos and sin, as transformers does.
- Dynamic NTK is stateless here: theta is scaled from `max(positions) + 1` of the current call
  (transformers does the same on a fresh model; its cache of a longer past call is not mirrored).
- The rotation is "rotate half" (non-interleaved), the layout of HF Llama checkpoints.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from bookft.model.config import ModelConfig


def _base_inv_freq(base: float, dim: int) -> np.ndarray:
    # transformers: 1 / base ** (arange(0, dim, 2).float() / dim), in float32
    exponent = np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim)
    return (np.float32(1.0) / np.power(np.float32(base), exponent)).astype(np.float32)


def static_inv_freq(config: ModelConfig) -> tuple[np.ndarray, float]:
    """[head_dim // 2] float32 inverse frequencies and the cos/sin scale, for non-dynamic types."""
    rope, dim, base = config.rope, config.dim_per_head, config.rope_theta
    original = rope.original_max_position_embeddings or config.max_position_embeddings
    inv = _base_inv_freq(base, dim)
    if rope.type in ("default", "dynamic"):
        return inv, 1.0
    if rope.type == "linear":
        return (inv / np.float32(rope.factor)).astype(np.float32), 1.0
    if rope.type == "llama3":
        factor = rope.factor
        low_wavelen = original / rope.low_freq_factor
        high_wavelen = original / rope.high_freq_factor
        wavelen = (2 * math.pi / inv).astype(np.float32)
        inv_llama = np.where(wavelen > low_wavelen, inv / factor, inv).astype(np.float32)
        smooth = (original / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor)
        smoothed = (1 - smooth) * inv_llama / factor + smooth * inv_llama
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        return np.where(medium, smoothed, inv_llama).astype(np.float32), 1.0
    if rope.type == "yarn":
        return _yarn(config, dim, base, original)
    raise ValueError(f"unknown rope type {rope.type!r}")


def _yarn(config: ModelConfig, dim: int, base: float, original: int) -> tuple[np.ndarray, float]:
    rope = config.rope
    factor = rope.factor

    def get_mscale(scale: float, mscale: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0

    attention_factor = rope.attention_factor
    if attention_factor is None:
        if rope.mscale and rope.mscale_all_dim:
            attention_factor = float(get_mscale(factor, rope.mscale) / get_mscale(factor, rope.mscale_all_dim))
        else:
            attention_factor = get_mscale(factor)
    beta_fast, beta_slow = rope.beta_fast or 32, rope.beta_slow or 1

    def correction_dim(num_rotations: float) -> float:
        return (dim * math.log(original / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if rope.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - low) / (high - low), 0, 1).astype(np.float32)
    pos_freqs = np.power(np.float32(base), np.arange(0, dim, 2).astype(np.float32) / np.float32(dim))
    extrapolation = np.float32(1.0) / pos_freqs
    interpolation = np.float32(1.0) / (np.float32(factor) * pos_freqs)
    extra_factor = 1 - ramp
    inv = interpolation * (1 - extra_factor) + extrapolation * extra_factor
    return inv.astype(np.float32), float(attention_factor)


def _dynamic_inv_freq(config: ModelConfig, positions: jax.Array) -> jax.Array:
    """Dynamic NTK: theta grows with the longest position of this call beyond max_position_embeddings."""
    dim, factor, max_pos = config.dim_per_head, config.rope.factor, config.max_position_embeddings
    seq_len = jnp.maximum(jnp.max(positions).astype(jnp.float32) + 1, float(max_pos))
    base = config.rope_theta * ((factor * seq_len / max_pos) - (factor - 1)) ** (dim / (dim - 2))
    exponent = jnp.arange(0, dim, 2, dtype=jnp.float32) / dim
    return 1.0 / (base ** exponent)


def rope_cos_sin(config: ModelConfig, positions: jax.Array) -> tuple[jax.Array, jax.Array]:
    """positions [B, S] int -> cos, sin [B, S, head_dim] float32 (YaRN scale folded in)."""
    if config.rope.type == "dynamic":
        inv, scale = _dynamic_inv_freq(config, positions), 1.0
    else:
        inv_np, scale = static_inv_freq(config)
        inv = jnp.asarray(inv_np)
    freqs = positions.astype(jnp.float32)[..., None] * inv  # [B, S, D/2]
    emb = jnp.concatenate([freqs, freqs], axis=-1)  # [B, S, D]
    return jnp.cos(emb) * scale, jnp.sin(emb) * scale


def apply_rope(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """x [B, S, H, D] rotated by cos/sin [B, S, D] (rotate-half layout), computed in float32."""
    xf = x.astype(jnp.float32)
    half = xf.shape[-1] // 2
    rotated = jnp.concatenate([-xf[..., half:], xf[..., :half]], axis=-1)
    out = xf * cos[:, :, None, :] + rotated * sin[:, :, None, :]
    return out.astype(x.dtype)
