"""Every strategy x kernel against a float64 dense oracle: output and dq, dk, dv within 1e-5 relative.

The full matrix: strategy x kernel (xla; splash interpreted) x cp {2, 4, 8} (usp 2x2, 2x4; local 1)
x layout (zig-zag, plain) x heads (MHA; GQA with fewer kv heads than the ulysses degree) x data
(causal only; packed documents crossing shard borders, with padding). In the zig-zag layout packed
rows also go through `arrange_documents` (the data path's balancing), so the strategies are checked
on the non-contiguous documents it produces.

Cost: a cell is one compiled fwd+bwd program (compiles dominate on CPU); both data cases run
through it, and the oracle is computed once per (shape, data) and shared by every cell. Tiny shapes:
S = 128 with 8-token blocks for xla (several blocks per chunk pair at cp 2, one at cp 8); splash
needs chunks of >= 128 tokens, so S = 128 per layout chunk. A covering subset (every strategy x
kernel, every cp, layout, head layout and data case, pairwise) runs by default; the rest of the
product is marked `slow` and runs with BOOKFT_FULL_MATRIX=1 (76 more compiled programs). The whole
product last passed on 2026-11-30 (session 4, 93 passed: `BOOKFT_FULL_MATRIX=1 pytest
tests/attention/test_attention_strategies.py` at nice 19 beside one other job on the 2-core host):
46 interpreted-splash cells in 345 s (7.5 s each), 46 xla cells in about 790 s.
"""

from __future__ import annotations

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from attention_helpers import FAST, causal_segments, inputs, max_rel_err, mesh, oracle, packed_segments

from bookft.attention import load_balance, make_attention, unbalance
from bookft.attention.balance import arrange_documents
from bookft.attention.kernel_splash import splash_available

TOL = 1e-5
MHA, GQA = "mha", "gqa"
CPS = {"local": [1], "allgather": [2, 4, 8], "ulysses": [2, 4, 8], "ring": [2, 4, 8], "usp": [(2, 2), (2, 4)]}
BLOCK = {"xla": 8, "splash": 128}
B = {"xla": 2, "splash": 1}


def degree(strategy, cp):
    return cp[1] if strategy == "usp" else (1 if strategy == "local" else cp)


def total_cp(strategy, cp):
    return cp[0] * cp[1] if strategy == "usp" else cp


def heads(kind, strategy, cp):
    if kind == MHA:
        return 8, 8
    return 8, (1 if degree(strategy, cp) <= 2 else 2)  # fewer kv heads than the degree (replicated)


def seq_len(kernel, strategy, cp, balanced):
    if kernel == "xla":
        return 128
    n = total_cp(strategy, cp) * (2 if balanced else 1)
    return 128 * n  # splash: every layout chunk is one 128-token block


def mesh_for(strategy, cp):
    if strategy == "local":
        return None
    if strategy == "usp":
        return mesh((1, 1, *cp), ("data", "fsdp", "context", "context_ulysses"))
    return mesh((1, 1, cp), ("data", "fsdp", "context"))


@functools.cache
def data_case(b, S, hq, hkv, packed):
    """Inputs, segment ids and the oracle's (o, dq, dk, dv): computed once per shape and data."""
    q, k, v, do = inputs(S + hkv, b, S, hq, hkv, 8)
    seg = packed_segments(b, S, seed=S) if packed else causal_segments(b, S)
    return (q, k, v, seg, do), oracle(q, k, v, seg, do)


def compiled(attend, shapes):
    def fn(q, k, v, seg, do):
        o, pull = jax.vjp(lambda q, k, v: attend(q, k, v, seg, None), q, k, v)
        return (o, *pull(do))

    structs = [jax.ShapeDtypeStruct(s, d) for s, d in shapes]
    return jax.jit(fn).lower(*structs).compile(compiler_options=FAST)


def run_layout(exe, args, n, balanced, arrange_block):
    """Stored order in, natural order out. Zig-zag + packed: documents arranged per row first;
    -> results in natural order and the tokens to compare (padding attends to itself then)."""
    q, k, v, seg, do = args
    S = seg.shape[1]
    orders = np.tile(np.arange(S), (seg.shape[0], 1))
    ids = seg
    if balanced and n > 1:
        pairs = [arrange_documents(row, n, block=arrange_block) for row in seg]
        orders = np.stack([o for o, _ in pairs])
        ids = np.stack([i for _, i in pairs])  # already in arranged order

    def zigzag(x):
        return load_balance(x, n) if balanced and n > 1 else x

    def stored(x):  # [b, S, H, D] natural -> arranged -> stored
        return zigzag(np.take_along_axis(x, orders[:, :, None, None], axis=1))

    outs = exe(*(jnp.asarray(stored(x)) for x in (q, k, v)), jnp.asarray(zigzag(ids)), jnp.asarray(stored(do)))
    inv = np.argsort(orders, axis=1)
    natural = []
    for x in outs:
        x = np.asarray(x)
        x = unbalance(x, n) if balanced and n > 1 else x
        natural.append(np.take_along_axis(x, inv[:, :, None, None], axis=1))
    keep = seg > 0 if balanced and n > 1 else np.ones_like(seg, bool)
    return natural, keep


def check_cell(kernel, strategy, cp, balanced, head_kind):
    hq, hkv = heads(head_kind, strategy, cp)
    n = total_cp(strategy, cp)
    S, b = seq_len(kernel, strategy, cp, balanced), B[kernel]
    attend = make_attention(strategy, kernel, mesh_for(strategy, cp), load_balanced=balanced,
                            block_q=BLOCK[kernel], block_kv=BLOCK[kernel])
    f32, i32 = np.float32, np.int32
    exe = compiled(attend, [((b, S, hq, 8), f32), ((b, S, hkv, 8), f32), ((b, S, hkv, 8), f32),
                            ((b, S), i32), ((b, S, hq, 8), f32)])
    for packed in (False, True):
        args, want = data_case(b, S, hq, hkv, packed)
        got, keep = run_layout(exe, args, n, balanced, BLOCK[kernel])
        errs = [max_rel_err(g[keep], w[keep]) for g, w in zip(got, want, strict=True)]
        assert max(errs) < TOL, (kernel, strategy, cp, balanced, head_kind, packed, "o,dq,dk,dv", errs)


# the default subset: every strategy x kernel, and pairwise every cp, layout and head layout
DEFAULT = {
    ("xla", "local", 1, False, GQA),
    ("xla", "allgather", 2, True, MHA),
    ("xla", "allgather", 4, False, GQA),
    ("xla", "allgather", 8, True, GQA),
    ("xla", "ulysses", 2, False, GQA),
    ("xla", "ulysses", 4, True, GQA),
    ("xla", "ulysses", 8, False, MHA),
    ("xla", "ring", 2, False, MHA),
    ("xla", "ring", 4, True, GQA),
    ("xla", "ring", 8, True, MHA),
    ("xla", "ring", 8, False, GQA),
    ("xla", "usp", (2, 2), True, GQA),
    ("xla", "usp", (2, 4), False, MHA),
    ("xla", "usp", (2, 4), True, GQA),
    ("splash", "local", 1, False, MHA),
    ("splash", "allgather", 2, True, GQA),
    ("splash", "ulysses", 2, False, MHA),
    ("splash", "ring", 2, True, GQA),
    ("splash", "usp", (2, 2), True, GQA),
}


NEEDS_TOKAMAX = pytest.mark.skipif(not splash_available(), reason="Tokamax splash: Python >= 3.12 with bookft[tpu]")
FULL = pytest.mark.skipif(not os.environ.get("BOOKFT_FULL_MATRIX"),
                          reason="the rest of the product: set BOOKFT_FULL_MATRIX=1")


def cells():
    for kernel in ("xla", "splash"):
        for strategy, cps in CPS.items():
            for cp in cps:
                for balanced in (False,) if strategy == "local" else (True, False):
                    for head_kind in (MHA, GQA):
                        cell = (kernel, strategy, cp, balanced, head_kind)
                        marks = () if cell in DEFAULT else (pytest.mark.slow, FULL)
                        if kernel == "splash":
                            marks = (*marks, NEEDS_TOKAMAX)
                        name = "-".join([kernel, strategy, "x".join(map(str, np.atleast_1d(cp))),
                                         "zigzag" if balanced else "plain", head_kind])
                        yield pytest.param(*cell, marks=marks, id=name)


def test_matrix_is_the_full_product():
    all_cells = list(cells())
    assert len(all_cells) == 2 * (2 + 3 * 3 * 2 * 2 + 2 * 2 * 2)  # 92 compiled programs
    assert DEFAULT <= {tuple(c.values) for c in all_cells}


@pytest.mark.parametrize("kernel,strategy,cp,balanced,head_kind", list(cells()))
def test_strategy_matches_dense(kernel, strategy, cp, balanced, head_kind):
    check_cell(kernel, strategy, cp, balanced, head_kind)
