"""ingest: sources (PDF, code repository, legal archive, JSONL, HTML, text) -> documents -> tokens -> corpus.

Public API: `IngestConfig`, `build_corpus(config) -> manifest`, `extract(job)` (the pure per-source
function), `resolve_sources`, `train_bpe`, `load_tokenizer`.
"""

from bookft.ingest.build import build_corpus
from bookft.ingest.config import IngestConfig
from bookft.ingest.sources import ExtractJob, extract, resolve_sources
from bookft.ingest.tokenize import load_tokenizer, train_bpe

__all__ = ["IngestConfig", "build_corpus", "ExtractJob", "extract", "resolve_sources", "load_tokenizer",
           "train_bpe"]
