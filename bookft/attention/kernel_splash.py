"""Tokamax's splash attention (Pallas, TPU) as a chunk-pair kernel; TPU-interpreted on CPU for tests.

Only public names of Tokamax and JAX are used:
- the op is `tokamax.ops.experimental.tpu.SplashAttention` (tokamax >= 0.0.17, Python >= 3.12:
  the `tpu` extra). Forward: `op(q, k, v, mask=, segment_ids=, return_residuals=True)` gives the
  output and (max_logits, lse), lse in natural log. Backward: the op's own VJP op, `op.vjp(
  (lse, lse), o, do, q, k, v, ...)`, which reads only the lse of the residuals. The engine passes
  the *global* o and lse (every pair merged), so the one kernel serves the local, all-gather,
  Ulysses, ring and USP strategies, forward and backward, without a private backward.
- Tokamax 0.0.17 exports no name for the two argument types its public `splash_attention`
  declares, the segment ids (`q`, `kv`) and the static mask (`is_causal`). They are read from that
  function's own signature (`typing.get_type_hints`): the types the public API promises to take.
  A Tokamax whose signature no longer names them raises AttentionError naming the version.
- Masks per chunk pair, never the global S x S: causal for a diagonal pair, full below it (pairs
  above are skipped by the engine); segment ids are AND-ed in the kernel. A traced pair kind
  (`causal` from the engine) conds between the two static masks.
- Block sizes come from Tokamax (its autotuning cache, else its heuristics: 1024 when the chunk is
  a multiple of 1024, else 128; the backward uses dq_reduction_steps=3 past three kv blocks), so a
  chunk must be a multiple of 128 tokens. Its cache-miss warning is filtered (one per trace).
  attention.block_q/block_kv size the xla kernel only.
- The kernel does not scale q; the strategy scales q by 1/sqrt(D) before calling.
- Layout: bookft uses [B, S, H, D]; splash wants [H, S, D] per batch row (vmapped over B).
- On CPU (tests) the Pallas calls run under `jax.experimental.pallas.tpu.force_tpu_interpret_mode`
  (public JAX): the TPU interpreter. The op's device check is bypassed (`bypass_device_check`), so
  the same code AOT-compiles the Mosaic kernel for TPU topologies from a CPU host (`bookft plan`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
import typing
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from bookft.errors import AttentionError

LANES = 128  # Tokamax's splash configs take blocks that are multiples of the TPU lane width
NEEDS = ("the splash kernel needs Tokamax's public splash op (tokamax 0.0.17, Python 3.12 or newer): "
         "pip install 'bookft[tpu]' on Python >= 3.12, or use attention.kernel: xla")


def _pick(union, field: str):
    for t in typing.get_args(union):
        if field in getattr(t, "__dataclass_fields__", {}):
            return t
    return None


def _quiet_cache_miss(record: logging.LogRecord) -> bool:
    """Drop Tokamax's "Autotuning cache miss ... SplashAttention" warning: it falls back to its
    heuristic blocks (what this kernel documents) and would print once per kernel trace."""
    return not str(record.msg).startswith("Autotuning cache miss for PallasMosaicTpuSplashAttention")


@functools.lru_cache(maxsize=1)
def tokamax_splash():
    """(op, vjp op, SegmentIds type, Mask type) from Tokamax's public API; AttentionError when absent."""
    if sys.version_info < (3, 12):
        raise AttentionError(f"{NEEDS} (this is Python {sys.version_info.major}.{sys.version_info.minor})")
    try:
        import tokamax
        from tokamax.ops.experimental import tpu as tokamax_tpu
    except ImportError as e:
        raise AttentionError(f"{NEEDS} ({e})") from e
    hints = typing.get_type_hints(tokamax.ops.experimental.splash_attention)
    seg_ids, mask = _pick(hints.get("segment_ids"), "kv"), _pick(hints.get("mask"), "is_causal")
    if seg_ids is None or mask is None:
        raise AttentionError(f"tokamax {tokamax.__version__}: its splash_attention signature no longer names "
                             f"a segment-ids and a causal-mask type; {NEEDS}")
    logging.getLogger("absl").addFilter(_quiet_cache_miss)
    op = tokamax_tpu.SplashAttention(bypass_device_check=True)
    return op, op.vjp.replace(bypass_device_check=True), seg_ids, mask


@dataclass(frozen=True)
class SplashKernel:
    """Tokamax splash attention over one chunk pair (causal-diagonal or full)."""

    block_q: int = 512  # xla's; Tokamax sizes its own blocks (module docstring)
    block_kv: int = 512
    interpret: bool = False
    name: str = "splash"

    def __post_init__(self):
        tokamax_splash()  # fail at make time, with the reason, not inside a trace

    def check_chunk(self, chunk: int) -> str | None:
        if chunk % LANES:
            return (f"splash needs chunks of a multiple of {LANES} tokens, got {chunk} (each of the "
                    f"2*cp chunks must hold a multiple of {LANES} tokens: use a longer sequence or the xla kernel)")
        return None

    def _interpreting(self):
        if not self.interpret:
            return contextlib.nullcontext()
        from jax.experimental.pallas import tpu as pltpu

        return pltpu.force_tpu_interpret_mode()

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
        op, _, seg_ids, mask = tokamax_splash()
        qh, kh, vh = (x.transpose(0, 2, 1, 3) for x in (q, k, v))  # [B, H, C, D]

        def one(q1, k1, v1, qs, ks):
            o, (_, lse) = op(q1, k1, v1, mask=mask(is_causal=causal), segment_ids=seg_ids(q=qs, kv=ks),
                             return_residuals=True)
            return o, lse

        with self._interpreting():
            o, lse = jax.vmap(one)(qh, kh, vh, qseg.astype(jnp.int32), kseg.astype(jnp.int32))
        return o.transpose(0, 2, 1, 3).astype(jnp.float32), lse.astype(jnp.float32)

    def _bwd(self, q, k, v, qseg, kseg, o, lse, do, *, causal: bool):
        _, vjp, seg_ids, mask = tokamax_splash()
        dt = q.dtype
        qh, kh, vh = (x.transpose(0, 2, 1, 3) for x in (q, k, v))
        oh, doh = o.astype(dt).transpose(0, 2, 1, 3), do.astype(dt).transpose(0, 2, 1, 3)

        def one(q1, k1, v1, qs, ks, o1, lse1, do1):
            g = vjp((lse1, lse1), o1, do1, q1, k1, v1, mask=mask(is_causal=causal),
                    segment_ids=seg_ids(q=qs, kv=ks))
            return g["q"], g["k"], g["v"]

        with self._interpreting():
            dq, dk, dv = jax.vmap(one)(qh, kh, vh, qseg.astype(jnp.int32), kseg.astype(jnp.int32), oh, lse, doh)
        return tuple(x.transpose(0, 2, 1, 3).astype(jnp.float32) for x in (dq, dk, dv))


def splash_available() -> bool:
    """Whether Tokamax's public splash op can be used here (Python >= 3.12 with bookft[tpu])."""
    try:
        tokamax_splash()
    except AttentionError:
        return False
    return True
