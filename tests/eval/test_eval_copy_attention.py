"""experiments/copy_attention.py (the copying head's diagnosis): the recording attention is the reference
attention, its probabilities are causal rows that sum to 1, and each answer token's source is the
needle token it repeats."""

from __future__ import annotations

import numpy as np
import pytest
from eval_helpers import byte_bpe

model_mod = pytest.importorskip("bookft.model")

from bookft.eval.config import EvalConfig  # noqa: E402
from bookft.eval.haystack import build_haystack  # noqa: E402
from bookft.needles import make_task  # noqa: E402
from bookft.needles.placement import build_sample  # noqa: E402
from bookft.needles.tokenizer import ModelTokenizer  # noqa: E402
from experiments import copy_attention as ca  # noqa: E402

TINY = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
            max_position_embeddings=1024, compute_dtype="float32", remat="none", short_conv=4)


def test_recording_attention_and_sources():
    import jax.numpy as jnp

    tok = ModelTokenizer.load(byte_bpe())
    model = ca.one_device(model_mod.init_model(model_mod.ModelConfig(**TINY), seed=0))
    cfg = EvalConfig(phrasing="short")
    sample = build_sample(make_task(cfg, 0, 50.0), build_haystack(cfg.haystack, tok, 0, 300, cfg.corpus), tok, 300,
                          50.0, chat=False, add_bos=cfg.add_bos)
    ids = jnp.asarray(sample.input_ids, jnp.int32)[None]
    pos, seg = jnp.arange(ids.shape[1], dtype=jnp.int32)[None], jnp.ones_like(ids)
    store: list = []
    recorded, _ = model.run(ids, pos, seg, attend=ca.recording_attend(store))
    np.testing.assert_array_equal(np.asarray(recorded), np.asarray(model.run(ids, pos, seg)[0]))
    assert len(store) == TINY["num_layers"] and store[0].shape == (1, 4, ids.shape[1], ids.shape[1])
    np.testing.assert_allclose(store[0].sum(-1), 1.0, rtol=1e-5)
    assert np.all(np.triu(store[1][0, 2], 1) == 0)  # causal

    rows = ca.analyse(model, sample)
    a0, a1 = sample.answer_span
    n0, _ = sample.needle_spans[0]
    assert len(rows) == a1 - a0
    v0 = ca._find(sample.input_ids[n0:sample.needle_spans[0][1]], sample.input_ids[a0:a1])
    assert v0 is not None  # the short phrasing's answer is tokenized as in the needle
    for r in rows:
        h = r["heads"]["L0H0"]
        src = n0 + v0 + r["j"]
        assert sample.input_ids[src] == r["target"] and h["offset"] == h["argmax"] - src
        assert 0 <= h["p_src"] <= h["p_needle"] <= 1 + 1e-6
    s = ca.summarise([{"tokens": rows}])
    assert s["copy_head"] in rows[0]["heads"] and s["right"]["tokens"] + s["wrong"]["tokens"] == len(rows)
