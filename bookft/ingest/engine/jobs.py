"""The extraction tasks the pool runs (local process pool or Ray Data): a whole source, or one page range
of a large PDF.

Design choices:
- One module-level entry point, `run_task(task)`, so both engines map one function over picklable
  tuples, and a module light enough to preload in the forkserver (pool.py `context`): sources,
  the cache and the extractors; no tokenizers, Arrow or corpus code. Workers fork from a server
  that has imported it once, instead of each importing the build module.
- ("source", job, cache_root, key, content_hash): extract the source and write its cache entry in
  the worker; only the head (no texts) travels back.
- ("pages", path, start, stop, password): the raw page texts of pages [start, stop) of a PDF, read by
  pdfium exactly as the whole-file path reads them, with each page's paragraphs joined as the range's
  own running headers suggest (`page_chunks`: the costly per-page step, done here in parallel). They
  travel back (a bounded range of pages); the build reassembles the ranges in page order and runs the
  document-level steps (running headers/footers, paragraphs over page breaks, cleaning) on all pages
  at once, keeping a page's chunk only where the whole document's headers agree, then writes one
  cache entry for the whole source. Any exception in a range comes back as {"error": ...}, never
  raised: the build then extracts that file whole, so a bad file is reported exactly as unsplit.
"""

from __future__ import annotations

from pathlib import Path

from bookft.ingest.engine.cache import write_extract
from bookft.ingest.formats.pdf import page_chunks, pdf_page_range
from bookft.ingest.sources import ExtractJob, extract


def extract_to_cache(job: ExtractJob, cache_root: Path, key: str, chash: str) -> dict:
    """Extract one source, write it to the extraction cache, return only its head (no texts)."""
    res = extract(job)
    res.hash = chash
    return write_extract(cache_root, key, res)


def page_range(path: str, start: int, stop: int, password: str | None) -> dict:
    """{"pages": [text of each page in [start, stop)], "chunks": their speculative paragraphs (pdf.page_chunks)},
    or {"error": why} (the file is then extracted whole)."""
    try:
        pages = pdf_page_range(path, start, stop, password)
        return {"pages": pages, "chunks": page_chunks(pages)}
    except Exception as e:  # noqa: BLE001  any failure: the whole-file path decides what to report
        return {"error": f"{type(e).__name__}: {e}"}


def run_task(task: tuple):
    """One task of the extraction map: ("source", ...) -> head; ("pages", ...) -> page texts or error."""
    kind, *args = task
    if kind == "source":
        return extract_to_cache(*args)
    if kind == "pages":
        return page_range(*args)
    raise ValueError(f"unknown extraction task {kind!r}")
