"""DOCX (Office Open XML WordprocessingML) -> one document: paragraphs and headings in order, tables as
text, tracked changes resolved to the final text.

Design choices:
- Read with the OOXML standard (ECMA-376) itself: the zip through the bounded zip reader
  (`members.zip_parts`: zip slip refused, size and ratio caps, bounded reads; only the XML parts are
  read, never media) and defusedxml (`legal.parse_xml`: entity bombs and XXE refused). Not
  python-docx: it opens the zip itself without caps, needs lxml, has no notion of tracked changes
  (a paragraph's text silently skips the runs inside <w:ins>) and lists tables apart from
  paragraphs, so the document order would have to be rebuilt from the XML anyway.
- Elements are matched by local name, so transitional and strict OOXML read alike.
- Order: the body's paragraphs and tables as they come; content controls (<w:sdt>) are opened,
  except a table of contents (it repeats the headings); a text box follows the paragraph it is
  anchored in; of <mc:AlternateContent>, only the first choice (the fallback repeats it). Headers,
  footers and comments are not the document's text.
- Tracked changes give the final text: <w:ins> and <w:moveTo> kept; <w:del>, <w:moveFrom> (with
  their <w:delText>) dropped; a paragraph whose mark was deleted runs on into the next one; a deleted
  table row is dropped. Field codes (<w:instrText>) are dropped, field results kept.
- A table is one paragraph block: a row per line, cells joined by " | ", a cell's paragraphs by spaces.
- Footnotes and endnotes are kept: "[n]" where referenced (numbered in order of reference) and
  "[n] text" after the body.
- Metadata: docProps/core.xml's title (else the first Title-styled paragraph, else the file name),
  creator and language; counts of the body's paragraphs (a table is one), headings (Heading/Title
  styles or an outline level) and tables.
- Refused with a reason naming the file and the problem: a password-protected document (Office
  encrypts it into an OLE compound file, not a zip), a legacy Word 97-2003 .doc, not a zip, no main
  document part, XML refused.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import IO

from bookft.ingest.config import LimitsConfig
from bookft.ingest.documents import Document, Entry, ExtractResult, clean_text
from bookft.ingest.formats.legal import XmlRefused, local_name, parse_xml
from bookft.ingest.formats.members import ARCHIVE_ERRORS, zip_parts

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
DROPPED = {"del", "moveFrom", "delText", "delInstrText", "instrText", "pPr", "rPr", "tblPr", "trPr", "tcPr",
           "sectPr", "rPrChange", "pPrChange", "footnoteRef", "endnoteRef", "commentReference", "fldData",
           "annotationRef", "separator", "continuationSeparator"}
_HEADING = re.compile(r"^(heading \d|title|subtitle)$", re.I)


class DocxFailure(Exception):
    """A DOCX that cannot be read; the message is the manifest reason."""


def _val(el, name: str = "val") -> str | None:
    """An attribute by local name (w:val, w:type, ...), whatever its namespace."""
    for k, v in el.attrib.items():
        if k.rsplit("}", 1)[-1] == name:
            return v
    return None


def _child(el, name: str):
    return next((c for c in el if local_name(c.tag) == name), None)


def _choice(alternate):
    """Of <mc:AlternateContent>, the first <mc:Choice> (else the <mc:Fallback>): the others repeat it."""
    pick = _child(alternate, "Choice")
    return pick if pick is not None else _child(alternate, "Fallback")


def _xml(parts: dict[str, bytes], name: str, what: str):
    try:
        return parse_xml(parts[name])
    except XmlRefused as e:
        raise DocxFailure(f"malformed DOCX: {name} ({what}): {e}") from None


def _targets(parts: dict[str, bytes], rels: str, base: str) -> dict[str, str]:
    """Relationship type (its last path segment: officeDocument, footnotes, ...) -> part name."""
    if rels not in parts:
        return {}
    out = {}
    for r in _xml(parts, rels, "relationships").iter():
        if local_name(r.tag) == "Relationship" and r.get("Target") and r.get("TargetMode") != "External":
            t = r.get("Target")
            name = posixpath.normpath(t.lstrip("/") if t.startswith("/") else posixpath.join(base, t))
            out.setdefault(r.get("Type", "").rsplit("/", 1)[-1], name)
    return out


class _Doc:
    """The state of one document's rendering: styles, footnote texts and their numbering, counts."""

    def __init__(self, parts: dict[str, bytes], styles: str | None, notes: list[str]) -> None:
        self.heading_styles: set[str] = set()
        self.title_styles: set[str] = set()
        if styles and styles in parts:
            self._styles(_xml(parts, styles, "styles"))
        self.note_text: dict[tuple[str, str], object] = {}
        for name in notes:
            if name in parts:
                for n in _xml(parts, name, "notes"):
                    if local_name(n.tag) in ("footnote", "endnote") and _val(n, "type") in (None, "normal"):
                        self.note_text[(local_name(n.tag), _val(n, "id") or "")] = n
        self.refs: list[tuple[str, str]] = []
        self.counts = {"headings": 0, "tables": 0}
        self.first_title = ""

    def _styles(self, root) -> None:
        info = {}  # styleId -> (name, outline level, based on)
        for s in root:
            if local_name(s.tag) != "style" or _val(s, "type") not in (None, "paragraph"):
                continue
            name = _child(s, "name")
            based = _child(s, "basedOn")
            info[_val(s, "styleId") or ""] = (_val(name) if name is not None else "", _outline(_child(s, "pPr")),
                                              _val(based) if based is not None else None)
        for sid in info:
            seen, cur = set(), sid
            while cur in info and cur not in seen:  # the basedOn chain passes heading-ness down
                seen.add(cur)
                name, outline, based = info[cur]
                if _HEADING.match(name or "") or outline:
                    self.heading_styles.add(sid)
                    if (name or "").lower() == "title":
                        self.title_styles.add(sid)
                    break
                cur = based

    def ref(self, kind: str, note_id: str) -> str:
        self.refs.append((kind, note_id))
        return f"[{len(self.refs)}]"


def _inline(el, doc: _Doc, out: list[str], boxes: list) -> None:
    """Text of a paragraph's content (runs, insertions, links, fields, ...), tracked deletions dropped."""
    for c in el:
        tag = local_name(c.tag)
        if tag in DROPPED:
            continue
        if tag == "t":
            out.append(c.text or "")
        elif tag == "tab":
            out.append(" ")
        elif tag in ("br", "cr"):
            out.append(" " if _val(c, "type") in ("page", "column") else "\n")
        elif tag == "noBreakHyphen":
            out.append("-")
        elif tag in ("footnoteReference", "endnoteReference"):
            out.append(doc.ref(tag[:-9], _val(c, "id") or ""))
        elif tag == "txbxContent":
            boxes.append(c)
        elif tag == "AlternateContent":
            pick = _choice(c)
            if pick is not None:
                _inline(pick, doc, out, boxes)
        else:
            _inline(c, doc, out, boxes)


def _outline(el) -> bool:
    """A pPr (or style) with an outline level 0-8: a heading, whatever its style's name."""
    lvl = _child(el, "outlineLvl") if el is not None else None
    v = _val(lvl) if lvl is not None else None
    return v is not None and v.isdigit() and int(v) < 9


def _paragraph(p, doc: _Doc) -> tuple[str, list, bool, str]:
    """w:p -> (raw text, text boxes, paragraph mark deleted, "heading" / "title" / "")."""
    ppr = _child(p, "pPr")
    role, mark_deleted = "", False
    if ppr is not None:
        st = _child(ppr, "pStyle")
        style = _val(st) if st is not None else None
        rpr = _child(ppr, "rPr")
        mark_deleted = rpr is not None and _child(rpr, "del") is not None
        if style in doc.title_styles:
            role = "title"
        elif style in doc.heading_styles or _outline(ppr):
            role = "heading"
    out: list[str] = []
    boxes: list = []
    _inline(p, doc, out, boxes)
    return "".join(out), boxes, mark_deleted, role


def _spaces(text: str) -> str:
    """Runs of spaces (tabs, no-break) -> one space per line; lines kept; ends stripped."""
    return "\n".join(" ".join(line.split()) for line in text.split("\n")).strip()


def _blocks(container, doc: _Doc) -> list[str]:
    """Paragraphs and tables of a body, cell, text box, note or content control, in order."""
    out: list[str] = []
    pending = ""  # text of paragraphs whose mark was deleted: it runs on into the next paragraph
    for c in container:
        tag = local_name(c.tag)
        if tag == "p":
            text, boxes, merged, role = _paragraph(c, doc)
            if merged:
                pending += text
                continue
            text, pending = _spaces(pending + text), ""
            if text:
                out.append(text)
                doc.counts["headings"] += role != ""
                if role == "title" and not doc.first_title:
                    doc.first_title = text
            for box in boxes:
                out.extend(_blocks(box, doc))
        elif tag == "tbl":
            table = _table(c, doc)
            if table:
                out.append(table)
                doc.counts["tables"] += 1
        elif tag == "sdt":
            pr = _child(c, "sdtPr")
            gallery = [_val(g) for g in pr.iter() if local_name(g.tag) == "docPartGallery"] if pr is not None else []
            content = _child(c, "sdtContent")
            if content is not None and "Table of Contents" not in gallery:
                out.extend(_blocks(content, doc))
        elif tag == "AlternateContent":
            pick = _choice(c)
            if pick is not None:
                out.extend(_blocks(pick, doc))
        elif tag in ("customXml", "ins", "moveTo", "sdtContent"):
            out.extend(_blocks(c, doc))
    if _spaces(pending):
        out.append(_spaces(pending))
    return out


def _cells(row, doc: _Doc) -> list[str]:
    cells = []
    for c in row:
        tag = local_name(c.tag)
        if tag == "tc":
            cells.append(" ".join(b.replace("\n", " ") for b in _blocks(c, doc)))
        elif tag in ("sdt", "customXml"):
            inner = _child(c, "sdtContent") if tag == "sdt" else c
            cells.extend(_cells(inner, doc) if inner is not None else [])
    return cells


def _table(tbl, doc: _Doc) -> str:
    rows = []
    for tr in tbl.iter():
        if local_name(tr.tag) != "tr":
            continue
        trpr = _child(tr, "trPr")
        if trpr is not None and _child(trpr, "del") is not None:
            continue  # a row deleted with tracked changes on
        cells = _cells(tr, doc)
        if any(cells):
            rows.append(" | ".join(cells))
    return "\n".join(rows)


def _core(parts: dict[str, bytes], name: str | None) -> dict[str, str]:
    if not name or name not in parts:
        return {}
    try:
        root = parse_xml(parts[name])
    except XmlRefused:
        return {}
    out = {}
    for el in root:
        tag = local_name(el.tag)
        if tag in ("title", "creator", "language") and (el.text or "").strip() and tag not in out:
            out[tag] = " ".join(el.text.split())
    return out


def _check_container(file: Path | IO[bytes]) -> None:
    if isinstance(file, Path):
        with open(file, "rb") as f:
            head = f.read(8)
            data = head + f.read() if head == OLE_MAGIC else head
    else:
        file.seek(0)
        data = file.read()
        file.seek(0)
    if data[:8] == OLE_MAGIC:
        if "EncryptedPackage".encode("utf-16-le") in data:
            raise DocxFailure("encrypted (password-protected) DOCX: Office keeps it as an encrypted OLE package, "
                              "not a zip; save a copy without the password to ingest it")
        raise DocxFailure("not a DOCX: a legacy Word 97-2003 (.doc) or other OLE file; save it as .docx")


def read_docx(file: Path | IO[bytes], source: str, collection: str, limits: LimitsConfig, res: ExtractResult
              ) -> Entry:
    """Read one DOCX into `res` (its document, refused members' entries); returns the file's own entry."""
    try:
        _check_container(file)
        try:
            parts = zip_parts(file, source, limits, res, "docx", lambda n: n.lower().endswith((".xml", ".rels")))
        except ARCHIVE_ERRORS as e:
            raise DocxFailure(f"malformed DOCX: not a readable zip archive ({type(e).__name__}: {e})") from None
        top = _targets(parts, "_rels/.rels", "")
        main = top.get("officeDocument", "word/document.xml")
        if main not in parts:
            raise DocxFailure(f"malformed DOCX: the main document part {main} is missing")
        base = posixpath.dirname(main)
        rels = _targets(parts, posixpath.join(base, "_rels", posixpath.basename(main) + ".rels"), base)
        notes = [rels.get("footnotes", f"{base}/footnotes.xml"), rels.get("endnotes", f"{base}/endnotes.xml")]
        doc = _Doc(parts, rels.get("styles", f"{base}/styles.xml"), notes)
        root = _xml(parts, main, "main document")
        body = next((el for el in root.iter() if local_name(el.tag) == "body"), None)
        if body is None:
            raise DocxFailure(f"malformed DOCX: {main} has no <w:body>")
        paras = _blocks(body, doc)
        doc.counts["paragraphs"] = len(paras)  # of the body, a table counts as one
        for n, key in enumerate(doc.refs, 1):  # notes may reference notes: the list grows while we read it
            note = doc.note_text.get(key)
            text = " ".join(b.replace("\n", " ") for b in _blocks(note, doc)) if note is not None else ""
            paras.append(f"[{n}] {text}".strip())
        core = _core(parts, top.get("core-properties", "docProps/core.xml"))
    except DocxFailure as e:
        return Entry(source, "failed", str(e), "docx")
    text = clean_text("\n\n".join(paras))
    if not text:
        return Entry(source, "failed", f"DOCX without text ({main} has no paragraphs or tables with text)", "docx")
    meta: dict[str, str | int] = {k: v for k, v in (("author", core.get("creator")),
                                                    ("language", core.get("language"))) if v}
    meta.update(doc.counts)
    meta["notes"] = len(doc.refs)
    title = core.get("title") or doc.first_title or Path(source).stem
    res.documents.append(Document(source, collection, "docx", text, title, meta))
    return Entry(source, "ingested", "", "docx")


def extract_docx(path: Path, collection: str, limits: LimitsConfig) -> ExtractResult:
    res = ExtractResult(source=str(path), kind="docx")
    res.entries.append(read_docx(path, str(path), collection, limits, res))
    res.add("files")
    return res
