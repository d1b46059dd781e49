"""Blockwise flash attention in plain JAX: the CPU/GPU kernel, and (one block) the dense reference.

Design choices:
- A kernel computes one *chunk pair*: a q chunk [B, C, Hq, D] against a kv chunk [B, Ck, Hkv, D].
  `causal=True` means both are the same global chunk (mask kv_pos <= q_pos inside it); `False`
  means the kv chunk lies entirely before the q chunk (or the run is not causal). Here `causal`
  may be a traced bool: one program serves both pair kinds (half the compile time). Strategies decide
  which pairs exist and merge pair results by log-sum-exp (bookft/attention/engine.py).
- q arrives already scaled by 1/sqrt(D). Segment ids mask across documents.
- Forward: online softmax over kv blocks, so memory is O(block_q * block_kv) scores. The kv loop
  is a lax.while_loop, not a scan: JAX's partial evaluation of an enclosing layer scan (a scanned
  model under grad) turns a scan's per-step values into stacked outputs, every block's scores and
  masks, while a while_loop stays whole (tests/attention/test_attention_memory.py). The forward
  is never differentiated (the strategies' custom_vjp).
  A block is skipped with lax.cond when the causal mask hides it or the [min, max] segment-id
  ranges of the q and kv blocks do not overlap (book-length packed documents: most blocks).
- Backward takes the *global* o and lse (after merging all pairs) like FlashAttention-2:
  p = exp(s - lse), ds = p * (dp - rowsum(o * do)); dq accumulates over kv blocks, dk/dv per block.
- Fully masked rows get lse = NEG (finite) and o = 0, so merges never produce NaN.
- GQA: q heads are grouped [Hkv, G] with q head h -> kv head h // G (splash's convention).
- Sliding window (static `window` W > 0): a query sees keys at most W - 1 tokens back in global
  order (HF's `kv_idx > q_idx - W`). `offset` (traced) is the global start of the q chunk minus that
  of the kv chunk, so the same kernel serves any pair; blocks entirely out of the window are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
from jax import lax

NEG = -1e30  # finite "minus infinity" for masked scores and empty-row lse
F32 = jnp.float32


def scan_blocks(f, init, xs):
    """lax.scan, inlined when there is one step (small programs compile much faster on CPU)."""
    if jax.tree_util.tree_leaves(xs)[0].shape[0] != 1:
        return lax.scan(f, init, xs)
    carry, y = f(init, jax.tree_util.tree_map(lambda x: x[0], xs))
    return carry, jax.tree_util.tree_map(lambda x: x[None], y)


def _loop(n: int, body, init):
    """body(j, carry) -> carry for j in range(n): a while_loop (see the module docstring), inlined
    when n is 1."""
    if n == 1:
        return body(jnp.int32(0), init)
    _, carry = lax.while_loop(lambda s: s[0] < n, lambda s: (s[0] + 1, body(s[0], s[1])), (jnp.int32(0), init))
    return carry


def _blocks_q(x, n, b, hkv):  # [B, C, Hq, D] -> [n, B, b, Hkv, G, D]
    B, C, Hq, D = x.shape
    return x.reshape(B, n, b, hkv, Hq // hkv, D).transpose(1, 0, 2, 3, 4, 5)


def _blocks_kv(x, n, b):  # [B, Ck, Hkv, D] -> [n, B, b, Hkv, D]
    B, C, H, D = x.shape
    return x.reshape(B, n, b, H, D).transpose(1, 0, 2, 3, 4)


def _blocks_seg(s, n, b):  # [B, C] -> [n, B, b], lo [n, B], hi [n, B]
    sb = s.reshape(s.shape[0], n, b).transpose(1, 0, 2)
    return sb, sb.min(-1), sb.max(-1)


def _mask(qs, ks, i, j, bq, bk, causal, offset=0, window=0):  # -> [B, 1, 1, bq, bk] bool
    m = qs[:, None, None, :, None] == ks[:, None, None, None, :]
    qpos = i * bq + jnp.arange(bq)
    kpos = j * bk + jnp.arange(bk)
    if causal is not False:  # causal: bool or traced
        m = m & (jnp.logical_not(causal) | (kpos[None, :] <= qpos[:, None]))[None, None, None]
    if window:
        m = m & ((qpos[:, None] + offset - kpos[None, :]) < window)[None, None, None]
    return m


def _visible(i, j, bq, bk, qlo, qhi, klo, khi, causal, offset=0, window=0):
    vis = jnp.any((klo <= qhi) & (qlo <= khi))  # any batch row shares a segment
    if causal is not False:
        vis = vis & (jnp.logical_not(causal) | (j * bk <= i * bq + bq - 1))
    if window:  # the block's nearest (query, key) pair is inside the window
        vis = vis & (i * bq + offset - (j * bk + bk - 1) < window)
    return vis


def flash_fwd(q, k, v, qseg, kseg, *, causal: bool, block_q: int, block_kv: int, offset=0, window: int = 0):
    """-> o [B, C, Hq, D] f32, lse [B, Hq, C] f32 for one chunk pair."""
    B, C, Hq, D = q.shape
    Ck, Hkv = k.shape[1], k.shape[2]
    G = Hq // Hkv
    bq, bk = min(block_q, C), min(block_kv, Ck)
    nq, nk = C // bq, Ck // bk
    qb = _blocks_q(q, nq, bq, Hkv)
    kb, vb = _blocks_kv(k, nk, bk), _blocks_kv(v, nk, bk)
    qsb, qlo, qhi = _blocks_seg(qseg, nq, bq)
    ksb, klo, khi = _blocks_seg(kseg, nk, bk)

    def q_block(xs):
        i, qi, qsi, qlo_i, qhi_i = xs

        def kv_step(j, carry):
            kj, vj, ksj, klo_j, khi_j = kb[j], vb[j], ksb[j], klo[j], khi[j]

            def compute(c):
                m, den, acc = c
                s = jnp.einsum("bqhgd,bkhd->bhgqk", qi, kj, preferred_element_type=F32)
                mask = _mask(qsi, ksj, i, j, bq, bk, causal, offset, window)
                s = jnp.where(mask, s, NEG)
                m_new = jnp.maximum(m, s.max(-1))
                p = jnp.where(mask, jnp.exp(s - m_new[..., None]), 0.0)
                corr = jnp.exp(m - m_new)
                den = den * corr + p.sum(-1)
                pv = jnp.einsum("bhgqk,bkhd->bhgqd", p, vj.astype(F32))
                return m_new, den, acc * corr[..., None] + pv

            vis = _visible(i, j, bq, bk, qlo_i, qhi_i, klo_j, khi_j, causal, offset, window)
            return lax.cond(vis, compute, lambda c: c, carry)

        init = (
            jnp.full((B, Hkv, G, bq), NEG, F32),
            jnp.zeros((B, Hkv, G, bq), F32),
            jnp.zeros((B, Hkv, G, bq, D), F32),
        )
        m, den, acc = _loop(nk, kv_step, init)
        lse = jnp.where(den > 0, m + jnp.log(jnp.where(den > 0, den, 1.0)), NEG)
        o = acc / jnp.where(den > 0, den, 1.0)[..., None]
        return o, lse

    _, (o, lse) = scan_blocks(lambda c, xs: (c, q_block(xs)), None, (jnp.arange(nq), qb, qsb, qlo, qhi))
    o = o.transpose(1, 0, 4, 2, 3, 5).reshape(B, C, Hq, D)  # [nq,B,Hkv,G,bq,D] -> [B,C,Hq,D]
    lse = lse.transpose(1, 2, 3, 0, 4).reshape(B, Hq, C)  # [nq,B,Hkv,G,bq] -> [B,Hq,C]
    return o, lse


def flash_bwd(q, k, v, qseg, kseg, o, lse, do, *, causal: bool, block_q: int, block_kv: int, offset=0,
              window: int = 0):
    """Gradients (f32) of one chunk pair given the global o, lse [B, Hq, C] and do."""
    B, C, Hq, D = q.shape
    Ck, Hkv = k.shape[1], k.shape[2]
    G = Hq // Hkv
    bq, bk = min(block_q, C), min(block_kv, Ck)
    nq, nk = C // bq, Ck // bk
    di = jnp.einsum("bshd,bshd->bhs", o.astype(F32), do.astype(F32))  # [B, Hq, C]
    qb, dob = _blocks_q(q, nq, bq, Hkv), _blocks_q(do.astype(F32), nq, bq, Hkv)
    # [B, Hq, C] -> [nq, B, Hkv, G, bq]
    def rows(x):
        return x.reshape(B, Hkv, G, nq, bq).transpose(3, 0, 1, 2, 4)

    lseb, dib = rows(lse), rows(di)
    kb, vb = _blocks_kv(k, nk, bk), _blocks_kv(v, nk, bk)
    qsb, qlo, qhi = _blocks_seg(qseg, nq, bq)
    ksb, klo, khi = _blocks_seg(kseg, nk, bk)

    def kv_block(dq_acc, xs):
        j, kj, vj, ksj, klo_j, khi_j = xs
        kj32, vj32 = kj.astype(F32), vj.astype(F32)

        def q_step(carry, ys):
            i, qi, doi, lsei, dii, qsi, qlo_i, qhi_i = ys

            def compute(c):
                dk, dv = c
                qi32 = qi.astype(F32)
                s = jnp.einsum("bqhgd,bkhd->bhgqk", qi32, kj32)
                mask = _mask(qsi, ksj, i, j, bq, bk, causal, offset, window)
                p = jnp.where(mask, jnp.exp(jnp.where(mask, s, NEG) - lsei[..., None]), 0.0)
                dv = dv + jnp.einsum("bhgqk,bqhgd->bkhd", p, doi)
                dp = jnp.einsum("bqhgd,bkhd->bhgqk", doi, vj32)
                ds = p * (dp - dii[..., None])
                dq_i = jnp.einsum("bhgqk,bkhd->bqhgd", ds, kj32)
                dk = dk + jnp.einsum("bhgqk,bqhgd->bkhd", ds, qi32)
                return (dk, dv), dq_i

            def skip(c):
                return c, jnp.zeros((B, bq, Hkv, G, D), F32)

            vis = _visible(i, j, bq, bk, qlo_i, qhi_i, klo_j, khi_j, causal, offset, window)
            return lax.cond(vis, compute, skip, carry)

        zeros = jnp.zeros((B, bk, Hkv, D), F32)
        (dk, dv), dq_parts = scan_blocks(
            q_step, (zeros, zeros), (jnp.arange(nq), qb, dob, lseb, dib, qsb, qlo, qhi)
        )
        return dq_acc + dq_parts, (dk, dv)

    dq0 = jnp.zeros((nq, B, bq, Hkv, G, D), F32)
    dq, (dk, dv) = scan_blocks(kv_block, dq0, (jnp.arange(nk), kb, vb, ksb, klo, khi))
    dq = dq.transpose(1, 0, 2, 3, 4, 5).reshape(B, C, Hq, D)
    dk = dk.transpose(1, 0, 2, 3, 4).reshape(B, Ck, Hkv, D)
    dv = dv.transpose(1, 0, 2, 3, 4).reshape(B, Ck, Hkv, D)
    return dq, dk, dv


@dataclass(frozen=True)
class XlaKernel:
    """Blockwise online-softmax kernel (skips fully masked blocks)."""

    block_q: int = 512
    block_kv: int = 512
    interpret: bool = False  # unused; uniform constructor with SplashKernel
    name: str = "xla"

    def blocks(self, chunk: int) -> tuple[int, int]:
        return min(self.block_q, chunk), min(self.block_kv, chunk)

    def check_chunk(self, chunk: int) -> str | None:
        bq, bk = self.blocks(chunk)
        if chunk % bq or chunk % bk:
            return f"chunk length {chunk} is not divisible by block_q={bq} / block_kv={bk}"
        return None

    def fwd(self, q, k, v, qseg, kseg, *, causal: bool, offset=0, window: int = 0):
        return flash_fwd(q, k, v, qseg, kseg, causal=causal, block_q=self.block_q, block_kv=self.block_kv,
                         offset=offset, window=window)

    def bwd(self, q, k, v, qseg, kseg, o, lse, do, *, causal: bool, offset=0, window: int = 0):
        return flash_bwd(q, k, v, qseg, kseg, o, lse, do, causal=causal, block_q=self.block_q,
                         block_kv=self.block_kv, offset=offset, window=window)
