"""bf16 compute with float32 master weights and a float32 loss: over 200 steps of the tiny preset's
model and optimizer (configs/tiny-cpu.yaml; one device, one 256-token row per step from a synthetic
corpus as the shortened data path: about 15 s of CPU per run), the bf16 run's final loss (the mean
of its last 10 steps) is within 2% of the float32 run's, and the
bf16 run really computes in bf16 while its parameters and loss stay float32."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bookft.parallel.mesh import make_mesh
from bookft.train.config import load_run_config
from bookft.train.data import FIELDS, Batches
from bookft.train.program import build_program
from bookft.train.step import batch_sharding

SEQ, STEPS = 256, 200


class MotifCorpus:
    """Rows of packed documents, each a random 12-token motif repeated: learnable in 200 steps
    (copying), so the two runs are compared on a falling loss, not on noise."""

    path = "motifs"
    seq_len = SEQ

    def __len__(self):
        return 64

    def sequence(self, i):
        r = np.random.default_rng(i)
        lens = [96, 160]
        ids = np.concatenate([np.resize(r.integers(1, 1000, 12), n) for n in lens])
        return {"input_ids": ids.astype(np.int32), "segment_ids": np.repeat([1, 2], lens).astype(np.int32),
                "positions": np.concatenate([np.arange(n) for n in lens]).astype(np.int32),
                "loss_weights": np.ones(SEQ, np.float32)}


def run(dtype: str) -> tuple[list[float], dict]:
    cfg = load_run_config(None, [f"model.compute_dtype={dtype}", "parallel.mesh.context=1", "parallel.cpu_devices=0",
                                 f"train.steps={STEPS}", "train.curriculum=[]", "train.probe_every=0",
                                 f"data.seq_len={SEQ}", "data.batch_size=1"])
    mesh = make_mesh(cfg.parallel, jax.devices()[:1])
    program = build_program(cfg, mesh)
    state, frozen = program.init_state()
    batches = Batches(MotifCorpus(), batch_size=cfg.data.batch_size, seed=0)
    sh = batch_sharding(mesh)
    losses = []
    for i in range(STEPS):
        state, metrics = program.step(state, frozen, batches.global_batch(i, SEQ, {f: sh for f in FIELDS}))
        losses.append(metrics["loss"])
    return [float(x) for x in losses], state


@pytest.fixture(scope="module")
def runs():
    return run("float32"), run("bfloat16")


def test_bf16_final_loss_within_2_percent_of_float32(runs):
    (f32, _), (bf16, state) = runs
    tail32, tail16 = np.mean(f32[-10:]), np.mean(bf16[-10:])  # the final loss: the last 10 steps' mean
    print(f"float32 {f32[0]:.4f} -> {tail32:.4f}, bf16 {bf16[0]:.4f} -> {tail16:.4f} (last 10 steps' mean)")
    assert tail32 < 0.7 * f32[0], f"the float32 run did not learn: {f32[0]:.3f} -> {tail32:.3f}"
    assert abs(tail16 - tail32) <= 0.02 * tail32, (tail16, tail32)
    assert bf16 != f32  # the bf16 program is not the float32 one
    leaves = jax.tree.leaves(state["params"])
    assert leaves and all(x.dtype == jnp.float32 for x in leaves)  # float32 master weights
