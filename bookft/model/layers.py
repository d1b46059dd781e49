"""Pure functions of one decoder layer: RMSNorm, projections (+LoRA), reference attention, SwiGLU.

Design choices:
- A layer is a pure function of a dict of per-layer arrays, so the stacked layer state runs under
  `jax.lax.scan` (compile time independent of depth) and under `jax.checkpoint` with a policy.
- Weights keep Hugging Face's [out, in] orientation split into heads (q: [Hq, D, E],
  o: [E, Hq, D], gate/up: [F, E], down: [E, F]); einsum contracts them directly, so loading and
  saving are reshapes, never transposes.
- LoRA follows PEFT's layout: A [r, in...], B [out..., r]; delta(x) = scale * (x . A) . B.
- Norms and softmax run in float32; matmuls in the compute dtype.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from bookft.model.axes import constrain, seq_shards
from bookft.model.config import ModelConfig
from bookft.model.rope import apply_rope

Attend = Callable[[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array], jax.Array]
NEG_INF = -1e30

# target -> (base weight name, number of trailing "in" dims of the weight)
LORA_BASE = {"q": ("wq", 1), "k": ("wk", 1), "v": ("wv", 1), "o": ("wo", 2),
             "gate": ("w_gate", 1), "up": ("w_up", 1), "down": ("w_down", 1)}


def rms_norm(x: jax.Array, weight: jax.Array, eps: float) -> jax.Array:
    """HF RMSNorm: normalize in float32, cast back, then scale by the weight."""
    xf = x.astype(jnp.float32)
    y = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
    return weight.astype(x.dtype) * y.astype(x.dtype)


def reference_attention(q: jax.Array, k: jax.Array, v: jax.Array, segment_ids: jax.Array,
                        positions: jax.Array, window: int = 0) -> jax.Array:
    """Dense causal + same-segment attention. q [B,S,Hq,D], k/v [B,S,Hkv,D] -> [B,S,Hq,D].

    Causality follows token order in the array (the global order on one device); `positions` are
    only for RoPE and unused here. Scale 1/sqrt(D) applied here, as the attend contract says.
    window W > 0: keys at most W - 1 tokens back (a sliding-window layer).
    """
    del positions
    b, s, hq, d = q.shape
    hkv = k.shape[2]
    qg = q.reshape(b, s, hkv, hq // hkv, d)
    scores = jnp.einsum("bqhgd,bkhd->bhgqk", qg, k, preferred_element_type=jnp.float32) / jnp.sqrt(d)
    causal = jnp.tril(jnp.ones((s, s), dtype=bool))
    if window:
        causal = causal & ~jnp.tril(jnp.ones((s, s), dtype=bool), -window)
    same = segment_ids[:, :, None] == segment_ids[:, None, :]  # [B, Sq, Sk]
    mask = (causal[None] & same)[:, None, None]
    probs = jax.nn.softmax(jnp.where(mask, scores, NEG_INF), axis=-1)
    out = jnp.einsum("bhgqk,bkhd->bqhgd", probs.astype(v.dtype), v, preferred_element_type=jnp.float32)
    return out.reshape(b, s, hq, d).astype(q.dtype)


def _proj(p: dict, name: str, x: jax.Array, eq: str, config: ModelConfig, target: str) -> jax.Array:
    dtype = x.dtype
    y = jnp.einsum(eq, x, p[name].astype(dtype))
    a = p.get(f"lora_{target}_a")
    if a is not None:
        n_in = LORA_BASE[target][1]
        xa = jnp.tensordot(x, a.astype(dtype), axes=(list(range(x.ndim - n_in, x.ndim)),
                                                     list(range(1, 1 + n_in))))
        y = y + config.lora.scale * jnp.tensordot(xa, p[f"lora_{target}_b"].astype(dtype), axes=([-1], [-1]))
    return y


def qkv(p: dict, x: jax.Array, cos: jax.Array, sin: jax.Array, config: ModelConfig):
    """x [B,S,E] (residual stream) -> q [B,S,Hq,D], k, v [B,S,Hkv,D] after norm, bias, qk-norm, RoPE."""
    eps = config.rms_norm_eps
    h = rms_norm(x, p["attn_norm"], eps)
    q = _proj(p, "wq", h, "bse,hde->bshd", config, "q")
    k = _proj(p, "wk", h, "bse,hde->bshd", config, "k")
    v = _proj(p, "wv", h, "bse,hde->bshd", config, "v")
    if config.qkv_bias:
        q, k, v = q + p["bq"].astype(q.dtype), k + p["bk"].astype(k.dtype), v + p["bv"].astype(v.dtype)
    if config.qk_norm:
        q, k = rms_norm(q, p["q_norm"], eps), rms_norm(k, p["k_norm"], eps)
    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    q = constrain(q, ("batch", "seq", "heads", "head_dim"))
    k = constrain(k, ("batch", "seq", "kv_heads", "head_dim"))
    v = constrain(v, ("batch", "seq", "kv_heads", "head_dim"))
    return q, k, v


def finish(p: dict, x: jax.Array, attn: jax.Array, config: ModelConfig) -> jax.Array:
    """Residual stream x [B,S,E] + o-proj(attn [B,S,Hq,D]), then + SwiGLU MLP."""
    x = x + _proj(p, "wo", attn.astype(x.dtype), "bshd,ehd->bse", config, "o")
    x = constrain(x, ("batch", "seq", "embed"))
    return constrain(x + mlp(p, x, config), ("batch", "seq", "embed"))


def mlp(p: dict, x: jax.Array, config: ModelConfig) -> jax.Array:
    """SwiGLU MLP (with its pre-norm) of x [B,S,E]; with `config.mlp_chunk` a rematerialised scan over
    chunks of each device's tokens, so [tokens, intermediate] buffers are chunk-sized."""

    def one(x):
        h = rms_norm(x, p["mlp_norm"], config.rms_norm_eps)
        gate = _proj(p, "w_gate", h, "bse,fe->bsf", config, "gate")
        up = _proj(p, "w_up", h, "bse,fe->bsf", config, "up")
        act = constrain(jax.nn.silu(gate) * up, ("batch", "seq", "mlp"))
        return _proj(p, "w_down", act, "bsf,ef->bse", config, "down")

    b, s, e = x.shape
    cp = seq_shards()
    if not config.mlp_chunk or s % cp or s // cp <= config.mlp_chunk:
        return one(x)
    local = s // cp
    c = next(c for c in range(config.mlp_chunk, 0, -1) if local % c == 0)
    n = local // c
    # [B, S] -> [n, B, cp*c]: chunk k holds every device's k-th run of c tokens, so no data moves
    xs = jnp.moveaxis(x.reshape(b, cp, n, c, e), 2, 0).reshape(n, b, cp * c, e)
    ys = jax.lax.map(jax.checkpoint(lambda xc: one(constrain(xc, ("batch", "seq", "embed")))), xs)
    return jnp.moveaxis(ys.reshape(n, b, cp, c, e), 0, 2).reshape(b, s, e)


def layer(p: dict, x: jax.Array, cos: jax.Array, sin: jax.Array, segment_ids: jax.Array,
          positions: jax.Array, attend: Attend, config: ModelConfig, return_kv: bool = False,
          window: int = 0):
    """One decoder layer on the residual stream x [B,S,E]; optionally also returns (k, v).
    window > 0: a sliding-window layer (the attend gets window=...)."""
    q, k, v = qkv(p, x, cos, sin, config)
    attn = attend(q, k, v, segment_ids, positions, window=window) if window else attend(q, k, v, segment_ids, positions)
    out = finish(p, x, attn, config)
    return (out, (k, v)) if return_kv else (out, None)


def remat_policy(name: str):
    """Map our remat names to a jax.checkpoint policy (None = no remat)."""
    policies = jax.checkpoint_policies
    table = {
        "none": None,
        "full": policies.nothing_saveable,
        "save_dots": policies.dots_with_no_batch_dims_saveable,
        # keep matmul outputs in pinned host memory (TPU/GPU); XLA:CPU compiles it as a plain save
        "offload": policies.offload_dot_with_no_batch_dims("device", "pinned_host"),
        # full remat, but each layer's input (named "layer_input" by the decoder: the scan's only
        # saved activation) lives in pinned host memory: HBM keeps no per-layer activations at all
        "offload_input": policies.save_and_offload_only_these_names(
            names_which_can_be_saved=[], names_which_can_be_offloaded=["layer_input"],
            offload_src="device", offload_dst="pinned_host"),
    }
    return table[name]
