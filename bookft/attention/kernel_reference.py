"""Dense reference attention: the oracle for tests and the `reference` kernel.

- `dense_attention` is plain softmax attention over the global sequence (materializes S x S), fully
  differentiable by JAX autodiff; every strategy and kernel is tested against it.
- `ReferenceKernel` is the chunk-pair kernel with one block covering the whole pair (dense scores,
  no skipping), sharing the math of kernel_xla so strategies can run it.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from bookft.attention.kernel_xla import flash_bwd, flash_fwd


def dense_attention(q, k, v, segment_ids=None, *, causal=True, scale=None, window: int = 0):
    """q [B,S,Hq,D], k/v [B,S,Hkv,D], segment_ids [B,S] in natural order -> [B,S,Hq,D].
    window W > 0: a query sees keys at most W - 1 tokens back (a sliding-window layer)."""
    B, S, Hq, D = q.shape
    Hkv = k.shape[2]
    scale = D**-0.5 if scale is None else scale
    k = jnp.repeat(k, Hq // Hkv, axis=2)
    v = jnp.repeat(v, Hq // Hkv, axis=2)
    s = jnp.einsum("bqhd,bkhd->bhqk", q.astype(jnp.float32) * scale, k.astype(jnp.float32))
    mask = jnp.ones((B, 1, S, S), bool)
    if segment_ids is not None:
        mask = segment_ids[:, None, :, None] == segment_ids[:, None, None, :]
    if causal:
        mask = mask & jnp.tril(jnp.ones((S, S), bool))[None, None]
    if window:
        idx = jnp.arange(S)
        mask = mask & ((idx[:, None] - idx[None, :]) < window)[None, None]
    s = jnp.where(mask, s, -1e30)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", p, v.astype(jnp.float32)).astype(q.dtype)


@dataclass(frozen=True)
class ReferenceKernel:
    """Dense chunk-pair kernel (one block per pair)."""

    block_q: int = 512
    block_kv: int = 512
    interpret: bool = False
    name: str = "reference"

    def check_chunk(self, chunk: int) -> str | None:
        return None

    def fwd(self, q, k, v, qseg, kseg, *, causal: bool, offset=0, window: int = 0):
        return flash_fwd(q, k, v, qseg, kseg, causal=causal, block_q=q.shape[1], block_kv=k.shape[1],
                         offset=offset, window=window)

    def bwd(self, q, k, v, qseg, kseg, o, lse, do, *, causal: bool, offset=0, window: int = 0):
        return flash_bwd(q, k, v, qseg, kseg, o, lse, do, causal=causal, block_q=q.shape[1],
                         block_kv=k.shape[1], offset=offset, window=window)
