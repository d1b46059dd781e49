"""PDF -> one document per file: text in reading order, page by page, cleaned.

Design choices:
- pypdfium2 (fast, good text, BSD/Apache) is the default backend; pypdf (pure Python, always there)
  takes over for a file pdfium cannot open, and is the backend when asked for.
- A file that does not start with `%PDF-` is refused before any parser sees it ("not a PDF").
  Encrypted files (no password given; the empty user password is tried), damaged/truncated files and
  files with no text layer (image-only) each get their own reason.
- Cleaning, in order: running headers/footers (a first/last line that repeats, digits masked, on at
  least half the pages) and bare page numbers removed; words hyphenated at line ends joined;
  lines joined into paragraphs (a short line ending a sentence ends a paragraph); ligatures
  normalised (`clean_text`). Pages are joined so a paragraph running over a page break stays whole.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from pathlib import Path

from bookft.ingest.documents import Document, Entry, ExtractResult, clean_text

_PAGE_NUM = re.compile(r"^\s*(page\s+)?(\d{1,5}|[ivxlcdm]{1,8})(\s*(of|/)\s*\d{1,5})?\s*$", re.I)
_HYPHEN = re.compile(r"([A-Za-z\u00C0-\u024F])[-\u00AD\uFFFE\u0002]\n\s*([a-z\u00DF-\u024F])")
_DIGITS = re.compile(r"\d+")


class PdfFailure(Exception):
    """A PDF that cannot be read; the message is the manifest reason."""


def _pages_pdfium(data: bytes) -> tuple[list[str], dict]:
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as e:
        msg = str(e)
        if "password" in msg.lower():
            raise PdfFailure("encrypted PDF (a password is required; none was given)") from None
        raise PdfFailure(f"pdfium cannot open it: {msg}") from None
    try:
        meta = {}
        try:
            m = pdf.get_metadata_dict(skip_empty=True)
            meta = {"title": m.get("Title", ""), "author": m.get("Author", "")}
        except Exception:  # metadata is optional
            pass
        pages = [_pdfium_page_lines(pdf[i]) for i in range(len(pdf))]
        return pages, meta
    finally:
        pdf.close()


def _pdfium_page_lines(page) -> str:
    """One page -> its lines, with an empty line where the vertical gap says a paragraph ends.

    pdfium's text drops blank lines, so paragraph gaps come from the line rectangles: the text range is
    split into lines and matched to the merged rectangles (a line pdfium de-hyphenated spans two);
    when the match fails, each line's text is read from its rectangle instead (slower, always right).
    """
    tp = page.get_textpage()
    try:
        width = page.get_width()
        full = tp.get_text_range()  # before count_rects: pdfium's rect state is per text page
        spans: list[tuple[float, float]] = []  # (top, bottom) per text line, merged from pdfium's rects
        for j in range(tp.count_rects()):
            _, bottom, _, top = tp.get_rect(j)
            if spans and bottom < spans[-1][0] and top > spans[-1][1]:  # same line as the previous rect
                spans[-1] = (max(top, spans[-1][0]), min(bottom, spans[-1][1]))
            else:
                spans.append((top, bottom))
        texts = full.replace("\r\n", "\n").split("\n")
        need = sum(1 + t.count("\ufffe") for t in texts)
        if not full.strip():
            rows = []
        elif need == len(spans):
            rows, k = [], 0
            for t in texts:
                n = 1 + t.count("\ufffe")
                rows.append((spans[k][0], spans[k + n - 1][1], t))
                k += n
        else:
            rows = [(top, bottom, tp.get_text_bounded(0, bottom, width, top)) for top, bottom in spans]
    finally:
        tp.close()
        page.close()
    gaps = sorted(rows[i][1] - rows[i + 1][0] for i in range(len(rows) - 1))
    usual = gaps[len(gaps) // 2] if gaps else 0.0
    lines: list[str] = []
    for i, (_, _, txt) in enumerate(rows):
        if i and usual > 0 and rows[i - 1][1] - rows[i][0] > 1.6 * usual + 1:
            lines.append("")
        lines.append(txt.replace("\x02", "-\n").replace("\ufffe", "-\n"))
    return "\n".join(lines)


def _pages_pypdf(data: bytes) -> tuple[list[str], dict]:
    import logging

    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            try:
                ok = reader.decrypt("")
            except Exception as e:
                raise PdfFailure(f"encrypted PDF that cannot be decrypted here ({e})") from None
            if not ok:
                raise PdfFailure("encrypted PDF (a password is required; none was given)")
        pages = [p.extract_text() or "" for p in reader.pages]
        m = reader.metadata or {}
        meta = {"title": str(m.get("/Title", "") or ""), "author": str(m.get("/Author", "") or "")}
        return pages, meta
    except PdfFailure:
        raise
    except (PdfReadError, Exception) as e:  # pypdf raises many types on damaged files
        raise PdfFailure(f"damaged or truncated PDF ({type(e).__name__}: {str(e)[:120]})") from None


def _norm(line: str) -> str:
    return _DIGITS.sub("#", " ".join(line.split())).lower()


def strip_headers_footers(pages: list[list[str]]) -> list[list[str]]:
    """Remove running headers/footers and page numbers from per-page line lists."""
    n = len(pages)
    counts: Counter[str] = Counter()
    for lines in pages:
        edge = {_norm(x) for x in lines[:2] + lines[-2:] if len(x) <= 70 and any(c.isalpha() for c in x)}
        counts.update(edge)
    repeated = {k for k, c in counts.items() if n >= 3 and c >= max(2, n // 2)}
    out = []
    for lines in pages:
        lines = list(lines)
        for _ in range(2):  # up to two header lines and two footer lines
            while lines and not lines[0].strip():
                lines.pop(0)
            while lines and not lines[-1].strip():
                lines.pop()
            if lines and (_norm(lines[0]) in repeated or _PAGE_NUM.match(lines[0])):
                lines.pop(0)
            if lines and (_norm(lines[-1]) in repeated or _PAGE_NUM.match(lines[-1])):
                lines.pop()
        out.append(lines)
    return out


def join_lines(lines: list[str]) -> str:
    """Lines of a page -> paragraphs: hyphenated words joined, a short sentence-final line ends a paragraph."""
    lines = [ln.strip() for ln in lines]
    while lines and not lines[0]:
        lines.pop(0)
    widths = sorted(len(ln) for ln in lines if ln)
    typical = widths[int(len(widths) * 0.8)] if widths else 0
    out: list[str] = []
    for i, ln in enumerate(lines):
        if not ln:
            out.append("\n\n")
            continue
        out.append(ln)
        nxt = lines[i + 1] if i + 1 < len(lines) else None
        if nxt is None:
            break
        ends_sentence = ln[-1] in ".!?:;\"'\u201d)"
        if ends_sentence and len(ln) < 0.9 * typical:
            out.append("\n\n")
        else:
            out.append("\n")
    text = "".join(out).replace("\ufffe\n", "-\n").replace("\ufffe", "")
    text = _HYPHEN.sub(r"\1\2", text)
    text = re.sub(r"(?<!\n)\n(?!\n)", " ", text)  # single newlines inside a paragraph -> spaces
    return text


def pdf_text(data: bytes, backend: str = "pdfium") -> tuple[str, dict]:
    """PDF bytes -> (text, meta with pages / empty_pages / backend / title / author). Raises PdfFailure."""
    if not data.lstrip()[:1024].startswith(b"%PDF-") and b"%PDF-" not in data[:1024]:
        head = data[:8]
        what = "empty file" if not data else f"starts with {head!r}"
        raise PdfFailure(f"not a PDF (no %PDF- header; {what})")
    used = backend
    if backend == "pdfium":
        try:
            pages, meta = _pages_pdfium(data)
        except PdfFailure as e:
            if str(e).startswith("encrypted"):
                pages, meta = _pages_pypdf(data)  # pypdf tries the empty user password
            else:
                try:
                    pages, meta = _pages_pypdf(data)
                except PdfFailure as e2:
                    raise PdfFailure(f"{e2} (pdfium: {e})") from None
            used = "pypdf"
    else:
        pages, meta = _pages_pypdf(data)
    page_lines = [[ln for ln in p.replace("\r\n", "\n").replace("\r", "\n").split("\n")] for p in pages]
    empty = sum(1 for p in pages if not p.strip())
    page_lines = strip_headers_footers(page_lines)
    text = ""
    for lines in page_lines:
        chunk = join_lines(lines).strip()
        if not chunk:
            continue
        if not text:
            text = chunk
        elif text[-1] in ".!?:;\"\u201d)" and chunk[:1].isupper():
            text += "\n\n" + chunk
        elif text.endswith("-") and chunk[:1].islower():
            text = text[:-1] + chunk
        else:
            text += " " + chunk
    meta = {**meta, "pages": len(pages), "empty_pages": empty, "backend": used}
    return clean_text(text), meta


def extract_pdf(path: Path, collection: str, backend: str = "pdfium") -> ExtractResult:
    res = ExtractResult(source=str(path), kind="pdf")
    try:
        data = path.read_bytes()
    except OSError as e:
        res.entries.append(Entry(str(path), "failed", f"cannot read file: {e.strerror or e}", "pdf"))
        return res
    doc, entry, meta = pdf_document(data, str(path), collection, backend)
    res.add("pages", meta.get("pages", 0))
    res.add("empty_pages", meta.get("empty_pages", 0))
    res.add("files")
    if doc:
        res.documents.append(doc)
    res.entries.append(entry)
    return res


def pdf_document(data: bytes, source: str, collection: str, backend: str = "pdfium"
                 ) -> tuple[Document | None, Entry, dict]:
    try:
        text, meta = pdf_text(data, backend)
    except PdfFailure as e:
        return None, Entry(source, "failed", str(e), "pdf"), {}
    if not text:
        why = (f"no text layer on any of {meta['pages']} page(s) (image-only/scanned PDF; OCR is not done)"
               if meta["pages"] else "PDF has no pages")
        return None, Entry(source, "failed", why, "pdf"), meta
    note = ""
    if meta["empty_pages"]:
        note = f"{meta['empty_pages']} of {meta['pages']} page(s) without a text layer"
    title = meta.get("title") or Path(source).stem
    doc = Document(source, collection, "pdf", text, title,
                   {k: meta[k] for k in ("author", "pages", "empty_pages", "backend") if meta.get(k) is not None})
    return doc, Entry(source, "ingested", note, "pdf"), meta
