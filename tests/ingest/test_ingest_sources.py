"""Extractors on fixtures generated here: PDF, code repository, legal XML/archives, text; hostile input."""

import io
import json
import os
import tarfile
import zipfile

import pytest

from bookft.ingest.config import ExtractConfig, LimitsConfig
from bookft.ingest.documents import clean_text, decode_text
from bookft.ingest.formats.archive import extract_legal
from bookft.ingest.formats.code import extract_code
from bookft.ingest.formats.legal import XmlRefused, xml_to_text
from bookft.ingest.formats.pdf import pdf_text
from bookft.ingest.sample.pdfwriter import book_pdf, page_stream, write_pdf
from bookft.ingest.sources import extract, resolve_sources

PARAS = [f"Paragraph {i} tells how the extraordinarily considerate librarian catalogued manuscripts "
         f"meticulously while the committee deliberated about river stones. The code of Aldric is {48213 + i}."
         for i in range(60)]


def _entries(res):
    return {e.source: (e.status, e.reason) for e in res.entries}


@pytest.mark.parametrize("backend", ["pdfium", "pypdf"])
def test_pdf_text_exact_headers_pagenumbers_hyphens_removed(backend):
    data = book_pdf("A Running Header", "Ann Author", PARAS, lines_per_page=30)
    text, meta = pdf_text(data, backend)
    assert text == "\n\n".join(PARAS)
    assert meta["pages"] > 3 and meta["title"] == "A Running Header" and meta["author"] == "Ann Author"
    assert "A Running Header" not in text


def test_pdf_made_by_reportlab():
    canvas = pytest.importorskip("reportlab.pdfgen.canvas")
    buf = io.BytesIO()
    c = canvas.Canvas(buf)
    c.drawString(72, 720, "Hello from reportlab, page one.")
    c.showPage()
    c.drawString(72, 720, "Second page says goodbye.")
    c.save()
    text, meta = pdf_text(buf.getvalue())
    assert "Hello from reportlab, page one." in text and "Second page says goodbye." in text
    assert meta["pages"] == 2


def test_ligatures_and_hyphen_cleanup():
    assert clean_text("e\ufb03cient \ufb01sh\r\n") == "efficient fish"


def test_bad_pdfs(tmp_path):
    good = book_pdf("T", "A", PARAS[:5])
    (tmp_path / "truncated.pdf").write_bytes(good[: len(good) // 3])
    (tmp_path / "fake.pdf").write_bytes(b"this is plain text, not a PDF\n")
    (tmp_path / "images.pdf").write_bytes(write_pdf([page_stream([]), page_stream([])]))
    from pypdf import PdfReader, PdfWriter

    w = PdfWriter()
    for p in PdfReader(io.BytesIO(good)).pages:
        w.add_page(p)
    w.encrypt(user_password="secret", owner_password="owner")
    enc = io.BytesIO()
    w.write(enc)
    (tmp_path / "encrypted.pdf").write_bytes(enc.getvalue())
    jobs, bad = resolve_sources([(str(tmp_path), "auto", None)], ExtractConfig(), LimitsConfig())
    assert not bad and {j.kind for j in jobs} == {"pdf"}
    got = {os.path.basename(j.path): extract(j) for j in jobs}
    reasons = {k: r.entries[0].reason for k, r in got.items()}
    assert all(r.entries[0].status == "failed" and not r.documents for r in got.values())
    assert reasons["encrypted.pdf"].startswith("encrypted PDF")
    assert reasons["fake.pdf"].startswith("not a PDF")
    assert "damaged or truncated" in reasons["truncated.pdf"] or "no text layer" in reasons["truncated.pdf"]
    assert "no text layer" in reasons["images.pdf"]


def test_code_repository(tmp_path):
    repo = tmp_path / "repo"
    (repo / "src" / "pkg").mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / "README.md").write_text("# Demo\n\nA demo repository.\n")
    (repo / "a.py").write_text("print('a')\n")
    (repo / "src" / "pkg" / "mod.py").write_text("def f():\n    return 1\n")
    (repo / "src" / "pkg" / "blob.dat").write_bytes(b"\x00\x01\x02binary" * 10)
    (repo / "build").mkdir()
    (repo / "build" / "gen.py").write_text("x = 1\n")
    (repo / ".gitignore").write_text("secret.txt\n*.log\n")
    (repo / "secret.txt").write_text("do not ingest\n")
    (repo / "debug.log").write_text("log\n")
    (repo / "package-lock.json").write_text("{}\n")
    (repo / "big.py").write_text("x = 1\n" * 400)
    (tmp_path / "outside.txt").write_text("outside the repository\n")
    os.symlink(tmp_path / "outside.txt", repo / "escape.txt")
    os.symlink("loop_b", repo / "loop_a")
    os.symlink("loop_a", repo / "loop_b")
    res = extract_code(repo, "repo", max_file_kb=1)
    doc = res.documents[0].text
    heads = [ln for ln in doc.splitlines() if ln.startswith("=== FILE:")]
    assert heads == ["=== FILE: README.md (markdown) ===", "=== FILE: .gitignore (text) ===",
                     "=== FILE: a.py (python) ===", "=== FILE: src/pkg/mod.py (python) ==="]
    assert "do not ingest" not in doc and "ref: refs" not in doc
    reasons = {os.path.basename(k): v[1] for k, v in _entries(res).items() if v[0] != "ingested"}
    assert reasons["blob.dat"] == "binary content"
    assert reasons["package-lock.json"] == "lock file"
    assert "size cap" in reasons["big.py"]
    assert "vendored" in reasons[""] or any("vendored" in r for r in reasons.values())
    assert "leaves the repository" in reasons["escape.txt"]
    assert reasons["loop_a"] == "symlink loop" and reasons["loop_b"] == "symlink loop"


USLM = b"""<?xml version="1.0"?>
<uscDoc xmlns="http://xml.house.gov/schemas/uslm/1.0" xmlns:dc="http://purl.org/dc/elements/1.1/">
<meta><dc:title>Title 99. Testing</dc:title></meta>
<main><title><num value="99">Title 99.</num><heading>Testing</heading>
<chapter><num>Chapter 1.</num><heading>General</heading>
<section><num>\xc2\xa7 101.</num><heading>Definitions</heading>
<chapeau>In this title:</chapeau>
<subsection><num>(a)</num><content><p>The term <term>book</term> means a long text.</p></content></subsection>
</section></chapter></title></main></uscDoc>"""

AKN = b"""<akomaNtoso xmlns="http://docs.oasis-open.org/legaldocml/ns/akn/3.0"><act>
<meta><identification><FRBRWork><FRBRname value="Test Act"/></FRBRWork></identification></meta>
<body><chapter><num>I</num><heading>Scope</heading>
<article><num>Article 1</num><heading>Purpose</heading><paragraph><num>1.</num><content><p>This Act applies.</p>
</content></paragraph></article></chapter></body></act></akomaNtoso>"""

BOMB = b"""<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;">]><lolz>&lol3;</lolz>"""


def test_uslm_and_akoma_ntoso_structure():
    text, title, schema = xml_to_text(USLM)
    assert schema == "uslm" and title == "Title 99. Testing"
    assert text.split("\n\n") == ["Title 99. Testing", "Chapter 1. General", "\u00a7 101. Definitions",
                                  "In this title:", "(a)", "The term book means a long text."]
    text, title, schema = xml_to_text(AKN)
    assert schema == "akoma-ntoso" and title == "Test Act"
    assert text.split("\n\n") == ["I Scope", "Article 1 Purpose", "1.", "This Act applies."]


def test_billion_laughs_refused():
    with pytest.raises(XmlRefused, match="billion-laughs"):
        xml_to_text(BOMB)


def _zip(path, members):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zf.writestr(name, data)


def test_legal_zip_with_slip_bomb_and_jsonl(tmp_path):
    ops = "\n".join(json.dumps({"case_name": f"A v. B {i}", "text": f"Opinion {i} text."}) for i in range(3))
    z = tmp_path / "law.zip"
    _zip(z, [("usc/t99.xml", USLM), ("akn/act.xml", AKN), ("ops.jsonl", ops + "\nnot json\n"),
             ("../evil.txt", b"escape"), ("/abs.txt", b"abs"), ("bomb.xml", BOMB),
             ("zeros.txt", b"0" * (3 << 20)), ("page.html", b"<html><script>x()</script><p>Hi there</p></html>")])
    res = extract_legal(z, "law", LimitsConfig(archive_max_ratio=100))
    e = {k.split(":", 1)[1]: v for k, v in _entries(res).items() if ":" in k}
    assert "zip slip" in e["../evil.txt"][1] and "zip slip" in e["/abs.txt"][1]
    assert e["bomb.xml"][0] == "failed" and "billion-laughs" in e["bomb.xml"][1]
    assert "decompression bomb" in e["zeros.txt"][1]
    assert e["ops.jsonl"][0] == "ingested" and "1 line(s) not a JSON object" in e["ops.jsonl"][1]
    titles = [d.title for d in res.documents]
    assert titles[:2] == ["Title 99. Testing", "Test Act"]
    assert [d.text for d in res.documents if d.source.endswith("page.html")] == ["Hi there"]
    assert sum(1 for d in res.documents if "#L" in d.source) == 3


def test_tar_links_refused(tmp_path):
    t = tmp_path / "law.tar.gz"
    with tarfile.open(t, "w:gz") as tf:
        info = tarfile.TarInfo("ok.xml")
        info.size = len(USLM)
        tf.addfile(info, io.BytesIO(USLM))
        link = tarfile.TarInfo("link.xml")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        tf.addfile(link)
    res = extract_legal(t, "law", LimitsConfig())
    assert len(res.documents) == 1
    assert any("link member refused" in e.reason for e in res.entries)


def test_text_encodings_and_bad_paths(tmp_path):
    (tmp_path / "latin.txt").write_bytes("Caf\xe9 cr\xe8me br\xfbl\xe9e".encode("cp1252"))
    (tmp_path / "empty").mkdir()
    os.symlink("self", tmp_path / "self")
    jobs, bad = resolve_sources([(str(tmp_path / "latin.txt"), "auto", None), (str(tmp_path / "missing"), "auto", None),
                                 (str(tmp_path / "empty"), "auto", None), (str(tmp_path / "self"), "auto", None)],
                                ExtractConfig(), LimitsConfig())
    assert [b.reason for b in bad] == ["path does not exist", "empty folder: no files to ingest",
                                       "symlink loop: cannot be followed"]
    res = extract(jobs[0])
    assert res.documents[0].text == "Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e"
    assert "not valid UTF-8" in res.entries[0].reason
    assert decode_text(b"\xef\xbb\xbfhi")[0] == "hi"


def test_unreadable_file(tmp_path, monkeypatch):
    p = tmp_path / "locked.txt"
    p.write_text("secret")
    os.chmod(p, 0)
    if os.geteuid() == 0:  # root reads anything: simulate the permission error
        import pathlib

        real = pathlib.Path.read_bytes
        monkeypatch.setattr(pathlib.Path, "read_bytes",
                            lambda self: (_ for _ in ()).throw(PermissionError(13, "Permission denied"))
                            if self.name == "locked.txt" else real(self))
    jobs, _ = resolve_sources([(str(p), "text", None)], ExtractConfig(), LimitsConfig())
    res = extract(jobs[0])
    assert res.entries[0].status == "failed" and "Permission denied" in res.entries[0].reason


@pytest.mark.parametrize("backend", ["pdfium", "pypdf"])
def test_broken_xref_table_is_repaired(backend):
    data = book_pdf("Xref", "A", PARAS[:8], lines_per_page=12)
    import re

    broken = re.sub(rb"startxref\n\d+", b"startxref\n999", data)  # the xref table is not at 999
    assert broken != data
    text, _ = pdf_text(broken, backend)
    assert text == "\n\n".join(PARAS[:8])


def test_auto_kind_on_a_mixed_folder(tmp_path):
    root = tmp_path / "mixed"
    (root / "repo" / ".git").mkdir(parents=True)
    (root / "repo" / "main.py").write_text("print(1)\n")
    (root / "books").mkdir()
    (root / "books" / "one.pdf").write_bytes(book_pdf("One", "A", PARAS[:3]))
    (root / "books" / "two.pdf").write_bytes(book_pdf("Two", "A", PARAS[3:6]))
    (root / "notes").mkdir()
    (root / "notes" / "a.md").write_text("# A\n\nnote a\n")
    (root / "notes" / "b.txt").write_text("note b\n")
    (root / "page.html").write_text("<p>hello</p>")
    (root / "ops.jsonl").write_text('{"text": "x"}\n')
    (root / "law.zip").write_bytes(b"")
    for i in range(5):  # python files next to documents do not make the folder a repository
        (root / f"tool{i}.py").write_text("x = 1\n")
    jobs, bad = resolve_sources([(str(root), "auto", None)], ExtractConfig(), LimitsConfig())
    got = {(os.path.relpath(j.path, root), j.kind, j.collection) for j in jobs}
    assert ("repo", "code", "repo") in got
    assert ("books/one.pdf", "pdf", "one") in got and ("books/two.pdf", "pdf", "two") in got
    assert ("notes/a.md", "text", "notes") in got and ("notes/b.txt", "text", "notes") in got
    assert ("page.html", "html", "mixed") in got and ("ops.jsonl", "jsonl", "ops") in got
    assert ("law.zip", "legal", "law") in got and ("tool0.py", "text", "mixed") in got
    forced, _ = resolve_sources([(str(root / "notes"), "text", "N")], ExtractConfig(), LimitsConfig())
    assert [(j.kind, j.collection) for j in forced] == [("text", "N"), ("text", "N")]
