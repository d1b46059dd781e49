"""A minimal PDF writer (text only) for the built-in sample and for tests; no dependency.

Design choices:
- PDF 1.4, one Helvetica (standard 14, WinAnsi) font, one content stream per page, a classic xref
  table with exact byte offsets, deterministic bytes (no dates, a fixed /ID) so the sample's content
  hashes are stable and the ingest cache hits.
- Lines are placed explicitly (`Td` / `Tj`), so tests know the exact text each page carries.
- `wrap` breaks paragraphs into lines and can hyphenate long words at line ends, to exercise the
  extractor's hyphen joining.
"""

from __future__ import annotations

import hashlib

PAGE_W, PAGE_H = 612, 792


def _esc(s: str) -> bytes:
    b = s.encode("cp1252", "replace")
    return b.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def wrap(paragraph: str, width: int = 90, hyphenate: bool = True) -> list[str]:
    """Greedy line breaking; a word longer than 7 letters that does not fit may be hyphenated."""
    lines: list[str] = []
    cur = ""
    for word in paragraph.split():
        if not cur:
            cur = word
        elif len(cur) + 1 + len(word) <= width:
            cur += " " + word
        else:
            room = width - len(cur) - 2
            if hyphenate and word.isalpha() and word.islower() and len(word) >= 8 and room >= 4:
                cut = min(room, len(word) - 3)
                lines.append(f"{cur} {word[:cut]}-")
                cur = word[cut:]
            else:
                lines.append(cur)
                cur = word
    if cur:
        lines.append(cur)
    return lines


def page_stream(lines: list[str], header: str = "", footer: str = "", size: int = 10) -> bytes:
    lead = size + 3
    out = [b"BT", f"/F1 {size} Tf".encode()]
    if header:
        out.append(b"1 0 0 1 72 750 Tm (" + _esc(header) + b") Tj")
    y = 720
    for ln in lines:
        # an empty line is written as one space so text extractors see the paragraph break
        out.append(f"1 0 0 1 72 {y} Tm (".encode() + _esc(ln or " ") + b") Tj")
        y -= lead
    if footer:
        out.append(b"1 0 0 1 300 40 Tm (" + _esc(footer) + b") Tj")
    out.append(b"ET")
    return b"\n".join(out)


def write_pdf(pages: list[bytes], title: str = "", author: str = "") -> bytes:
    """Content streams (one per page) -> PDF bytes."""
    n = len(pages)
    objs: list[bytes] = []
    # 1 catalog, 2 pages, 3 font, 4 info, then per page: page object, content stream
    kids = " ".join(f"{5 + 2 * i} 0 R" for i in range(n))
    objs.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objs.append(f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode())
    objs.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    objs.append(b"<< /Title (" + _esc(title) + b") /Author (" + _esc(author) + b") /Producer (bookft) >>")
    for i, stream in enumerate(pages):
        objs.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {PAGE_W} {PAGE_H}] "
                    f"/Resources << /Font << /F1 3 0 R >> >> /Contents {6 + 2 * i} 0 R >>".encode())
        objs.append(f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream")
    buf = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for k, body in enumerate(objs, 1):
        offsets.append(len(buf))
        buf += f"{k} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(buf)
    buf += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        buf += f"{off:010d} 00000 n \n".encode()
    fid = hashlib.md5(bytes(buf)).hexdigest()
    buf += (f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R /Info 4 0 R /ID [<{fid}> <{fid}>] >>\n"
            f"startxref\n{xref}\n%%EOF\n").encode()
    return bytes(buf)


def book_pdf(title: str, author: str, paragraphs: list[str], lines_per_page: int = 50, width: int = 90,
             running_header: bool = True, page_numbers: bool = True) -> bytes:
    """Paragraphs -> a paginated PDF with a running header and page numbers; paragraphs end with a blank line."""
    lines: list[str] = []
    for p in paragraphs:
        lines.extend(wrap(p, width))
        lines.append("")
    pages = []
    for k, i in enumerate(range(0, max(len(lines), 1), lines_per_page), 1):
        pages.append(page_stream(lines[i:i + lines_per_page], header=title if running_header else "",
                                 footer=str(k) if page_numbers else ""))
    return write_pdf(pages, title=title, author=author)
