"""Shared helpers for tests/attention: a float64 numpy oracle, inputs, meshes, fast CPU compiles."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bookft.attention import load_balance, unbalance

FAST = {"xla_backend_optimization_level": 0}  # CPU compile time dominates these tests


def oracle(q, k, v, seg, do, causal=True):
    """float64 dense attention and its vjp: -> o, dq, dk, dv (natural order, [B,S,H,D])."""
    q, k, v, do = (np.asarray(x, np.float64) for x in (q, k, v, do))
    B, S, Hq, D = q.shape
    G = Hq // k.shape[2]
    kr, vr = np.repeat(k, G, axis=2), np.repeat(v, G, axis=2)
    scale = D**-0.5
    s = np.einsum("bqhd,bkhd->bhqk", q, kr) * scale
    mask = seg[:, None, :, None] == seg[:, None, None, :]
    if causal:
        mask = mask & np.tril(np.ones((S, S), bool))[None, None]
    s = np.where(mask, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = np.einsum("bhqk,bkhd->bqhd", p, vr)
    dv = np.einsum("bhqk,bqhd->bkhd", p, do)
    dp = np.einsum("bqhd,bkhd->bhqk", do, vr)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = np.einsum("bhqk,bkhd->bqhd", ds, kr) * scale
    dk = np.einsum("bhqk,bqhd->bkhd", ds, q) * scale

    def fold(x):  # sum the G q heads that share each kv head
        return x.reshape(B, S, -1, G, D).sum(3)

    return o, dq, fold(dk), fold(dv)


def inputs(seed, B, S, Hq, Hkv, D):
    r = np.random.default_rng(seed)
    q, do = (r.standard_normal((B, S, Hq, D)).astype(np.float32) for _ in range(2))
    k, v = (r.standard_normal((B, S, Hkv, D)).astype(np.float32) for _ in range(2))
    return q, k, v, do


def packed_segments(B, S, seed=0):
    """Documents of very different lengths, crossing shard borders, a 1-token doc and padding (0)."""
    r = np.random.default_rng(seed)
    seg = np.zeros((B, S), np.int32)
    for b in range(B):
        cuts = np.sort(r.choice(np.arange(1, S - 8), size=4, replace=False))
        cuts = np.concatenate([[0], cuts[:2], [cuts[1] + 1], cuts[2:], [S - S // 16]])
        for doc, (a, e) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)):
            seg[b, a:e] = doc + 1  # the rest (tail) stays 0 = padding
    return seg


def causal_segments(B, S):
    return np.ones((B, S), np.int32)


def mesh(shape, names):
    n = int(np.prod(shape))
    return jax.sharding.Mesh(np.array(jax.devices()[:n]).reshape(shape), names)


def compiled_vjp(attend, cp, balanced, shapes):
    """Compile attend's fwd+bwd in stored order; returns run(q,k,v,seg,do) -> natural-order results."""

    def fn(q, k, v, seg, do):
        o, pull = jax.vjp(lambda q, k, v: attend(q, k, v, seg, None), q, k, v)
        return (o, *pull(do))

    structs = [jax.ShapeDtypeStruct(s, d) for s, d in shapes]
    exe = jax.jit(fn).lower(*structs).compile(compiler_options=FAST)

    def run(q, k, v, seg, do):
        lb = (lambda x: load_balance(x, cp)) if balanced else (lambda x: x)
        ub = (lambda x: unbalance(np.asarray(x), cp)) if balanced else np.asarray
        outs = exe(*(jnp.asarray(lb(x)) for x in (q, k, v, seg, do)))
        return [ub(x) for x in outs]

    return run


def max_rel_err(got, want):
    return float(np.max(np.abs(np.asarray(got, np.float64) - want)) / np.max(np.abs(want)))
