"""Chunked cross-entropy: [S, vocab] logits never exist.

With S = 1M tokens and a 128K vocabulary, fp32 logits would be 512 GB; here the hidden states of
each device's slice of the sequence are cut into chunks of `chunk` tokens, and a `lax.scan` computes
logits, log-sum-exp and the target logit per chunk under `jax.checkpoint`, so the backward pass
recomputes each chunk's logits instead of keeping them. Peak extra memory per device is one chunk
of logits: [B, chunk, vocab].

The sequence axis is reshaped as [cp, n_chunks, chunk] with the (sharded) context factor outermost,
so every device scans over its own tokens and no data moves between devices.

Returns sums (weighted cross-entropy, z-loss, weights); the caller divides by the global weight
sum so that the loss is the mean over all real targets of the global batch, however it is split.

`vocab_parallel_cross_entropy` is the same sums for a context-parallel mesh without ever holding
the whole output embedding on one device: each context device keeps a vocabulary slice of it
[V/cp, E] (bf16), the chunk's hidden states are all-gathered over the context axes ([cp*c, E],
the same number of logits per device as before), and the log-sum-exp and the target logit are
reduced across the vocabulary slices (pmax/psum). The embedding's gradient is then [V/cp, E] per
device instead of a full [V, E] fp32 partial sum, and no device ever gathers the full table.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def pick_chunk(local_len: int, chunk: int) -> int:
    """Largest divisor of `local_len` not above `chunk`."""
    c = max(1, min(chunk, local_len))
    while local_len % c:
        c -= 1
    return c


def chunked_cross_entropy(logits_fn, hidden, targets, weights, *, cp: int = 1, chunk: int = 2048,
                          z_loss: float = 0.0):
    """hidden [B,S,D], targets [B,S] int32, weights [B,S] f32 -> (sum w*ce, sum w*z*lse^2, sum w)."""
    b, s, d = hidden.shape
    if s % cp:
        raise ValueError(f"sequence length {s} is not divisible by the context degree {cp}")
    local = s // cp
    c = pick_chunk(local, chunk)
    n = local // c

    def split(x):  # [B, S, ...] -> [n, B, cp*c, ...] (device-local chunk k of every shard)
        x = x.reshape(b, cp, n, c, *x.shape[2:])
        x = jnp.moveaxis(x, 2, 0)
        return x.reshape(n, b, cp * c, *x.shape[4:])

    def chunk_loss(h, t, w):
        logits = logits_fn(h).astype(jnp.float32)  # [B, cp*c, V]
        lse = jax.nn.logsumexp(logits, axis=-1)
        tgt = jnp.take_along_axis(logits, t[..., None], axis=-1)[..., 0]
        return _sums(lse, tgt, w, z_loss)

    zero = jnp.zeros((), jnp.float32)
    ce, z = _scan_chunks(chunk_loss, zero, (split(hidden), split(targets), split(weights)))
    return ce, z, jnp.sum(weights.astype(jnp.float32))


def _sums(lse, tgt, w, z_loss: float):
    """Per-chunk (sum w*ce, sum w*z*lse^2) from the log-sum-exp and the target logit."""
    ce = jnp.sum((lse - tgt) * w)
    return ce, (jnp.sum(z_loss * jnp.square(lse) * w) if z_loss else jnp.zeros((), jnp.float32))


def _scan_chunks(chunk_loss, zero, xs):
    """Sum `chunk_loss` over the leading (chunk) axis of xs; each chunk rematerialised in backward."""
    chunk_loss = jax.checkpoint(chunk_loss)

    def body(carry, x):
        ce, z = chunk_loss(*x)
        return (carry[0] + ce, carry[1] + z), None

    (ce, z), _ = lax.scan(body, (zero, zero), xs)
    return ce, z


def vocab_parallel_axes(mesh, vocab_size: int) -> tuple[str, ...]:
    """The context axes a vocabulary of `vocab_size` can be split over (empty: use the gathered path)."""
    axes = tuple(a for a in ("context", "context_ulysses") if mesh.shape.get(a, 1) > 1)
    cp = math.prod(mesh.shape[a] for a in axes)
    return axes if axes and vocab_size % cp == 0 else ()


def vocab_parallel_cross_entropy(w, hidden, targets, weights, *, mesh, chunk: int = 2048, z_loss: float = 0.0):
    """w [V, E] output embedding, hidden [B,S,E] (S over the context axes) -> the same sums as
    `chunked_cross_entropy`, with the vocabulary split over the context axes (see the module doc)."""
    seq = vocab_parallel_axes(mesh, w.shape[0])
    if not seq:
        raise ValueError(f"vocabulary {w.shape[0]} cannot be split over the mesh's context axes {dict(mesh.shape)}")
    rows = tuple(a for a in ("data", "fsdp") if mesh.shape.get(a, 1) > 1)
    cp = math.prod(mesh.shape[a] for a in seq)
    v_local = w.shape[0] // cp
    w = w.astype(hidden.dtype)  # cast before the re-layout: bf16 moves, and the slice is all we keep
    w = lax.with_sharding_constraint(w, NamedSharding(mesh, P(seq, None)))
    tok = P(rows or None, seq)

    def local(w, h, t, wt):  # w [V/cp, E]; h [b, s, E]; t, wt [b, s] (this device's tokens)
        b, s, _ = h.shape
        c = pick_chunk(s, chunk)
        n = s // c
        first = lax.axis_index(seq) * v_local

        def split(x):  # [b, s, ...] -> [n, b, c, ...]
            return jnp.moveaxis(x.reshape(b, n, c, *x.shape[2:]), 1, 0)

        def chunk_loss(h, t, wt):  # this device's c tokens; their logits over all vocabulary slices
            hg, tg = (lax.all_gather(x, seq, axis=1, tiled=True) for x in (h, t))  # [b, cp*c, ...]
            logits = jnp.einsum("bse,ve->bsv", hg, w, preferred_element_type=jnp.float32)
            m = lax.pmax(lax.stop_gradient(jnp.max(logits, axis=-1)), seq)  # any shift is exact
            lse = m + jnp.log(lax.psum(jnp.sum(jnp.exp(logits - m[..., None]), axis=-1), seq))
            mine = (tg >= first) & (tg < first + v_local)
            tgt = jnp.take_along_axis(logits, jnp.clip(tg - first, 0, v_local - 1)[..., None], axis=-1)[..., 0]
            tgt = lax.psum(jnp.where(mine, tgt, 0.0), seq)
            # back to this device's own tokens (the gathered order is device-major)
            lse, tgt = (lax.dynamic_slice_in_dim(x, lax.axis_index(seq) * c, c, axis=1) for x in (lse, tgt))
            return _sums(lse, tgt, wt, z_loss)

        zero = lax.pcast(jnp.zeros((), jnp.float32), (*rows, *seq), to="varying")  # per-device sums
        ce, z = _scan_chunks(chunk_loss, zero, (split(h), split(t), split(wt)))
        return lax.psum(ce, (*rows, *seq)), lax.psum(z, (*rows, *seq))

    ce, z = jax.shard_map(local, mesh=mesh, in_specs=(P(seq, None), P(*tok, None), tok, tok),
                          out_specs=(P(), P()))(w, hidden, targets, weights.astype(jnp.float32))
    return ce, z, jnp.sum(weights.astype(jnp.float32))


def dense_cross_entropy(logits, targets, weights, z_loss: float = 0.0):
    """Reference: the same sums from full logits [B,S,V] (tests only)."""
    logits = logits.astype(jnp.float32)
    lse = jax.nn.logsumexp(logits, axis=-1)
    tgt = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    return (jnp.sum((lse - tgt) * weights), jnp.sum(z_loss * jnp.square(lse) * weights),
            jnp.sum(weights))
