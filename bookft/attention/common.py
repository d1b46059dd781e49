"""What every strategy shares: the resolved options (`Spec`), shape checks, chunking, shard_map.

Design choices:
- `Spec` is frozen and built once by make_attention; strategies are functions of it.
- Checks raise AttentionError at trace time (shapes are known only then), before any compile.
- Chunking: the sequence is cut into 2*cp chunks (the zig-zag unit; cp in plain order), each cut into `sub`
  sub-chunks so that a chunk pair stays at most `max_chunk` tokens (attention.max_chunk, default
  MAX_CHUNK): the per-pair temporaries (layout transposes, fp32 kernel outputs, merges) scale with
  the chunk, not with S/cp, and splash mask metadata stays small, even for the local or ulysses
  strategies that see the whole sequence.
- shard_map runs with check_vma=False (splash's Pallas call needs it). On a mesh with Explicit axes
  the inputs are resharded to the specs first (shard_map refuses mismatched explicit shardings).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from bookft.attention.balance import chunks_per_shard
from bookft.attention.config import MAX_CHUNK
from bookft.errors import AttentionError


@dataclass(frozen=True)
class Spec:
    strategy: str
    kernel: Any  # a chunk-pair kernel object (XlaKernel, SplashKernel, ReferenceKernel)
    mesh: Any
    context_axis: str
    ulysses_axis: str
    batch_axes: tuple[str, ...]  # only those present in the mesh
    causal: bool
    load_balanced: bool
    scale: float | None
    # largest chunk of a kernel call; splash skips cross-document work only at this granularity
    max_chunk: int = MAX_CHUNK

    def size(self, axis: str) -> int:
        return int(self.mesh.shape[axis]) if self.mesh is not None else 1

    @property
    def batch_size(self) -> int:
        n = 1
        for a in self.batch_axes:
            n *= self.size(a)
        return n


def check_inputs(spec: Spec, q, k, v, segment_ids, cp: int) -> None:
    name = f"attention strategy {spec.strategy!r}"
    if q.ndim != 4 or k.ndim != 4 or k.shape != v.shape:
        raise AttentionError(
            f"{name}: expected q [B,S,Hq,D] and k, v [B,S,Hkv,D] of equal shape, got "
            f"q {q.shape}, k {k.shape}, v {v.shape}"
        )
    B, S, Hq, D = q.shape
    if k.shape[0] != B or k.shape[1] != S or k.shape[3] != D:
        raise AttentionError(f"{name}: q {q.shape} and k {k.shape} differ in batch, length or head_dim")
    if Hq % k.shape[2]:
        raise AttentionError(f"{name}: {Hq} q heads are not a multiple of {k.shape[2]} kv heads")
    if segment_ids is not None and segment_ids.shape != (B, S):
        raise AttentionError(f"{name}: segment_ids shape {segment_ids.shape} != (B, S) = {(B, S)}")
    n = chunks_per_shard(spec.load_balanced)
    if S % (n * cp):
        what = f"2 * context parallelism = {2 * cp} (zig-zag)" if n == 2 else f"context parallelism {cp}"
        raise AttentionError(
            f"{name}: sequence length {S} is not divisible by {what}; choose data.seq_len as a multiple of it"
        )
    if B % spec.batch_size:
        raise AttentionError(
            f"{name}: batch {B} is not divisible by the batch mesh axes {spec.batch_axes} "
            f"(size {spec.batch_size})"
        )


def chunking(spec: Spec, seq_len: int, cp: int) -> tuple[int, int]:
    """-> (sub, chunk): each of the n*cp layout chunks is cut into `sub` chunks of `chunk` tokens."""
    sub, chunk = 1, seq_len // (chunks_per_shard(spec.load_balanced) * cp)
    while chunk > spec.max_chunk and chunk % 2 == 0 and spec.kernel.check_chunk(chunk // 2) is None:
        sub, chunk = sub * 2, chunk // 2
    problem = spec.kernel.check_chunk(chunk)
    if problem:
        raise AttentionError(
            f"attention strategy {spec.strategy!r}, kernel {spec.kernel.name!r}: {problem} "
            f"(sequence {seq_len} = cp {cp} * {chunks_per_shard(spec.load_balanced)} * {sub} chunks of {chunk})"
        )
    return sub, chunk


def require_axes(spec: Spec, axes: tuple[str, ...]) -> None:
    if spec.mesh is None:
        raise AttentionError(
            f"attention strategy {spec.strategy!r} needs a mesh with axes {axes}; pass mesh= "
            "(or use strategy 'local' on one device)"
        )
    missing = [a for a in axes if a not in spec.mesh.axis_names]
    if missing:
        raise AttentionError(
            f"attention strategy {spec.strategy!r}: mesh axes {tuple(spec.mesh.axis_names)} lack "
            f"{missing}; add them to parallel.mesh (size 1 is fine) or pick another strategy"
        )


def scaled(spec: Spec, q):
    scale = q.shape[-1] ** -0.5 if spec.scale is None else spec.scale
    return q * jnp.asarray(scale, q.dtype)


def default_segments(q, segment_ids):
    if segment_ids is None:
        return jnp.ones(q.shape[:2], jnp.int32)
    return segment_ids.astype(jnp.int32)


def sharded_call(spec: Spec, body, seq_axes, q, k, v, seg):
    """Run body(q, k, v, seg) per device, with B over batch axes and S over `seq_axes`."""
    b = spec.batch_axes or None
    x_spec, s_spec = P(b, seq_axes, None, None), P(b, seq_axes)
    mesh = spec.mesh
    if any(str(t).endswith("Explicit") for t in getattr(mesh, "axis_types", ())):
        q, k, v = (jax.sharding.reshard(x, NamedSharding(mesh, x_spec)) for x in (q, k, v))
        seg = jax.sharding.reshard(seg, NamedSharding(mesh, s_spec))
    fn = jax.shard_map(
        body, mesh=mesh, in_specs=(x_spec, x_spec, x_spec, s_spec), out_specs=x_spec, check_vma=False
    )
    return fn(q, k, v, seg)


def replicate_kv_heads(k, degree: int, hq: int, strategy: str):
    """Repeat kv heads so `degree` divides their count (ulysses with fewer kv heads than devices)."""
    hkv = k.shape[2]
    if hkv % degree == 0:
        return k
    target = math.lcm(hkv, degree)
    if hq % target:
        raise AttentionError(
            f"attention strategy {strategy!r}: cannot spread {hkv} kv heads over ulysses degree "
            f"{degree} for {hq} q heads (q heads must be a multiple of lcm(kv heads, degree) = {target})"
        )
    return jnp.repeat(k, target // hkv, axis=2)


def check_heads(hq: int, degree: int, strategy: str, axis: str) -> None:
    if hq % degree:
        raise AttentionError(
            f"attention strategy {strategy!r}: {hq} q heads are not divisible by the ulysses degree "
            f"{degree} (mesh axis {axis!r}); choose a degree that divides the head count or use ring"
        )
