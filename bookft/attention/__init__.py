"""Attention: local kernels (splash, xla, reference) wrapped by context-parallel strategies
(local, allgather, ulysses, ring, usp). Entry point: `make_attention`; see api.py."""

from bookft._lazy import lazy

# public name -> defining module, imported on first use (bookft/_lazy.py)
__getattr__, __dir__, __all__ = lazy(__name__, {
    "bookft.attention.api": ["KERNELS", "STRATEGIES", "make_attention"],
    "bookft.attention.balance": ["load_balance", "unbalance"],
    "bookft.attention.kernel_reference": ["dense_attention"],
    "bookft.errors": ["AttentionError"],
})
