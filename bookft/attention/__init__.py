"""Attention: local kernels (splash, xla, reference) wrapped by context-parallel strategies
(local, allgather, ulysses, ring, usp). Entry points: `resolve(config, mesh)` (resolution.py: the
strategy that runs, its balance and lengths, then `.attend()`) and `make_attention` (api.py)."""

from bookft._lazy import lazy

# Lazy (bookft/_lazy.py), measured: CPU seconds of a fresh interpreter, 2-core host at load 1.1-1.3, median of
# 5 interleaved rounds: `import bookft.attention.resolution` 0.05 s; 1.75 s with plain imports here (jax).
# public name -> defining module, imported on first use
__getattr__, __dir__, __all__ = lazy(__name__, {
    "bookft.attention.api": ["KERNELS", "STRATEGIES", "make_attention"],
    "bookft.attention.balance": ["load_balance", "unbalance"],
    "bookft.attention.kernel_reference": ["dense_attention"],
    "bookft.attention.resolution": ["Resolved", "choose_axes", "resolve"],
    "bookft.errors": ["AttentionError"],
})
