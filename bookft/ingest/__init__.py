"""ingest: sources (PDF, EPUB, DOCX, code repository, legal archive, JSONL, HTML, text) -> documents -> corpus.

Public API: `IngestConfig`, `build_corpus(config) -> manifest`, `extract(job)` (the pure per-source
function), `resolve_sources`, `train_bpe`, `load_tokenizer`.

Layout (docs/design.md, "Inside ingest"): corpus_build.py (the whole build) and example_writer.py
(its synthesis phase) on top of phases/ (one pass: extract, dedup, tokenize, pack, write, publish);
formats/ (one reader per format), filters/ (secrets, duplicates), engine/ (pool, Ray, jobs, cache);
sample/ (the built-in sample corpus) apart.
"""

from bookft._lazy import lazy

# Lazy (bookft/_lazy.py), measured: CPU seconds of a fresh interpreter, 2-core host at load 1.1-1.3, median of
# 5 interleaved rounds: `import bookft.app` (every command, `bookft --help` too) 0.16 s, 0.51 s with plain
# imports here; the pool's forkserver preload (bookft.ingest.engine.jobs) 0.34 s, 0.43 s.
# public name -> defining module, imported on first use
__getattr__, __dir__, __all__ = lazy(__name__, {
    "bookft.ingest.corpus_build": ["build_corpus"],
    "bookft.ingest.config": ["IngestConfig"],
    "bookft.ingest.sources": ["ExtractJob", "extract", "resolve_sources"],
    "bookft.ingest.tokenize": ["load_tokenizer", "train_bpe"],
})
