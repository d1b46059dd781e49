"""OCR of PDF pages that have no text layer (scanned / image-only pages), with Tesseract.

Design choices:
- Optional and off by default (`extract.ocr.enabled`, per corpus): OCR costs about a second of CPU
  per page and its text is noisier than a text layer. It runs only on the pages whose text layer is
  empty; pages with text are never re-read.
- Tesseract is an external program: used when `tesseract` is on PATH, through pytesseract (the
  `ocr` extra: `pip install 'bookft[ocr]'`). Without either, nothing is read and the reason says
  what to install; the page is then reported as a page without a text layer, as before.
- Pages are rendered by pdfium (already the default PDF backend) at `dpi`, one at a time (one
  bitmap in memory), each OCR call bounded by `page_timeout_s`.
- The OCR text goes back into the PDF extractor's pipeline, so running headers, page numbers and
  hyphenation are cleaned the same way as for a text layer.
"""

from __future__ import annotations

import shutil

from bookft.ingest.config import OcrConfig


def tesseract_missing() -> str | None:
    """Why OCR cannot run here (what to install), or None."""
    if shutil.which("tesseract") is None:
        return "tesseract is not on PATH (install it, e.g. apt-get install tesseract-ocr)"
    try:
        import pytesseract  # noqa: F401
    except ImportError:
        return "pytesseract is not installed (pip install 'bookft[ocr]')"
    return None


def ocr_pages(data: bytes, indices: list[int], cfg: OcrConfig, password: str | None = None
              ) -> tuple[dict[int, str], str]:
    """OCR the pages at `indices` of PDF `data` -> ({page index: text}, note for the manifest entry)."""
    missing = tesseract_missing()
    if missing:
        return {}, f"OCR asked for, but {missing}"
    import pypdfium2 as pdfium
    import pytesseract

    out: dict[int, str] = {}
    failed: list[str] = []
    try:
        pdf = pdfium.PdfDocument(data, password=password)
    except pdfium.PdfiumError as e:
        return {}, f"OCR not done: pdfium cannot render the pages ({e})"
    try:
        for i in indices:
            page = pdf[i]
            try:
                image = page.render(scale=cfg.dpi / 72).to_pil()
            finally:
                page.close()
            try:
                text = pytesseract.image_to_string(image, lang=cfg.lang, timeout=cfg.page_timeout_s)
            except (pytesseract.TesseractError, RuntimeError, OSError) as e:
                failed.append(f"page {i + 1}: {str(e).strip()[:120]}")
                continue
            if text.strip():
                out[i] = text
    finally:
        pdf.close()
    version = str(pytesseract.get_tesseract_version()).split()[0]
    note = f"{len(out)} of {len(indices)} page(s) without a text layer read by OCR (tesseract {version}, " \
           f"{cfg.lang}, {cfg.dpi} dpi)"
    if failed:
        note += f"; OCR failed on {len(failed)} page(s) (first: {failed[0]})"
    return out, note
