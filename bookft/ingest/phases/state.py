"""What the phases of one build pass hand on (`Build`), and the progress sink when none is given."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bookft.corpus.crash import crash_point
from bookft.ingest.config import IngestConfig
from bookft.ingest.documents import Document
from bookft.ingest.engine.cache import SourceCache
from bookft.ingest.engine.pool import in_thread
from bookft.ingest.tokenize import load_tokenizer

LossWeightsFn = Callable[[Document, np.ndarray], "np.ndarray | None"]


class NullProgress:
    def start(self, phase: str, total: int | None = None, unit: str = "") -> None: ...
    def advance(self, n: int = 1, **counters) -> None: ...
    def end(self) -> None: ...


@dataclass
class Build:
    """What the phases of one build pass on: sources, their extraction heads, kept documents, the
    tokenizer, the token files, the packing plan. Each phase reads what earlier ones set."""

    cfg: IngestConfig
    progress: object
    root: Path
    cache: SourceCache
    loss_weights: LossWeightsFn | None
    fixed_tokenizer: tuple | None = None  # (tokenizer, origin) used as it is (build_pass's `tokenizer`)
    previous: dict | None = None  # the current version's manifest: unreadable sources keep its documents
    stale: dict[int, tuple[str, str]] = field(default_factory=dict)  # job index -> (hash, key) kept (stale.py)
    stale_sources: list[dict] = field(default_factory=list)  # the manifest's `stale`
    timings: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds of this process (workers not included)
    specs: list = field(default_factory=list)
    labels: list[str] = field(default_factory=list)  # each spec's source name (the mix's and the manifest's)
    unmixed: list[str] = field(default_factory=list)  # names of sources packed once each, outside the mix
    jobs: list = field(default_factory=list)
    job_label: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    hashes: list[str] = field(default_factory=list)
    todo: list[int] = field(default_factory=list)  # indices of the jobs extracted this time
    page_ranges: int = 0  # page-range jobs run for split PDFs (extract.pdf_pages_per_job)
    heads: list[dict] = field(default_factory=list)
    entries: list[dict] = field(default_factory=list)
    stats_total: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    secrets: list[dict] = field(default_factory=list)  # redacted secrets: source, line, kind (filters/secrets.py)
    secrets_per_source: dict[str, int] = field(default_factory=dict)
    keep: dict[int, list[int]] = field(default_factory=dict)  # source index -> kept document indices
    duplicates: list[dict] = field(default_factory=list)
    n_near: int = 0
    n_docs: int = 0
    tok: object = None
    given_tokenizer: Future | None = None  # tokenizer.path, loading in a thread since extraction began
    origin: str = "trained"
    fp: str = ""
    eos_id: int | None = None
    pad_id: int | None = None
    eos: int | None = None
    staged: Path | None = None
    tok_file: Path | None = None
    w_file: Path | None = None
    doc_off: list[int] = field(default_factory=lambda: [0])
    doc_coll: list[int] = field(default_factory=list)
    doc_label: list[str] = field(default_factory=list)  # each kept document's source name
    mix: dict | None = None  # the mix record (ingest/mix.py) when the build mixes
    bounds_parts: list[np.ndarray] = field(default_factory=list)
    bound_off: list[int] = field(default_factory=lambda: [0])
    n_tok_total: int = 0
    plan: object = None
    info: dict = field(default_factory=dict)

    def start_tokenizer_load(self) -> None:
        """A given tokenizer (tokenizer.path) loads in a thread from here on (about 0.2 s of this process
        for a 49k vocabulary, GIL held): called once the extraction tasks are handed out, so the pool
        does not wait for it."""
        if self.cfg.tokenizer.path and self.given_tokenizer is None:
            self.given_tokenizer = in_thread(load_tokenizer, self.cfg.tokenizer.path)

    @contextmanager
    def phase(self, name: str):
        t, c = time.perf_counter(), time.process_time()
        yield
        self.timings[name] = time.perf_counter() - t
        self.cpu[name] = time.process_time() - c
        crash_point(f"after-{name}")  # the tests' kill -9 between phases (corpus/crash.py)

    def kept_docs(self):
        """(source index, Document) of every kept document, in order, one text in memory at a time."""
        for i in sorted(self.keep):
            for d in self.cache.documents(self.keys[i], self.keep[i]):
                yield i, d
