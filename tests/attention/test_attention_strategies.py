"""Every strategy x kernel against a float64 dense oracle: output and dq, dk, dv within 1e-5 relative.

One compiled program per cell runs twice: causal-only and packed documents (segment ids are data).
Cells are chosen so each strategy meets cp 2/4/8 (usp 2x2, 2x4), both layouts (zig-zag and plain)
and both head layouts (MHA; GQA with fewer kv heads than the ulysses degree). Splash (interpreted,
chunks >= 128 tokens, so longer sequences) covers a representative subset: it is slow on CPU, so
three of its cells are marked `slow` (`-m "not slow"` skips them).
"""

from __future__ import annotations

import numpy as np
import pytest
from attention_helpers import (
    causal_segments,
    compiled_vjp,
    inputs,
    max_rel_err,
    mesh,
    oracle,
    packed_segments,
)

from bookft.attention import make_attention

TOL = 1e-5
MHA, GQA = "mha", "gqa"


def heads(kind, degree):
    if kind == MHA:
        return 8, 8
    return 8, (1 if degree <= 2 else 2)  # fewer kv heads than the degree (replicated by ulysses)


def mesh_for(strategy, cp):
    if strategy == "local":
        return None
    if strategy == "usp":
        ring, uly = cp
        return mesh((1, 1, ring, uly), ("data", "fsdp", "context", "context_ulysses"))
    return mesh((1, 1, cp), ("data", "fsdp", "context"))


def degree(strategy, cp):
    return cp[1] if strategy == "usp" else (1 if strategy == "local" else cp)


def total_cp(strategy, cp):
    return cp[0] * cp[1] if strategy == "usp" else (1 if strategy == "local" else cp)


def check_cell(strategy, kernel, cp, balanced, head_kind, S, block, B=2, D=8):
    hq, hkv = heads(head_kind, degree(strategy, cp))
    n = total_cp(strategy, cp)
    attend = make_attention(strategy, kernel, mesh_for(strategy, cp), load_balanced=balanced,
                            block_q=block, block_kv=block)
    q, k, v, do = inputs(hash((strategy, kernel, S)) % 1000, B, S, hq, hkv, D)
    f32, i32 = np.float32, np.int32
    shapes = [(q.shape, f32), (k.shape, f32), (v.shape, f32), ((B, S), i32), (q.shape, f32)]
    run = compiled_vjp(attend, n, balanced and n > 1, shapes)
    for seg in (causal_segments(B, S), packed_segments(B, S, seed=S + n)):
        want = oracle(q, k, v, seg, do)
        got = run(q, k, v, seg, do)
        errs = [max_rel_err(g, w) for g, w in zip(got, want, strict=True)]
        assert max(errs) < TOL, (strategy, kernel, cp, balanced, head_kind, "o,dq,dk,dv", errs)


def _id(x):
    if isinstance(x, tuple):
        return "x".join(map(str, x))
    if isinstance(x, bool):
        return "zigzag" if x else "plain"
    return str(x)


XLA_CELLS = [  # (strategy, cp, balanced, heads)
    ("local", 1, False, GQA),
    ("allgather", 2, True, MHA),
    ("allgather", 4, False, GQA),
    ("allgather", 8, True, GQA),
    ("ulysses", 2, False, GQA),
    ("ulysses", 4, True, GQA),
    ("ulysses", 8, False, MHA),
    ("ring", 2, False, MHA),
    ("ring", 4, True, GQA),
    ("ring", 8, True, MHA),
    ("ring", 8, False, GQA),
    ("usp", (2, 2), True, GQA),
    ("usp", (2, 4), False, MHA),
    ("usp", (2, 4), True, GQA),
]


@pytest.mark.parametrize("strategy,cp,balanced,head_kind", XLA_CELLS, ids=lambda x: _id(x))
def test_xla_kernel_matches_dense(strategy, cp, balanced, head_kind):
    # S=128 with 8-token blocks: several blocks per chunk pair at cp=2, one at cp=8
    check_cell(strategy, "xla", cp, balanced, head_kind, S=128, block=8)


SLOW = pytest.mark.slow  # interpreted splash compiles slowly on CPU; the xla cells cover the matrix
SPLASH_CELLS = [  # (strategy, cp, balanced, heads, S): every layout chunk >= 128 tokens
    ("local", 1, False, GQA, 256),
    ("ring", 2, True, GQA, 512),
    pytest.param("ulysses", 2, False, MHA, 256, marks=SLOW),
    pytest.param("allgather", 2, True, MHA, 512, marks=SLOW),
    pytest.param("usp", (2, 2), False, GQA, 512, marks=SLOW),
]


@pytest.mark.parametrize("strategy,cp,balanced,head_kind,S", SPLASH_CELLS, ids=lambda x: _id(x))
def test_splash_kernel_matches_dense(strategy, cp, balanced, head_kind, S):
    check_cell(strategy, "splash", cp, balanced, head_kind, S=S, block=128, D=8)
