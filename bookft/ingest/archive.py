"""Legal archive: a folder or a .zip / .tar(.gz|.bz2|.xz) of XML, HTML, JSON Lines, text (and PDF).

Design choices:
- Members are read into memory and never written to disk, but dangerous members are still refused
  with a reason, because the archive is hostile input: absolute paths or `..` (zip slip), links
  (symlinks, hard links, devices), and decompression bombs (per-member size cap, compression-ratio
  cap, total uncompressed cap; reads are bounded, declared sizes are not trusted).
- The archive (or folder) is the collection; one document per XML/HTML/text member, one per line of
  a JSON Lines member.
- Nesting cap: one level of archive. An archive named as a source, or found in a folder (the US
  Code comes as a folder of one zip per title), is opened with the rules above; an archive inside an
  archive is refused with a reason (unpack it first), so expansion stays bounded by one archive's
  caps. EPUB and DOCX are zips too: read from a folder, refused inside an archive.
- `zip_parts` is the same bounded zip reader for the zip-based document formats (EPUB, DOCX): the
  members they ask for, by name, in memory.
"""

from __future__ import annotations

import os
import stat
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import IO

from bookft.ingest.config import ExtractConfig, LimitsConfig
from bookft.ingest.documents import Document, Entry, ExtractResult, clean_text
from bookft.ingest.legal import XmlRefused, xml_to_text
from bookft.ingest.secrets import SecretScanner
from bookft.ingest.text import html_document, jsonl_documents, text_document

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
ZIP_DOCUMENT_SUFFIXES = (".epub", ".docx")  # zip containers read by their own extractors (epub.py, docx.py)
ARCHIVE_ERRORS = (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, ValueError)
MB = 1 << 20


def is_archive(path: Path) -> bool:
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def unsafe_name(name: str) -> str | None:
    """Why a member name is refused (zip slip), or None."""
    if not name or "\x00" in name:
        return "empty or NUL in member name"
    norm = name.replace("\\", "/")
    if norm.startswith("/") or (len(norm) > 1 and norm[1] == ":"):
        return f"absolute path {name!r} (zip slip)"
    if ".." in PurePosixPath(norm).parts:
        return f"path {name!r} escapes the archive with '..' (zip slip)"
    return None


def _members_zip(path: Path | IO[bytes], lim: LimitsConfig, res: ExtractResult, kind: str = "legal",
                 want: Callable[[str], bool] | None = None, label: str | None = None
                 ) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of the zip's safe members; refused ones become entries of `kind`. `want(name)`,
    when given, is asked about every safe member and only those it accepts are read."""
    total = 0
    label = str(path) if label is None else label
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        if len(infos) > lim.archive_max_members:
            raise ValueError(f"{len(infos)} members, over the cap of {lim.archive_max_members}")
        for info in infos:
            src = f"{label}:{info.filename}"
            if info.is_dir():
                continue
            why = unsafe_name(info.filename)
            mode = info.external_attr >> 16
            if why is None and stat.S_ISLNK(mode):
                why = "symbolic link member refused"
            if why is None and info.file_size > lim.archive_max_member_mb * MB:
                why = f"member declares {info.file_size} bytes, over the {lim.archive_max_member_mb:g} MiB cap"
            if why is None and info.file_size > MB and info.file_size / max(info.compress_size, 1) > \
                    lim.archive_max_ratio:
                why = (f"compression ratio {info.file_size / max(info.compress_size, 1):.0f}:1 over the cap "
                       f"{lim.archive_max_ratio:g}:1 (decompression bomb)")
            if why:
                res.entries.append(Entry(src, "skipped", why, kind))
                continue
            if want is not None and not want(info.filename):
                continue
            cap = int(min(lim.archive_max_member_mb * MB, lim.archive_max_total_mb * MB - total))
            with zf.open(info) as f:
                data = f.read(cap + 1)
            if len(data) > cap:
                res.entries.append(Entry(src, "skipped", "member inflates past the size caps (decompression "
                                         "bomb); not read further", kind))
                if total + len(data) > lim.archive_max_total_mb * MB:
                    res.entries.append(Entry(label, "skipped", "archive total uncompressed size over "
                                             f"{lim.archive_max_total_mb:g} MiB; remaining members not read",
                                             kind))
                    return
                continue
            total += len(data)
            yield info.filename, data


def _members_tar(path: Path, lim: LimitsConfig, res: ExtractResult) -> Iterator[tuple[str, bytes]]:
    total = 0
    n = 0
    with tarfile.open(path, "r:*") as tf:
        for m in tf:
            n += 1
            if n > lim.archive_max_members:
                raise ValueError(f"over the cap of {lim.archive_max_members} members")
            src = f"{path}:{m.name}"
            if m.isdir():
                continue
            why = unsafe_name(m.name)
            if why is None and (m.issym() or m.islnk()):
                why = f"link member refused ({'symlink' if m.issym() else 'hard link'} to {m.linkname!r})"
            if why is None and not m.isfile():
                why = "device, FIFO or other special member refused"
            if why is None and m.size > lim.archive_max_member_mb * MB:
                why = f"member is {m.size} bytes, over the {lim.archive_max_member_mb:g} MiB cap"
            if why is None and total + m.size > lim.archive_max_total_mb * MB:
                res.entries.append(Entry(str(path), "skipped", "archive total uncompressed size over "
                                         f"{lim.archive_max_total_mb:g} MiB; remaining members not read", "legal"))
                return
            if why:
                res.entries.append(Entry(src, "skipped", why, "legal"))
                continue
            f = tf.extractfile(m)
            data = f.read(m.size) if f else b""
            total += len(data)
            yield m.name, data


def _members_folder(root: Path, lim: LimitsConfig, res: ExtractResult) -> Iterator[tuple[str, bytes | None]]:
    """(relative path, bytes) of the folder's files; None for an archive, EPUB or DOCX (opened by path)."""
    real_root = os.path.realpath(root)
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in sorted(files):
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                try:
                    target = os.path.realpath(p, strict=True)
                except OSError:
                    res.entries.append(Entry(str(p), "skipped", "symlink loop or dangling symlink", "legal"))
                    continue
                if not target.startswith(real_root + os.sep):
                    res.entries.append(Entry(str(p), "skipped", "symlink leaves the folder; not followed", "legal"))
                    continue
            try:
                if p.stat().st_size > lim.max_file_mb * MB:
                    res.entries.append(Entry(str(p), "skipped", f"file over {lim.max_file_mb:g} MiB", "legal"))
                    continue
                data = None if is_archive(p) or name.lower().endswith(ZIP_DOCUMENT_SUFFIXES) else p.read_bytes()
            except OSError as e:
                res.entries.append(Entry(str(p), "failed", f"cannot read file: {e.strerror or e}", "legal"))
                continue
            yield rel, data


def _members_archive(path: Path, lim: LimitsConfig, res: ExtractResult) -> Iterator[tuple[str, bytes]]:
    return _members_zip(path, lim, res) if path.name.lower().endswith(".zip") else _members_tar(path, lim, res)


def zip_parts(file: Path | IO[bytes], label: str, lim: LimitsConfig, res: ExtractResult, kind: str,
              want: Callable[[str], bool]) -> dict[str, bytes]:
    """The members of a zip-based document (EPUB, DOCX) that `want` accepts, by name, read under the
    archive rules (refused members become entries of `kind`). Raises ARCHIVE_ERRORS for a bad zip."""
    return dict(_members_zip(file, lim, res, kind, want, label))


def member_documents(name: str, data: bytes, source: str, collection: str, extract: ExtractConfig | None = None,
                     password: str | None = None) -> tuple[list[Document], Entry]:
    """One archive member (or folder file) -> documents + its manifest entry, by extension."""
    extract = extract or ExtractConfig()
    low = name.lower()
    if low.endswith(".xml"):
        try:
            text, title, schema = xml_to_text(data)
        except XmlRefused as e:
            return [], Entry(source, "failed", str(e), "legal")
        text = clean_text(text)
        if not text:
            return [], Entry(source, "skipped", "XML without text", "legal")
        title = title or PurePosixPath(name).stem
        return [Document(source, collection, "legal", text, title, {"schema": schema})], Entry(source, "ingested",
                                                                                               "", "legal")
    if low.endswith((".jsonl", ".ndjson")):
        return jsonl_documents(data, source, collection, "legal")
    if low.endswith((".html", ".htm", ".xhtml")):
        doc, entry = html_document(data, source, collection, "legal")
        return ([doc] if doc else []), entry
    if low.endswith(".pdf"):
        from bookft.ingest.pdf import pdf_document

        doc, entry, _ = pdf_document(data, source, collection, extract.pdf_backend, password=password,
                                     ocr=extract.ocr if extract.ocr.enabled else None)
        return ([doc] if doc else []), entry
    if low.endswith(ARCHIVE_SUFFIXES + ZIP_DOCUMENT_SUFFIXES):  # a folder opens these by path, never here
        return [], Entry(source, "skipped", "archive inside an archive not opened (archives are opened one level "
                         "deep: unpack the outer one to ingest it)", "legal")
    if low.endswith((".json", ".png", ".jpg", ".jpeg", ".gif", ".exe", ".so", ".bin")):
        return [], Entry(source, "skipped", f"unsupported member type ({PurePosixPath(name).suffix})", "legal")
    doc, entry = text_document(data, source, collection, "legal")
    return ([doc] if doc else []), entry


def extract_legal(path: Path, collection: str, limits: LimitsConfig, extract: ExtractConfig | None = None,
                  password: str | None = None, secrets: SecretScanner | None = None) -> ExtractResult:
    """A legal folder or archive -> documents, one manifest entry per member. An archive in the folder is
    opened in place (members named `folder/sub/title.zip:member`); a damaged one fails alone. With
    `secrets`, each document's secrets are redacted (lines of its extracted text) and listed."""
    res = ExtractResult(source=str(path), kind="legal")

    def add(name: str, data: bytes, src: str) -> None:
        docs, entry = member_documents(name, data, src, collection, extract, password)
        if secrets is not None:
            for d in docs:
                d.text, found = secrets.redact(d.text, name)
                if found:
                    res.secrets.extend(f.record(d.source) for f in found)
                    res.add("secrets", len(found))
        res.documents.extend(docs)
        res.entries.append(entry)
        res.add("files")

    try:
        if not path.is_dir() and not is_archive(path):  # one XML (or other) file: its own only member
            add(path.name, path.read_bytes(), str(path))
        elif not path.is_dir():
            for name, data in _members_archive(path, limits, res):
                add(name, data, f"{path}:{name}")
        else:
            for rel, data in _members_folder(path, limits, res):
                if data is not None:
                    add(rel, data, f"{path}/{rel}")
                    continue
                inner = path / rel
                if rel.lower().endswith(ZIP_DOCUMENT_SUFFIXES):  # a book or filing: its own extractor
                    from bookft.ingest.docx import read_docx
                    from bookft.ingest.epub import read_epub

                    read = read_epub if rel.lower().endswith(".epub") else read_docx
                    res.entries.append(read(inner, str(inner), collection, limits, res))
                    res.add("files")
                    continue
                try:
                    for name, member in _members_archive(inner, limits, res):
                        add(name, member, f"{inner}:{name}")
                except ARCHIVE_ERRORS as e:
                    res.entries.append(Entry(str(inner), "failed", f"damaged or refused archive: "
                                             f"{type(e).__name__}: {e}", "legal"))
    except ARCHIVE_ERRORS as e:
        res.entries.append(Entry(str(path), "failed", f"damaged or refused archive: {type(e).__name__}: {e}",
                                 "legal"))
    if not res.entries:
        res.entries.append(Entry(str(path), "skipped", "archive or folder holds no files", "legal"))
    return res
