"""Attention: local kernels (splash, xla, reference) wrapped by context-parallel strategies
(local, allgather, ulysses, ring, usp). Entry points: `resolve(config, mesh)` (resolution.py: the
strategy that runs, its balance and lengths, then `.attend()`) and `make_attention` (api.py)."""

from bookft._lazy import lazy

# public name -> defining module, imported on first use (bookft/_lazy.py)
__getattr__, __dir__, __all__ = lazy(__name__, {
    "bookft.attention.api": ["KERNELS", "STRATEGIES", "make_attention"],
    "bookft.attention.balance": ["load_balance", "unbalance"],
    "bookft.attention.kernel_reference": ["dense_attention"],
    "bookft.attention.resolution": ["Resolved", "choose_axes", "resolve"],
    "bookft.errors": ["AttentionError"],
})
