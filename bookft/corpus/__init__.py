"""corpus: the on-disk, versioned corpus (documents + packed sequences + tokenizer) and its reader.

Public API: `open_corpus(path) -> Corpus`, `pack(...)` (pure packing plan), `expand_segments`.
"""

from bookft._lazy import lazy

# Lazy (bookft/_lazy.py), measured: CPU seconds of a fresh interpreter, 2-core host at load 1.1-1.3, median of
# 12 interleaved rounds: what `bookft ingest` imports (bookft.ingest.corpus_build) 0.57 s; 0.62 s with plain
# imports here (the reader's pyarrow.compute).
# public name -> defining module, imported on first use
__getattr__, __dir__, __all__ = lazy(__name__, {
    "bookft.corpus.packing": ["PackPlan", "Piece", "expand_segments", "pack"],
    "bookft.corpus.reader": ["Corpus", "open_corpus"],
})
