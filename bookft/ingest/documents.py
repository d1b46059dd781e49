"""What every extractor returns: documents plus one manifest entry per file looked at.

Design choices:
- Extraction is a pure function `path -> ExtractResult` (picklable in and out), so a process pool
  (or Ray Data, ingest/engine/ray_engine.py) maps it over sources; nothing here touches the corpus directory.
- Every file an extractor saw ends up as an `Entry` (ingested / skipped / failed + reason): nothing
  is lost silently, and the manifest can list it.
- Text normalisation shared by all sources is `clean_text` (bookft/needles/text.py, re-exported
  here): the example synthesizer below ingest measures its examples in the same text form.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

from bookft.needles.text import clean_text

__all__ = ["STATUSES", "Document", "Entry", "ExtractResult", "clean_text", "decode_text", "file_hash",
           "looks_binary", "text_hash"]

STATUSES = ("ingested", "skipped", "failed")


@dataclass
class Document:
    source: str  # file path, or "archive.zip:member/path"
    collection: str
    kind: str
    text: str
    title: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def hash(self) -> str:
        return text_hash(self.text)


@dataclass
class Entry:
    source: str
    status: str  # ingested | skipped | failed
    reason: str = ""
    kind: str = ""
    hash: str = ""  # content hash of the file (sources) or empty (members)


@dataclass
class ExtractResult:
    source: str
    kind: str
    hash: str = ""
    documents: list[Document] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)  # pages, empty_pages, files, chars, secrets
    secrets: list[dict] = field(default_factory=list)  # redacted secrets: {source, line, kind}, never the value

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(d: dict) -> ExtractResult:
        return ExtractResult(source=d["source"], kind=d["kind"], hash=d.get("hash", ""),
                             documents=[Document(**x) for x in d.get("documents", [])],
                             entries=[Entry(**x) for x in d.get("entries", [])], stats=d.get("stats", {}),
                             secrets=d.get("secrets", []))

    def add(self, stat: str, n: int = 1) -> None:
        self.stats[stat] = self.stats.get(stat, 0) + n


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def file_hash(path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def decode_text(data: bytes) -> tuple[str, str]:
    """Bytes -> (text, note). UTF-8 (with or without BOM), UTF-16 with BOM, else cp1252/latin-1."""
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", "replace"), ""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", "replace"), "decoded as UTF-16 (BOM)"
    try:
        return data.decode("utf-8"), ""
    except UnicodeDecodeError as e:
        pos = e.start
    try:
        return data.decode("cp1252"), f"not valid UTF-8 (byte {pos}); decoded as cp1252"
    except UnicodeDecodeError:
        return data.decode("latin-1"), f"not valid UTF-8 (byte {pos}); decoded as latin-1"


def looks_binary(data: bytes) -> bool:
    """Content sniffing: NUL bytes, or many control bytes, in the first 8 KiB."""
    head = data[:8192]
    if not head:
        return False
    if b"\x00" in head and not head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return True
    ctrl = sum(1 for b in head if b < 9 or 13 < b < 32)
    return ctrl / len(head) > 0.1
