"""Sliding-window layers (model.sliding_window, model.layer_types): the model, its decode cache, its
HF folder keys and the config checks."""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest
from model_helpers import greedy_without_cache

from bookft.attention import make_attention
from bookft.errors import ConfigError, ModelError
from bookft.model import ModelConfig, generate_greedy, init_model

CFG = ModelConfig(vocab_size=61, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4,
                  num_kv_heads=2, compute_dtype="float32", remat="none", init_std=0.3,
                  sliding_window=3, layer_types=("sliding_attention", "full_attention"))


def _ids(b=2, s=24, seed=0):
    return np.random.default_rng(seed).integers(0, 61, (b, s)).astype(np.int32)


def test_layer_windows_and_config_checks():
    assert CFG.layer_windows == (3, 0)
    assert dataclasses.replace(CFG, layer_types=()).layer_windows == (3, 3)  # Mistral style: all
    assert dataclasses.replace(CFG, sliding_window=0, layer_types=()).layer_windows == (0, 0)
    from bookft.config import from_dict

    base = {"num_layers": 2, "sliding_window": 4}
    with pytest.raises(ConfigError, match="layer_types: unknown type 'local'"):
        from_dict(ModelConfig, {**base, "layer_types": ["local", "full_attention"]}, "model")
    with pytest.raises(ConfigError, match="has 1 entries for 2 layers"):
        from_dict(ModelConfig, {**base, "layer_types": ["full_attention"]}, "model")
    with pytest.raises(ConfigError, match="sliding_window is 0"):
        from_dict(ModelConfig, {"layer_types": ["sliding_attention", "full_attention"]}, "model")


def test_windowed_model_blockwise_kernel_equals_reference_and_window_matters():
    model = init_model(CFG, seed=1)
    ids = _ids()
    pos = np.tile(np.arange(24, dtype=np.int32), (2, 1))
    seg = np.ones((2, 24), np.int32)
    ref = model(jnp.asarray(ids), jnp.asarray(pos), jnp.asarray(seg))  # dense reference attention
    attend = make_attention("local", "xla", None, block_q=8, block_kv=8, load_balanced=True)
    got = model(jnp.asarray(ids), jnp.asarray(pos), jnp.asarray(seg), attend=attend)
    np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-5, atol=1e-5)
    full = init_model(dataclasses.replace(CFG, sliding_window=0, layer_types=()), seed=1)
    other = full(jnp.asarray(ids), jnp.asarray(pos), jnp.asarray(seg))
    assert np.abs(np.asarray(other) - np.asarray(ref))[:, 3:].max() > 1e-3  # beyond the window
    np.testing.assert_allclose(np.asarray(other)[:, :3], np.asarray(ref)[:, :3], rtol=1e-5, atol=1e-6)


def test_windowed_greedy_decode_with_cache_equals_recompute():
    model = init_model(CFG, seed=2)
    ids = _ids(2, 9, seed=3)
    np.testing.assert_array_equal(generate_greedy(model, ids, 8), greedy_without_cache(model, ids, 8))


def test_window_keys_round_trip_through_hf_folder_and_export_refuses(tmp_path):
    from bookft.model.hf_io import load_hf, save_hf
    from bookft.train.export import export_checkpoint

    model = init_model(CFG, seed=0)
    save_hf(model, CFG, tmp_path / "hf")
    _, back = load_hf(tmp_path / "hf")
    assert back.sliding_window == 3 and back.layer_types == CFG.layer_types
    with pytest.raises(ModelError, match="sliding-window layers"):
        export_checkpoint(tmp_path / "hf", tmp_path / "out")
