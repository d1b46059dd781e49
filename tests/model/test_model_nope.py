"""NoPE layers (model.nope_layers): content-only attention in the chosen layers, the decode cache, the
HF folder key and export's refusal, and the config checks."""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest
from model_helpers import greedy_without_cache

from bookft.attention import make_attention
from bookft.errors import ConfigError, ModelError
from bookft.model import ModelConfig, forward_logits, generate_greedy, init_model

CFG = ModelConfig(vocab_size=61, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4,
                  num_kv_heads=2, compute_dtype="float32", remat="none", init_std=0.3, nope_layers=(0,))


def _run(model, ids, offset=0, attend=None):
    b, s = ids.shape
    pos = np.tile(np.arange(offset, offset + s, dtype=np.int32), (b, 1))
    return np.asarray(model(jnp.asarray(ids), jnp.asarray(pos), jnp.asarray(np.ones((b, s), np.int32)),
                            attend=attend))


def test_nope_layers_are_position_free_and_the_rest_keep_rope():
    ids = np.random.default_rng(0).integers(0, 61, (2, 24)).astype(np.int32)
    perm = ids.copy()
    perm[:, :-1] = ids[:, :-1][:, np.random.default_rng(1).permutation(23)]
    one = dataclasses.replace(CFG, num_layers=1)
    # one NoPE layer: the last token's attention is over the set of earlier tokens, so their order
    # does not change its logits; with RoPE it does
    nope = init_model(one, seed=1)
    np.testing.assert_allclose(_run(nope, perm)[:, -1], _run(nope, ids)[:, -1], rtol=1e-5, atol=1e-5)
    rope = init_model(dataclasses.replace(one, nope_layers=()), seed=1)
    assert np.abs(_run(rope, perm)[:, -1] - _run(rope, ids)[:, -1]).max() > 1e-3
    assert CFG.layer_rope == (False, True) and dataclasses.replace(CFG, nope_layers=()).layer_rope == (True, True)
    # mixed layers (unrolled): the blockwise kernel gives the reference forward
    mixed = init_model(CFG, seed=1)
    attend = make_attention("local", "xla", None, block_q=8, block_kv=8, load_balanced=False)
    np.testing.assert_allclose(_run(mixed, ids, attend=attend), _run(mixed, ids), rtol=1e-5, atol=1e-5)
    # every layer NoPE: one scanned body, equal to the unrolled one (float32: XLA fuses the two programs
    # differently; on an AVX-512 host 2 of 1,536 logits differ by 1.9e-6, so atol is 1e-5 as above)
    every = init_model(dataclasses.replace(CFG, nope_layers=(0, 1)), seed=1)
    unrolled = init_model(dataclasses.replace(CFG, nope_layers=(0, 1), scan_layers=False), seed=1)
    np.testing.assert_allclose(_run(unrolled, ids), _run(every, ids), rtol=1e-5, atol=1e-5)


def test_nope_greedy_decode_with_cache_equals_recompute():
    model = init_model(CFG, seed=2)
    ids = np.random.default_rng(3).integers(0, 61, (2, 9)).astype(np.int32)
    np.testing.assert_array_equal(generate_greedy(model, ids, 8), greedy_without_cache(model, ids, 8))


def test_nope_key_round_trips_through_hf_folder_and_export_refuses(tmp_path):
    from bookft.config import from_dict
    from bookft.model.hf_io import load_hf, save_hf
    from bookft.train.export import export_checkpoint

    model = init_model(CFG, seed=0)
    save_hf(model, CFG, tmp_path / "hf")
    back_model, back = load_hf(tmp_path / "hf")
    assert back.nope_layers == (0,)
    ids = np.random.default_rng(4).integers(0, 61, (1, 12)).astype(np.int32)
    np.testing.assert_allclose(forward_logits(back_model, ids), forward_logits(model, ids), rtol=1e-6, atol=1e-6)
    with pytest.raises(ModelError, match="without RoPE"):
        export_checkpoint(tmp_path / "hf", tmp_path / "out")
    for bad in ([2], [0, 0], [-1]):
        with pytest.raises(ConfigError, match="nope_layers"):
            from_dict(ModelConfig, {"num_layers": 2, "nope_layers": bad}, "model")
