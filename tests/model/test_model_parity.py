"""Parity with transformers: logits of our decoder vs the torch model, fp32, every family and rope type."""

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from hf_tiny import make_hf_model, torch_logits  # noqa: E402

from bookft.model import forward_logits, load_hf  # noqa: E402

ROPES = {
    "default": {},
    "linear": {"rope_type": "linear", "factor": 2.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 16},
}
CASES = [("llama", r) for r in ROPES] + [("mistral", "default"), ("qwen2", "yarn"), ("qwen3", "linear")]


def _inputs(seed: int, b: int = 2, s: int = 24, offset: int = 7):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 300, (b, s)).astype(np.int64)
    # global positions that do not start at 0 (a shard of a longer sequence)
    positions = (np.arange(s)[None] + offset + np.arange(b)[:, None] * 3).astype(np.int64)
    return ids, positions


@pytest.mark.parametrize("family,rope", CASES)
def test_logits_match_transformers(tmp_path, family, rope):
    # dynamic NTK only acts beyond max_position_embeddings: make the positions go past it
    max_pos = 16 if rope == "dynamic" else 64
    hf = make_hf_model(family, ROPES[rope], max_position_embeddings=max_pos, seed=len(family))
    hf.save_pretrained(tmp_path)
    ids, positions = _inputs(seed=1)
    expected = torch_logits(hf, ids, positions)
    model, config = load_hf(tmp_path)
    assert config.model_type == family and config.rope.type == rope
    assert config.tie_embeddings == hf.config.tie_word_embeddings
    got = forward_logits(model, ids.astype(np.int32), positions.astype(np.int32))
    assert got.dtype == np.float32 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)
    # the scaling must matter: the same weights with plain rope give different logits
    if rope != "default":
        import dataclasses

        plain = dataclasses.replace(config, rope=dataclasses.replace(config.rope, type="default"))
        model.config = plain
        other = forward_logits(model, ids.astype(np.int32), positions.astype(np.int32))
        assert np.abs(other - expected).max() > 1e-3
