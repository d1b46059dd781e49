"""Strategy `ulysses`: all-to-all from sequence-sharded to head-sharded, full-sequence local
attention, all-to-all back (DeepSpeed-Ulysses).

- KV heads fewer than the degree are replicated (repeat each kv head) so every device gets whole
  GQA groups; MaxText refuses this case. Q heads not divisible by the degree is an AttentionError.
- After the all-to-all a device holds the whole sequence in stored (maybe zig-zag) order; the
  chunk-pair engine knows every chunk's global id, so no reordering of activations is needed.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from bookft.attention.balance import shard_chunk_ids
from bookft.attention.common import (
    Spec,
    check_heads,
    check_inputs,
    chunking,
    default_segments,
    replicate_kv_heads,
    require_axes,
    scaled,
    sharded_call,
)
from bookft.attention.engine import local_core


def validate(spec: Spec) -> None:
    require_axes(spec, (spec.context_axis,))


def seq_to_heads(x, axis):  # [b, s, H, D] -> [b, s*n, H/n, D]
    return lax.all_to_all(x, axis, split_axis=2, concat_axis=1, tiled=True)


def heads_to_seq(x, axis):  # [b, s*n, H/n, D] -> [b, s, H, D]
    return lax.all_to_all(x, axis, split_axis=1, concat_axis=2, tiled=True)


def apply(spec: Spec, q, k, v, segment_ids, window: int = 0):
    axis = spec.context_axis
    cp = spec.size(axis)
    check_inputs(spec, q, k, v, segment_ids, cp)
    check_heads(q.shape[2], cp, spec.strategy, axis)
    k, v = (replicate_kv_heads(x, cp, q.shape[2], spec.strategy) for x in (k, v))
    sub, chunk = chunking(spec, q.shape[1], cp)
    ids = shard_chunk_ids(cp, spec.load_balanced, sub).reshape(-1)  # whole sequence, stored order
    core = local_core(spec.kernel, spec.causal, chunk, window)

    def body(q, k, v, seg):
        qf, kf, vf = (seq_to_heads(x, axis) for x in (q, k, v))
        sf = lax.all_gather(seg, axis, axis=1, tiled=True)
        o = core(qf, kf, vf, sf, sf, jnp.asarray(ids), jnp.asarray(ids))
        return heads_to_seq(o, axis)

    return sharded_call(spec, body, axis, scaled(spec, q), k, v, default_segments(q, segment_ids))
