"""Inference helpers: full-sequence logits and greedy decoding with a KV cache.

Design choices:
- `forward_logits` is the single-device reference: float32 compute, no remat, the dense reference
  attention; for tests, tools and parity checks against transformers.
- Greedy decoding is two steps, so a caller that lays the prompt out for context parallelism
  (eval: zig-zag order, sharded over the context axes) can run the prefill its own way:
  `prefill_cache(model, ids, positions, segment_ids, last, attend)` runs the prompt through the
  injected `attend` (the long part) and returns the logits of each row's last real token plus a
  `KVCache`; `decode_greedy` then emits one token per step, each attending densely over the cache
  (one query row, no kernel needed). `generate_greedy` composes the two for a plain prompt.
- The prompt may be padded (segment id 0) and stored in any order: `last` says where each row's
  last real token sits, and the cache's `valid` mask [B,T] (segment id > 0, then every written
  decode slot) is all the decode step needs, since attention over keys does not depend on their
  order. So the cache is never reordered or gathered.
- The cache grows block-wise: the stored sequence is cut into `cache_blocks` equal blocks (the
  context shards) and each gets `ceil(capacity / blocks)` empty slots appended, so a cache
  sharded along the sequence grows on every shard in place; decode token i goes to block
  i % blocks. Writes are a one-hot select (elementwise, so it stays sharded like the cache); on one
  device the cache is one buffer per layer, each written in place (`_local_step_fn`).
- Sharding is by logical names (`axes.constrain`, active only under `use_rules`): the cache is
  ("batch", "seq", "kv_heads", "head_dim") like the attention inputs. The model sees no mesh.
- Each jitted function is cached by the model's graphdef (and attend), so repeated calls with the
  same shapes do not recompile.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from bookft.host import to_host
from bookft.model import layers as L
from bookft.model import short_conv
from bookft.model.axes import constrain
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


class KVCache(NamedTuple):
    """Per-layer keys/values [L,B,T,Hkv,D], the keys a query may see [B,T] bool, decode slots [N]."""

    k: jax.Array
    v: jax.Array
    valid: jax.Array
    slots: np.ndarray  # host int: cache index of decode token i
    history: np.ndarray | None = None  # model.short_conv: each row's last W-1 prompt ids [B, W-1]
    positions: jax.Array | None = None  # [B,T] RoPE position of each slot (sliding-window layers)


def _conv_history(model: Decoder, input_ids, positions, segment_ids, last) -> np.ndarray | None:
    """The ids before each row's first new token, in text order ([B, W-1], -1 = none), for the
    short convolution's decode steps; found by (segment, position) so any prompt layout works."""
    width = model.config.short_conv
    if not width:
        return None
    ids, pos, seg = (np.asarray(x) for x in (input_ids, positions, segment_ids))
    out = np.full((ids.shape[0], width - 1), -1, np.int32)
    for r, t in enumerate(np.asarray(last)):
        here = np.flatnonzero((seg[r] == seg[r, t]) & (pos[r] > pos[r, t] - width) & (pos[r] <= pos[r, t]))
        got = ids[r, here[np.argsort(pos[r, here])]][-(width - 1):]
        out[r, out.shape[1] - len(got):] = got
    return out


CACHE_AXES = (None, "batch", "seq", "kv_heads", "head_dim")


def _grow(x, axis: int, blocks: int, extra: int):
    """Append `extra` slots to each of `blocks` equal blocks along `axis` (shard-local on a sharded axis)."""
    shape = x.shape
    split = shape[:axis] + (blocks, shape[axis] // blocks) + shape[axis + 1:]
    pad = [(0, 0)] * (len(shape) + 1)
    pad[axis + 1] = (0, extra)
    grown = jnp.pad(x.reshape(split), pad)
    return grown.reshape(shape[:axis] + (blocks * (shape[axis] // blocks + extra),) + shape[axis + 1:])


def decode_slots(stored_len: int, capacity: int, blocks: int) -> np.ndarray:
    """[capacity] cache index of decode token i: block i % blocks, after that block's prompt slots."""
    extra = -(-capacity // blocks)
    per = stored_len // blocks + extra
    i = np.arange(capacity)
    return ((i % blocks) * per + stored_len // blocks + i // blocks).astype(np.int32)


@functools.lru_cache(maxsize=32)
def _prefill_fn(graphdef, attend, blocks: int, extra: int):
    @jax.jit
    def prefill(state, ids, positions, segment_ids, last):
        model = nnx.merge(graphdef, state)
        hidden, (k, v) = model.run(ids, positions, segment_ids, attend, return_kv=True)
        # the last real token of each row, as a one-hot contraction over S: on a sequence-sharded
        # hidden this is a local product + all-reduce, never a gather of [B,S,D]
        pick = (jnp.arange(ids.shape[1])[None, :] == last[:, None]).astype(hidden.dtype)  # [B,S]
        h_last = jnp.einsum("bs,bse->be", pick, hidden)[:, None]  # [B,1,E]
        k, v = (constrain(_grow(x, 2, blocks, extra), CACHE_AXES) for x in (k, v))
        valid = constrain(_grow(segment_ids > 0, 1, blocks, extra), ("batch", "seq"))
        pos = constrain(_grow(positions, 1, blocks, extra), ("batch", "seq"))
        return model.logits(h_last)[:, 0], k, v, valid, pos  # [B,V], [L,B,T,Hkv,D] x2, [B,T] x2
    return prefill


def prefill_cache(model: Decoder, input_ids, positions, segment_ids, last, attend=None, *,
                  capacity: int, cache_blocks: int = 1):
    """Run the prompt; -> (logits [B,V] of each row's last real token, KVCache with room for
    `capacity` new tokens).

    input_ids/positions/segment_ids [B,S] in the order `attend` expects (segment id 0 = padding);
    last [B]: index in that order of each row's last real token. S must divide into cache_blocks.
    """
    s = input_ids.shape[1]
    if s % cache_blocks:
        raise ValueError(f"prefill length {s} does not split into {cache_blocks} cache blocks")
    extra = -(-max(capacity, 1) // cache_blocks)
    graphdef, state = nnx.split(model)
    logits, k, v, valid, pos = _prefill_fn(graphdef, attend, cache_blocks, extra)(
        state, input_ids, positions, segment_ids, jnp.asarray(last, jnp.int32))
    history = _conv_history(model, input_ids, positions, segment_ids, last)
    return logits, KVCache(k, v, valid, decode_slots(s, max(capacity, 1), cache_blocks), history, pos)


def _decode_attention(q, ck, cv, valid):
    """q [B,1,Hq,D] against cache ck/cv [B,T,Hkv,D], keys where valid [B,T] (sliding windows:
    the caller narrows valid per layer): _decode_attention_heads on the cache made head-major."""
    return _decode_attention_heads(q, jnp.swapaxes(ck, 1, 2), jnp.swapaxes(cv, 1, 2), valid)


def _decode_attention_heads(q, ck, cv, valid):
    """_decode_attention on a head-major cache ck/cv [B,Hkv,T,D]: both products then take the cache as
    it lies (batch and head leading, keys or values a plain matrix), where [B,T,Hkv,D] has XLA's CPU
    backend transpose the whole cache of every layer at every step."""
    b, _, hq, d = q.shape
    hkv = ck.shape[1]
    qg = q.reshape(b, hkv, hq // hkv, d)
    scores = jnp.einsum("bhgd,bhkd->bhgk", qg, ck, preferred_element_type=jnp.float32) / jnp.sqrt(d)
    probs = jax.nn.softmax(jnp.where(valid[:, None, None, :], scores, L.NEG_INF), axis=-1)
    out = jnp.einsum("bhgk,bhkd->bhgd", probs.astype(cv.dtype), cv, preferred_element_type=jnp.float32)
    return out.reshape(b, 1, hq, d).astype(q.dtype)


def _step_input(model: Decoder, token, position, history):
    """The decode step's input: the new tokens' embeddings [B,1,E] (through the short convolution's
    window when the model has one) and their RoPE cos/sin at `position` [B]."""
    config = model.config
    table = model.embed[...].astype(jnp.dtype(config.compute_dtype))
    if config.short_conv:
        x = short_conv.apply(table, model.conv[...], short_conv.step_taps(token, history))
    else:
        x = jnp.take(table, token[:, None], axis=0)
    return (x, *rope_cos_sin(config, position[:, None]))  # [B,1] positions


@functools.lru_cache(maxsize=32)
def _step_fn(graphdef):
    def step(state, cache_k, cache_v, valid, token, position, slot, history, cache_pos):
        model = nnx.merge(graphdef, state)
        config = model.config
        x, cos, sin = _step_input(model, token, position, history)
        here = jnp.arange(valid.shape[1]) == slot  # [T]
        valid = valid | here[None, :]
        cache_pos = jnp.where(here[None, :], position[:, None], cache_pos)
        windows = jnp.asarray([w or np.iinfo(np.int32).max for w in config.layer_windows], jnp.int32)

        def body(x, xs):
            p, ck, cv, window = xs
            q, k, v = L.qkv(p, x, cos, sin, config)
            ck = jnp.where(here[None, :, None, None], k.astype(ck.dtype), ck)
            cv = jnp.where(here[None, :, None, None], v.astype(cv.dtype), cv)
            seen = valid & (position[:, None] - cache_pos < window)  # sliding-window layers
            return L.finish(p, x, _decode_attention(q, ck, cv, seen), config), (ck, cv)

        x, (cache_k, cache_v) = jax.lax.scan(body, x, (model.layers.arrays(), cache_k, cache_v, windows))
        hidden = L.rms_norm(x, model.final_norm[...], config.rms_norm_eps)
        return model.logits(hidden)[:, 0], cache_k, cache_v, valid, cache_pos
    return jax.jit(step, donate_argnums=(1, 2, 3, 8))


@functools.lru_cache(maxsize=32)
def _local_step_fn(graphdef):
    """The decode step on one device: one head-major cache buffer per layer ([B,Hkv,T,D]), each
    written in place (dynamic_update_slice on a donated buffer) and read once by its layer's
    attention; the layers unrolled. The sharded step's one-hot select rewrites every layer's whole
    cache each token, and its layer scan slices and restacks it: three passes over the cache where
    this makes one."""
    def step(state, cache_k, cache_v, valid, token, position, slot, history, cache_pos):
        model = nnx.merge(graphdef, state)
        config = model.config
        x, cos, sin = _step_input(model, token, position, history)
        b = valid.shape[0]
        valid = jax.lax.dynamic_update_slice(valid, jnp.ones((b, 1), valid.dtype), (0, slot))
        cache_pos = jax.lax.dynamic_update_slice(cache_pos, position[:, None].astype(cache_pos.dtype), (0, slot))
        layers = model.layers.arrays()
        new_k, new_v = [], []
        for i, window in enumerate(config.layer_windows):
            p = jax.tree.map(lambda a, i=i: a[i], layers)
            q, k, v = L.qkv(p, x, cos, sin, config)
            ck = jax.lax.dynamic_update_slice(cache_k[i], jnp.swapaxes(k, 1, 2).astype(cache_k[i].dtype),
                                              (0, 0, slot, 0))
            cv = jax.lax.dynamic_update_slice(cache_v[i], jnp.swapaxes(v, 1, 2).astype(cache_v[i].dtype),
                                              (0, 0, slot, 0))
            seen = valid & (position[:, None] - cache_pos < (window or np.iinfo(np.int32).max))
            x = L.finish(p, x, _decode_attention_heads(q, ck, cv, seen), config)
            new_k.append(ck)
            new_v.append(cv)
        hidden = L.rms_norm(x, model.final_norm[...], config.rms_norm_eps)
        return model.logits(hidden)[:, 0], tuple(new_k), tuple(new_v), valid, cache_pos
    return jax.jit(step, donate_argnums=(1, 2, 3, 8))


def _one_device(x: jax.Array) -> bool:
    return len(getattr(x, "sharding", None).device_set) == 1 if hasattr(x, "sharding") else True


def decode_step_fn(graphdef, one_device: bool):
    """The jitted decode step: on one device per-layer head-major cache buffers (tuples of
    [B,Hkv,T,D]), else the sharded step over the stacked cache [L,B,T,Hkv,D]; the same arguments and
    results otherwise."""
    return _local_step_fn(graphdef) if one_device else _step_fn(graphdef)


def decode_greedy(model: Decoder, logits, cache: KVCache, lengths, max_new_tokens: int,
                  eos_id: int | None = None) -> np.ndarray:
    """Greedy tokens after a prefill: logits [B,V] of the last prompt token, lengths [B] = prompt
    lengths (the RoPE position of the first new token). -> [B,n] int32, n <= max_new_tokens."""
    b = logits.shape[0]
    if max_new_tokens > len(cache.slots):
        raise ValueError(f"max_new_tokens {max_new_tokens} exceeds the cache capacity {len(cache.slots)}")
    if max_new_tokens <= 0:
        return np.zeros((b, 0), np.int32)
    graphdef, state = nnx.split(model)
    lengths = np.asarray(lengths, np.int32)
    cache_k, cache_v, valid, history = cache.k, cache.v, cache.valid, cache.history
    one = _one_device(cache_k)
    step = decode_step_fn(graphdef, one)
    if one:  # per-layer head-major buffers written in place (_local_step_fn)
        cache_k, cache_v = (tuple(jnp.swapaxes(c[i], 1, 2) for i in range(c.shape[0])) for c in (cache_k, cache_v))
    cache_pos = cache.positions if cache.positions is not None else jnp.zeros(valid.shape, jnp.int32)
    done = np.zeros(b, bool)
    out = []
    for i in range(max_new_tokens):
        token = to_host(jnp.argmax(logits, axis=-1)).astype(np.int32)  # every host: the same tokens
        if eos_id is not None:
            token = np.where(done, eos_id, token)
            done |= token == eos_id
        out.append(token)
        if i == max_new_tokens - 1 or done.all():
            break
        logits, cache_k, cache_v, valid, cache_pos = step(
            state, cache_k, cache_v, valid, jnp.asarray(token), jnp.asarray(lengths + i),
            jnp.int32(cache.slots[i]), None if history is None else jnp.asarray(history), cache_pos)
        if history is not None:  # the short convolution's window moves on by the token just fed
            history = np.concatenate([history[:, 1:], token[:, None]], axis=1)
    return np.stack(out, axis=1).astype(np.int32)


def generate_greedy(model: Decoder, input_ids, max_new_tokens: int, attend=None,
                    eos_id: int | None = None, *, lengths=None) -> np.ndarray:
    """Greedy continuation of input_ids [B,S] -> new tokens [B,n] int32 (n <= max_new_tokens).

    lengths [B]: real prompt length of each row when rows are right-padded (default: all S).
    After a row emits `eos_id`, it is padded with eos_id; decoding stops early once every row has.
    """
    ids = np.asarray(input_ids, np.int32)
    b, s = ids.shape
    if max_new_tokens <= 0:
        return np.zeros((b, 0), np.int32)
    lengths = np.full(b, s, np.int32) if lengths is None else np.asarray(lengths, np.int32)
    if lengths.shape != (b,) or lengths.min() < 1 or lengths.max() > s:
        raise ValueError(f"lengths must be [B={b}] values in 1..{s}, got {lengths.tolist()}")
    seg = (np.arange(s)[None, :] < lengths[:, None]).astype(np.int32)
    positions = np.broadcast_to(np.arange(s, dtype=np.int32), (b, s)) * seg
    logits, cache = prefill_cache(model, ids, jnp.asarray(positions), jnp.asarray(seg), lengths - 1,
                                  attend, capacity=max_new_tokens)
    return decode_greedy(model, logits, cache, lengths, max_new_tokens, eos_id)
