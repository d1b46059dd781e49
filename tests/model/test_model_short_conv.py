"""The short convolution (model.short_conv) is exact in any token layout and never crosses documents."""

import jax.numpy as jnp
import numpy as np
import pytest

from bookft.attention import load_balance, unbalance
from bookft.model import short_conv
from bookft.model.config import ModelConfig
from bookft.model.decoder import init_model


def _reference(ids, seg, weight, table):
    """Plain-order numpy conv: x_t + sum_k x_{t-k} @ W_k within the segment."""
    b, s = ids.shape
    out = table[ids].copy()
    for r in range(b):
        for t in range(s):
            if seg[r, t] == 0:
                continue
            for k in range(weight.shape[0]):
                if t - k >= 0 and seg[r, t - k] == seg[r, t]:
                    out[r, t] += table[ids[r, t - k]] @ weight[k]
    return out


def _packed(b=2, s=32, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 50, (b, s)).astype(np.int32)
    seg = np.zeros((b, s), np.int32)
    pos = np.zeros((b, s), np.int32)
    for r in range(b):
        cuts = sorted(rng.choice(np.arange(1, s - 4), 2, replace=False)) + [s - 3]  # 3 padding tokens
        start = 0
        for d, end in enumerate(cuts, 1):
            seg[r, start:end] = d
            pos[r, start:end] = np.arange(end - start) + (5 if d == 1 else 0)  # a document cut mid-way
            start = end
    return ids, pos, seg


def test_short_conv_exact_in_zigzag_order():
    ids, pos, seg = _packed()
    rng = np.random.default_rng(1)
    table = rng.standard_normal((50, 6)).astype(np.float32)
    weight = rng.standard_normal((4, 6, 6)).astype(np.float32)
    want = _reference(ids, seg, weight, table)
    for cp in (1, 2, 4):
        lb = [np.asarray(load_balance(jnp.asarray(x), cp)) for x in (ids, pos, seg)]
        taps = short_conv.earlier_ids(*map(jnp.asarray, lb), width=4)
        got = short_conv.apply(jnp.asarray(table), jnp.asarray(weight), taps)
        got = np.asarray(unbalance(got, cp))
        mask = seg > 0
        np.testing.assert_allclose(got[mask], want[mask], rtol=1e-5, atol=1e-5)


def test_short_conv_decode_history_matches_full_sequence():
    ids = np.array([[3, 9, 4, 4, 7, 1, 8]], np.int32)
    seg = jnp.ones((1, 7), jnp.int32)
    taps_full = np.asarray(short_conv.earlier_ids(jnp.asarray(ids), jnp.arange(7)[None], seg, 4))
    from bookft.model.generate import _conv_history

    model = init_model(ModelConfig(vocab_size=16, hidden_size=8, intermediate_size=16, num_heads=2,
                                   num_kv_heads=2, short_conv=4))
    pos, seg = np.arange(6)[None], np.ones((1, 6), np.int32)
    hist = _conv_history(model, ids[:, :6], pos, seg, np.array([5]))  # the last token is "decoded"
    step = np.asarray(short_conv.step_taps(jnp.asarray(ids[:, 6]), jnp.asarray(hist)))
    np.testing.assert_array_equal(step[:, 0, 0], taps_full[:, 0, 6])


def test_short_conv_model_starts_as_plain_llama():
    base = ModelConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_heads=4, num_kv_heads=2,
                       compute_dtype="float32", remat="none")
    conv = ModelConfig(**{**base.__dict__, "short_conv": 8})
    ids = jnp.asarray(np.random.default_rng(0).integers(0, 64, (2, 16)), jnp.int32)
    pos = jnp.broadcast_to(jnp.arange(16), (2, 16))
    m0, m1 = init_model(base), init_model(conv)
    assert m1.conv[...].shape == (8, 32, 32) and not np.any(np.asarray(m1.conv[...]))
    h1 = m1(ids, pos)
    m1.embed[...], m1.lm_head[...] = m0.embed[...], m0.lm_head[...]
    # zero taps: the embeddings pass through unchanged, whatever the other weights are
    x0 = jnp.take(m1.embed[...], ids, axis=0)
    taps = short_conv.earlier_ids(ids, pos, jnp.ones_like(ids), 8)
    np.testing.assert_allclose(np.asarray(short_conv.apply(m1.embed[...], m1.conv[...], taps)), np.asarray(x0))
    assert np.isfinite(np.asarray(h1)).all()


def test_short_conv_round_trips_through_bookft_hf_folder_and_export_refuses(tmp_path):
    from bookft.errors import ModelError
    from bookft.model.hf_io import load_hf, save_hf
    from bookft.train.export import export_checkpoint

    cfg = ModelConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_heads=4, num_kv_heads=2,
                      compute_dtype="float32", remat="none", short_conv=4)
    m = init_model(cfg)
    m.conv[...] = jnp.asarray(np.random.default_rng(0).standard_normal(m.conv[...].shape), jnp.float32)
    save_hf(m, cfg, tmp_path / "hf")
    back, cfg2 = load_hf(tmp_path / "hf")
    assert cfg2.short_conv == 4
    np.testing.assert_array_equal(np.asarray(back.conv[...]), np.asarray(m.conv[...]))
    with pytest.raises(ModelError, match="short convolution"):
        export_checkpoint(tmp_path / "hf", tmp_path / "out")


def test_short_conv_greedy_decode_matches_full_forward():
    from bookft.model import forward_logits, generate_greedy

    cfg = ModelConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_heads=4, num_kv_heads=2,
                      compute_dtype="float32", remat="none", short_conv=4)
    m = init_model(cfg, seed=1)
    m.conv[...] = jnp.asarray(np.random.default_rng(0).standard_normal(m.conv[...].shape) * 0.3, jnp.float32)
    assert m.conv[...].shape == (4, 32, 32)
    prompt = np.random.default_rng(2).integers(0, 64, (2, 9)).astype(np.int32)
    new = generate_greedy(m, prompt, 5)
    seq = prompt
    for i in range(5):  # the same tokens by re-running the whole sequence each time
        nxt = forward_logits(m, seq)[:, -1].argmax(-1).astype(np.int32)
        np.testing.assert_array_equal(new[:, i], nxt)
        seq = np.concatenate([seq, nxt[:, None]], axis=1)

