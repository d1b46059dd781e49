"""Strategy `ring`: K/V (and kv segment ids) travel around the context axis with ppermute.

- Forward: cp steps; at step t device r holds the kv shard of device r-t and merges its chunk pairs
  into (o, lse) by log-sum-exp. Pairs above the diagonal (by global chunk id) are skipped, so with
  zig-zag input every device does the same causal work.
- Backward is a second ring in a custom_vjp (the splash residual output is not differentiable):
  dK/dV accumulators travel with K/V, dq stays home; after cp shifts each accumulator is back with
  its owner. Memory stays O(S/cp) per device.
- Both rings are one lax.scan over cp steps that computes then shifts (one kernel instance per
  program, which halves compile time; the forward's last K/V shift is spare traffic).
- The chunk-id table is static; the ids of the travelling shard are looked up with axis_index, so
  the same core serves usp (each ring member there holds several chunks after the all-to-all).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
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
from bookft.attention.engine import F32, accumulate_bwd, accumulate_fwd, check_window, init_acc


def ring_core(kernel, causal: bool, chunk: int, axis: str, size: int, table: np.ndarray, window: int = 0):
    """custom_vjp (q, k, v, seg) -> o for one ring member; table [size, n_local] global chunk ids."""
    check_window(causal, window)
    perm = [(i, (i + 1) % size) for i in range(size)]

    def shift(*xs):
        return tuple(lax.ppermute(x, axis, perm) for x in xs)

    def ids(step):  # ids of the kv shard held at `step`: it came from device r - step
        r = lax.axis_index(axis)
        return jnp.asarray(table)[(r - step) % size]

    @jax.custom_vjp
    def core(q, k, v, seg):
        return core_fwd(q, k, v, seg)[0]

    def core_fwd(q, k, v, seg):
        qids = ids(0)

        def step(carry, t):  # compute on the shard held now, then pass it on
            k, v, kseg, o, lse = carry
            o, lse = accumulate_fwd(kernel, causal, chunk, q, seg, qids, k, v, kseg, ids(t), o, lse, window)
            return (*shift(k, v, kseg), o, lse), None

        # one scan (and so one kernel instance) for all steps; the last shift is spare traffic
        (_, _, _, o, lse), _ = lax.scan(step, (k, v, seg, *init_acc(q)), jnp.arange(size))
        o = o.astype(q.dtype)
        return o, (q, k, v, seg, o, lse)

    def core_bwd(res, do):
        q, k, v, seg, o, lse = res
        qids = ids(0)

        def step(carry, t):  # dK/dV accumulators travel with their K/V shard; dq stays home
            k, v, kseg, dk, dv, dq = carry
            dq, gk, gv = accumulate_bwd(kernel, causal, chunk, q, seg, qids, k, v, kseg, ids(t), o, lse, do, dq,
                                         window)
            return (*shift(k, v, kseg, dk + gk, dv + gv), dq), None

        zeros = jnp.zeros(k.shape, F32)
        init = (k, v, seg, zeros, zeros, jnp.zeros(q.shape, F32))
        # after `size` shifts every dK/dV accumulator is back with the device that owns that shard
        (_, _, _, dk, dv, dq), _ = lax.scan(step, init, jnp.arange(size))
        return dq.astype(q.dtype), dk.astype(k.dtype), dv.astype(v.dtype), None

    core.defvjp(core_fwd, core_bwd)
    return core


def validate(spec: Spec) -> None:
    require_axes(spec, (spec.context_axis,))


def apply(spec: Spec, q, k, v, segment_ids, window: int = 0):
    axis = spec.context_axis
    cp = spec.size(axis)
    check_inputs(spec, q, k, v, segment_ids, cp)
    sub, chunk = chunking(spec, q.shape[1], cp)
    core = ring_core(spec.kernel, spec.causal, chunk, axis, cp, shard_chunk_ids(cp, spec.load_balanced, sub),
                     window)
    return sharded_call(spec, core, axis, scaled(spec, q), k, v, default_segments(q, segment_ids))
