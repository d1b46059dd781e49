"""Legal XML (USLM: US Code, Public Laws; Akoma Ntoso) -> text with its structure kept.

Design choices:
- Parsed with defusedxml: entity declarations (billion laughs) and external entities (XXE) are
  refused; the refusal is the manifest reason.
- One renderer for both schemas (and for unknown XML): namespaces are dropped; a structural
  element (title, chapter, section, article, ...) becomes a heading line "num heading" set off by
  blank lines; text containers (p, content, chapeau, ...) become paragraphs; metadata is skipped
  except the document title.
"""

from __future__ import annotations

import defusedxml.ElementTree as DET
from defusedxml import DefusedXmlException

STRUCTURE = {"title", "subtitle", "chapter", "subchapter", "part", "subpart", "division", "subdivision",
             "section", "subsection", "paragraph", "subparagraph", "clause", "subclause", "item",
             "subitem", "article", "book", "level", "appendix", "schedule", "rule", "hcontainer", "tblock",
             "preamble", "preface", "conclusions", "attachment"}
HEADS = {"num", "heading", "subheading"}
BLOCKS = {"p", "content", "chapeau", "continuation", "text", "intro", "wrapup", "note", "quotedcontent",
          "blockquote", "li", "longtitle", "docTitle", "proviso", "def", "td", "th"}
SKIP = {"meta", "toc", "notes", "sourcecredit", "layout"}


def local_name(tag) -> str:
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1]


def detect_schema(root) -> str:
    tag = root.tag if isinstance(root.tag, str) else ""
    if "uslm" in tag or local_name(tag) in ("uscDoc", "lawDoc", "pLaw", "bill"):
        return "uslm"
    if "akn" in tag or "akomaNtoso" in tag:
        return "akoma-ntoso"
    return "xml"


def _text(el) -> str:
    return " ".join("".join(el.itertext()).split())


def _title(root) -> str:
    for el in root.iter():
        name = local_name(el.tag).lower()
        if name in ("title", "doctitle", "frbrname", "shorttitle") and el.get("value"):
            return el.get("value")
        if name in ("doctitle", "dc:title") or (el.tag and str(el.tag).endswith("}title") and
                                                 "purl.org/dc" in str(el.tag)):
            t = _text(el)
            if t:
                return t
    return ""


def _render(el, out: list[str]) -> None:
    name = local_name(el.tag)
    low = name.lower()
    if low in SKIP:
        return
    if low in STRUCTURE:
        heads = [_text(c) for c in el if local_name(c.tag).lower() in HEADS]
        head = " ".join(h for h in heads if h)
        if head:
            out.append(head)
        if el.text and el.text.strip():
            out.append(" ".join(el.text.split()))
        for child in el:
            if local_name(child.tag).lower() not in HEADS:
                _render(child, out)
            if child.tail and child.tail.strip():
                out.append(" ".join(child.tail.split()))
        return
    if low in BLOCKS:
        t = _text(el)
        if t:
            out.append(t)
        return
    if el.text and el.text.strip():
        out.append(" ".join(el.text.split()))
    for child in el:
        _render(child, out)
        if child.tail and child.tail.strip():
            out.append(" ".join(child.tail.split()))


class XmlRefused(Exception):
    """XML that is refused or broken; the message is the manifest reason."""


def parse_xml(data: bytes):
    """XML bytes -> root element (defusedxml). Raises XmlRefused for entity bombs, XXE and bad XML; also
    the parser of the other XML-based formats (EPUB, DOCX)."""
    try:
        return DET.fromstring(data, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as e:
        raise XmlRefused(f"XML refused: {type(e).__name__} (entity declarations / external references are "
                         "not allowed; possible billion-laughs or XXE)") from None
    except DET.ParseError as e:
        raise XmlRefused(f"not well-formed XML: {e}") from None


def xml_to_text(data: bytes) -> tuple[str, str, str]:
    """XML bytes -> (text, title, schema). Raises XmlRefused for entity bombs, XXE and bad XML."""
    root = parse_xml(data)
    out: list[str] = []
    _render(root, out)
    paras = [p for p in out if p]
    return "\n\n".join(paras), _title(root), detect_schema(root)
