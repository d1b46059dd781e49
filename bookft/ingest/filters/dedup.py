"""Duplicate removal in the build's dedup phase: exact duplicates (the text's sha256, computed at
extraction) and, when `near_dedup.enabled`, near-duplicates (neardup.py, MinHash LSH).

Documents come in source order and the first occurrence wins: a document is kept, or recorded as a
duplicate of an earlier kept one. Only kept documents are remembered, so a document never counts
as the original of another when it was itself dropped.
"""

from __future__ import annotations

from bookft.ingest.config import NearDedupConfig
from bookft.ingest.filters.neardup import NearDuplicates


class Duplicates:
    """Feed documents in order with `check_add`: None keeps one; else the manifest's duplicate record."""

    def __init__(self, exact: bool, near: NearDedupConfig) -> None:
        self.exact = exact
        self.near = NearDuplicates(near) if near.enabled else None
        self.seen: dict[str, str] = {}  # text sha256 -> the source of the kept document
        self.n_near = 0

    @property
    def reads_text(self) -> bool:
        """Whether check_add needs the documents' texts (near-duplicates), not only their hashes."""
        return self.near is not None

    def check_add(self, source: str, text_hash: str, text: str | None) -> dict | None:
        if self.exact and text_hash in self.seen:
            return {"source": source, "duplicate_of": self.seen[text_hash]}
        if self.near is not None:
            hit = self.near.check_add(text, source)
            if hit is not None:
                self.n_near += 1
                return {"source": source, "near_duplicate_of": hit[0], "jaccard": round(hit[1], 4)}
        self.seen[text_hash] = source
        return None
