"""EPUB content documents: an XHTML chapter -> paragraphs (headings and footnotes kept); nav.xhtml -> its toc.

Design choices:
- The stdlib HTML parser, event by event: it never expands declared entities (a billion-laughs
  DOCTYPE stays inert text) or fetches anything, knows HTML's named entities (`&nbsp;` is common in
  EPUB XHTML and not well-formed XML) and keeps going on sloppy markup, so one bad tag does not cost
  a chapter. End tags close back to their opener (HTML's own recovery).
- Block elements end paragraphs; <br> is a line break; other whitespace inside a paragraph, no-break
  spaces included, collapses to one space (source line breaks of XHTML are not text). Skipped:
  <head>, <script>, <style>, <template>, <svg>; images (alt text is not the book's text).
- Navigation headings: the caller gives the chapter's nav titles as (fragment, title). A title
  whose fragment is an element's id is put before that element, the others at the chapter's start;
  a title is dropped where the text right after it already says it (the chapter's own <h1>).
- Footnotes are kept: a noteref (epub:type noteref, role doc-noteref, or a fragment link inside
  <sup>) stays inline as "[marker]"; footnote bodies (epub:type footnote/note, role doc-footnote)
  move to the end of the chapter, in order, so they do not cut the paragraph they sit in. Endnote
  sections stay where they are (already at the end).
"""

from __future__ import annotations

from html.parser import HTMLParser

from bookft.ingest.documents import decode_text

PARA, LINE, HEAD = "\ue000", "\ue001", "\ue002"  # private-use marks: paragraph end, line break, nav heading
VOID = {"br", "img", "hr", "meta", "link", "input", "col", "area", "base", "wbr", "source", "embed", "param",
        "track"}
BLOCK = {"p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "li", "blockquote", "section", "article", "aside",
         "header", "footer", "figure", "figcaption", "table", "tr", "dt", "dd", "pre", "nav", "ol", "ul", "dl",
         "caption", "body", "main", "address", "details", "summary", "hgroup", "center"}
SKIP = {"head", "script", "style", "template", "svg", "noscript"}
NOTE_TYPES = {"footnote", "note", "doc-footnote"}
NOTEREF_TYPES = {"noteref", "doc-noteref"}


def _types(attrs: dict) -> set[str]:
    return set((attrs.get("epub:type") or "").split()) | set((attrs.get("role") or "").split())


class _Chapter(HTMLParser):
    def __init__(self, anchors: dict[str, list[str]]) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors = anchors  # id -> nav titles, removed when placed
        self.out: list[str] = []  # the current sink: the body, a footnote, or a noteref's marker
        self.body = self.out
        self.notes: list[list[str]] = []
        self.stack: list[tuple[str, object, bool]] = []  # (tag, on close, is a block)
        self.skip = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        anchor = a.get("id") or (a.get("name") if tag == "a" else None)
        if anchor in self.anchors and not self.skip:
            self.out.extend(PARA + HEAD + t + PARA for t in self.anchors.pop(anchor))
        if tag in VOID:
            if not self.skip:
                self.out.append(LINE if tag == "br" else PARA if tag == "hr" else "")
            return
        close = None
        kinds = _types(a)
        if tag in SKIP:
            self.skip += 1
            close = self._unskip
        elif kinds & NOTE_TYPES:
            prev, self.out = self.out, []
            self.notes.append(self.out)
            close = lambda prev=prev: setattr(self, "out", prev)
        elif kinds & NOTEREF_TYPES or (tag == "a" and "#" in (a.get("href") or "") and self.stack
                                       and self.stack[-1][0] == "sup"):
            prev, self.out = self.out, []
            close = lambda prev=prev: self._marker(prev)
        if tag in BLOCK:
            self.out.append(PARA)
        self.stack.append((tag, close, tag in BLOCK))

    def _unskip(self) -> None:
        self.skip -= 1

    def _marker(self, prev: list[str]) -> None:
        text = " ".join("".join(self.out).replace(PARA, " ").replace(LINE, " ").split())
        self.out = prev
        if text:
            prev.append(text if text.startswith("[") else f"[{text}]")

    def handle_endtag(self, tag):
        if tag in VOID or all(t != tag for t, _, _ in self.stack):
            return
        while self.stack:
            t, close, block = self.stack.pop()
            if block:
                self.out.append(PARA)
            if close is not None:
                close()
            if t == tag:
                break

    def handle_data(self, data):
        if not self.skip:
            self.out.append(data.replace(PARA, "").replace(LINE, "").replace(HEAD, ""))


def _paragraphs(raw: str) -> list[tuple[bool, str]]:
    """Text with marks -> [(is a nav heading, paragraph)], whitespace collapsed, empty ones dropped."""
    out = []
    for chunk in raw.split(PARA):
        lines = (" ".join(x.replace(HEAD, "").split()) for x in chunk.split(LINE))
        text = "\n".join(x for x in lines if x)
        if text:
            out.append((HEAD in chunk, text))
    return out


def _norm(text: str) -> str:
    return "".join(c for c in text.casefold() if c.isalnum())


def render_xhtml(data: bytes, heads: list[tuple[str, str]]) -> str:
    """One XHTML chapter -> its text: paragraphs separated by blank lines, nav titles `heads`
    ([(fragment, title)]) as heading paragraphs, footnotes at the end."""
    anchors: dict[str, list[str]] = {}
    for frag, title in heads:
        if frag:
            anchors.setdefault(frag, []).append(title)
    parser = _Chapter(anchors)
    parser.feed(decode_text(data)[0])
    parser.close()
    while parser.stack:  # unclosed elements: close them (restores the body sink)
        parser.handle_endtag(parser.stack[-1][0])
    start = [(True, t) for frag, t in heads if not frag or frag in anchors]  # unplaced ones open the chapter
    paras = start + _paragraphs("".join(parser.body))
    for note in parser.notes:
        paras += _paragraphs("".join(note) + PARA)
    keep = []
    for i, (head, text) in enumerate(paras):
        if head:
            after = [_norm(t) for _, t in paras[i + 1:i + 3]]
            if after and (after[0] == _norm(text) or "".join(after) == _norm(text)):
                continue  # the chapter's own heading (or the next nav title) says it already
        keep.append(text)
    return "\n\n".join(keep)


class _Nav(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.navs: list[tuple[set[str], list[tuple[str, str]]]] = []
        self.open: list[int] = []  # indices of the <nav> elements we are in
        self.link: list[str] | None = None
        self.href = ""

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "nav":
            self.navs.append((_types(a), []))
            self.open.append(len(self.navs) - 1)
        elif tag == "a" and self.open and a.get("href"):
            self.link, self.href = [], a["href"]

    def handle_endtag(self, tag):
        if tag == "nav" and self.open:
            self.open.pop()
        elif tag == "a" and self.link is not None:
            text = " ".join("".join(self.link).split())
            if text:
                self.navs[self.open[-1]][1].append((self.href, text))
            self.link = None

    def handle_data(self, data):
        if self.link is not None:
            self.link.append(data)


def nav_links(data: bytes) -> list[tuple[str, str]]:
    """An EPUB 3 navigation document -> [(href, title)] of its toc nav (else its first nav), in order."""
    parser = _Nav()
    parser.feed(decode_text(data)[0])
    parser.close()
    toc = [links for kinds, links in parser.navs if kinds & {"toc", "doc-toc"} and links]
    return toc[0] if toc else next((links for _, links in parser.navs if links), [])
