"""Sources: resolve what the user named into extraction jobs, and the one pure extraction entry point.

Design choices:
- `resolve_sources` turns paths into `ExtractJob`s (kind detected per source when `auto`): a PDF,
  EPUB or DOCX file, an archive, a code repository folder, a legal folder, a JSONL/HTML/text file.
  A plain folder of books/texts is expanded into one job per file, so refreshes
  re-extract only what changed. Paths that cannot be used become failed/skipped manifest entries,
  never exceptions.
- `extract(job) -> ExtractResult` is a pure function of the job (picklable), run by a process pool
  or as Ray Data tasks (`engine: ray`, ingest/engine/ray_engine.py); it dispatches by kind through
  the format registry (ingest/formats/registry.py). `job_key` is its cache key: the content hash of
  the source plus the extractor version and options. A PDF password travels in the job (never in
  the manifest); the key holds only a salted, slow hash of it, so a changed password re-extracts.
- Secrets (bookft/ingest/filters/secrets.py) are redacted inside extraction, before anything is cached or
  tokenized: code repositories by default, legal sources when asked (`extract.secrets`).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bookft.ingest.config import ExtractConfig, LimitsConfig
from bookft.ingest.documents import Entry, ExtractResult, file_hash
from bookft.ingest.formats.code import VENDORED_DIRS, Walker, looks_like_repository
from bookft.ingest.formats.members import is_archive
from bookft.ingest.formats.registry import file_kind, reader

EXTRACTOR_VERSION = "1"
LEGAL_EXTS = (".xml", ".jsonl", ".ndjson", ".html", ".htm")
BOOK_KINDS = ("pdf", "epub", "docx")  # one file is one work: its own collection
BOOK_EXTS = (".pdf", ".epub", ".docx")


@dataclass(frozen=True)
class ExtractJob:
    path: str
    kind: str  # one of KINDS (formats/registry.py)
    collection: str
    extract: ExtractConfig
    limits: LimitsConfig
    pdf_password: str | None = field(default=None, repr=False)


def _files(folder: Path) -> list[Path]:
    out = []
    for dirpath, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in VENDORED_DIRS)
        out.extend(Path(dirpath) / f for f in sorted(files) if not f.startswith("."))
    return out


def resolve_sources(paths: list[tuple], extract: ExtractConfig, limits: LimitsConfig
                    ) -> tuple[list[ExtractJob], list[Entry]]:
    """[(path, kind, collection[, pdf_password])] -> (jobs in order, entries for paths that cannot be used).

    A folder with `auto`: a code repository (git checkout, or mostly source code and no documents)
    is one job; a folder of mostly XML/JSONL/HTML (and no books or archives) is one legal job; any
    other folder is opened: each file is its own job (a PDF, EPUB or DOCX is its own collection,
    other files share the folder's collection; an archive is a legal job) and each subfolder is
    resolved the same way. A password applies to every PDF the source holds.
    """
    jobs: list[ExtractJob] = []
    bad: list[Entry] = []
    for raw, kind, coll, *rest in paths:
        out: list[ExtractJob] = []
        _resolve(Path(raw), raw, kind, coll, extract, limits, out, bad)
        password = rest[0] if rest else None
        jobs.extend(ExtractJob(j.path, j.kind, j.collection, j.extract, j.limits, password) if password else j
                    for j in out)
    return jobs, bad


def _resolve(p: Path, raw: str, kind: str, coll: str | None, extract: ExtractConfig, limits: LimitsConfig,
             jobs: list[ExtractJob], bad: list[Entry]) -> None:
    if p.is_symlink():
        try:
            os.path.realpath(p, strict=True)
        except OSError as e:
            why = "symlink loop" if e.errno == 40 else "dangling symlink"
            bad.append(Entry(raw, "failed", f"{why}: cannot be followed", kind))
            return
    if not p.exists():
        bad.append(Entry(raw, "failed", "path does not exist", kind))
        return
    if p.is_file():
        k = file_kind(p) if kind == "auto" else kind
        if k == "code":
            bad.append(Entry(raw, "failed", "kind 'code' needs a folder", k))
            return
        if k == "legal" and not (is_archive(p) or p.name.lower().endswith(".xml")):
            k = file_kind(p)
        jobs.append(ExtractJob(str(p), k, coll or p.stem, extract, limits))
        return
    if not p.is_dir():
        bad.append(Entry(raw, "failed", "not a regular file or folder", kind))
        return
    name = coll or p.resolve().name
    if kind in ("code", "legal"):
        jobs.append(ExtractJob(str(p), kind, name, extract, limits))
        return
    files = _files(p)
    if not files and not (kind == "auto" and (p / ".git").exists()):
        bad.append(Entry(raw, "skipped", "empty folder: no files to ingest", kind))
        return
    if kind == "auto":
        if looks_like_repository(p):
            jobs.append(ExtractJob(str(p), "code", name, extract, limits))
            return
        if sum(f.name.lower().endswith(LEGAL_EXTS) for f in files) * 2 >= len(files) and \
                not any(is_archive(f) or f.name.lower().endswith(BOOK_EXTS) for f in files):
            jobs.append(ExtractJob(str(p), "legal", name, extract, limits))
            return
        for child in sorted(os.listdir(p)):
            if child.startswith(".") or child in VENDORED_DIRS:
                continue
            c = p / child
            if c.is_dir() and not c.is_symlink():
                _resolve(c, str(c), "auto", None, extract, limits, jobs, bad)
            else:
                k = file_kind(c) if c.is_file() else "auto"
                shared = name if k in ("text", "html") else None  # loose texts share the folder's collection
                _resolve(c, str(c), "auto", shared, extract, limits, jobs, bad)
        return
    for f in files:  # forced pdf/text/html/jsonl on a folder: every file, that kind
        jobs.append(ExtractJob(str(f), kind, f.stem if kind in BOOK_KINDS else name, extract, limits))


def content_hash(job: ExtractJob) -> str:
    """sha256 of the source's bytes; a folder: of its files' paths and contents (.git excluded; for a
    code repository only the files the extractor would read, so ignored build output costs nothing)."""
    p = Path(job.path)
    if p.is_file():
        try:
            return file_hash(p)
        except OSError:
            return ""
    h = hashlib.sha256()
    if job.kind == "code":
        walker = Walker(p, ExtractResult(source=job.path, kind="code"), job.extract.code_include_hidden,
                         job.extract.code_skip_vendored)
        files = [fp for _, fp in walker.walk(p, "", [])]
        h.update(json.dumps([[e.source, e.reason] for e in walker.res.entries]).encode())
    else:
        files = []
        for dirpath, dirs, names in os.walk(p):
            dirs[:] = sorted(d for d in dirs if d != ".git")
            files.extend(Path(dirpath) / f for f in sorted(names))
    cap = job.limits.code_max_file_kb * 1024 if job.kind == "code" else None
    for fp in files:
        h.update(str(fp.relative_to(p)).encode("utf-8", "surrogateescape") + b"\0")
        try:
            if fp.is_symlink():
                h.update(os.readlink(fp).encode("utf-8", "surrogateescape"))
            elif cap is not None and fp.stat().st_size > cap:
                h.update(str(fp.stat().st_size).encode())  # skipped by size; only its size matters
            else:
                h.update(bytes.fromhex(file_hash(fp)))
        except OSError:
            h.update(b"unreadable")
    return h.hexdigest()


def job_key(job: ExtractJob, chash: str) -> str:
    extract = asdict(job.extract)
    del extract["pdf_pages_per_job"]  # how a PDF is split across the pool; the result is the same
    opts = {"v": EXTRACTOR_VERSION, "kind": job.kind, "collection": job.collection, "path": job.path,
            "extract": extract, "limits": asdict(job.limits)}
    if job.pdf_password:  # salted and slow: the cache key does not give the password away
        opts["password"] = hashlib.pbkdf2_hmac("sha256", job.pdf_password.encode(), (chash or job.path).encode(),
                                               100_000).hex()
    return hashlib.sha256((chash + json.dumps(opts, sort_keys=True)).encode()).hexdigest()


def extract(job: ExtractJob) -> ExtractResult:
    """The pure extraction function: one job -> documents + manifest entries. Never raises for bad input."""
    p = Path(job.path)
    try:
        size = p.stat().st_size if p.is_file() else 0
        if size > job.limits.max_file_mb * (1 << 20):
            res = ExtractResult(source=job.path, kind=job.kind)
            why = f"file over the {job.limits.max_file_mb:g} MiB cap"
            res.entries.append(Entry(job.path, "skipped", why, job.kind))
            return res
        return reader(job.kind)(p, job)
    except Exception as e:  # a bug or an unforeseen file: report it, keep the run going
        res = ExtractResult(source=job.path, kind=job.kind)
        res.entries.append(Entry(job.path, "failed", f"unexpected error: {type(e).__name__}: {e}", job.kind))
        return res
