"""A causal short convolution over the token embeddings (`model.short_conv: W`, 0 = off).

    x'_t = x_t + sum_{k=0}^{W-1} x_{t-k} @ W_k      (x = token embeddings, W [W, E, E], zero-initialised)

Why: a tiny model trained from scratch has to grow a "previous token" attention head before it can
copy a fact from far back (an induction head); the convolution hands every position the identity
of the tokens just before it, which made long-range retrieval learnable in minutes on 2 CPU cores
(../shared/STACK-FACTS.md; the H3 / Hyena / Mamba "short conv" in front of the mixer, Fu et al.
2023, Poli et al. 2023). Zero init makes the model start as the plain Llama. Off by default; HF
Llama has no such layer, so such a model does not export to transformers.

Design choices:
- Exact in any token layout. The sequence may be stored in zig-zag order and sharded (context
  parallelism) or hold several documents, so "the token k before" is found by (segment, position),
  not by array index: every token gets a virtual text index start[segment] + position - min
  position of its segment, the ids are scattered to that index and read back shifted by k. A tap
  that would cross a document start (or read padding, segment 0) contributes nothing. Only int32
  ids move ([B, S], a few MB at 1M tokens), never activations.
- The taps are embeddings of the earlier ids, so the layer is a function of the ids alone; one
  decode step needs just the previous W-1 ids of its row (`history`), no cache of activations.
- A full matrix per tap: it can give each offset a subspace of its own, as a
  previous-token attention head writes through its OV matrix (Olsson et al. 2022, induction heads),
  at W*E*E parameters (131k at W=8, E=128). Per-channel taps, tried before, put "digit d one token
  back" in the embedding space of "digit d here", and the copying head of a tiny model read a blend
  of the needle token and its neighbours (experiments/copy_attention.py; docs/configuration.md,
  "Why the defaults").
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def earlier_ids(ids: jax.Array, positions: jax.Array, segment_ids: jax.Array, width: int) -> jax.Array:
    """ids/positions/segment_ids [B,S] -> [W, B, S]: the id k tokens earlier in the same document
    (k = 0..W-1; k = 0 is the token itself), -1 where there is none."""
    b, s = ids.shape
    valid = segment_ids > 0
    seg = jnp.where(valid, segment_ids, 0)

    def per_row(seg_r, pos_r, valid_r):
        counts = jax.ops.segment_sum(valid_r.astype(jnp.int32), seg_r, num_segments=s + 1)
        first = jax.ops.segment_min(jnp.where(valid_r, pos_r, jnp.iinfo(jnp.int32).max), seg_r,
                                    num_segments=s + 1)
        start = jnp.cumsum(counts) - counts
        offset = pos_r - first[seg_r]  # position within this row's part of the document
        return jnp.where(valid_r, start[seg_r] + offset, s), offset

    index, offset = jax.vmap(per_row)(seg, positions, valid)  # [B,S] virtual text index (s = none)
    rows = jnp.arange(b)[:, None]
    text = jnp.full((b, s + 1), -1, ids.dtype).at[rows, index].set(ids, mode="drop")
    taps = [jnp.where(valid, ids, -1)]
    for k in range(1, width):
        ok = valid & (offset >= k)
        taps.append(jnp.where(ok, text[rows, jnp.where(ok, index - k, s)], -1))
    return jnp.stack(taps)


def apply(table: jax.Array, weight: jax.Array, taps: jax.Array) -> jax.Array:
    """table [V,E] (compute dtype), weight [W,E,E], taps [W, ...] ids (-1 = none) -> x' [..., E]: the
    embedding of taps[0] plus the W taps' embeddings, each through its matrix."""
    x = jnp.take(table, jnp.maximum(taps[0], 0), axis=0)
    out = x
    for k in range(weight.shape[0]):
        e = jnp.take(table, jnp.maximum(taps[k], 0), axis=0)
        w = weight[k].astype(e.dtype)
        mixed = jnp.einsum("...e,ef->...f", e, w)
        out = out + jnp.where((taps[k] >= 0)[..., None], mixed, 0)
    return out


def step_taps(token: jax.Array, history: jax.Array) -> jax.Array:
    """One decode step: token [B] and history [B, W-1] (the previous ids, most recent last, -1 =
    none) -> taps [W, B, 1]."""
    taps = jnp.concatenate([token[:, None], history[:, ::-1]], axis=1)  # [B, W]: k = 0, 1, ...
    return jnp.moveaxis(taps, 1, 0)[:, :, None]
