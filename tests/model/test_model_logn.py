"""Log-n attention scaling (model.logn_attention): the scale, the logits it gives against a numpy
attention with per-document positions, identity within the base length, the decode cache, the HF
folder key and export's refusal, and the config check. (Every CP strategy: test_train_strategies.)"""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest
from model_helpers import greedy_without_cache

from bookft.errors import ConfigError, ModelError
from bookft.model import ModelConfig, forward_logits, generate_greedy, init_model
from bookft.model import layers as L
from bookft.model.rope import rope_cos_sin

CFG = ModelConfig(vocab_size=61, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4,
                  num_kv_heads=2, compute_dtype="float32", remat="none", init_std=0.3, logn_attention=4)


def _ids(b=2, s=24, seed=0):
    return np.random.default_rng(seed).integers(0, 61, (b, s)).astype(np.int32)


def _run(model, ids, pos, seg):
    return np.asarray(model(jnp.asarray(ids), jnp.asarray(pos), jnp.asarray(seg)))


def test_scale_is_one_within_the_base_and_log_ratio_past_it():
    got = np.asarray(L.logn_scale(jnp.asarray([[0, 1, 3, 4, 15, 63]]), 4))[0]
    np.testing.assert_allclose(got, [1, 1, 1, np.log(5) / np.log(4), 2.0, 3.0], rtol=1e-6)


def test_attention_logits_scaled_per_document_position():
    """One layer's attention with the knob equals a numpy softmax of logits scaled by
    max(1, log(p + 1) / log(4)), p counted from each document's start (two packed documents)."""
    cfg = dataclasses.replace(CFG, num_layers=1)
    model = init_model(cfg, seed=1)
    s, lens = 20, (12, 8)
    seg = np.repeat([1, 2], lens)[None].astype(np.int32)
    pos = np.concatenate([np.arange(n) for n in lens])[None].astype(np.int32)
    x = jnp.asarray(np.random.default_rng(2).normal(size=(1, s, 32)), jnp.float32)
    cos, sin = rope_cos_sin(cfg, jnp.asarray(pos))
    p = {k: v[0] for k, v in model.layers.arrays().items()}
    q, k, v = (np.asarray(t, np.float64) for t in L.qkv(p, x, cos, sin, dataclasses.replace(cfg, logn_attention=0)))
    scale = np.maximum(1.0, np.log(pos[0] + 1.0) / np.log(4.0))
    want = np.zeros_like(q)
    for h in range(4):
        logits = scale[:, None] * (q[0, :, h] @ k[0, :, h // 2].T) / np.sqrt(q.shape[-1])
        mask = np.tril(np.ones((s, s), bool)) & (seg[0][:, None] == seg[0][None, :])
        w = np.where(mask, np.exp(logits - np.where(mask, logits, -np.inf).max(-1, keepdims=True)), 0.0)
        want[0, :, h] = (w / w.sum(-1, keepdims=True)) @ v[0, :, h // 2]
    qs, ks, vs = L.qkv(p, x, cos, sin, cfg, positions=jnp.asarray(pos))
    got = np.asarray(L.reference_attention(qs, ks, vs, jnp.asarray(seg), jnp.asarray(pos)))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


def test_off_within_the_base_and_on_past_it():
    ids = _ids()
    pos = np.tile(np.arange(24, dtype=np.int32), (2, 1))
    seg = np.ones((2, 24), np.int32)
    plain = _run(init_model(dataclasses.replace(CFG, logn_attention=0), seed=1), ids, pos, seg)
    wide = _run(init_model(dataclasses.replace(CFG, logn_attention=24), seed=1), ids, pos, seg)
    np.testing.assert_array_equal(wide, plain)  # every position < 24: scale exactly 1
    short = _run(init_model(CFG, seed=1), ids, pos, seg)
    np.testing.assert_array_equal(short[:, :4], plain[:, :4])  # positions 0-3 see scale 1
    assert np.abs(short[:, 8:] - plain[:, 8:]).max() > 1e-3


def test_greedy_decode_with_cache_equals_recompute():
    model = init_model(CFG, seed=2)
    ids = _ids(2, 9, seed=3)
    np.testing.assert_array_equal(generate_greedy(model, ids, 8), greedy_without_cache(model, ids, 8))


def test_key_round_trips_through_hf_folder_and_export_refuses(tmp_path):
    from bookft.config import from_dict
    from bookft.model.hf_io import load_hf, save_hf
    from bookft.train.export import export_checkpoint

    model = init_model(CFG, seed=0)
    save_hf(model, CFG, tmp_path / "hf")
    back_model, back = load_hf(tmp_path / "hf")
    assert back.logn_attention == 4
    ids = _ids(1, 12, seed=4)
    np.testing.assert_allclose(forward_logits(back_model, ids), forward_logits(model, ids), rtol=1e-6, atol=1e-6)
    with pytest.raises(ModelError, match="logn_attention"):
        export_checkpoint(tmp_path / "hf", tmp_path / "out")
    for bad in (1, -3):
        with pytest.raises(ConfigError, match="logn_attention"):
            from_dict(ModelConfig, {"logn_attention": bad}, "model")
