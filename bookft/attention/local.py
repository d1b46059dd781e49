"""Strategy `local`: one device sees the whole sequence (no mesh). Tiny runs, eval, references."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from bookft.attention.balance import shard_chunk_ids
from bookft.attention.common import Spec, check_inputs, chunking, default_segments, scaled
from bookft.attention.engine import local_core


def validate(spec: Spec) -> None:
    """Needs nothing from a mesh."""


def apply(spec: Spec, q, k, v, segment_ids, window: int = 0):
    spec = dataclasses.replace(spec, load_balanced=False)  # cp=1: zig-zag order is natural order
    check_inputs(spec, q, k, v, segment_ids, 1)
    sub, chunk = chunking(spec, q.shape[1], 1)
    ids = jnp.asarray(shard_chunk_ids(1, False, sub)[0])
    core = local_core(spec.kernel, spec.causal, chunk, window)
    seg = default_segments(q, segment_ids)
    return core(scaled(spec, q), k, v, seg, seg, ids, ids)
