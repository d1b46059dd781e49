"""Attention: local kernels (splash, xla, reference) wrapped by context-parallel strategies
(local, allgather, ulysses, ring, usp). Entry point: `make_attention`; see api.py."""

from bookft.attention.api import KERNELS, STRATEGIES, make_attention
from bookft.attention.balance import load_balance, unbalance
from bookft.attention.kernel_reference import dense_attention
from bookft.errors import AttentionError

__all__ = [
    "KERNELS",
    "STRATEGIES",
    "AttentionError",
    "dense_attention",
    "load_balance",
    "make_attention",
    "unbalance",
]
