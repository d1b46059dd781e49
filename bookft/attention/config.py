"""Attention configuration: which context-parallel strategy wraps which local kernel."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# auto: chosen from heads, KV heads, context degree and kernel (bookft/attention/resolve.py), printed
Strategy = Literal["auto", "local", "allgather", "ulysses", "ring", "usp"]
# auto: by backend (bookft.attention.api.pick_kernel): tpu -> splash (Tokamax), gpu and cpu -> xla
Kernel = Literal["auto", "splash", "xla", "reference"]

MAX_CHUNK = 4096  # default max_chunk; ring 128K on v5p:2x2x1: 4.09 GiB temp per chip with 16K chunks, 2.34 with 4K


@dataclass(frozen=True, kw_only=True)
class AttentionConfig:
    strategy: Strategy = "ring"
    kernel: Kernel = "xla"
    block_q: int = 512
    block_kv: int = 512
    # Largest q/kv chunk a kernel call sees (sequence chunks are halved until they fit). Per-pair
    # temporaries scale with it; splash can only skip whole chunk pairs of other documents, so packed
    # rows balance better with smaller chunks (benchmarks/attention.py `balance`) at more kernel calls.
    max_chunk: int = MAX_CHUNK
    load_balance: bool = True  # zig-zag order for causal strategies (applied by the data path)
    causal: bool = True
