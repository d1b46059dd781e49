"""Sliding-window attention (model.sliding_window): every strategy equals the dense float64 oracle
with the window mask, in the zig-zag layout, with packed documents crossing shard borders.

Windows count tokens in row order, so documents must be contiguous (the trainer turns document
arrangement off for windowed models): rows here are zig-zagged without `arrange_documents`.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from attention_helpers import compiled_vjp, inputs, max_rel_err, mesh, oracle, packed_segments

from bookft.attention import make_attention
from bookft.errors import AttentionError
from bookft.model.layers import reference_attention

S, B, HQ, HKV, D, BLOCK = 128, 2, 4, 2, 8, 8
MESHES = {
    "local": (None, 1),
    "allgather": (((1, 1, 4), ("data", "fsdp", "context")), 4),
    "ulysses": (((1, 1, 2), ("data", "fsdp", "context")), 2),
    "ring": (((1, 1, 4), ("data", "fsdp", "context")), 4),
    "usp": (((1, 1, 2, 2), ("data", "fsdp", "context", "context_ulysses")), 4),
}


def _check(strategy, window, kernel="xla"):
    shape, cp = MESHES[strategy]
    m = mesh(*shape) if shape else None
    balanced = strategy != "local"
    attend = make_attention(strategy, kernel, m, load_balanced=balanced, block_q=BLOCK, block_kv=BLOCK)

    def windowed(q, k, v, seg, pos):
        return attend(q, k, v, seg, pos, window=window)

    f32, i32 = np.float32, np.int32
    run = compiled_vjp(windowed, cp, balanced, [((B, S, HQ, D), f32), ((B, S, HKV, D), f32),
                                                ((B, S, HKV, D), f32), ((B, S), i32), ((B, S, HQ, D), f32)])
    q, k, v, do = inputs(7, B, S, HQ, HKV, D)
    seg = packed_segments(B, S, seed=3)
    got = run(q, k, v, seg, do)
    want = oracle(q, k, v, seg, do, window=window)
    errs = [max_rel_err(g, w) for g, w in zip(got, want, strict=True)]
    assert max(errs) < 1e-5, (strategy, window, "o,dq,dk,dv", errs)
    # the window matters: full causal attention differs
    full = oracle(q, k, v, seg, do)[0]
    assert max_rel_err(got[0], full) > 1e-2


@pytest.mark.parametrize("strategy", list(MESHES))
def test_window_matches_dense_every_strategy(strategy):
    _check(strategy, 20)  # spans several 8-token blocks and, at cp 4, chunk pairs on other devices


def test_window_smaller_than_a_block_ring():
    _check("ring", 3)


def test_window_reference_kernel():
    _check("local", 11, kernel="reference")


def test_model_reference_attention_window_matches_oracle():
    q, k, v, _ = inputs(1, B, 32, HQ, HKV, D)
    seg = packed_segments(B, 32, seed=1)
    got = reference_attention(q, k, v, seg, None, window=5)
    want = oracle(q, k, v, seg, np.zeros_like(q), window=5)[0]
    assert max_rel_err(got, want) < 1e-5


def test_splash_refuses_a_window():
    from bookft.attention.kernel_splash import splash_available

    if not splash_available():
        pytest.skip("Tokamax splash: Python >= 3.12 with bookft[tpu]")
    attend = make_attention("local", "splash", None, block_q=128, block_kv=128, load_balanced=True)
    x = jax.ShapeDtypeStruct((1, 256, 2, 128), np.float32)
    seg = jax.ShapeDtypeStruct((1, 256), np.int32)
    with pytest.raises(AttentionError, match="sliding-window"):
        jax.eval_shape(lambda q, s: attend(q, q, q, s, None, window=64), x, seg)
