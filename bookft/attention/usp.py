"""Strategy `usp` (unified sequence parallelism): ulysses over the inner axis `context_ulysses`,
ring over the outer axis `context`.

The sequence is sharded over (context, context_ulysses), context outer: device (r, u) holds shard
r*U + u. The all-to-all over the ulysses axis gives device (r, u) the contiguous shards
r*U .. r*U+U-1 for H/U heads; a ring over `context` (ring.ring_core with a table of the 2*U*sub
chunk ids each ring member then holds) finishes the job, and the all-to-all goes back.
"""

from __future__ import annotations

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
from bookft.attention.ring import ring_core
from bookft.attention.ulysses import heads_to_seq, seq_to_heads


def validate(spec: Spec) -> None:
    require_axes(spec, (spec.context_axis, spec.ulysses_axis))


def apply(spec: Spec, q, k, v, segment_ids, window: int = 0):
    ring_axis, uly_axis = spec.context_axis, spec.ulysses_axis
    R, U = spec.size(ring_axis), spec.size(uly_axis)
    cp = R * U
    check_inputs(spec, q, k, v, segment_ids, cp)
    check_heads(q.shape[2], U, spec.strategy, uly_axis)
    k, v = (replicate_kv_heads(x, U, q.shape[2], spec.strategy) for x in (k, v))
    sub, chunk = chunking(spec, q.shape[1], cp)
    table = shard_chunk_ids(cp, spec.load_balanced, sub).reshape(R, -1)  # [R, U*2*sub]
    core = ring_core(spec.kernel, spec.causal, chunk, ring_axis, R, table, window)

    def body(q, k, v, seg):
        qf, kf, vf = (seq_to_heads(x, uly_axis) for x in (q, k, v))
        sf = lax.all_gather(seg, uly_axis, axis=1, tiled=True)
        return heads_to_seq(core(qf, kf, vf, sf), uly_axis)

    seq_axes = (ring_axis, uly_axis)
    return sharded_call(spec, body, seq_axes, scaled(spec, q), k, v, default_segments(q, segment_ids))
