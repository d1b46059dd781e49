"""The TPU splash kernel (Pallas) as a chunk-pair kernel; interpreted on CPU for tests.

Design choices:
- Masks are built per chunk pair, never for the global S x S: a static `CausalMask((C, C))` for a
  diagonal pair and `FullMask((C, C))` for a pair wholly below the diagonal (pairs above it are
  skipped by the strategy). Segment ids are passed as `SegmentIds(q, kv)` and AND-ed in the kernel.
  Mask metadata is processed once per (chunk, heads, blocks) and cached (`_build`).
- Forward calls the kernel with `save_residuals=True` to get (out, lse). That output cannot be
  differentiated, so the backward calls the kernel module's private `_splash_attention_bwd` with
  the *global* o and lse (after the strategy merged all pairs); pinned to jax 0.10.x's signature.
- The separate dq kernel is used (`use_fused_bwd_kernel=False`): the fused one keeps an fp32 dq
  copy per kv block, quadratic in the per-chip length.
- The kernel does not scale q; the strategy scales q by 1/sqrt(D) before calling.
- Layout: bookft uses [B, S, H, D]; splash wants [H, S, D] per batch row (vmapped over B).
- `interpret=True` only when the mesh's devices are CPU (chosen in make_attention), so the same
  code AOT-compiles the real Mosaic kernel for TPU topologies from a CPU host.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sk
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as sm

from bookft.errors import AttentionError

LANES = 128  # splash needs kv blocks that are multiples of the TPU lane width


@functools.lru_cache(maxsize=64)
def _build(chunk: int, heads: int, causal: bool, bq: int, bk: int, interpret: bool):
    mask = sm.CausalMask((chunk, chunk)) if causal else sm.FullMask((chunk, chunk))
    sizes = sk.BlockSizes(
        block_q=bq, block_kv=bk, block_kv_compute=bk,
        block_q_dkv=bq, block_kv_dkv=bk, block_kv_dkv_compute=bk,
        block_q_dq=bq, block_kv_dq=bk, use_fused_bwd_kernel=False,
    )
    with jax.ensure_compile_time_eval():  # may be first called while tracing: stay concrete
        kernel = sk.make_splash_mha(
            sm.MultiHeadMask([mask] * heads), block_sizes=sizes, head_shards=1, q_seq_shards=1,
            save_residuals=True, interpret=interpret,
        )

    def as_numpy(info):  # host constants: embed in any backend's program (TPU AOT from a CPU host)
        if info is None:
            return None
        info = jax.tree_util.tree_map(np.asarray, info)
        pmb = info.partial_mask_blocks
        if pmb is not None:  # what sk._splash_attention does before calling the kernel
            info = info._replace(partial_mask_blocks=pmb.reshape(-1, *pmb.shape[-2:]))
        return info

    fwd_info = jax.tree_util.tree_map(np.asarray, kernel.fwd_mask_info)
    dq_info, dkv_info = as_numpy(kernel.dq_mask_info), as_numpy(kernel.dkv_mask_info)
    # forward only: save_residuals=True never reaches the kernel's own vjp, so no backward infos
    kernel = sk.SplashAttentionKernel(fwd_info, None, None, **kernel.kwargs)
    return kernel, dq_info, dkv_info, sizes


@dataclass(frozen=True)
class SplashKernel:
    """Pallas splash attention over one chunk pair (causal-diagonal or full)."""

    block_q: int = 512
    block_kv: int = 512
    interpret: bool = False
    name: str = "splash"

    def blocks(self, chunk: int) -> tuple[int, int]:
        return min(self.block_q, chunk), min(self.block_kv, chunk)

    def check_chunk(self, chunk: int) -> str | None:
        bq, bk = self.blocks(chunk)
        if chunk % bq or chunk % bk:
            return f"chunk length {chunk} is not divisible by block_q={bq} / block_kv={bk}"
        if bk % LANES or bq % 8:
            return (
                f"splash needs block_kv a multiple of {LANES} and block_q a multiple of 8, got "
                f"block_q={bq}, block_kv={bk} for chunk length {chunk} (each of the 2*cp chunks "
                f"must hold at least {LANES} tokens: use a longer sequence or the xla kernel)"
            )
        return None

    def _kernel(self, q, causal):
        bq, bk = self.blocks(q.shape[1])
        return _build(q.shape[1], q.shape[2], causal, bq, bk, self.interpret)

    @staticmethod
    def _no_window(window: int) -> None:
        if window:
            raise AttentionError(
                f"sliding-window attention (window {window}) is not available with the splash kernel; "
                "use attention.kernel: xla for models with sliding-window layers"
            )

    def fwd(self, q, k, v, qseg, kseg, *, causal, offset=0, window: int = 0):
        self._no_window(window)
        if causal is False:
            return self._fwd(q, k, v, qseg, kseg, causal=False)
        return jax.lax.cond(
            causal,
            lambda: self._fwd(q, k, v, qseg, kseg, causal=True),
            lambda: self._fwd(q, k, v, qseg, kseg, causal=False),
        )

    def bwd(self, q, k, v, qseg, kseg, o, lse, do, *, causal, offset=0, window: int = 0):
        self._no_window(window)
        if causal is False:
            return self._bwd(q, k, v, qseg, kseg, o, lse, do, causal=False)
        return jax.lax.cond(
            causal,
            lambda: self._bwd(q, k, v, qseg, kseg, o, lse, do, causal=True),
            lambda: self._bwd(q, k, v, qseg, kseg, o, lse, do, causal=False),
        )

    def _fwd(self, q, k, v, qseg, kseg, *, causal: bool):
        kernel, _, _, _ = self._kernel(q, causal)
        qh, kh, vh = (x.transpose(0, 2, 1, 3) for x in (q, k, v))  # [B, H, C, D]

        def one(q1, k1, v1, qs, ks):
            o, (lse,) = kernel(q1, k1, v1, segment_ids=sk.SegmentIds(q=qs, kv=ks))
            return o, lse

        o, lse = jax.vmap(one)(qh, kh, vh, qseg.astype(jnp.int32), kseg.astype(jnp.int32))
        return o.transpose(0, 2, 1, 3).astype(jnp.float32), lse.astype(jnp.float32)

    def _bwd(self, q, k, v, qseg, kseg, o, lse, do, *, causal: bool):
        kernel, dq_info, dkv_info, sizes = self._kernel(q, causal)
        kw = kernel.kwargs
        dt = q.dtype
        qh, kh, vh = (x.transpose(0, 2, 1, 3) for x in (q, k, v))
        oh, doh = o.astype(dt).transpose(0, 2, 1, 3), do.astype(dt).transpose(0, 2, 1, 3)

        def one(q1, k1, v1, qs, ks, o1, lse1, do1):
            res = (q1, k1, v1, sk.SegmentIds(q=qs, kv=ks), None, o1, lse1, dq_info, dkv_info)
            grads = sk._splash_attention_bwd(
                False, kw["mask_value"], False, sizes, None, kw["mask_function"], None,
                self.interpret, res, do1,
            )
            return grads[3], grads[4], grads[5]

        dq, dk, dv = jax.vmap(one)(
            qh, kh, vh, qseg.astype(jnp.int32), kseg.astype(jnp.int32), oh, lse, doh
        )
        return tuple(x.transpose(0, 2, 1, 3).astype(jnp.float32) for x in (dq, dk, dv))
