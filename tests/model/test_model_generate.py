"""Greedy decoding with a KV cache equals greedy decoding by full recomputation."""

import numpy as np
from model_helpers import greedy_without_cache

from bookft.model import ModelConfig, RopeConfig, generate_greedy, init_model
from bookft.model.layers import reference_attention

CONFIG = ModelConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4,
                     num_kv_heads=2, compute_dtype="float32", remat="none", init_std=0.3,
                     rope=RopeConfig(type="llama3", factor=4.0, original_max_position_embeddings=8))


def test_kv_cache_greedy_equals_recompute():
    model = init_model(CONFIG, seed=1)
    ids = np.random.default_rng(0).integers(0, 97, (2, 9)).astype(np.int32)
    expected = greedy_without_cache(model, ids, 8)
    got = generate_greedy(model, ids, 8)
    assert got.shape == (2, 8) and got.dtype == np.int32
    np.testing.assert_array_equal(got, expected)
    assert len(set(got[0].tolist())) > 1  # a non-degenerate continuation


def test_eos_stops_and_pads_and_attend_is_injected():
    model = init_model(CONFIG, seed=2)  # same shapes as above: the decode step is not recompiled
    ids = np.random.default_rng(1).integers(0, 97, (2, 9)).astype(np.int32)
    calls = []

    def attend(q, k, v, segment_ids, positions):
        calls.append(q.shape)  # recorded at trace time
        return reference_attention(q, k, v, segment_ids, positions)

    full = generate_greedy(model, ids, 6, attend=attend)
    assert calls and calls[0][1] == 9  # the prefill ran through the injected attend
    eos = int(full[0, 2])
    got = generate_greedy(model, ids, 6, attend=attend, eos_id=eos)
    first = [int(np.argmax(row == eos)) if (row == eos).any() else None for row in full]
    for r, stop in enumerate(first):
        if stop is None:
            np.testing.assert_array_equal(got[r], full[r, : got.shape[1]])
        else:
            np.testing.assert_array_equal(got[r, : stop + 1], full[r, : stop + 1])
            assert (got[r, stop:] == eos).all()


def test_ragged_rows_and_blockwise_cache_equal_unpadded():
    """Right-padded rows (lengths) and a cache grown per block (cache_blocks, as a sequence-sharded
    cache grows on each shard) decode exactly like each prompt alone."""
    from bookft.model.generate import decode_greedy, prefill_cache

    model = init_model(CONFIG, seed=1)
    rng = np.random.default_rng(2)
    prompts = [rng.integers(0, 97, n).astype(np.int32) for n in (7, 9)]
    alone = np.concatenate([generate_greedy(model, p[None], 5) for p in prompts])
    ids = np.zeros((2, 10), np.int32)
    seg = np.zeros((2, 10), np.int32)
    for i, p in enumerate(prompts):
        ids[i, :len(p)], seg[i, :len(p)] = p, 1
    lengths = np.array([7, 9])
    np.testing.assert_array_equal(generate_greedy(model, ids[:, :9], 5, lengths=lengths), alone)
    pos = np.arange(10, dtype=np.int32)[None] * seg
    logits, cache = prefill_cache(model, ids, pos, seg, lengths - 1, capacity=8, cache_blocks=2)
    assert cache.k.shape[2] == 10 + 8 and list(cache.slots[:4]) == [5, 14, 6, 15]  # block i % 2
    np.testing.assert_array_equal(decode_greedy(model, logits, cache, lengths, 5), alone)


def test_the_one_device_step_equals_the_sharded_step():
    """The decode step on one device (per-layer buffers written in place) returns the sharded step's
    logits, cache, mask and positions, on a cache with holes and a sliding-window-free model."""
    import jax.numpy as jnp
    from flax import nnx

    from bookft.model.generate import decode_step_fn

    model = init_model(CONFIG, seed=3)
    graphdef, state = nnx.split(model)
    rng = np.random.default_rng(0)
    b, t = 2, 24
    shape = (CONFIG.num_layers, b, t, CONFIG.num_kv_heads, CONFIG.hidden_size // CONFIG.num_heads)
    k0, v0 = (rng.normal(size=shape).astype(np.float32) for _ in range(2))
    valid = np.ones((b, t), bool)
    valid[:, 15:] = False
    valid[1, 3:6] = False  # padding inside the prompt
    pos = np.tile(np.arange(t), (b, 1)).astype(np.int32)
    args = (jnp.asarray([5, 7], jnp.int32), jnp.asarray([15, 12], jnp.int32), jnp.int32(15), None)
    got = {}
    for one in (False, True):
        k, v = jnp.asarray(k0), jnp.asarray(v0)
        if one:  # per-layer head-major buffers [B,Hkv,T,D]
            k, v = (tuple(jnp.swapaxes(x, 1, 2) for x in c) for c in (k, v))
        logits, k, v, va, po = decode_step_fn(graphdef, one)(state, k, v, jnp.asarray(valid), *args, jnp.asarray(pos))
        if one:
            k, v = (jnp.stack([jnp.swapaxes(x, 1, 2) for x in c]) for c in (k, v))
        got[one] = [np.asarray(logits), np.asarray(k), np.asarray(v), np.asarray(va), np.asarray(po)]
    for a, b_ in zip(got[False], got[True], strict=True):
        np.testing.assert_allclose(a, b_, atol=1e-5)
