"""Chunk-pair engine shared by every strategy: which (q chunk, kv chunk) pairs run, and the merge.

Design choices:
- Every strategy reduces to: local q chunks with known global chunk ids against a set of kv chunks
  with known ids. The pair relation is computed from ids at run time (ids depend on the device and,
  for ring, on the step): kv chunk after q chunk -> skip; same chunk -> diagonal (causal kernel);
  before -> full kernel. A pair whose [min, max] segment-id ranges do not overlap is skipped too.
  `lax.cond` executes one branch, so skipped pairs cost nothing on TPU/CPU (an interpreted Pallas
  kernel in CPU tests runs every pair and selects: `_pair`). The kernel gets the pair
  kind as a traced bool (xla masks dynamically; splash conds between its two static-mask kernels).
- Forward accumulates (o, lse) in fp32 by log-sum-exp merges; backward (FlashAttention-2 style) runs
  the same pairs with the global o and lse, accumulating dq locally and dk/dv per kv chunk.
- Loops are lax.scan (outer over kv chunks, inner over q chunks) so the program size does not grow
  with the number of chunks. Memory: O(local q + local kv) plus one pair's kernel temporaries.
- Sliding window (static `window` W > 0, causal only): a pair whose nearest tokens are W or more
  apart is skipped like a pair above the diagonal; the kernel gets the pair's global offset
  (qid - kid) * c and masks inside it, so every strategy and layout gets windows for free.
- `local_core` wraps the engine in a custom_vjp for strategies whose kv is already on the device
  (local, allgather after its all-gather, ulysses after its all-to-all); ring has its own core.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from bookft.attention.kernel_xla import NEG, scan_blocks
from bookft.errors import AttentionError

F32 = jnp.float32
SKIP, FULL, DIAG = 0, 1, 2


def _seg_ranges(seg, n, c):  # [B, n*c] -> lo [B, n], hi [B, n]
    s = seg.reshape(seg.shape[0], n, c)
    return s.min(-1), s.max(-1)


def _relation(qid, kid, qlo, qhi, klo, khi, causal: bool, c: int = 0, window: int = 0):
    overlap = jnp.any((klo <= qhi) & (qlo <= khi))
    if causal:
        rel = jnp.where(kid > qid, SKIP, jnp.where(kid == qid, DIAG, FULL))
        if window:  # nearest (query, key) of the pair: the kv chunk's last token vs the q chunk's first
            rel = jnp.where((qid - kid) * c - (c - 1) >= window, SKIP, rel)
    else:
        rel = jnp.asarray(FULL)
    return jnp.where(overlap, rel, SKIP).astype(jnp.int32)


def check_window(causal: bool, window: int) -> None:
    if window and not causal:
        raise AttentionError(f"a sliding window ({window}) needs causal attention")


def _diag(rel, causal: bool):
    """Pair kind for the kernel: traced bool (diagonal pair) when causal, else static False."""
    return rel == DIAG if causal else False


def merge(o1, lse1, o2, lse2):
    """Log-sum-exp merge of two partial results: o [B,C,H,D] f32, lse [B,H,C] f32."""
    m = jnp.maximum(lse1, lse2)
    lse = m + jnp.log(jnp.exp(lse1 - m) + jnp.exp(lse2 - m))
    w1 = jnp.exp(lse1 - lse).transpose(0, 2, 1)[..., None]
    w2 = jnp.exp(lse2 - lse).transpose(0, 2, 1)[..., None]
    return o1 * w1 + o2 * w2, lse


def _dyn(x, i, c, axis):
    return lax.dynamic_slice_in_dim(x, i * c, c, axis=axis)


def _put(x, u, i, c, axis):
    return lax.dynamic_update_slice_in_dim(x, u, i * c, axis=axis)


def _pair(kernel, runs, run, skip):
    """One chunk pair: `run` when `runs`, else `skip` (lax.cond: one branch executes). An interpreted
    Pallas kernel (CPU tests) runs every pair and selects: the TPU interpreter puts a barrier over
    all mesh devices in each kernel call, so devices must make the same number of calls."""
    if not getattr(kernel, "interpret", False):
        return lax.cond(runs, run, skip, None)
    return jax.tree.map(lambda a, b: jnp.where(runs, a, b), run(None), skip(None))


def accumulate_fwd(kernel, causal, c, q, qseg, qids, k, v, kseg, kids, o_acc, lse_acc, window: int = 0):
    """Merge attention of q chunks (ids qids [nq]) over kv chunks (ids kids [nk]) into (o, lse)."""
    nq, nk = q.shape[1] // c, k.shape[1] // c
    qlo, qhi = _seg_ranges(qseg, nq, c)
    klo, khi = _seg_ranges(kseg, nk, c)

    def over_kv(carry, j):
        kj, vj, ksj = _dyn(k, j, c, 1), _dyn(v, j, c, 1), _dyn(kseg, j, c, 1)

        def over_q(carry, i):
            o_acc, lse_acc = carry
            qi, qsi = _dyn(q, i, c, 1), _dyn(qseg, i, c, 1)
            oi, li = _dyn(o_acc, i, c, 1), _dyn(lse_acc, i, c, 2)

            def run(_):
                o_p, l_p = kernel.fwd(qi, kj, vj, qsi, ksj, causal=_diag(rel, causal),
                                      offset=(qids[i] - kids[j]) * c, window=window)
                return merge(oi, li, o_p, l_p)

            rel = _relation(qids[i], kids[j], qlo[:, i], qhi[:, i], klo[:, j], khi[:, j], causal, c, window)
            oi, li = _pair(kernel, rel != SKIP, run, lambda _: (oi, li))
            return (_put(o_acc, oi, i, c, 1), _put(lse_acc, li, i, c, 2)), None

        carry, _ = scan_blocks(over_q, carry, jnp.arange(nq))
        return carry, None

    (o_acc, lse_acc), _ = scan_blocks(over_kv, (o_acc, lse_acc), jnp.arange(nk))
    return o_acc, lse_acc


def accumulate_bwd(kernel, causal, c, q, qseg, qids, k, v, kseg, kids, o, lse, do, dq_acc, window: int = 0):
    """Backward of accumulate_fwd given global o/lse: -> dq_acc (+=), dk, dv [B, nk*c, Hkv, D] f32."""
    nq, nk = q.shape[1] // c, k.shape[1] // c
    qlo, qhi = _seg_ranges(qseg, nq, c)
    klo, khi = _seg_ranges(kseg, nk, c)
    B, _, Hkv, D = k.shape

    def over_kv(dq_acc, j):
        kj, vj, ksj = _dyn(k, j, c, 1), _dyn(v, j, c, 1), _dyn(kseg, j, c, 1)

        def over_q(carry, i):
            dq_acc, dk, dv = carry
            qi, qsi, doi = _dyn(q, i, c, 1), _dyn(qseg, i, c, 1), _dyn(do, i, c, 1)
            oi, li = _dyn(o, i, c, 1), _dyn(lse, i, c, 2)
            dqi = _dyn(dq_acc, i, c, 1)

            def run(_):
                g_q, g_k, g_v = kernel.bwd(qi, kj, vj, qsi, ksj, oi, li, doi, causal=_diag(rel, causal),
                                           offset=(qids[i] - kids[j]) * c, window=window)
                return dqi + g_q, dk + g_k, dv + g_v

            rel = _relation(qids[i], kids[j], qlo[:, i], qhi[:, i], klo[:, j], khi[:, j], causal, c, window)
            dqi, dk, dv = _pair(kernel, rel != SKIP, run, lambda _: (dqi, dk, dv))
            return (_put(dq_acc, dqi, i, c, 1), dk, dv), None

        zeros = jnp.zeros((B, c, Hkv, D), F32)
        (dq_acc, dk, dv), _ = scan_blocks(over_q, (dq_acc, zeros, zeros), jnp.arange(nq))
        return dq_acc, (dk, dv)

    dq_acc, (dk, dv) = scan_blocks(over_kv, dq_acc, jnp.arange(nk))
    dk = dk.transpose(1, 0, 2, 3, 4).reshape(B, nk * c, Hkv, D)  # [nk,B,c,H,D] -> [B,nk*c,H,D]
    dv = dv.transpose(1, 0, 2, 3, 4).reshape(B, nk * c, Hkv, D)
    return dq_acc, dk, dv


def init_acc(q):
    B, S, H, _ = q.shape
    return jnp.zeros(q.shape, F32), jnp.full((B, H, S), NEG, F32)


def local_core(kernel, causal: bool, c: int, window: int = 0):
    """custom_vjp attention of local q chunks over local kv chunks: (q,k,v,qseg,kseg,qids,kids)."""
    check_window(causal, window)

    @jax.custom_vjp
    def core(q, k, v, qseg, kseg, qids, kids):
        return core_fwd(q, k, v, qseg, kseg, qids, kids)[0]

    def core_fwd(q, k, v, qseg, kseg, qids, kids):
        o, lse = accumulate_fwd(kernel, causal, c, q, qseg, qids, k, v, kseg, kids, *init_acc(q), window=window)
        o = o.astype(q.dtype)
        return o, (q, k, v, qseg, kseg, qids, kids, o, lse)

    def core_bwd(res, do):
        q, k, v, qseg, kseg, qids, kids, o, lse = res
        dq, dk, dv = accumulate_bwd(
            kernel, causal, c, q, qseg, qids, k, v, kseg, kids, o, lse, do, jnp.zeros(q.shape, F32), window=window
        )
        return dq.astype(q.dtype), dk.astype(k.dtype), dv.astype(v.dtype), None, None, None, None

    core.defvjp(core_fwd, core_bwd)
    return core
