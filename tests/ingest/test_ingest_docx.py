"""DOCX written here as OOXML (zip + WordprocessingML) with known text: headings, tables, tracked changes,
footnotes, text boxes, content controls; encrypted, legacy and broken files."""

import difflib
import io
import zipfile

from bookft.ingest.config import ExtractConfig, LimitsConfig
from bookft.ingest.formats.archive import extract_legal
from bookft.ingest.formats.docx import extract_docx
from bookft.ingest.sources import extract, resolve_sources

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
NS = (f'xmlns:w="{W}" xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" '
      'xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape"')
REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
WORDS = "river stone lantern harbor meadow archive winter summer quiet ancient merchant sailor \u00e9t\u00e9".split()


def sentence(i: int, n: int = 30) -> str:
    return " ".join(WORDS[(i * 5 + k * 7) % len(WORDS)] for k in range(n)).capitalize() + f" ({i})."


def run(text: str) -> str:
    return f'<w:r><w:t xml:space="preserve">{text}</w:t></w:r>'


def p(*content: str, style: str | None = None, ppr: str = "") -> str:
    st = f'<w:pStyle w:val="{style}"/>' if style else ""
    return f"<w:p><w:pPr>{st}{ppr}</w:pPr>{''.join(content)}</w:p>"


def table(rows) -> str:
    trs = "".join("<w:tr>" + "".join(f"<w:tc>{p(run(c))}</w:tc>" for c in row) + "</w:tr>" for row in rows)
    return f"<w:tbl><w:tblPr/>{trs}</w:tbl>"


def write_docx(path, body: str, *, footnotes: str = "", core: bool = True, main: str = "word/document.xml",
               target: str | None = None):
    rels = (f'<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            f'<Relationship Id="r1" Type="{REL}/officeDocument" Target="{target or main}"/>'
            f'<Relationship Id="r2" Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/'
            f'core-properties" Target="docProps/core.xml"/></Relationships>')
    doc_rels = (f'<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
                f'relationships"><Relationship Id="s" Type="{REL}/styles" Target="styles.xml"/>'
                f'<Relationship Id="f" Type="{REL}/footnotes" Target="footnotes.xml"/>'
                f'<Relationship Id="h" Type="{REL}/hyperlink" Target="https://example.org" TargetMode="External"/>'
                f"</Relationships>")
    styles = (f'<w:styles {NS}><w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/></w:style>'
              '<w:style w:type="paragraph" w:styleId="Kop1"><w:name w:val="heading 1"/></w:style>'
              '<w:style w:type="paragraph" w:styleId="MyHeading"><w:name w:val="My Heading"/>'
              '<w:basedOn w:val="Kop1"/></w:style>'
              '<w:style w:type="paragraph" w:styleId="Normal"><w:name w:val="Normal"/></w:style></w:styles>')
    core_xml = ('<?xml version="1.0"?><cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/'
                'metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/">'
                "<dc:title>Known Filing</dc:title><dc:creator>Cy Counsel</dc:creator>"
                "<dc:language>en-US</dc:language></cp:coreProperties>")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/'
                    'package/2006/content-types"/>')
        zf.writestr("_rels/.rels", rels)
        zf.writestr(main, f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document {NS}><w:body>{body}'
                    "<w:sectPr/></w:body></w:document>")
        zf.writestr("word/_rels/document.xml.rels", doc_rels)
        zf.writestr("word/styles.xml", styles)
        if footnotes:
            zf.writestr("word/footnotes.xml", f"<w:footnotes {NS}>{footnotes}</w:footnotes>")
        if core:
            zf.writestr("docProps/core.xml", core_xml)
        zf.writestr("word/media/image1.png", b"\x89PNG" * 100)
    return path


def known_docx(tmp_path):
    ins = '<w:ins w:id="1" w:author="A" w:date="2024-01-01T00:00:00Z">{}</w:ins>'
    deleted_mark = '<w:rPr><w:del w:id="3" w:author="A" w:date="2024-01-01T00:00:00Z"/></w:rPr>'
    dele = '<w:del w:id="2" w:author="A" w:date="2024-01-01T00:00:00Z"><w:r><w:delText>{}</w:delText></w:r></w:del>'
    toc = ('<w:sdt><w:sdtPr><w:docPartObj><w:docPartGallery w:val="Table of Contents"/></w:docPartObj></w:sdtPr>'
           f"<w:sdtContent>{p(run('Contents'))}{p(run('Section One ....... 1'))}</w:sdtContent></w:sdt>")
    textbox = ('<w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><wps:txbx><w:txbxContent>'
               f"{p(run('Boxed remark.'))}</w:txbxContent></wps:txbx></w:drawing></mc:Choice><mc:Fallback><w:pict>"
               f"<w:txbxContent>{p(run('Boxed remark.'))}</w:txbxContent></w:pict></mc:Fallback>"
               "</mc:AlternateContent></w:r>")
    body = "".join([
        p(run("Known Filing Title"), style="Title"),
        toc,
        p(run("Section One"), style="Kop1"),
        p(run(sentence(1))),
        p(run(sentence(2) + " The parties "), ins.format(run("did not ")), run("agree"),
          dele.format(" entirely and forever"), run(".")),
        p(run("Deleted mark joins "), ppr=deleted_mark),
        p(run("this line.")),
        p(run(sentence(3)), textbox),
        p(run("Sub heading"), style="MyHeading"),
        table([["Name", "Role", "Term"], ["Ann", "Judge", "2020\u20132030"], ["Bo", "Clerk", ""]]),
        p(run("A "), '<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText> HYPERLINK "x" </w:instrText>'
          '</w:r><w:r><w:fldChar w:fldCharType="separate"/></w:r>', run("linked"), '<w:r><w:fldChar '
          'w:fldCharType="end"/></w:r>', f'<w:hyperlink r:id="h" xmlns:r="{REL}">{run(" phrase")}</w:hyperlink>',
          run(" with a note"), '<w:r><w:footnoteReference w:id="5"/></w:r>', run(" and a tab"),
          "<w:r><w:tab/><w:t>here.</w:t></w:r>"),
        p(run("Line one"), "<w:r><w:br/><w:t>line two.</w:t></w:r>"),
        p(ins.format(run("An inserted paragraph, kept."))),
        p(dele.format("A paragraph wholly deleted."), ppr=deleted_mark),
        p(run(sentence(4))),
    ])
    notes = ('<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>'
             '<w:footnote w:id="5"><w:p><w:r><w:footnoteRef/></w:r>'
             f"{run(' The footnote text, kept.')}</w:p></w:footnote>")
    expected = ["Known Filing Title", "Section One", sentence(1),
                sentence(2) + " The parties did not agree.", "Deleted mark joins this line.",
                sentence(3), "Boxed remark.", "Sub heading",
                "Name | Role | Term\nAnn | Judge | 2020\u20132030\nBo | Clerk |",
                "A linked phrase with a note[1] and a tab here.", "Line one\nline two.",
                "An inserted paragraph, kept.", sentence(4), "[1] The footnote text, kept."]
    return write_docx(tmp_path / "known.docx", body, footnotes=notes), "\n\n".join(expected)


def test_docx_round_trips_known_text(tmp_path):
    path, expected = known_docx(tmp_path)
    res = extract_docx(path, "filing", LimitsConfig())
    assert [(e.status, e.reason) for e in res.entries] == [("ingested", "")]
    (doc,) = res.documents
    ratio = difflib.SequenceMatcher(None, doc.text, expected, autojunk=False).ratio()
    assert ratio >= 0.98, ratio
    assert doc.text == expected
    assert "entirely and forever" not in doc.text and "wholly deleted" not in doc.text and "HYPERLINK" not in doc.text
    assert doc.title == "Known Filing" and doc.kind == "docx"
    assert doc.meta == {"author": "Cy Counsel", "language": "en-US", "paragraphs": 13, "headings": 3, "tables": 1,
                        "notes": 1}


def test_docx_kind_detection_and_legal_folder(tmp_path):
    folder = tmp_path / "filings"
    folder.mkdir()
    known_docx(folder)
    jobs, bad = resolve_sources([(str(folder), "auto", None)], ExtractConfig(), LimitsConfig())
    assert not bad and [(j.kind, j.collection) for j in jobs] == [("docx", "known")]
    assert extract(jobs[0]).documents[0].title == "Known Filing"
    (folder / "t1.xml").write_text("<doc><p>Law text.</p></doc>")
    res = extract_legal(folder, "filings", LimitsConfig())  # a legal folder reads its DOCX with this extractor
    assert sorted(d.kind for d in res.documents) == ["docx", "legal"]
    assert [e.status for e in res.entries] == ["ingested", "ingested"]


def test_bad_docx_files_get_clear_reasons(tmp_path):
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 500
    (tmp_path / "encrypted.docx").write_bytes(ole + "EncryptionInfo\0EncryptedPackage".encode("utf-16-le"))
    (tmp_path / "legacy.docx").write_bytes(ole + "WordDocument".encode("utf-16-le"))
    (tmp_path / "text.docx").write_bytes(b"just text")
    write_docx(tmp_path / "nomain.docx", p(run("x")), target="word/gone.xml")  # points to a missing part
    bomb = (b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]>'
            b'<w:document xmlns:w="x">&b;</w:document>')
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("word/document.xml", bomb)
    (tmp_path / "bomb.docx").write_bytes(buf.getvalue())
    write_docx(tmp_path / "empty.docx", p(run("   ")))
    reason = {}
    for name in ("encrypted", "legacy", "text", "nomain", "bomb", "empty"):
        res = extract_docx(tmp_path / f"{name}.docx", "x", LimitsConfig())
        (entry,) = [e for e in res.entries if e.source == str(tmp_path / f"{name}.docx")]
        assert entry.status == "failed" and not res.documents, name
        reason[name] = entry.reason
    assert reason["encrypted"].startswith("encrypted (password-protected) DOCX")
    assert reason["legacy"].startswith("not a DOCX: a legacy Word 97-2003 (.doc)")
    assert reason["text"].startswith("malformed DOCX: not a readable zip archive (BadZipFile")
    assert reason["nomain"] == "malformed DOCX: the main document part word/gone.xml is missing"
    assert reason["bomb"].startswith("malformed DOCX: word/document.xml (main document): XML refused")
    assert reason["empty"] == "DOCX without text (word/document.xml has no paragraphs or tables with text)"
