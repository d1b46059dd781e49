"""The format registry: a source's kind -> the reader that extracts it, and a file's kind by its name.

Design choices:
- One table (`READERS`), not a chain of tests: a reader takes the source's path and its job
  (collection, extraction settings, limits, PDF password) and returns an ExtractResult. A new
  format is one reader module and one row here; `KINDS` (what `--kind` accepts) is the table's keys.
- Secrets are redacted inside the readers that ask for it (code always, legal when asked), with a
  scanner opened for the one job (bookft/ingest/filters/secrets.py).
- `file_kind` names a file's kind by its suffix (an archive is legal), else by its first bytes
  (`%PDF-`), else text.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bookft.ingest.documents import ExtractResult
from bookft.ingest.filters.secrets import scanner
from bookft.ingest.formats.archive import extract_legal
from bookft.ingest.formats.code import extract_code
from bookft.ingest.formats.docx import extract_docx
from bookft.ingest.formats.epub import extract_epub
from bookft.ingest.formats.members import is_archive
from bookft.ingest.formats.pdf import extract_pdf
from bookft.ingest.formats.text import extract_text_file

Reader = Callable[[Path, "object"], ExtractResult]  # (path, ExtractJob) -> result


def read_pdf(p: Path, job) -> ExtractResult:
    ocr = job.extract.ocr if job.extract.ocr.enabled else None
    return extract_pdf(p, job.collection, job.extract.pdf_backend, password=job.pdf_password, ocr=ocr)


def read_epub(p: Path, job) -> ExtractResult:
    return extract_epub(p, job.collection, job.limits)


def read_docx(p: Path, job) -> ExtractResult:
    return extract_docx(p, job.collection, job.limits)


def read_code(p: Path, job) -> ExtractResult:
    with scanner(job.extract.secrets.code) as secrets:
        return extract_code(p, job.collection, job.limits.code_max_file_kb, job.extract.code_skip_vendored,
                            job.extract.code_include_hidden, secrets)


def read_legal(p: Path, job) -> ExtractResult:
    with scanner(job.extract.secrets.legal) as secrets:
        return extract_legal(p, job.collection, job.limits, job.extract, job.pdf_password, secrets)


def read_text(p: Path, job) -> ExtractResult:
    """JSON Lines, HTML or plain text: one reader, told the kind."""
    return extract_text_file(p, job.collection, job.kind)


READERS: dict[str, Reader] = {"pdf": read_pdf, "epub": read_epub, "docx": read_docx, "code": read_code,
                              "legal": read_legal, "jsonl": read_text, "html": read_text, "text": read_text}
KINDS = tuple(READERS)

# suffix -> kind, tried in order after the archive suffixes (an archive is a legal source)
SUFFIX_KINDS: tuple[tuple[tuple[str, ...], str], ...] = (
    ((".pdf",), "pdf"), ((".epub",), "epub"), ((".docx",), "docx"), ((".xml",), "legal"),
    ((".jsonl", ".ndjson"), "jsonl"), ((".html", ".htm", ".xhtml"), "html"))


def reader(kind: str) -> Reader:
    """The reader of `kind`; any other kind is read as text."""
    return READERS.get(kind, read_text)


def file_kind(path: Path) -> str:
    low = path.name.lower()
    if is_archive(path):
        return "legal"
    for suffixes, kind in SUFFIX_KINDS:
        if low.endswith(suffixes):
            return kind
    try:
        with open(path, "rb") as f:
            if f.read(5) == b"%PDF-":
                return "pdf"
    except OSError:
        pass
    return "text"
