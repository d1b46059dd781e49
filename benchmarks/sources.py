"""Source formats benchmark: EPUB and DOCX extraction rates, the secret scan against
detect-secrets' own per-file scan, and OCR seconds per page.

Inputs are generated here: an EPUB of `--chapters` chapters and a DOCX of the same paragraphs (zip +
XHTML / OOXML), the bookft package as the code for the secret scan, and an image-only page for OCR
(skipped without tesseract). Prints a rich table and writes a new
benchmarks/results/sources_<chapters>-chapters_<hardware>_<date>.json.

    python -m benchmarks.sources [--chapters 200] [--paragraphs 30]
"""

from __future__ import annotations

import argparse
import difflib
import io
import random
import shutil
import tempfile
import time
import zipfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

import bookft
from benchmarks.common import Record
from bookft.ingest.config import ExtractConfig, LimitsConfig, OcrConfig
from bookft.ingest.filters.secrets import SecretScanner
from bookft.ingest.formats.docx import extract_docx
from bookft.ingest.formats.epub import extract_epub
from bookft.ingest.sample import WORDS

OPF = ('<package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata xmlns:dc="http://purl.org/dc/'
       'elements/1.1/"><dc:title>Bench</dc:title></metadata><manifest>{items}</manifest><spine>{spine}</spine>'
       "</package>")
CONTAINER = ('<container xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile '
             'full-path="content.opf"/></rootfiles></container>')
W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def paragraphs(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 120))).capitalize() + "." for _ in range(n)]


def write_epub(path: Path, chapters: list[list[str]]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("mimetype", "application/epub+zip")
        zf.writestr("META-INF/container.xml", CONTAINER)
        items, spine = [], []
        for i, paras in enumerate(chapters):
            body = f"<h1>Chapter {i + 1}</h1>" + "".join(f"<p>{p}</p>" for p in paras)
            zf.writestr(f"c{i}.xhtml", f'<html xmlns="http://www.w3.org/1999/xhtml"><body>{body}</body></html>')
            items.append(f'<item id="c{i}" href="c{i}.xhtml" media-type="application/xhtml+xml"/>')
            spine.append(f'<itemref idref="c{i}"/>')
        zf.writestr("content.opf", OPF.format(items="".join(items), spine="".join(spine)))


def write_docx(path: Path, chapters: list[list[str]]) -> None:
    body = []
    for i, paras in enumerate(chapters):
        body.append(f'<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Chapter {i + 1}</w:t></w:r></w:p>')
        body += [f"<w:p><w:r><w:t>{p}</w:t></w:r></w:p>" for p in paras]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("word/document.xml", f"<w:document {W}><w:body>{''.join(body)}</w:body></w:document>")


def timed(fn, repeat: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def secrets_rates(tmp: Path) -> dict:
    """bookft's scanner against detect-secrets' own public per-file scan (`scan_file`, over copies of
    the same files: it reads them itself), on the bookft package's code."""
    from detect_secrets.core.scan import scan_file

    root = Path(bookft.__file__).parent
    texts = {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*.py"))}
    lines = sum(t.count("\n") + 1 for t in texts.values())
    copies = []
    for n, t in texts.items():
        copies.append(tmp / "code" / n)
        copies[-1].parent.mkdir(parents=True, exist_ok=True)
        copies[-1].write_text(t)
    with SecretScanner() as s:
        ours, n_ours = timed(lambda: sum(len(s.scan_all(t, n)) for n, t in texts.items()), 2)
        theirs, n_theirs = timed(lambda: sum(1 for p in copies for _ in scan_file(str(p))), 1)
    return {"files": len(texts), "lines": lines, "findings_fast": n_ours, "findings_library_loop": n_theirs,
            "fast_lines_per_s": round(lines / ours), "library_lines_per_s": round(lines / theirs),
            "speedup": round(theirs / ours, 2)}


def ocr_rate(tmp: Path) -> dict:
    if shutil.which("tesseract") is None:
        return {"skipped": "tesseract is not on PATH"}
    from PIL import Image, ImageDraw, ImageFont

    from bookft.ingest.formats.pdf import pdf_text

    rng = random.Random(1)
    lines = [" ".join(rng.choice(WORDS) for _ in range(9)).capitalize() + "." for _ in range(40)]
    font = ImageFont.load_default(size=30)
    img = Image.new("L", (1700, 2200), 255)  # a letter page at 200 dpi
    draw = ImageDraw.Draw(img)
    for i, line in enumerate(lines):
        draw.text((120, 100 + 50 * i), line, fill=0, font=font)
    buf = io.BytesIO()
    img.save(buf, "PDF", resolution=200.0)
    cfg = ExtractConfig(ocr=OcrConfig(enabled=True, dpi=300)).ocr
    dt, (text, meta) = timed(lambda: pdf_text(buf.getvalue(), ocr=cfg), 1)
    ratio = difflib.SequenceMatcher(None, text, " ".join(lines), autojunk=False).ratio()
    return {"s_per_page": round(dt, 2), "dpi": cfg.dpi, "similarity": round(ratio, 4), "note": meta.get("ocr_note")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chapters", type=int, default=200)
    ap.add_argument("--paragraphs", type=int, default=30)
    args = ap.parse_args()
    record = Record("sources", f"{args.chapters}-chapters")
    rng = random.Random(0)
    chapters = [paragraphs(rng, args.paragraphs) for _ in range(args.chapters)]
    expected = "\n\n".join(x for i, ch in enumerate(chapters) for x in [f"Chapter {i + 1}", *ch])
    out: dict = {"chapters": args.chapters, "chars": len(expected)}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name, write, read in (("epub", write_epub, extract_epub), ("docx", write_docx, extract_docx)):
            path = tmp / f"bench.{name}"
            write(path, chapters)
            dt, res = timed(lambda p=path, r=read: r(p, "bench", LimitsConfig()))
            text = res.documents[0].text
            out[name] = {"file_mib": round(path.stat().st_size / 2**20, 2), "seconds": round(dt, 3),
                         "chars_per_s": round(len(text) / dt), "exact": text == expected}
        out["secrets"] = secrets_rates(tmp)
        out["ocr"] = ocr_rate(tmp)
    t = Table(title=f"source formats ({record.header['machine']['hardware']})")
    for col in ("what", "figure"):
        t.add_column(col)
    for name in ("epub", "docx"):
        r = out[name]
        t.add_row(f"{name} extraction ({args.chapters} chapters, {out['chars']:,} chars, {r['file_mib']} MiB)",
                  f"{r['seconds']} s, {r['chars_per_s']:,} chars/s, text exact: {r['exact']}")
    s = out["secrets"]
    t.add_row(f"secret scan, bookft package ({s['lines']:,} lines)",
              f"{s['fast_lines_per_s']:,} lines/s vs detect-secrets' loop {s['library_lines_per_s']:,} "
              f"({s['speedup']}x; findings {s['findings_fast']} = {s['findings_library_loop']})")
    o = out["ocr"]
    t.add_row("OCR of an image-only page", o.get("skipped") or f"{o['s_per_page']} s/page at {o['dpi']} dpi, "
                                                              f"similarity {o['similarity']}")
    Console().print(t)
    record.write(out)


if __name__ == "__main__":
    main()
