"""corpus: the on-disk, versioned corpus (documents + packed sequences + tokenizer) and its reader.

Public API: `open_corpus(path) -> Corpus`, `pack(...)` (pure packing plan), `expand_segments`.
"""

from bookft.corpus.packing import PackPlan, Piece, expand_segments, pack
from bookft.corpus.reader import Corpus, open_corpus

__all__ = ["Corpus", "open_corpus", "pack", "PackPlan", "Piece", "expand_segments"]
