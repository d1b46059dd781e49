"""Inference helpers: full-sequence logits and greedy decoding with a KV cache.

Design choices:
- `forward_logits` is the single-device reference: float32 compute, no remat, the dense reference
  attention; for tests, tools and parity checks against transformers.
- `generate_greedy` prefills the prompt with the injected `attend` (the long part; a context-
  parallel attend works here) and keeps per-layer K/V in a cache [L, B, T, Hkv, D]; each new token
  then attends densely over the cache (one query row, so no kernel is needed). The prompt is one
  unpadded block per row (positions 0..S-1).
- Each jitted function is cached by the model's graphdef, so repeated calls do not recompile.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from bookft.model import layers as L
from bookft.model.decoder import Decoder
from bookft.model.rope import rope_cos_sin


def _reference_copy(model: Decoder) -> Decoder:
    graphdef, state = nnx.split(model)
    copy = nnx.merge(graphdef, state)
    copy.config = dataclasses.replace(model.config, compute_dtype="float32", remat="none")
    return copy


@functools.lru_cache(maxsize=32)
def _logits_fn(graphdef):
    @jax.jit
    def run(state, ids, positions):
        model = nnx.merge(graphdef, state)
        return model.logits(model(ids, positions))
    return run


def forward_logits(model: Decoder, input_ids, positions=None) -> np.ndarray:
    """input_ids [B,S] -> logits [B,S,V] numpy float32 (fp32 compute, reference attention)."""
    ids = jnp.asarray(input_ids, jnp.int32)
    if positions is None:
        positions = jnp.broadcast_to(jnp.arange(ids.shape[1], dtype=jnp.int32), ids.shape)
    graphdef, state = nnx.split(_reference_copy(model))
    return np.asarray(_logits_fn(graphdef)(state, ids, jnp.asarray(positions, jnp.int32)))


@functools.lru_cache(maxsize=32)
def _prefill_fn(graphdef, attend):
    @jax.jit
    def prefill(state, ids, positions):
        model = nnx.merge(graphdef, state)
        hidden, (k, v) = model.run(ids, positions, None, attend, return_kv=True)
        return model.logits(hidden[:, -1:])[:, 0], k, v  # [B,V], [L,B,S,Hkv,D] x2
    return prefill


def _decode_attention(q, ck, cv, t):
    """q [B,1,Hq,D] against cache ck/cv [B,T,Hkv,D], keys at index <= t."""
    b, _, hq, d = q.shape
    hkv = ck.shape[2]
    qg = q.reshape(b, 1, hkv, hq // hkv, d)
    scores = jnp.einsum("bqhgd,bkhd->bhgqk", qg, ck, preferred_element_type=jnp.float32) / jnp.sqrt(d)
    mask = jnp.arange(ck.shape[1]) <= t
    probs = jax.nn.softmax(jnp.where(mask, scores, L.NEG_INF), axis=-1)
    out = jnp.einsum("bhgqk,bkhd->bqhgd", probs.astype(cv.dtype), cv, preferred_element_type=jnp.float32)
    return out.reshape(b, 1, hq, d).astype(q.dtype)


@functools.lru_cache(maxsize=32)
def _step_fn(graphdef):
    def step(state, cache_k, cache_v, token, t):
        model = nnx.merge(graphdef, state)
        config = model.config
        x = jnp.take(model.embed[...], token[:, None], axis=0).astype(jnp.dtype(config.compute_dtype))
        positions = jnp.full(token[:, None].shape, t, jnp.int32)
        cos, sin = rope_cos_sin(config, positions)

        def body(x, xs):
            p, ck, cv = xs
            q, k, v = L.qkv(p, x, cos, sin, config)
            ck = jax.lax.dynamic_update_slice(ck, k.astype(ck.dtype), (0, t, 0, 0))
            cv = jax.lax.dynamic_update_slice(cv, v.astype(cv.dtype), (0, t, 0, 0))
            return L.finish(p, x, _decode_attention(q, ck, cv, t), config), (ck, cv)

        x, (cache_k, cache_v) = jax.lax.scan(body, x, (model.layers.arrays(), cache_k, cache_v))
        hidden = L.rms_norm(x, model.final_norm[...], config.rms_norm_eps)
        return model.logits(hidden)[:, 0], cache_k, cache_v
    return jax.jit(step, donate_argnums=(1, 2))


def generate_greedy(model: Decoder, input_ids, max_new_tokens: int, attend=None,
                    eos_id: int | None = None) -> np.ndarray:
    """Greedy continuation of input_ids [B,S] -> new tokens [B,n] int32 (n <= max_new_tokens).

    After a row emits `eos_id`, it is padded with eos_id; decoding stops early once every row has.
    """
    ids = jnp.asarray(input_ids, jnp.int32)
    b, s = ids.shape
    if max_new_tokens <= 0:
        return np.zeros((b, 0), np.int32)
    graphdef, state = nnx.split(model)
    positions = jnp.broadcast_to(jnp.arange(s, dtype=jnp.int32), (b, s))
    logits, k, v = _prefill_fn(graphdef, attend)(state, ids, positions)
    total = s + max_new_tokens
    pad = [(0, 0), (0, 0), (0, total - s), (0, 0), (0, 0)]
    cache_k, cache_v = jnp.pad(k, pad), jnp.pad(v, pad)
    step = _step_fn(graphdef)
    done = np.zeros(b, bool)
    out = []
    for i in range(max_new_tokens):
        token = np.asarray(jnp.argmax(logits, axis=-1)).astype(np.int32)
        if eos_id is not None:
            token = np.where(done, eos_id, token)
            done |= token == eos_id
        out.append(token)
        if i == max_new_tokens - 1 or done.all():
            break
        logits, cache_k, cache_v = step(state, cache_k, cache_v, jnp.asarray(token), jnp.int32(s + i))
    return np.stack(out, axis=1).astype(np.int32)
