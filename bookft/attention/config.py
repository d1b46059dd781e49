"""Attention configuration: which context-parallel strategy wraps which local kernel."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Strategy = Literal["local", "allgather", "ulysses", "ring", "usp"]
Kernel = Literal["splash", "xla", "reference"]


@dataclass(frozen=True, kw_only=True)
class AttentionConfig:
    strategy: Strategy = "ring"
    kernel: Kernel = "xla"
    block_q: int = 512
    block_kv: int = 512
    # Largest q/kv chunk a kernel call sees (sequence chunks are halved until they fit). Per-pair
    # temporaries scale with it; splash can only skip whole chunk pairs of other documents, so packed
    # rows balance better with smaller chunks (benchmarks/attention.py `balance`) at more kernel calls.
    max_chunk: int = 4096
    load_balance: bool = True  # zig-zag order for causal strategies (applied by the data path)
    causal: bool = True
