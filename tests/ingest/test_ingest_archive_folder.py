"""A folder of legal zips (one per title, as the US Code is downloaded): each zip is a first-level archive,
opened with the archive rules; a zip inside a zip is still refused; a damaged zip fails alone."""

import io
import zipfile

import pytest

from bookft.ingest.config import ExtractConfig, LimitsConfig
from bookft.ingest.sources import extract, resolve_sources


def title_xml(n: int) -> bytes:
    return (f'<uscDoc xmlns="http://xml.house.gov/schemas/uslm/1.0"><main><title><num>Title {n}.</num>'
            f"<heading>Sample</heading><section><num>\u00a7 1.</num><content><p>Law text of title {n}.</p>"
            "</content></section></title></main></uscDoc>").encode()


BOMB = b"""<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">
]><lolz>&lol2;</lolz>"""


def zip_bytes(members) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zf.writestr(name, data)
    return buf.getvalue()


@pytest.fixture
def uscode(tmp_path):
    folder = tmp_path / "uscode"
    (folder / "more").mkdir(parents=True)
    (folder / "usc01.zip").write_bytes(zip_bytes([
        ("usc01.xml", title_xml(1)), ("../evil.xml", title_xml(99)), ("bomb.xml", BOMB),
        ("zeros.txt", b"0" * (3 << 20)), ("inner.zip", zip_bytes([("usc98.xml", title_xml(98))]))]))
    (folder / "more" / "usc02.zip").write_bytes(zip_bytes([("usc02.xml", title_xml(2))]))
    (folder / "usc03.zip").write_bytes(b"PK\x03\x04 truncated, not a zip")
    (folder / "notes.xml").write_bytes(title_xml(4))
    return folder


@pytest.mark.parametrize("kind", ["legal", "auto"])
def test_folder_of_zips_ingests_members_and_refuses_zip_in_zip(uscode, kind):
    jobs, bad = resolve_sources([(str(uscode), kind, None)], ExtractConfig(), LimitsConfig(archive_max_ratio=100))
    assert not bad
    results = [extract(j) for j in jobs]
    docs = sorted(d.text.split("\n\n")[-1] for r in results for d in r.documents)
    assert docs == ["Law text of title 1.", "Law text of title 2.", "Law text of title 4."]
    entries = {e.source.removeprefix(str(uscode) + "/"): (e.status, e.reason) for r in results for e in r.entries}
    assert entries["usc01.zip:usc01.xml"] == ("ingested", "")
    assert entries["more/usc02.zip:usc02.xml"] == ("ingested", "")
    assert entries["usc01.zip:inner.zip"] == ("skipped", "archive inside an archive not opened (archives are opened "
                                              "one level deep: unpack the outer one to ingest it)")
    assert "zip slip" in entries["usc01.zip:../evil.xml"][1]
    assert entries["usc01.zip:bomb.xml"][0] == "failed" and "billion-laughs" in entries["usc01.zip:bomb.xml"][1]
    assert "decompression bomb" in entries["usc01.zip:zeros.txt"][1]
    assert entries["usc03.zip"][0] == "failed" and entries["usc03.zip"][1].startswith("damaged or refused archive")
    assert sum(1 for s, _ in entries.values() if s == "ingested") == 3
    if kind == "legal":  # one job for the folder, its collection the folder's name
        assert [(j.kind, j.collection) for j in jobs] == [("legal", "uscode")]
        assert {d.collection for r in results for d in r.documents} == {"uscode"}


def test_zip_in_zip_stays_refused_when_the_zip_is_the_source(tmp_path):
    z = tmp_path / "outer.zip"
    z.write_bytes(zip_bytes([("a.xml", title_xml(1)), ("nested.tar.gz", b"x"), ("book.epub", b"PK"),
                             ("brief.docx", b"PK")]))
    (job,), _ = resolve_sources([(str(z), "auto", None)], ExtractConfig(), LimitsConfig())
    res = extract(job)
    assert [d.text.split("\n\n")[-1] for d in res.documents] == ["Law text of title 1."]
    refused = sorted(e.source.split(":", 1)[1] for e in res.entries if e.reason.startswith("archive inside an archive"))
    assert refused == ["book.epub", "brief.docx", "nested.tar.gz"]
