"""Strategy `allgather`: q stays sequence-sharded; K, V and kv segment ids are all-gathered.

Each device then attends its 2 (zig-zag) chunks to all 2*cp chunks with the chunk-pair engine, so
chunks above the diagonal are skipped and causal work is balanced when the input is zig-zagged.
Memory is O(S) for K/V per device (inherent to this strategy); the S x S scores never exist.
The all-gather sits outside the custom_vjp, so its transpose (a reduce-scatter of dK/dV) is JAX's.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from bookft.attention.balance import shard_chunk_ids
from bookft.attention.common import (
    Spec,
    check_inputs,
    chunking,
    default_segments,
    require_axes,
    scaled,
    sharded_call,
)
from bookft.attention.engine import local_core


def validate(spec: Spec) -> None:
    require_axes(spec, (spec.context_axis,))


def apply(spec: Spec, q, k, v, segment_ids, window: int = 0):
    axis = spec.context_axis
    cp = spec.size(axis)
    check_inputs(spec, q, k, v, segment_ids, cp)
    sub, chunk = chunking(spec, q.shape[1], cp)
    table = shard_chunk_ids(cp, spec.load_balanced, sub)  # [cp, 2*sub]
    core = local_core(spec.kernel, spec.causal, chunk, window)

    def body(q, k, v, seg):  # q/k/v [b, S/cp, H, D], seg [b, S/cp]
        r = lax.axis_index(axis)
        kg, vg, sg = (lax.all_gather(x, axis, axis=1, tiled=True) for x in (k, v, seg))
        return core(q, kg, vg, seg, sg, jnp.asarray(table)[r], jnp.asarray(table.reshape(-1)))

    return sharded_call(spec, body, axis, scaled(spec, q), k, v, default_segments(q, segment_ids))
