"""phases: one pass of the corpus build, sources -> documents -> tokens -> packed sequences -> a
published corpus version (`build_pass`). The whole build of a definition, with the synthesis phase
between two passes, is ingest/corpus_build.py's `build_corpus`.

Design choices:
- Phases, each a function over one build state (state.py `Build`, what the phases hand on):
  resolve sources and extract them (extract.py: a pure function per source on a process pool or
  Ray, cached per content hash, big PDFs split into page ranges); dedup (dedup.py: exact, by text
  sha256, first occurrence wins; near-duplicates when enabled); tokenizer (given, reused from the
  previous version, or trained) and tokenize (tokens.py, cached per fingerprint); pack (a pure plan
  over lengths) and write (streamed Arrow) (write.py); the manifest (manifest.py) and the atomic
  publish (run.py).
- Streaming: the extraction cache on disk is the document store between phases. Dedup reads heads
  only (hashes computed at extraction); tokenize, train and write read one document's text at a
  time. Memory is bounded by the largest single source (its extraction in a worker, its token
  arrays here), not by the corpus.
- Deterministic: results are assembled in source order, not completion order, so a rerun gives
  the same data hash.
- Refresh pipelines build on this: the manifest lists every source with its content hash (compare
  two manifests for added / changed / removed), `work` counts the extraction and tokenization
  actually done, and a pass only re-extracts sources whose hash changed. Locking two concurrent
  builds of one corpus is the pipeline's job.
"""

from bookft.ingest.phases.run import build_pass
from bookft.ingest.phases.state import Build, NullProgress
from bookft.ingest.phases.write import manifest_kind

__all__ = ["Build", "NullProgress", "build_pass", "manifest_kind"]
