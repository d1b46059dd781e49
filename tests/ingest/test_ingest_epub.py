"""EPUB books written here (zip + OPF + XHTML, EPUB 3 nav or EPUB 2 NCX) with known text; DRM and broken books."""

import difflib
import zipfile

import pytest

from bookft.ingest.config import ExtractConfig, LimitsConfig
from bookft.ingest.formats.epub import extract_epub
from bookft.ingest.sources import extract, resolve_sources

OPS = "http://www.idpf.org/2007/ops"
WORDS = ("river stone lantern harbor meadow archive winter summer quiet ancient merchant sailor caf\u00e9 "
         "na\u00efve r\u00e9sum\u00e9 \u201cquoted\u201d words \u2014 dashes").split()


def para(i: int, n: int = 40) -> str:
    words = [WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(n)]
    return " ".join(words).capitalize() + f", number {i}."


def xhtml(body: str, doctype: str = "<!DOCTYPE html>") -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n{doctype}\n<html xmlns="http://www.w3.org/1999/xhtml" '
            f'xmlns:epub="{OPS}"><head><title>ignored head title</title><style>p {{ x: 1 }}</style></head>\n'
            f"<body>\n{body}\n</body></html>").encode()


def ps(ids) -> str:
    return "\n".join(f"<p>\n  {para(i)}\n</p>" for i in ids)


def opf(items, spine, *, title="The Known Book", authors=("Ann Author", "Bo Writer"), lang="en", toc_attr=""):
    meta = "".join(f"<dc:creator>{a}</dc:creator>" for a in authors)
    man = "".join(f'<item id="{i}" href="{h}" media-type="{m}"{p}/>' for i, h, m, p in items)
    sp = "".join(f'<itemref idref="{i}"{"" if lin else " linear=" + chr(34) + "no" + chr(34)}/>' for i, lin in spine)
    return (f'<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">'
            f'<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">urn:x</dc:identifier>'
            f"<dc:title>{title}</dc:title>{meta}<dc:language>{lang}</dc:language></metadata>"
            f"<manifest>{man}</manifest><spine{toc_attr}>{sp}</spine></package>").encode()


CONTAINER = (b'<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
             b'<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
             b"</rootfiles></container>")


def write_epub(path, members, *, container=CONTAINER):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), b"application/epub+zip")  # stored, first: the OCF rule
        if container is not None:
            zf.writestr("META-INF/container.xml", container, zipfile.ZIP_DEFLATED)
        for name, data in members:
            zf.writestr(name, data, zipfile.ZIP_DEFLATED)
    return path


def known_book(tmp_path, nav: str = "nav"):
    """An EPUB 3 book (nav.xhtml) or EPUB 2 book (toc.ncx); returns (path, the text bookft must give)."""
    ch1 = xhtml(f"<section><h1>Chapter One</h1>\n{ps(range(0, 4))}</section>")  # its own h1 = the nav title
    ch2 = xhtml(f'<p>{para(10)} Here is a note<a epub:type="noteref" href="#fn1">1</a> and more.</p>\n{ps([11])}'
                f'<aside epub:type="footnote" id="fn1"><p>The footnote says the river stone is old.</p></aside>'
                f"{ps([12, 13])}",
                '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" "http://www.w3.org/TR/xhtml11/DTD/xhtml11.dtd">')
    ch3 = xhtml(f'{ps([20])}<div id="part-b"><p>Tab&nbsp;and&#160;entities &amp; more &lt;ok&gt;.</p>'
                f"{ps([21])}<p>line one<br/>line two</p></div><img src='x.png' alt='an image'/>")
    notes = xhtml(ps([30]))
    navdoc = xhtml('<nav epub:type="toc"><ol><li><a href="text/ch1.xhtml">Chapter One</a></li>'
                   '<li><a href="text/ch2.xhtml">Chapter Two</a></li><li><a href="text/ch3.xhtml">Chapter Three</a>'
                   '<ol><li><a href="text/ch3.xhtml#part-b">Part B</a></li></ol></li></ol></nav>'
                   '<nav epub:type="landmarks"><ol><li><a href="text/ch1.xhtml">Start</a></li></ol></nav>')
    ncx = (b'<?xml version="1.0"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1"><navMap>'
           b'<navPoint id="a"><navLabel><text>Chapter One</text></navLabel><content src="text/ch1.xhtml"/></navPoint>'
           b'<navPoint id="b"><navLabel><text>Chapter Two</text></navLabel><content src="text/ch2.xhtml"/></navPoint>'
           b'<navPoint id="c"><navLabel><text>Chapter Three</text></navLabel><content src="text/ch3.xhtml"/>'
           b'<navPoint id="d"><navLabel><text>Part B</text></navLabel><content src="text/ch3.xhtml#part-b"/>'
           b"</navPoint></navPoint></navMap></ncx>")
    x = "application/xhtml+xml"
    items = [("c3", "text/ch3.xhtml", x, ""), ("c1", "text/ch1.xhtml", x, ""), ("c2", "text/ch2.xhtml", x, ""),
             ("n", "text/notes.xhtml", x, ""), ("css", "style.css", "text/css", ""),
             ("img", "x.png", "image/png", "")]
    members = [("OEBPS/text/ch1.xhtml", ch1), ("OEBPS/text/ch2.xhtml", ch2), ("OEBPS/text/ch3.xhtml", ch3),
               ("OEBPS/text/notes.xhtml", notes), ("OEBPS/style.css", b"p{}"), ("OEBPS/x.png", b"\x89PNG" * 50)]
    spine = [("n", False), ("c1", True), ("c2", True), ("c3", True)]  # the notes are linear="no": last
    if nav == "nav":
        items.append(("nav", "nav.xhtml", x, ' properties="nav"'))
        members.append(("OEBPS/nav.xhtml", navdoc))
        spine.insert(1, ("nav", True))  # the nav document in the spine is not body text
        toc_attr = ""
    else:
        items.append(("ncx", "toc.ncx", "application/x-dtbncx+xml", ""))
        members.append(("OEBPS/toc.ncx", ncx))
        toc_attr = ' toc="ncx"'
    members.append(("OEBPS/content.opf", opf(items, spine, toc_attr=toc_attr)))
    expected = ["Chapter One", *(para(i) for i in range(4)),
                "Chapter Two", f"{para(10)} Here is a note[1] and more.", para(11), para(12), para(13),
                "The footnote says the river stone is old.",
                "Chapter Three", para(20), "Part B", "Tab and entities & more <ok>.", para(21),
                "line one\nline two", para(30)]
    return write_epub(tmp_path / f"known-{nav}.epub", members), "\n\n".join(expected)


@pytest.mark.parametrize("nav", ["nav", "ncx"])
def test_epub_round_trips_known_text(tmp_path, nav):
    path, expected = known_book(tmp_path, nav)
    res = extract_epub(path, "book", LimitsConfig())
    assert [(e.status, e.reason) for e in res.entries] == [("ingested", "")]
    (doc,) = res.documents
    ratio = difflib.SequenceMatcher(None, doc.text, expected, autojunk=False).ratio()
    assert ratio >= 0.98, ratio
    assert doc.text == expected
    assert doc.kind == "epub" and doc.title == "The Known Book"
    assert doc.meta == {"author": "Ann Author; Bo Writer", "language": "en", "chapters": 4}
    assert "ignored head title" not in doc.text and "an image" not in doc.text


def test_epub_in_a_folder_resolves_as_its_own_book(tmp_path):
    folder = tmp_path / "books"
    folder.mkdir()
    known_book(folder)
    (folder / "readme.txt").write_text("about these books\n")
    jobs, bad = resolve_sources([(str(folder), "auto", None)], ExtractConfig(), LimitsConfig())
    assert not bad and sorted((j.kind, j.collection) for j in jobs) == [("epub", "known-nav"), ("text", "books")]
    res = extract(next(j for j in jobs if j.kind == "epub"))
    assert res.documents[0].meta["chapters"] == 4


def _book_with(tmp_path, name, extra=(), *, container=CONTAINER, opf_bytes=None, chapters=True):
    x = "application/xhtml+xml"
    members = [("OEBPS/text/ch1.xhtml", xhtml(ps([1])))] if chapters else []
    members += list(extra)
    if opf_bytes is not False:
        members.append(("OEBPS/content.opf", opf_bytes or opf([("c1", "text/ch1.xhtml", x, ""),
                                                               ("c2", "text/gone.xhtml", x, "")],
                                                              [("c1", True), ("c2", True)])))
    return write_epub(tmp_path / name, members, container=container)


ENCRYPTION = ('<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
              'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
              '<enc:EncryptionMethod Algorithm="{alg}"/><enc:CipherData>'
              '<enc:CipherReference URI="{uri}"/></enc:CipherData></enc:EncryptedData></encryption>')
BOMB = b"""<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">
]><package>&lol2;</package>"""


def test_drm_and_malformed_epubs_get_clear_reasons(tmp_path):
    aes = ENCRYPTION.format(alg="http://www.w3.org/2001/04/xmlenc#aes128-cbc", uri="OEBPS/text/ch1.xhtml")
    fonts = ENCRYPTION.format(alg="http://www.idpf.org/2008/embedding", uri="OEBPS/fonts/a.otf")
    books = {
        "drm-aes.epub": _book_with(tmp_path, "drm-aes.epub", [("META-INF/encryption.xml", aes)]),
        "drm-adept.epub": _book_with(tmp_path, "drm-adept.epub", [("META-INF/rights.xml", b"<rights/>")]),
        "fonts-only.epub": _book_with(tmp_path, "fonts-only.epub", [("META-INF/encryption.xml", fonts)]),
        "no-container.epub": _book_with(tmp_path, "no-container.epub", container=None),
        "no-opf.epub": _book_with(tmp_path, "no-opf.epub", opf_bytes=False),
        "empty-spine.epub": _book_with(tmp_path, "empty-spine.epub", opf_bytes=opf([], [])),
        "bomb.epub": _book_with(tmp_path, "bomb.epub", opf_bytes=BOMB),
        "slip.epub": _book_with(tmp_path, "slip.epub", [("../../evil.xhtml", b"<p>x</p>")]),
    }
    (tmp_path / "text.epub").write_bytes(b"plain text, not a zip")
    books["text.epub"] = tmp_path / "text.epub"
    got = {name: extract_epub(p, "b", LimitsConfig()) for name, p in books.items()}
    main = {name: next(e for e in r.entries if e.source == str(books[name])) for name, r in got.items()}
    reason = {name: e.reason for name, e in main.items()}
    assert reason["drm-aes.epub"] == ("DRM-protected EPUB: META-INF/encryption.xml encrypts 1 file(s) (first: "
                                      "OEBPS/text/ch1.xhtml, algorithm http://www.w3.org/2001/04/xmlenc#aes128-cbc)"
                                      "; bookft cannot decrypt it: use a DRM-free copy")
    assert reason["drm-adept.epub"].startswith("DRM-protected EPUB: Adobe ADEPT (META-INF/rights.xml)")
    assert reason["no-container.epub"] == "malformed EPUB: META-INF/container.xml (OCF container) is missing"
    assert reason["no-opf.epub"] == ("malformed EPUB: META-INF/container.xml names the package "
                                     "OEBPS/content.opf, which is not in the archive")
    assert reason["empty-spine.epub"] == "malformed EPUB: OEBPS/content.opf has an empty spine (no reading order)"
    assert reason["bomb.epub"].startswith("malformed EPUB: OEBPS/content.opf (package document): XML refused")
    assert reason["text.epub"].startswith("malformed EPUB: not a readable zip archive (BadZipFile")
    for name in ("drm-aes.epub", "drm-adept.epub", "no-container.epub", "no-opf.epub", "empty-spine.epub",
                 "bomb.epub", "text.epub"):
        assert main[name].status == "failed" and not got[name].documents, name
    # font obfuscation is not DRM; a missing chapter is named; a zip-slip member is refused, the book kept
    for name in ("fonts-only.epub", "slip.epub"):
        assert main[name].status == "ingested" and got[name].documents[0].text == para(1), name
        assert main[name].reason == "1 chapter(s) missing or refused (first: OEBPS/text/gone.xhtml)"
    slip = [e for e in got["slip.epub"].entries if e is not main["slip.epub"]]
    assert [(e.status, e.kind) for e in slip] == [("skipped", "epub")] and "zip slip" in slip[0].reason
