"""Zig-zag causal load balancing and the chunk layout every strategy agrees on.

Design choices:
- The sequence is cut into 2*cp equal chunks (plain order: cp chunks, one per shard). Balanced
  ("zig-zag") order gives context rank r the chunks r and 2cp-1-r, so every rank owns one early and
  one late chunk and the causal work per rank is equal. The data path applies `load_balance` once
  (tokens, targets, positions, segment ids, loss weights); attention never reorders activations, it
  only needs to know which global chunk each local chunk is (`shard_chunk_ids`).
- Chunks may be cut further into `sub` sub-chunks (kernels that like bounded tiles, e.g. splash masks
  built per chunk pair, never for the global S x S); sub-chunk id = chunk id * sub + j keeps global
  order, which is all the causal mask needs.
"""

from __future__ import annotations

import numpy as np

from bookft.errors import AttentionError


def zigzag_order(cp: int) -> np.ndarray:
    """Chunk ids in stored order: [0, 2cp-1, 1, 2cp-2, ...] (rank r stores chunks r, 2cp-1-r)."""
    order = np.empty(2 * cp, dtype=np.int32)
    order[0::2] = np.arange(cp)
    order[1::2] = 2 * cp - 1 - np.arange(cp)
    return order


def _reorder(x, cp: int, axis: int, perm: np.ndarray):
    n = x.shape[axis]
    if n % (2 * cp):
        raise AttentionError(
            f"load balance: length {n} along axis {axis} is not divisible by 2*cp={2 * cp}; "
            "pad the sequence length (data.seq_len) to a multiple of 2*cp"
        )
    axis = axis % x.ndim
    shape = x.shape[:axis] + (2 * cp, n // (2 * cp)) + x.shape[axis + 1 :]
    chunks = x.reshape(shape)
    out = chunks[(slice(None),) * axis + (perm,)]  # fancy index works for numpy and jax arrays
    return out.reshape(x.shape)


def load_balance(x, cp: int, axis: int = 1):
    """Natural order -> zig-zag stored order along `axis` (numpy or jax array)."""
    if cp <= 1:
        return x
    return _reorder(x, cp, axis, zigzag_order(cp))


def unbalance(x, cp: int, axis: int = 1):
    """Zig-zag stored order -> natural order along `axis` (inverse of `load_balance`)."""
    if cp <= 1:
        return x
    return _reorder(x, cp, axis, np.argsort(zigzag_order(cp)).astype(np.int32))


def chunks_per_shard(balanced: bool) -> int:
    """Zig-zag needs 2 chunks per context shard; plain order needs 1 (S divisible by cp)."""
    return 2 if balanced else 1


def shard_chunk_ids(cp: int, balanced: bool, sub: int = 1) -> np.ndarray:
    """[cp, n*sub] global (sub-)chunk ids held by each context shard in stored order (n = 2 zig-zag, 1 plain)."""
    n = chunks_per_shard(balanced)
    order = zigzag_order(cp) if balanced else np.arange(cp, dtype=np.int32)
    per_shard = order.reshape(cp, n)
    ids = per_shard[:, :, None] * sub + np.arange(sub, dtype=np.int32)[None, None, :]
    return ids.reshape(cp, n * sub).astype(np.int32)
