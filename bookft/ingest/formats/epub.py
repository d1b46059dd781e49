"""EPUB (2 and 3) -> one document per book: chapters in spine order, navigation titles as headings.

Design choices:
- Read with the standards themselves (OCF zip container, OPF package, EPUB 3 nav / EPUB 2 NCX,
  XHTML) through the bounded zip reader (`members.zip_parts`: zip slip refused, member,
  ratio and total caps, bounded reads; only XML/XHTML members are read, never images or fonts).
  The package XML (container.xml, the OPF, toc.ncx, encryption.xml) is parsed with defusedxml
  (`legal.parse_xml`: entity bombs and XXE refused). Not ebooklib: it opens the zip itself without
  size caps and parses with lxml, resolving entities, and would add two dependencies for what this
  file does.
- Chapters (and nav.xhtml) are read by the stdlib HTML parser (`xhtml.py`): it never expands declared
  entities or fetches anything, knows HTML's named entities (`&nbsp;` in XHTML is common and not
  well-formed XML) and keeps going on sloppy markup, so one bad tag does not lose a chapter.
- Order: the spine's linear items, then its `linear="no"` items (notes, pop-up footnotes), so no text
  is lost. The EPUB 3 navigation document is not body text: its titles become headings.
- Headings: each navigation title (nav.xhtml's toc, else toc.ncx) opens its own paragraph where it
  points (a chapter's start, or the element with the fragment's id), unless the text there already
  says the same (an <h1> with the title). Footnotes: see `xhtml.py` (kept, at the chapter's end).
- Metadata: dc:title (the document title; else the file name), every dc:creator ("; "),
  dc:language, in the document meta with the chapter count.
- Refused, with a reason that names the file and the problem: DRM (META-INF/encryption.xml encrypting
  anything but fonts with the IDPF/Adobe font obfuscation; META-INF/rights.xml, Adobe ADEPT;
  license.lcpl, Readium LCP; sinf.xml, Apple FairPlay) and malformed books (not a zip, no
  container.xml, no package document, an empty spine, package XML refused). A chapter missing from
  the zip is left out and named in the entry's note; the rest of the book is kept.
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import IO
from urllib.parse import unquote

from bookft.ingest.config import LimitsConfig
from bookft.ingest.documents import Document, Entry, ExtractResult, clean_text
from bookft.ingest.formats.legal import XmlRefused, local_name, parse_xml
from bookft.ingest.formats.members import ARCHIVE_ERRORS, zip_parts
from bookft.ingest.formats.xhtml import nav_links, render_xhtml

XHTML_TYPES = ("application/xhtml+xml", "text/html", "application/xml")
READ_EXTS = (".xml", ".opf", ".ncx", ".xhtml", ".html", ".htm", ".xht", ".lcpl")
FONT_OBFUSCATION = ("http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC")
DRM_FILES = {"META-INF/rights.xml": "Adobe ADEPT (META-INF/rights.xml)",
             "META-INF/license.lcpl": "Readium LCP (META-INF/license.lcpl)",
             "META-INF/sinf.xml": "Apple FairPlay (META-INF/sinf.xml)"}


class EpubFailure(Exception):
    """An EPUB that cannot be read; the message is the manifest reason."""


def _href(base: str, href: str) -> tuple[str | None, str]:
    """A relative href from the folder `base` -> (zip member name or None if it leaves the book, fragment)."""
    path, _, frag = href.partition("#")
    if not path:
        return None, unquote(frag)
    name = posixpath.normpath(posixpath.join(base, unquote(path)))
    if name.startswith(("../", "/")) or name == "..":
        return None, unquote(frag)
    return name, unquote(frag)


def _xml(parts: dict[str, bytes], name: str, what: str):
    if name not in parts:
        raise EpubFailure(f"malformed EPUB: {name} ({what}) is missing")
    try:
        return parse_xml(parts[name])
    except XmlRefused as e:
        raise EpubFailure(f"malformed EPUB: {name} ({what}): {e}") from None


def _check_drm(parts: dict[str, bytes], names: set[str]) -> None:
    for name, scheme in DRM_FILES.items():
        if name in names:
            raise EpubFailure(f"DRM-protected EPUB: {scheme}; bookft cannot decrypt it: use a DRM-free copy")
    if "META-INF/encryption.xml" not in names:
        return
    root = _xml(parts, "META-INF/encryption.xml", "encryption manifest")
    locked = []
    for data in root.iter():
        if local_name(data.tag) != "EncryptedData":
            continue
        alg = next((m.get("Algorithm", "") for m in data.iter() if local_name(m.tag) == "EncryptionMethod"), "")
        uri = next((r.get("URI", "") for r in data.iter() if local_name(r.tag) == "CipherReference"), "")
        if alg not in FONT_OBFUSCATION:  # font obfuscation is not DRM: the text stays readable
            locked.append((unquote(uri), alg))
    if locked:
        raise EpubFailure(f"DRM-protected EPUB: META-INF/encryption.xml encrypts {len(locked)} file(s) (first: "
                          f"{locked[0][0]}, algorithm {locked[0][1] or 'unnamed'}); bookft cannot decrypt it: use "
                          "a DRM-free copy")


def _package(parts: dict[str, bytes]) -> str:
    root = _xml(parts, "META-INF/container.xml", "OCF container")
    for el in root.iter():
        if local_name(el.tag) == "rootfile" and el.get("full-path"):
            name = posixpath.normpath(unquote(el.get("full-path")))
            if name not in parts:
                raise EpubFailure(f"malformed EPUB: META-INF/container.xml names the package {name}, which is "
                                  "not in the archive")
            return name
    raise EpubFailure("malformed EPUB: META-INF/container.xml names no package document (rootfile)")


def _nav_titles(parts: dict[str, bytes], opf: str, manifest: dict, nav_id: str | None, ncx_id: str | None
                ) -> list[tuple[str, str, str]]:
    """[(member, fragment, title)] in reading order, from nav.xhtml's toc, else from toc.ncx."""
    base = posixpath.dirname(opf)
    if nav_id:
        name, _ = _href(base, manifest[nav_id][0])
        if name in parts:
            nbase = posixpath.dirname(name)
            out = [(m, f, t) for href, t in nav_links(parts[name]) for m, f in [_href(nbase, href)] if m]
            if out:
                return out
    if ncx_id and ncx_id in manifest:
        name, _ = _href(base, manifest[ncx_id][0])
        if name in parts:
            try:
                root = parse_xml(parts[name])
            except XmlRefused:
                return []
            nbase = posixpath.dirname(name)
            out = []
            for point in root.iter():
                if local_name(point.tag) != "navPoint":
                    continue
                label = next((" ".join("".join(t.itertext()).split()) for t in point.iter()
                              if local_name(t.tag) == "text"), "")
                src = next((c.get("src", "") for c in point if local_name(c.tag) == "content"), "")
                m, f = _href(nbase, src)
                if m and label:
                    out.append((m, f, label))
            return out
    return []


def read_epub(file: Path | IO[bytes], source: str, collection: str, limits: LimitsConfig, res: ExtractResult
              ) -> Entry:
    """Read one EPUB into `res` (its document, refused members' entries); returns the book's own entry."""
    names: set[str] = set()

    def want(name: str) -> bool:
        names.add(name)
        return name.lower().endswith(READ_EXTS)

    try:
        try:
            parts = zip_parts(file, source, limits, res, "epub", want)
        except ARCHIVE_ERRORS as e:
            raise EpubFailure(f"malformed EPUB: not a readable zip archive ({type(e).__name__}: {e})") from None
        _check_drm(parts, names)
        opf = _package(parts)
        pkg = _xml(parts, opf, "package document")
        doc = _book(parts, opf, pkg)
    except EpubFailure as e:
        return Entry(source, "failed", str(e), "epub")
    text, title, meta, notes = doc
    if not text:
        return Entry(source, "failed", "EPUB without text: " + ("; ".join(notes) or "its chapters are empty"),
                     "epub")
    res.documents.append(Document(source, collection, "epub", text, title or Path(source).stem, meta))
    return Entry(source, "ingested", "; ".join(notes), "epub")


def _book(parts: dict[str, bytes], opf: str, pkg) -> tuple[str, str, dict, list[str]]:
    """The package -> (text of the chapters in reading order, title, meta, notes on what was left out)."""
    base = posixpath.dirname(opf)
    meta: dict[str, str | int] = {}
    title, authors = "", []
    manifest: dict[str, tuple[str, str, str]] = {}  # id -> (href, media type, properties)
    spine: list[tuple[str, bool]] = []
    ncx_id = None
    for el in pkg.iter():
        tag = local_name(el.tag)
        value = " ".join("".join(el.itertext()).split())
        if tag == "title" and not title:
            title = value
        elif tag == "creator" and value:
            authors.append(value)
        elif tag == "language" and value and "language" not in meta:
            meta["language"] = value
        elif tag == "item" and el.get("id") and el.get("href"):
            manifest[el.get("id")] = (el.get("href"), el.get("media-type", ""), el.get("properties", ""))
        elif tag == "spine":
            ncx_id = el.get("toc")
        elif tag == "itemref" and el.get("idref"):
            spine.append((el.get("idref"), el.get("linear", "yes") != "no"))
    if not spine:
        raise EpubFailure(f"malformed EPUB: {opf} has an empty spine (no reading order)")
    if authors:
        meta["author"] = "; ".join(authors)
    nav_id = next((i for i, (_, _, props) in manifest.items() if "nav" in props.split()), None)
    heads: dict[str, list[tuple[str, str]]] = {}
    for m, frag, t in _nav_titles(parts, opf, manifest, nav_id, ncx_id):
        heads.setdefault(m, []).append((frag, t))
    notes: list[str] = []
    missing, unlisted, other = [], [], []
    chapters: list[str] = []
    order = [i for i, linear in spine if linear] + [i for i, linear in spine if not linear]
    for idref in order:
        if idref not in manifest:
            unlisted.append(idref)
            continue
        href, mtype, _ = manifest[idref]
        name, _ = _href(base, href)
        if idref == nav_id:
            continue
        if mtype and mtype not in XHTML_TYPES:
            other.append(f"{href} ({mtype})")
            continue
        if name is None or name not in parts:
            missing.append(href if name is None else name)
            continue
        text = render_xhtml(parts[name], heads.get(name, []))
        if text:
            chapters.append(text)
    if unlisted:
        notes.append(f"{len(unlisted)} spine item(s) not in the manifest of {opf} (first: {unlisted[0]})")
    if missing:
        notes.append(f"{len(missing)} chapter(s) missing or refused (first: {missing[0]})")
    if other:
        notes.append(f"{len(other)} spine item(s) not XHTML, not read (first: {other[0]})")
    meta["chapters"] = len(chapters)
    return clean_text("\n\n".join(chapters)), title, meta, notes


def extract_epub(path: Path, collection: str, limits: LimitsConfig) -> ExtractResult:
    res = ExtractResult(source=str(path), kind="epub")
    res.entries.append(read_epub(path, str(path), collection, limits, res))
    res.add("files")
    return res
