"""Shared helpers for tests/attention: a float64 numpy oracle, inputs, meshes, fast CPU compiles."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bookft.attention import load_balance, unbalance

FAST = {"xla_backend_optimization_level": 0}  # CPU compile time dominates these tests


def oracle(q, k, v, seg, do, causal=True, window=0):
    """float64 dense attention and its vjp: -> o, dq, dk, dv (natural order, [B,S,H,D]).
    One (row, head) at a time, so S = 2048 stays small in memory. window W > 0: keys at most
    W - 1 tokens back."""
    q, k, v, do = (np.asarray(x, np.float64) for x in (q, k, v, do))
    B, S, Hq, D = q.shape
    G = Hq // k.shape[2]
    scale = D**-0.5
    o, dq = np.zeros_like(q), np.zeros_like(q)
    dk, dv = np.zeros_like(k), np.zeros_like(v)
    tri = np.tril(np.ones((S, S), bool))
    if window:
        tri &= ~np.tril(np.ones((S, S), bool), -window)
    for b in range(B):
        mask = seg[b][:, None] == seg[b][None, :]
        if causal:
            mask &= tri
        for h in range(Hq):
            qh, kh, vh, doh = q[b, :, h], k[b, :, h // G], v[b, :, h // G], do[b, :, h]
            s = np.where(mask, qh @ kh.T * scale, -np.inf)
            p = np.exp(s - s.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            o[b, :, h] = p @ vh
            dp = doh @ vh.T
            ds = p * (dp - (dp * p).sum(-1, keepdims=True))
            dq[b, :, h] = ds @ kh * scale
            dk[b, :, h // G] += ds.T @ qh * scale  # the G q heads of a kv head add up
            dv[b, :, h // G] += p.T @ doh
    return o, dq, dk, dv


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
