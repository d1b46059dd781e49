"""Legal archive: a folder or a .zip / .tar(.gz|.bz2|.xz) of XML, HTML, JSON Lines, text (and PDF).

Design choices:
- Members are read by members.py (zip slip, links and decompression bombs refused with a reason).
- The archive (or folder) is the collection; one document per XML/HTML/text member, one per line of
  a JSON Lines member.
- Nesting cap: one level of archive. An archive named as a source, or found in a folder (the US
  Code comes as a folder of one zip per title), is opened with the rules above; an archive inside an
  archive is refused with a reason (unpack it first), so expansion stays bounded by one archive's
  caps. EPUB and DOCX are zips too: read from a folder by their own readers, refused inside an
  archive.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from bookft.ingest.config import ExtractConfig, LimitsConfig
from bookft.ingest.documents import Document, Entry, ExtractResult, clean_text
from bookft.ingest.filters.secrets import SecretScanner
from bookft.ingest.formats.docx import read_docx
from bookft.ingest.formats.epub import read_epub
from bookft.ingest.formats.legal import XmlRefused, xml_to_text
from bookft.ingest.formats.members import (
    ARCHIVE_ERRORS,
    ARCHIVE_SUFFIXES,
    ZIP_DOCUMENT_SUFFIXES,
    archive_members,
    folder_members,
    is_archive,
)
from bookft.ingest.formats.text import html_document, jsonl_documents, text_document


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
        from bookft.ingest.formats.pdf import pdf_document

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
            for name, data in archive_members(path, limits, res):
                add(name, data, f"{path}:{name}")
        else:
            for rel, data in folder_members(path, limits, res):
                if data is not None:
                    add(rel, data, f"{path}/{rel}")
                    continue
                inner = path / rel
                if rel.lower().endswith(ZIP_DOCUMENT_SUFFIXES):  # a book or filing: its own extractor
                    read = read_epub if rel.lower().endswith(".epub") else read_docx
                    res.entries.append(read(inner, str(inner), collection, limits, res))
                    res.add("files")
                    continue
                try:
                    for name, member in archive_members(inner, limits, res):
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
