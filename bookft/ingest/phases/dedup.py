"""The dedup phase: exact duplicates (text sha256, first occurrence wins) and, when enabled,
near-duplicates (filters/dedup.py). It reads the extraction heads only, and the texts one at a
time when near-duplicates are looked for."""

from __future__ import annotations

from bookft.ingest.filters.dedup import Duplicates
from bookft.ingest.phases.state import Build


def run(b: Build) -> None:
    """The kept documents of every source (`b.keep`), and a record per dropped one (`b.duplicates`)."""
    cfg, progress = b.cfg, b.progress
    progress.start("dedup", len(b.jobs), "sources")
    dups = Duplicates(cfg.dedup, cfg.near_dedup)
    for i in range(len(b.jobs)):
        if not b.heads[i]["documents"]:
            continue
        b.keep[i] = []
        texts = b.cache.documents(b.keys[i]) if dups.reads_text else None
        for k, d in enumerate(b.heads[i]["documents"]):
            text = next(texts).text if texts is not None else None
            hit = dups.check_add(d["source"], d["hash"], text)
            if hit is not None:
                b.duplicates.append(hit)
                continue
            b.keep[i].append(k)
        progress.advance(1)
    b.n_near = dups.n_near
    del dups
    progress.end()
    b.n_docs = sum(len(v) for v in b.keep.values())
