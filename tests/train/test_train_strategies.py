"""Every context-parallel strategy gives the single-device loss and gradients (8 CPU devices)."""

import jax
import numpy as np
import pytest

from bookft.config import from_dict
from bookft.parallel.mesh import context_degree, make_mesh
from bookft.train.config import RunConfig
from bookft.train.data import FIELDS, Batches
from bookft.train.program import build_program
from bookft.train.step import StepSettings, batch_sharding, make_loss_and_grads

SEQ = 64


class PackedCorpus:
    """Two sequences of three packed documents whose boundaries cross every shard border."""

    path = "packed"
    seq_len = SEQ

    def __len__(self):
        return 2

    def sequence(self, i):
        r = np.random.default_rng(i)
        lens = [21, 29, 14]
        return {
            "input_ids": r.integers(1, 120, SEQ).astype(np.int32),
            "segment_ids": np.repeat([1, 2, 3], lens).astype(np.int32),
            "positions": np.concatenate([np.arange(n) for n in lens]).astype(np.int32),
            "loss_weights": np.where(r.random(SEQ) < 0.2, 0.05, 1.0).astype(np.float32),
        }


def loss_and_grads(strategy, mesh_axes, grad_accum=1, **model):
    cfg = from_dict(RunConfig, {
        "model": {"vocab_size": 128, "hidden_size": 32, "intermediate_size": 64, "num_layers": 1,
                  "num_heads": 4, "num_kv_heads": 2, "compute_dtype": "float32", "remat": "none", **model},
        "attention": {"strategy": strategy, "kernel": "xla", "block_q": 8, "block_kv": 8},
        "parallel": {"mesh": mesh_axes},
        "data": {"batch_size": 2},
        "train": {"loss_chunk": 8, "grad_accum": grad_accum},
    })
    n = int(np.prod(list(mesh_axes.values())))
    mesh = make_mesh(cfg.parallel, jax.devices()[:n])
    program = build_program(cfg, mesh)
    attend, used, graphdef = program.attend, program.strategy, program.graphdef
    state, frozen = program.init_state()
    params = state["params"]
    cp = context_degree(mesh)
    batches = Batches(PackedCorpus(), batch_size=2, seed=0, grad_accum=grad_accum,
                      load_balance_cp=cp if used != "local" and cp > 1 else 1)
    sh = batch_sharding(mesh)
    batch = batches.global_batch(0, SEQ, {f: sh for f in FIELDS})
    fn = jax.jit(make_loss_and_grads(graphdef, attend, mesh, StepSettings(loss_chunk=8, z_loss=0.0, on_nan="stop")))
    loss, grads, _ = fn(params, frozen, batch)
    return float(loss), jax.tree.map(np.asarray, grads)


@pytest.fixture(scope="module")
def reference():
    return loss_and_grads("local", {"data": 1, "fsdp": 1, "context": 1})


@pytest.mark.parametrize("strategy,mesh_axes", [
    ("ring", {"data": 1, "fsdp": 2, "context": 4}),
    ("allgather", {"data": 2, "fsdp": 1, "context": 4}),
    ("ulysses", {"data": 1, "fsdp": 1, "context": 4}),  # 2 KV heads < degree 4: replicated
    ("usp", {"data": 1, "fsdp": 2, "context": 2, "context_ulysses": 2}),
])
def test_strategy_matches_single_device(reference, strategy, mesh_axes):
    ref_loss, ref_grads = reference
    loss, grads = loss_and_grads(strategy, mesh_axes)
    assert abs(loss - ref_loss) <= 1e-5 * abs(ref_loss)
    for g, r in zip(jax.tree.leaves(grads), jax.tree.leaves(ref_grads), strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5 * float(np.abs(r).max()))


def test_grad_accumulation_is_exact(reference):
    ref_loss, ref_grads = reference
    loss, grads = loss_and_grads("local", {"data": 1, "fsdp": 1, "context": 1}, grad_accum=2)
    assert abs(loss - ref_loss) <= 1e-6 * abs(ref_loss)
    for g, r in zip(jax.tree.leaves(grads), jax.tree.leaves(ref_grads), strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6 * float(np.abs(r).max()))


@pytest.mark.parametrize("remat", ["full", "offload_input"])
def test_memory_levers_keep_loss_and_gradients(reference, remat):
    """Remat policies and the chunked MLP (here 4 steps of 4 tokens per device) change memory only."""
    ref_loss, ref_grads = reference
    loss, grads = loss_and_grads("ring", {"data": 1, "fsdp": 1, "context": 4}, remat=remat, mlp_chunk=4)
    assert abs(loss - ref_loss) <= 1e-5 * abs(ref_loss)
    for g, r in zip(jax.tree.leaves(grads), jax.tree.leaves(ref_grads), strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5 * float(np.abs(r).max()))
