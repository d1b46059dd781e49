"""Both scorers through context parallelism: the eval drivers prefill and score with ring / usp
attention over simulated CPU meshes (zig-zag order, sequence-sharded, params placed with their
train shardings) and give the single-device results; bucketed lengths compile once and padding
changes nothing."""

from __future__ import annotations

import jax
import numpy as np
import pytest

model_mod = pytest.importorskip("bookft.model")

from bookft.attention.config import AttentionConfig  # noqa: E402
from bookft.eval.drivers import attention_and_layout, model_generate_fn, model_logits_fn  # noqa: E402
from bookft.eval.layout import SeqLayout, bucket_length  # noqa: E402
from bookft.parallel.config import ParallelConfig  # noqa: E402
from bookft.parallel.mesh import make_mesh  # noqa: E402

# peaky logits (init_std 0.3), so greedy argmaxes are far apart and float order cannot flip them;
# with the short convolution (the tiny CPU preset has it), whose taps are found by (segment,
# position) in zig-zag order and whose decode history comes from the stored-order prompt
TINY = model_mod.ModelConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4,
                             num_kv_heads=2, max_position_embeddings=512, compute_dtype="float32",
                             remat="none", init_std=0.3, short_conv=4)


PROMPT_LENGTHS = (37, 45, 41)


@pytest.fixture(scope="module")
def model():
    m = model_mod.init_model(TINY, seed=3)
    m.conv[...] = 0.5 * np.random.default_rng(4).standard_normal(m.conv[...].shape).astype(np.float32)
    return m  # the conv is zero-initialised; non-zero taps make it matter


def _prompts(lengths, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, TINY.vocab_size, n).astype(np.int32) for n in lengths]


def _padded(prompts, s):
    ids, seg = np.zeros((len(prompts), s), np.int32), np.zeros((len(prompts), s), np.int32)
    for i, p in enumerate(prompts):
        ids[i, :len(p)], seg[i, :len(p)] = p, 1
    return ids, seg


@pytest.fixture(scope="module")
def reference(model):
    """Single device, dense reference attention: greedy tokens (one right-padded batch with
    lengths; test_single_device_padding_changes_nothing ties it to unpadded prompts) and logits."""
    prompts = _prompts(PROMPT_LENGTHS)
    ids, _ = _padded(prompts, max(PROMPT_LENGTHS))
    tokens = model_mod.generate_greedy(model, ids, 6, lengths=PROMPT_LENGTHS)
    return prompts, tokens, model_mod.forward_logits(model, ids)  # causal: later padding is unseen


def test_bucket_length():
    assert [bucket_length(n, 4) for n in (1, 32, 33, 40, 41, 45, 48, 63, 64, 700, 1 << 20)] == \
        [1, 32, 40, 40, 48, 48, 48, 64, 64, 768, 1 << 20]
    assert bucket_length(700, 0) == 700 and bucket_length(700, 1) == 1024
    assert SeqLayout(per_octave=4).length(700) == 768


@pytest.mark.parametrize("mesh_axes,strategy,n_dev", [
    ({"data": 1, "fsdp": 2, "context": 4}, "ring", 8),  # 3 prompts -> rows padded to 4 over fsdp=2
    ({"data": 1, "fsdp": 1, "context": 2, "context_ulysses": 2}, "usp", 4),
])
def test_cp_scorers_equal_single_device(model, reference, mesh_axes, strategy, n_dev):
    mesh = make_mesh(ParallelConfig(mesh=mesh_axes), jax.devices()[:n_dev])
    att = AttentionConfig(strategy=strategy, kernel="xla", block_q=16, block_kv=16)
    attend, layout = attention_and_layout(att, mesh, per_octave=4)
    assert layout.cp == 4 and layout.balanced and layout.rule.chunks == 8
    # bucket, then whole chunks (8) and blocks (16) per chunk past one block
    assert [layout.length(n) for n in (7, 45, 128, 129, 250)] == [8, 48, 128, 256, 256]
    traces = []

    def counting(q, k, v, seg, pos):
        traces.append(q.shape)  # at trace time only
        return attend(q, k, v, seg, pos)

    # greedy generation: 3 prompts of different lengths batched together, bucketed to 48
    prompts, want, ref_logits = reference
    gen = model_generate_fn(model, attend=counting, layout=layout)
    got = gen(prompts, 6)
    np.testing.assert_array_equal(got, want)
    assert len({tuple(r) for r in want.tolist()}) > 1  # not a degenerate continuation
    assert traces and traces[0][1] == 48  # S = bucket(45) = 48: 8 chunks of 6 tokens
    n_traces = len(traces)
    got2 = gen(_prompts((42, 47, 33), seed=1), 6)  # other lengths, same bucket: no new trace
    assert len(traces) == n_traces and got2.shape == (3, 6)

    # teacher-forced: the window logits of a padded CP batch equal the unpadded reference
    ids, seg = _padded(prompts, 48)
    pos = np.arange(48, dtype=np.int32)[None] * seg
    tf = model_logits_fn(model, attend=attend, tail=8, layout=layout)
    logits, start = tf(ids, pos, seg)
    assert start == 45 - 8 and logits.shape == (3, 8, TINY.vocab_size)
    for i, p in enumerate(prompts):
        n = len(p)
        np.testing.assert_allclose(logits[i, : n - start], ref_logits[i, start:n], atol=2e-4, rtol=2e-4)
    _, start2 = tf(*_padded(prompts[:1] * 3, 48)[:1], pos, _padded(prompts[:1] * 3, 48)[1])
    assert start2 == 37 - 8 and tf.jitted._cache_size() == 1  # the window is traced: one program


def test_params_placed_with_train_shardings(model):
    mesh = make_mesh(ParallelConfig(mesh={"data": 1, "fsdp": 1, "context": 4}), jax.devices()[:4])
    layout = SeqLayout(mesh=mesh, balanced=True)
    placed = layout.place(model)
    emb = placed.embed[...]
    assert emb.sharding.spec == jax.sharding.PartitionSpec(None, "context")  # FSDP over the context axis
    assert len(emb.addressable_shards) == 4 and emb.addressable_shards[0].data.shape == (97, 8)
    np.testing.assert_array_equal(np.asarray(emb), np.asarray(model.embed[...]))
    assert not hasattr(model.embed[...].sharding, "spec")  # the caller's model is left as it was


def test_single_device_padding_changes_nothing(model, reference):
    """Unpadded prompts one by one == the right-padded ragged batch == the bucketed eval driver."""
    prompts, ragged, _ = reference
    alone = np.concatenate([model_mod.generate_greedy(model, p[None], 6) for p in prompts])
    np.testing.assert_array_equal(ragged, alone)
    np.testing.assert_array_equal(model_generate_fn(model, layout=SeqLayout(per_octave=4))(prompts, 6), alone)
