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
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


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

    @jax.checkpoint
    def chunk_loss(h, t, w):
        logits = logits_fn(h).astype(jnp.float32)  # [B, cp*c, V]
        lse = jax.nn.logsumexp(logits, axis=-1)
        tgt = jnp.take_along_axis(logits, t[..., None], axis=-1)[..., 0]
        ce = jnp.sum((lse - tgt) * w)
        z = jnp.sum(z_loss * jnp.square(lse) * w) if z_loss else jnp.zeros((), jnp.float32)
        return ce, z

    def body(carry, xs):
        ce, z = chunk_loss(*xs)
        return (carry[0] + ce, carry[1] + z), None

    zero = jnp.zeros((), jnp.float32)
    (ce, z), _ = jax.lax.scan(body, (zero, zero), (split(hidden), split(targets), split(weights)))
    return ce, z, jnp.sum(weights.astype(jnp.float32))


def dense_cross_entropy(logits, targets, weights, z_loss: float = 0.0):
    """Reference: the same sums from full logits [B,S,V] (tests only)."""
    logits = logits.astype(jnp.float32)
    lse = jax.nn.logsumexp(logits, axis=-1)
    tgt = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    return (jnp.sum((lse - tgt) * weights), jnp.sum(z_loss * jnp.square(lse) * weights),
            jnp.sum(weights))
