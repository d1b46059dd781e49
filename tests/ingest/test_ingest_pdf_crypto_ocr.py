"""Encrypted PDFs (RC4, AES-128, AES-256) with and without the password; OCR of image-only pages."""

import difflib
import io
import shutil

import pytest
from pypdf import PdfReader, PdfWriter

from bookft.ingest.config import ExtractConfig, LimitsConfig, OcrConfig
from bookft.ingest.formats.pdf import pdf_text
from bookft.ingest.sample.pdfwriter import book_pdf
from bookft.ingest.sources import extract, job_key, resolve_sources

PARAS = [f"Paragraph {i} of the owned book tells how the extraordinarily considerate librarian catalogued "
         f"manuscripts meticulously while the committee deliberated about river stones. The code is {48213 + i}."
         for i in range(8)]


def encrypted(algorithm: str, user: str = "letmein") -> bytes:
    w = PdfWriter(clone_from=PdfReader(io.BytesIO(book_pdf("Owned", "Me", PARAS, lines_per_page=12))))
    w.encrypt(user_password=user, owner_password="owner-" + user, algorithm=algorithm)
    buf = io.BytesIO()
    w.write(buf)
    return buf.getvalue()


@pytest.mark.parametrize("algorithm", ["RC4-128", "AES-128", "AES-256"])
@pytest.mark.parametrize("backend", ["pdfium", "pypdf"])
def test_encrypted_pdf_reasons_and_password(tmp_path, algorithm, backend):
    data = encrypted(algorithm)
    (tmp_path / "owned.pdf").write_bytes(data)
    cfg = ExtractConfig(pdf_backend=backend)
    specs = [(str(tmp_path / "owned.pdf"), "auto", None), (str(tmp_path), "auto", "mine", "letmein"),
             (str(tmp_path / "owned.pdf"), "pdf", "wrong", "not-it")]
    jobs, bad = resolve_sources(specs, cfg, LimitsConfig())
    assert not bad and [j.pdf_password for j in jobs] == [None, "letmein", "not-it"]
    assert "letmein" not in repr(jobs[1])
    none, right, wrong = (extract(j) for j in jobs)
    assert [(e.status, e.reason) for e in none.entries] == [
        ("failed", "encrypted PDF (a password is required; none was given)")]
    assert [(e.status, e.reason) for e in wrong.entries] == [
        ("failed", "encrypted PDF (the password given does not open it)")]
    assert [e.status for e in right.entries] == ["ingested"]
    assert right.documents[0].text == "\n\n".join(PARAS)
    keys = {job_key(j, "h") for j in jobs}
    assert len(keys) == 3  # the password is part of the cache key (hashed), so a new one re-extracts


def test_aes_without_the_crypto_package_says_encrypted(monkeypatch):
    from pypdf import PdfReader as Reader
    from pypdf.errors import DependencyError

    def no_crypto(self, password):
        raise DependencyError("cryptography>=3.1 is required for AES algorithm")

    monkeypatch.setattr(Reader, "decrypt", no_crypto)
    with pytest.raises(Exception, match=r"^encrypted PDF \(AES\); decrypting it needs a package that is missing "
                                        r"\(cryptography>=3.1 is required for AES algorithm\): pip install"):
        pdf_text(encrypted("AES-256"), "pypdf")


def image_pdf(lines: list[str]) -> bytes:
    """A PDF whose only page is a picture of `lines` (no text layer): what a scanner gives."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=34)
    img = Image.new("L", (1700, 120 + 60 * len(lines)), 255)
    draw = ImageDraw.Draw(img)
    for i, line in enumerate(lines):
        draw.text((90, 60 + 60 * i), line, fill=0, font=font)
    buf = io.BytesIO()
    img.save(buf, "PDF", resolution=200.0)
    return buf.getvalue()


SCAN = ["The quick brown fox jumps over the lazy dog near the harbor.",
        "Seven merchants travelled north with forty lanterns and a map.",
        "Every archive keeps its oldest letters in a quiet room."]


def test_image_only_pdf_without_ocr_is_reported_as_before(tmp_path, monkeypatch):
    (tmp_path / "scan.pdf").write_bytes(image_pdf(SCAN))
    off, on = (ExtractConfig(ocr=OcrConfig(enabled=flag)) for flag in (False, True))
    (job,), _ = resolve_sources([(str(tmp_path / "scan.pdf"), "auto", None)], off, LimitsConfig())
    assert [(e.status, e.reason) for e in extract(job).entries] == [
        ("failed", "no text layer on any of 1 page(s) (image-only/scanned PDF; OCR is not done)")]
    monkeypatch.setattr(shutil, "which", lambda name: None)  # OCR asked for, tesseract not installed
    (job,), _ = resolve_sources([(str(tmp_path / "scan.pdf"), "auto", None)], on, LimitsConfig())
    assert [(e.status, e.reason) for e in extract(job).entries] == [
        ("failed", "no text layer on any of 1 page(s) (image-only/scanned PDF); OCR asked for, but tesseract is "
                   "not on PATH (install it, e.g. apt-get install tesseract-ocr)")]


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract is not installed")
def test_ocr_reads_an_image_only_page(tmp_path):
    pytest.importorskip("pytesseract")
    (tmp_path / "scan.pdf").write_bytes(image_pdf(SCAN))
    (job,), _ = resolve_sources([(str(tmp_path / "scan.pdf"), "auto", None)],
                                ExtractConfig(ocr=OcrConfig(enabled=True, dpi=200)), LimitsConfig())
    res = extract(job)
    (entry,) = res.entries
    assert entry.status == "ingested" and entry.reason.startswith("1 of 1 page(s) without a text layer read by OCR "
                                                                  "(tesseract 5.")
    (doc,) = res.documents
    ratio = difflib.SequenceMatcher(None, doc.text, " ".join(SCAN), autojunk=False).ratio()
    assert ratio >= 0.95, (ratio, doc.text)
    assert doc.meta["ocr_pages"] == 1 and doc.meta["empty_pages"] == 0 and res.stats["ocr_pages"] == 1


def test_passwords_from_the_cli_and_the_environment_never_reach_the_corpus(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from bookft.cli import app
    from bookft.config import from_dict
    from bookft.errors import ConfigError
    from bookft.ingest import IngestConfig, build_corpus

    (tmp_path / "owned.pdf").write_bytes(encrypted("AES-256", "cli-secret-pw"))
    res = CliRunner().invoke(app, ["ingest", str(tmp_path / "owned.pdf"), "--out", str(tmp_path / "a"),
                                   "--workers", "0", "--vocab-size", "300", "--seq-len", "64",
                                   "--pdf-password", "cli-secret-pw"])
    assert res.exit_code == 0, res.output
    version = sorted((tmp_path / "a" / "versions").iterdir())[-1]
    manifest = (version / "manifest.json").read_text()
    assert '"ingested"' in manifest and "cli-secret-pw" not in manifest
    assert not any(b"cli-secret-pw" in f.read_bytes() for f in (tmp_path / "a").rglob("*") if f.is_file())

    (tmp_path / "env.pdf").write_bytes(encrypted("AES-128", "env-secret-pw"))
    cfg = from_dict(IngestConfig, {"out": str(tmp_path / "b"), "workers": 0, "tokenizer": {"vocab_size": 300},
                                   "packing": {"seq_len": 64},
                                   "sources": [{"path": str(tmp_path / "env.pdf"), "pdf_password_env": "BOOK_PW"}]})
    monkeypatch.delenv("BOOK_PW", raising=False)
    with pytest.raises(ConfigError, match=r"pdf_password_env names \$BOOK_PW, which is not set"):
        build_corpus(cfg)
    monkeypatch.setenv("BOOK_PW", "env-secret-pw")
    m = build_corpus(cfg)
    assert [e["status"] for e in m["sources"]] == ["ingested"] and m["counts"]["documents"] == 1
    assert "env-secret-pw" not in (tmp_path / "b" / "current" / "manifest.json").read_text()
