"""corpus: the on-disk, versioned corpus (documents + packed sequences + tokenizer) and its reader.

Public API: `open_corpus(path) -> Corpus`, `pack(...)` (pure packing plan), `expand_segments`.
"""

from bookft._lazy import lazy

# public name -> defining module, imported on first use (bookft/_lazy.py)
__getattr__, __dir__, __all__ = lazy(__name__, {
    "bookft.corpus.packing": ["PackPlan", "Piece", "expand_segments", "pack"],
    "bookft.corpus.reader": ["Corpus", "open_corpus"],
})
