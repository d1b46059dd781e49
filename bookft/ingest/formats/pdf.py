"""PDF -> one document per file: text in reading order, page by page, cleaned.

Design choices:
- pypdfium2 (fast, good text, BSD/Apache) is the default backend; pypdf (pure Python, always there)
  takes over for a file pdfium cannot open, and is the backend when asked for.
- A file that does not start with `%PDF-` is refused before any parser sees it ("not a PDF").
  Encrypted files (RC4 or AES; no password given, or a wrong one; the empty user password is
  tried), damaged/truncated files and files with no text layer (image-only) each get their own
  reason. A password (per source, or `--pdf-password`) opens files the user owns; pypdf needs the
  `cryptography` package for AES, a dependency of bookft.
- Pages without a text layer are read by OCR (bookft/ingest/formats/ocr.py, Tesseract) when the corpus
  asks for it (`extract.ocr.enabled`) and tesseract is on PATH; the OCR text then goes through the
  same cleaning as a text layer. Off, or without tesseract, such pages are reported as before.
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

from bookft.ingest.config import OcrConfig
from bookft.ingest.documents import Document, Entry, ExtractResult, clean_text

_PAGE_NUM = re.compile(r"^\s*(page\s+)?(\d{1,5}|[ivxlcdm]{1,8})(\s*(of|/)\s*\d{1,5})?\s*$", re.I)
_HYPHEN = re.compile(r"([A-Za-z\u00C0-\u024F])[-\u00AD\uFFFE\u0002]\n\s*([a-z\u00DF-\u024F])")
_DIGITS = re.compile(r"\d+")


class PdfFailure(Exception):
    """A PDF that cannot be read; the message is the manifest reason."""


ENCRYPTED_NONE_GIVEN = "encrypted PDF (a password is required; none was given)"
ENCRYPTED_WRONG_ONE = "encrypted PDF (the password given does not open it)"


def _encrypted(password: str | None) -> str:
    return ENCRYPTED_WRONG_ONE if password else ENCRYPTED_NONE_GIVEN


def _open_pdfium(src, password: str | None):
    """A pdfium document from bytes or a path; PdfFailure (encrypted / cannot open) otherwise."""
    import pypdfium2 as pdfium

    try:
        return pdfium.PdfDocument(src, password=password)
    except pdfium.PdfiumError as e:
        msg = str(e)
        if "password" in msg.lower():
            raise PdfFailure(_encrypted(password)) from None
        raise PdfFailure(f"pdfium cannot open it: {msg}") from None


def _pdfium_meta(pdf) -> dict:
    try:
        m = pdf.get_metadata_dict(skip_empty=True)
        return {"title": m.get("Title", ""), "author": m.get("Author", "")}
    except Exception:  # metadata is optional
        return {}


def _pages_pdfium(data: bytes, password: str | None = None) -> tuple[list[str], dict]:
    pdf = _open_pdfium(data, password)
    try:
        meta = _pdfium_meta(pdf)
        pages = [_pdfium_page_lines(pdf[i]) for i in range(len(pdf))]
        return pages, meta
    finally:
        pdf.close()


def pdf_split_plan(path: str, password: str | None = None) -> tuple[int, dict] | None:
    """(pages, meta) of a PDF that pdfium opens, for splitting it into page ranges (the build's extract
    phase, ingest/phases/extract.py); None when it does not open (not a PDF, encrypted without the
    password, damaged): such a file is extracted whole, so its failure is reported exactly as without
    splitting."""
    try:
        with open(path, "rb") as f:
            head = f.read(1024)
        if not head.lstrip().startswith(b"%PDF-") and b"%PDF-" not in head:
            return None
        pdf = _open_pdfium(path, password)
    except (OSError, PdfFailure):
        return None
    try:
        return len(pdf), _pdfium_meta(pdf)
    except Exception:
        return None
    finally:
        pdf.close()


def pdf_page_range(path: str, start: int, stop: int, password: str | None = None) -> list[str]:
    """Pages [start, stop) of a PDF read by pdfium, each as `_pages_pdfium` reads it (one page-range job of
    a split PDF; the extract phase reassembles the ranges in order). Raises on any failure (the caller then
    extracts the file whole)."""
    pdf = _open_pdfium(path, password)
    try:
        if len(pdf) < stop:
            raise PdfFailure(f"page range {start}-{stop} beyond the {len(pdf)} page(s)")
        return [_pdfium_page_lines(pdf[i]) for i in range(start, stop)]
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


def _pages_pypdf(data: bytes, password: str | None = None) -> tuple[list[str], dict]:
    import logging

    from pypdf import PdfReader
    from pypdf.errors import DependencyError, PdfReadError

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            try:
                ok = reader.decrypt(password or "")
            except DependencyError:
                raise
            except Exception as e:
                raise PdfFailure(f"encrypted PDF that cannot be decrypted here ({e})") from None
            if not ok:
                raise PdfFailure(_encrypted(password))
        pages = [p.extract_text() or "" for p in reader.pages]
        m = reader.metadata or {}
        meta = {"title": str(m.get("/Title", "") or ""), "author": str(m.get("/Author", "") or "")}
        return pages, meta
    except PdfFailure:
        raise
    except DependencyError as e:  # only encryption needs an optional package (AES: cryptography)
        raise PdfFailure(f"encrypted PDF (AES); decrypting it needs a package that is missing ({e}): "
                         "pip install 'cryptography>=3.1'") from None
    except (PdfReadError, Exception) as e:  # pypdf raises many types on damaged files
        raise PdfFailure(f"damaged or truncated PDF ({type(e).__name__}: {str(e)[:120]})") from None


def _norm(line: str) -> str:
    return _DIGITS.sub("#", " ".join(line.split())).lower()


def _page_lines(page: str) -> list[str]:
    return page.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def repeated_edges(pages: list[list[str]]) -> set[str]:
    """The running headers/footers of a document: a first/last line (digits masked) on at least half its pages."""
    n = len(pages)
    counts: Counter[str] = Counter()
    for lines in pages:
        edge = {_norm(x) for x in lines[:2] + lines[-2:] if len(x) <= 70 and any(c.isalpha() for c in x)}
        counts.update(edge)
    return {k for k, c in counts.items() if n >= 3 and c >= max(2, n // 2)}


def strip_bounds(lines: list[str], repeated: set[str]) -> tuple[int, int]:
    """(a, b): the page without its running header/footer lines and page numbers is lines[a:b]."""
    a, b = 0, len(lines)
    for _ in range(2):  # up to two header lines and two footer lines
        while a < b and not lines[a].strip():
            a += 1
        while a < b and not lines[b - 1].strip():
            b -= 1
        if a < b and (_norm(lines[a]) in repeated or _PAGE_NUM.match(lines[a])):
            a += 1
        if a < b and (_norm(lines[b - 1]) in repeated or _PAGE_NUM.match(lines[b - 1])):
            b -= 1
    return a, b


def _page_chunk(lines: list[str], a: int, b: int) -> str:
    """One page's stripped lines lines[a:b] as paragraphs."""
    return join_lines(lines[a:b]).strip()


def page_chunks(pages: list[str]) -> list[tuple[int, int, str]]:
    """Speculative per-page paragraphs for one page range of a split PDF (run in its worker, so the
    costly per-page half of `pages_text` is spread over the pool): (a, b, the paragraphs of lines[a:b]) with
    the bounds the range's own running headers give. `pages_text` keeps a page's chunk only when the
    whole document's headers give the same bounds, and joins the page itself otherwise, so the text is
    the same as from one job whatever the ranges see."""
    page_lines = [_page_lines(p) for p in pages]
    repeated = repeated_edges(page_lines)
    out = []
    for lines in page_lines:
        a, b = strip_bounds(lines, repeated)
        out.append((a, b, _page_chunk(lines, a, b)))
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


def pdf_text(data: bytes, backend: str = "pdfium", *, password: str | None = None, ocr: OcrConfig | None = None
             ) -> tuple[str, dict]:
    """PDF bytes -> (text, meta with pages / empty_pages / backend / title / author, and ocr_pages /
    ocr_note when `ocr` is given). Raises PdfFailure."""
    if not data.lstrip()[:1024].startswith(b"%PDF-") and b"%PDF-" not in data[:1024]:
        head = data[:8]
        what = "empty file" if not data else f"starts with {head!r}"
        raise PdfFailure(f"not a PDF (no %PDF- header; {what})")
    used = backend
    if backend == "pdfium":
        try:
            pages, meta = _pages_pdfium(data, password)
        except PdfFailure as e:
            if str(e).startswith("encrypted"):
                pages, meta = _pages_pypdf(data, password)  # pypdf tries the empty user password
            else:
                try:
                    pages, meta = _pages_pypdf(data, password)
                except PdfFailure as e2:
                    raise PdfFailure(f"{e2} (pdfium: {e})") from None
            used = "pypdf"
    else:
        pages, meta = _pages_pypdf(data, password)
    if ocr is not None and any(not p.strip() for p in pages):
        from bookft.ingest.formats.ocr import ocr_pages

        read, note = ocr_pages(data, [i for i, p in enumerate(pages) if not p.strip()], ocr, password)
        pages = [read.get(i, p) for i, p in enumerate(pages)]
        meta = {**meta, "ocr_pages": len(read), "ocr_note": note}
    return pages_text(pages, meta, used)


def pages_text(pages: list[str], meta: dict, used: str = "pdfium",
               chunks: list[tuple[int, int, str]] | None = None) -> tuple[str, dict]:
    """Every page's text, in order -> (text, meta): the document-level half of `pdf_text` (running
    headers/footers need all pages; paragraphs run over page breaks), run after a split PDF's ranges
    are reassembled. `chunks`: the ranges' `page_chunks`, one per page, used where their bounds hold."""
    page_lines = [_page_lines(p) for p in pages]
    empty = sum(1 for p in pages if not p.strip())
    repeated = repeated_edges(page_lines)
    parts: list[str] = []  # joined once at the end: `text += chunk` per page is quadratic in the book's length
    for k, lines in enumerate(page_lines):
        a, b = strip_bounds(lines, repeated)
        chunk = chunks[k][2] if chunks is not None and chunks[k][:2] == (a, b) else _page_chunk(lines, a, b)
        if not chunk:
            continue
        if not parts:
            parts.append(chunk)
        elif parts[-1][-1] in ".!?:;\"\u201d)" and chunk[:1].isupper():
            parts += ("\n\n", chunk)
        elif parts[-1].endswith("-") and chunk[:1].islower():
            parts[-1] = parts[-1][:-1]  # the last part is always a (non-empty) chunk: text[-1] is its last char
            parts.append(chunk)
        else:
            parts += (" ", chunk)
    meta = {**meta, "pages": len(pages), "empty_pages": empty, "backend": used}
    return clean_text("".join(parts)), meta


def extract_pdf(path: Path, collection: str, backend: str = "pdfium", *, password: str | None = None,
                ocr: OcrConfig | None = None) -> ExtractResult:
    try:
        data = path.read_bytes()
    except OSError as e:
        res = ExtractResult(source=str(path), kind="pdf")
        res.entries.append(Entry(str(path), "failed", f"cannot read file: {e.strerror or e}", "pdf"))
        return res
    return pdf_result(str(path), *pdf_document(data, str(path), collection, backend, password=password, ocr=ocr))


def pdf_result(source: str, doc: Document | None, entry: Entry, meta: dict) -> ExtractResult:
    """One PDF file's ExtractResult from `pdf_document`'s (or `pages_document`'s) answer."""
    res = ExtractResult(source=source, kind="pdf")
    res.add("pages", meta.get("pages", 0))
    res.add("empty_pages", meta.get("empty_pages", 0))
    if meta.get("ocr_pages"):
        res.add("ocr_pages", meta["ocr_pages"])
    res.add("files")
    if doc:
        res.documents.append(doc)
    res.entries.append(entry)
    return res


def pdf_document(data: bytes, source: str, collection: str, backend: str = "pdfium", *,
                 password: str | None = None, ocr: OcrConfig | None = None) -> tuple[Document | None, Entry, dict]:
    try:
        text, meta = pdf_text(data, backend, password=password, ocr=ocr)
    except PdfFailure as e:
        return None, Entry(source, "failed", str(e), "pdf"), {}
    return text_document(text, meta, source, collection)


def text_document(text: str, meta: dict, source: str, collection: str) -> tuple[Document | None, Entry, dict]:
    """A PDF's cleaned text and meta (`pdf_text`, `pages_text`) -> its document, manifest entry and meta."""
    ocr_note = f"; {meta['ocr_note']}" if meta.get("ocr_note") else ""
    if not text:
        why = (f"no text layer on any of {meta['pages']} page(s) (image-only/scanned PDF; OCR is not done)"
               if meta["pages"] else "PDF has no pages")
        if meta.get("ocr_note"):  # OCR was asked for: say what it did instead
            why = f"no text layer on any of {meta['pages']} page(s) (image-only/scanned PDF){ocr_note}"
        return None, Entry(source, "failed", why, "pdf"), meta
    notes = []
    if meta["empty_pages"]:
        notes.append(f"{meta['empty_pages']} of {meta['pages']} page(s) without a text layer")
    if meta.get("ocr_note"):
        notes.append(meta["ocr_note"])
    title = meta.get("title") or Path(source).stem
    keys = ("author", "pages", "empty_pages", "backend") + (("ocr_pages",) if meta.get("ocr_pages") else ())
    doc = Document(source, collection, "pdf", text, title, {k: meta[k] for k in keys if meta.get(k) is not None})
    return doc, Entry(source, "ingested", "; ".join(notes), "pdf"), meta
