import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bookft.errors import ConfigError, TrainError
from bookft.parallel.config import ParallelConfig
from bookft.parallel.mesh import make_mesh, resolve_axis_sizes
from bookft.train.config import Stage, TrainConfig
from bookft.train.data import Batches, shift_targets
from bookft.train.loss import chunked_cross_entropy, dense_cross_entropy, vocab_parallel_cross_entropy
from bookft.train.optimizer import make_schedule, stage_lr_scale


def loss_inputs(seed, b, s, d, v):
    """hidden [b,s,d], output embedding [v,d], targets, 0/1 weights."""
    rng = np.random.default_rng(seed)
    return (jnp.asarray(rng.normal(size=(b, s, d)), jnp.float32), jnp.asarray(rng.normal(size=(v, d)), jnp.float32),
            jnp.asarray(rng.integers(0, v, size=(b, s)), jnp.int32),
            jnp.asarray(rng.random((b, s)) > 0.3, jnp.float32))


@pytest.mark.parametrize("cp,chunk,z", [(1, 8, 0.0), (4, 3, 1e-3), (2, 64, 0.0)])
def test_chunked_loss_equals_dense_value_and_grad(cp, chunk, z):
    h, w_t, t, wt = loss_inputs(0, 2, 48, 8, 37)
    w_out = w_t.T

    def chunked(h, w_out):
        ce, zz, n = chunked_cross_entropy(lambda x: x @ w_out, h, t, wt, cp=cp, chunk=chunk, z_loss=z)
        return (ce + zz) / n

    def dense(h, w_out):
        ce, zz, n = dense_cross_entropy(h @ w_out, t, wt, z_loss=z)
        return (ce + zz) / n

    lc, gc = jax.value_and_grad(chunked, argnums=(0, 1))(h, w_out)
    ld, gd = jax.value_and_grad(dense, argnums=(0, 1))(h, w_out)
    np.testing.assert_allclose(lc, ld, rtol=1e-6)
    for a, b_ in zip(gc, gd, strict=True):
        np.testing.assert_allclose(a, b_, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("axes,z", [({"data": 1, "fsdp": 2, "context": 4}, 1e-3),
                                    ({"data": 1, "fsdp": 1, "context": 2, "context_ulysses": 4}, 0.0)])
def test_vocab_parallel_loss_equals_dense_value_and_grad(axes, z):
    mesh = make_mesh(ParallelConfig(mesh=axes), jax.devices()[:8])
    h, w, t, wt = loss_inputs(1, 2, 64, 8, 40)

    def parallel(h, w):
        ce, zz, n = vocab_parallel_cross_entropy(w, h, t, wt, mesh=mesh, chunk=4, z_loss=z)
        return (ce + zz) / n

    def dense(h, w):
        ce, zz, n = dense_cross_entropy(h @ w.T, t, wt, z_loss=z)
        return (ce + zz) / n

    lp, gp = jax.jit(jax.value_and_grad(parallel, argnums=(0, 1)))(h, w)
    ld, gd = jax.value_and_grad(dense, argnums=(0, 1))(h, w)
    np.testing.assert_allclose(lp, ld, rtol=1e-6)
    for a, b_ in zip(gp, gd, strict=True):
        np.testing.assert_allclose(a, b_, rtol=1e-5, atol=1e-6)


def test_shift_targets_masks_document_ends_and_padding():
    seq = {
        "input_ids": np.array([5, 6, 7, 8, 9, 0, 0], np.int32),
        "segment_ids": np.array([1, 1, 1, 2, 2, 0, 0], np.int32),
        "positions": np.array([0, 1, 2, 0, 1, 0, 0], np.int32),
        "loss_weights": np.array([1, 1, 0.5, 1, 1, 0, 0], np.float32),
    }
    out = shift_targets(seq)
    np.testing.assert_array_equal(out["targets"], [6, 7, 0, 9, 0, 0, 0])
    np.testing.assert_allclose(out["weights"], [1, 0.5, 0, 1, 0, 0, 0])


class FakeCorpus:
    path = "fake"

    def __init__(self, n=5, seq_len=16):
        self.n, self.seq_len = n, seq_len

    def __len__(self):
        return self.n

    def sequence(self, i):
        ids = np.arange(self.seq_len, dtype=np.int32) + 100 * i
        seg = np.ones(self.seq_len, np.int32)
        return {"input_ids": ids, "segment_ids": seg, "positions": np.arange(self.seq_len, dtype=np.int32),
                "loss_weights": np.ones(self.seq_len, np.float32)}


def test_batches_deterministic_epochs_and_rows():
    c = FakeCorpus()
    b = Batches(c, batch_size=2, seed=3)
    x1 = b.global_batch(4, 16)
    x2 = Batches(c, batch_size=2, seed=3).global_batch(4, 16)
    np.testing.assert_array_equal(x1["input_ids"], x2["input_ids"])
    # an epoch visits every sequence once
    seen = sorted(b.sequence_index(i) for i in range(5))
    assert seen == list(range(5))
    # cutting rows keeps tokens per step and the global shift across row ends
    rows = b.global_batch(0, 4)
    assert rows["input_ids"].shape == (1, 8, 4)
    full = b.global_batch(0, 16)
    np.testing.assert_array_equal(rows["targets"].reshape(2, 16), full["targets"].reshape(2, 16))
    with pytest.raises(TrainError, match="must divide"):
        b.global_batch(0, 5)


def test_batches_sharded_equals_numpy():
    c = FakeCorpus(seq_len=32)
    mesh = make_mesh(ParallelConfig(mesh={"data": 2, "fsdp": 1, "context": 4}))
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    b = Batches(c, batch_size=2, seed=0, load_balance_cp=4)
    sh = {f: NamedSharding(mesh, P(None, ("data", "fsdp"), "context")) for f in
          ("input_ids", "targets", "weights", "positions", "segment_ids")}
    got = b.global_batch(1, 32, shardings=sh)
    ref = b.global_batch(1, 32)
    for f in ref:
        np.testing.assert_array_equal(np.asarray(got[f]), ref[f])


class BooksCorpus(FakeCorpus):
    """Rows of packed documents of very different lengths, and padding at the end."""

    def sequence(self, i):
        lens = [70, 9, 33, 100, 20][i % 2:] + [0]
        lens[-1] = self.seq_len - sum(lens[:-1])
        seg = np.repeat(np.arange(1, len(lens) + 1), lens).astype(np.int32)
        seg[seg == len(lens)] = 0  # the tail is padding
        pos = np.concatenate([np.arange(n) for n in lens]).astype(np.int32)
        ids = np.arange(self.seq_len) + 1000 * i  # unique: identifies each token
        return {"input_ids": ids.astype(np.int32), "segment_ids": seg, "positions": pos,
                "loss_weights": np.ones(self.seq_len, np.float32)}


def test_batches_arrange_documents_for_load_balance():
    """cp > 1: rows are document-arranged then zig-zagged; every document keeps its tokens, targets,
    weights and positions in order, and the per-device causal work is balanced."""
    from bookft.attention.balance import unbalance

    c = BooksCorpus(seq_len=256)
    plain = Batches(c, batch_size=2, seed=0, shuffle=False).global_batch(0, 256)
    for arrange in (True, False):
        got = Batches(c, batch_size=2, seed=0, shuffle=False, load_balance_cp=4, balance_block=1,
                      arrange_documents=arrange).global_batch(0, 256)
        nat = {f: unbalance(v.reshape(2, 256), 4) for f, v in got.items()}
        for r in range(2):
            ref = {f: v.reshape(2, 256)[r] for f, v in plain.items()}
            for d in np.unique(ref["segment_ids"][ref["segment_ids"] > 0]):
                doc = ref["segment_ids"] == d
                new = np.unique(nat["segment_ids"][r][np.isin(nat["input_ids"][r], ref["input_ids"][doc])])
                assert len(new) == 1  # one document, one id
                mine = nat["segment_ids"][r] == new[0]
                for f in ("input_ids", "targets", "weights", "positions"):
                    np.testing.assert_array_equal(nat[f][r][mine], ref[f][doc])
            assert nat["weights"][r].sum() == ref["weights"].sum()
            # causal work per device (tokens x same-document earlier tokens), zig-zag chunks r, 7-r
            seg = nat["segment_ids"][r]
            cost = np.array([(seg[:t + 1] == seg[t]).sum() for t in range(256)]).reshape(8, 32).sum(1)
            dev = cost[:4] + cost[::-1][:4]
            if arrange:
                assert dev.max() / dev.mean() < 1.05, dev
            else:
                assert dev.max() / dev.mean() > 1.1, dev  # what zig-zag alone leaves


def test_data_arrange_modes():
    """data.arrange: swaps (default) / placement / none pick the arrangement; bad values are refused."""
    from bookft.attention.balance import arrange_documents, load_balance
    from bookft.train.config import load_run_config

    c = BooksCorpus(seq_len=256)
    row = shift_targets(c.sequence(0))
    for swaps in (True, False):
        got = Batches(c, batch_size=1, seed=0, shuffle=False, load_balance_cp=4, balance_block=16,
                      block_swaps=swaps).rows_for_step(0, 256)
        order, ids = arrange_documents(row["segment_ids"], 4, block=16, refine=swaps)
        np.testing.assert_array_equal(got["segment_ids"][0], load_balance(ids, 4, axis=0))
        np.testing.assert_array_equal(got["input_ids"][0], load_balance(row["input_ids"][order], 4, axis=0))
    assert load_run_config("configs/tiny-cpu.yaml", ["data.arrange=none"]).data.arrange == "none"
    with pytest.raises(ConfigError, match="arrange"):
        load_run_config("configs/tiny-cpu.yaml", ["data.arrange=zigzag"])


def test_mesh_sizes():
    assert resolve_axis_sizes({"data": 1, "fsdp": -1, "context": 2}, 8) == {"data": 1, "fsdp": 4, "context": 2}
    with pytest.raises(ConfigError, match="3 devices, but 8"):
        resolve_axis_sizes({"data": 1, "context": 3}, 8)
    with pytest.raises(ConfigError, match="unknown axis"):
        resolve_axis_sizes({"sequence": 8}, 8)


def test_curriculum_lr_scale_and_schedule():
    t = TrainConfig(steps=30, curriculum=(Stage(seq_len=4, steps=10, lr_scale=1.0),
                                          Stage(seq_len=8, steps=10, lr_scale=0.5)))
    assert float(stage_lr_scale(t, 3)) == 1.0
    assert float(stage_lr_scale(t, 12)) == 0.5
    assert float(stage_lr_scale(t, 25)) == 0.5
    sched = make_schedule(t.optimizer, t)
    assert float(sched(0)) == 0.0 and float(sched(10)) > 0


def test_distributed_detection():
    from bookft.parallel.distributed import maybe_initialize, wants_distributed

    assert not wants_distributed({})
    assert wants_distributed({"JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234"})
    assert wants_distributed({"TPU_WORKER_HOSTNAMES": "h0,h1,h2,h3"})
    assert not wants_distributed({"TPU_WORKER_HOSTNAMES": "localhost"})
    assert wants_distributed({"SLURM_NTASKS": "8"})
    assert maybe_initialize(None, env={}) is False and maybe_initialize(False, env={"SLURM_NTASKS": "8"}) is False
