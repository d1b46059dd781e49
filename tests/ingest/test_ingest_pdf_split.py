"""A large PDF split into page-range jobs (extract.pdf_pages_per_job): the same documents,
cache entries and corpus as one job per file; bad PDFs reported as without splitting."""

import io
from pathlib import Path

import numpy as np
import pytest
from pypdf import PdfReader, PdfWriter

from bookft.config import from_dict
from bookft.corpus.reader import open_corpus
from bookft.errors import ConfigError
from bookft.ingest import IngestConfig, build_corpus
from bookft.ingest.engine.cache import SourceCache
from bookft.ingest.engine.pool import pool_map
from bookft.ingest.phases.extract import _page_ranges
from bookft.ingest.sample.pdfwriter import book_pdf

WORDS = "river stone lantern harbor meadow archive winter summer quiet ancient merchant sailor".split()
PAGES_PER_JOB = 12  # the 61-page book: 6 page-range jobs; the 31-page owned one: 3


def _paras(seed, n_par):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(20, 90))).capitalize() + "." for _ in range(n_par)]


def _locked(data: bytes, password: str) -> bytes:
    w = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    w.encrypt(user_password=password, owner_password="owner", algorithm="AES-128")
    buf = io.BytesIO()
    w.write(buf)
    return buf.getvalue()


@pytest.fixture(scope="module")
def books(tmp_path_factory):
    """A 61-page book (running header, page numbers, paragraphs over page breaks), the same book
    encrypted (opened with its password), an encrypted book without one, a text file."""
    root = tmp_path_factory.mktemp("split")
    book = book_pdf("A Long Book", "Me", _paras(0, 200), lines_per_page=20)
    (root / "book.pdf").write_bytes(book)
    (root / "owned.pdf").write_bytes(_locked(book_pdf("Owned", "Me", _paras(1, 100), lines_per_page=20), "letmein"))
    (root / "locked.pdf").write_bytes(_locked(book_pdf("Locked", "Me", _paras(2, 100), lines_per_page=20), "nope"))
    (root / "notes.txt").write_text("\n\n".join(_paras(3, 10)))
    return root, [(str(root / "book.pdf"), "auto", None), (str(root / "owned.pdf"), "auto", None, "letmein"),
                  (str(root / "locked.pdf"), "auto", None), (str(root / "notes.txt"), "auto", None)]


def _cfg(out, per_job, **kw):
    return from_dict(IngestConfig, {"out": str(out), "workers": 2, "tokenizer": {"vocab_size": 400},
                                    "packing": {"seq_len": 256}, "extract": {"pdf_pages_per_job": per_job}, **kw})


def _heads(m, out) -> list:
    cache = SourceCache(Path(out))
    keys = [p.name[:-len(".head.json")] for p in (Path(out) / "cache" / "extract").glob("*.head.json")]
    return sorted((r.source, [(d.text, d.title, d.meta) for d in r.documents], r.stats,
                   [(e.source, e.status, e.reason) for e in r.entries]) for r in map(cache.load_extract, keys))


def _same_corpus(a, b, out_a, out_b):
    assert a["data_hash"] == b["data_hash"] and a["tokenizer"] == b["tokenizer"]
    for key in ("counts", "per_kind", "sources", "source_hashes", "duplicates"):
        assert a[key] == b[key], key
    assert _heads(a, out_a) == _heads(b, out_b)
    ca, cb = open_corpus(out_a), open_corpus(out_b)
    assert len(ca) == len(cb)
    for i in range(len(ca)):
        assert np.array_equal(ca.tokens(i), cb.tokens(i))


def test_page_ranges_cover_every_page_in_order_evenly():
    assert _page_ranges(1000, 300) == [(0, 250), (250, 500), (500, 750), (750, 1000)]
    for n, per in ((61, 12), (12, 12), (13, 12), (1019, 256), (5, 1)):
        r = _page_ranges(n, per)
        assert r[0][0] == 0 and r[-1][1] == n and all(a[1] == b[0] for a, b in zip(r, r[1:], strict=False))
        assert max(hi - lo for lo, hi in r) <= per and max(hi - lo for lo, hi in r) - min(hi - lo for lo, hi in r) <= 1


def test_the_building_process_takes_local_tasks_from_the_end_while_the_pool_takes_the_front():
    """_pool_map(local=...): page ranges also run in this process (the last one first, while the pool's
    first submit waits for the forkserver), everything else only in the pool; every task once."""
    import os

    out = list(pool_map(os.getpid, [()] * 6, 2, local=lambda i: i >= 3))
    assert sorted(i for i, _ in out) == list(range(6))
    pid = dict(out)
    assert pid[5] == os.getpid()  # taken before the pool starts
    assert all(pid[i] != os.getpid() for i in range(3))  # never local
    assert list(pool_map(os.getpid, [()] * 3, 2, local=lambda i: False))  # nothing local: the pool alone


def test_pages_per_job_is_validated():
    with pytest.raises(ConfigError, match=r"extract.pdf_pages_per_job: must be >= 1 .* or 0 to never split"):
        from_dict(IngestConfig, {"extract": {"pdf_pages_per_job": -1}})


def test_split_pdf_gives_the_unsplit_corpus(tmp_path, books):
    _, sources = books
    whole = build_corpus(_cfg(tmp_path / "whole", 0), sources=sources)
    split = build_corpus(_cfg(tmp_path / "split", PAGES_PER_JOB), sources=sources)
    assert whole["work"]["pdf_page_ranges"] == 0
    assert split["work"]["pdf_page_ranges"] == 6 + 3  # book.pdf and owned.pdf; not locked.pdf (no password)
    assert split["counts"]["pdf_pages"] == whole["counts"]["pdf_pages"] == 61 + 31  # locked.pdf: failed, no pages
    _same_corpus(whole, split, tmp_path / "whole", tmp_path / "split")
    failed = {Path(e["source"]).name: e["reason"] for e in split["sources"] if e["status"] == "failed"}
    assert list(failed) == ["locked.pdf"] and failed["locked.pdf"].startswith("encrypted PDF (a password is required")
    text = open_corpus(tmp_path / "split").documents()[0]["text"]
    assert "A Long Book" not in text and "\n\n" in text  # running header stripped over every page, paragraphs kept

    # The cache entry is per source, whole, under the same key: unsplit reuses what the split wrote.
    again = build_corpus(_cfg(tmp_path / "split", 0), sources=sources)
    assert again["work"]["extracted"] == 0 and again["data_hash"] == whole["data_hash"]


def test_a_range_that_fails_reports_the_file_as_unsplit(tmp_path, books, monkeypatch):
    """The file is truncated after the split was planned (a refresh while it is being written): every
    range fails, the file goes to one whole-source job and reads as a damaged PDF, as unsplit."""
    import bookft.ingest.phases.extract as build

    root, _ = books
    good = root / "book.pdf"
    cut = tmp_path / "cut.pdf"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    plan = build.pdf_split_plan(str(good))
    monkeypatch.setattr(build, "pdf_split_plan", lambda path, password=None: plan)
    sources = [(str(cut), "auto", None), (str(root / "notes.txt"), "auto", None)]
    split = build_corpus(_cfg(tmp_path / "split", PAGES_PER_JOB), sources=sources)
    monkeypatch.undo()
    whole = build_corpus(_cfg(tmp_path / "whole", 0), sources=sources)
    assert split["work"]["pdf_page_ranges"] == 6
    entry = next(e for e in split["sources"] if e["source"] == str(cut))
    assert entry["status"] == "failed" and entry["reason"].startswith("damaged or truncated PDF")
    assert split["sources"] == whole["sources"] and split["data_hash"] == whole["data_hash"]


def _count_joins(monkeypatch) -> list:
    """Record every page bookft.ingest.formats.pdf joins itself (not taken from a range's chunks)."""
    import bookft.ingest.formats.pdf as pdf

    calls: list = []
    join = pdf.join_lines
    monkeypatch.setattr(pdf, "join_lines", lambda lines: calls.append(1) or join(lines))
    return calls


def _page(rng, header, number):
    lines = [header] if header else []
    for _ in range(rng.integers(0, 12)):
        r = rng.random()
        if r < 0.1:
            lines.append("")
        elif r < 0.2:
            lines.append(" ".join(rng.choice(WORDS, size=rng.integers(1, 4))).capitalize() + ".")
        elif r < 0.3:
            lines.append(str(rng.choice(WORDS)) + "-")  # a hyphen at a line end
        else:
            lines.append(" ".join(rng.choice(WORDS, size=rng.integers(3, 14))))
    if number:
        lines.append(str(number))
    return "\n".join(lines)


@pytest.mark.parametrize("seed", range(12))
def test_range_chunks_give_the_same_text_as_one_job(seed, monkeypatch):
    """Each page-range worker joins its pages' paragraphs under its own running headers (pdf.page_chunks);
    pages_text keeps a chunk only where the whole document's headers give the same bounds. Random books
    whose headers repeat in some ranges only (so ranges and document disagree on some pages), cut into
    random ranges: the text is always the text of one job."""
    from bookft.ingest.formats.pdf import page_chunks, pages_text

    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 60))
    local = [f"Chapter {k}" for k in range(3)]  # a header on one stretch of pages only
    pages = [_page(rng, ["The Book", local[i * 3 // n], "", None][int(rng.integers(0, 4))],
                   i + 1 if rng.random() < 0.7 else None) for i in range(n)]
    cuts = sorted({0, n, *rng.integers(1, n, size=int(rng.integers(0, 5))).tolist()})
    chunks = [c for lo, hi in zip(cuts[:-1], cuts[1:], strict=True) for c in page_chunks(pages[lo:hi])]
    used = _count_joins(monkeypatch)
    got = pages_text(pages, {}, chunks=chunks)
    monkeypatch.undo()
    assert got == pages_text(pages, {})
    assert len(used) < n or n == 0  # some chunks were kept ...


def test_a_split_book_keeps_the_ranges_chunks(books, monkeypatch):
    """... and on a book whose running header is on every page, every page's chunk is kept."""
    import bookft.ingest.formats.pdf as pdf

    root, _ = books
    path = str(root / "book.pdf")
    ranges = _page_ranges(61, PAGES_PER_JOB)
    pages = [pdf.pdf_page_range(path, lo, hi) for lo, hi in ranges]
    chunks = [c for rng in pages for c in pdf.page_chunks(rng)]
    flat = [p for rng in pages for p in rng]
    calls = _count_joins(monkeypatch)
    got = pdf.pages_text(flat, {}, chunks=chunks)
    monkeypatch.undo()
    assert calls == [] and got == pdf.pages_text(flat, {})


def test_the_command_line_runs_the_pool(tmp_path):
    """`python -m bookft.cli ingest BIG.pdf` (a book big enough to be split): the pool's workers run
    bookft/cli.py again (as __mp_main__) and must not start a command of their own. The corpus is the
    one job's."""
    import json
    import subprocess
    import sys

    (tmp_path / "big.pdf").write_bytes(book_pdf("A Big Book", "Me", _paras(7, 1400), lines_per_page=40))
    r = subprocess.run([sys.executable, "-m", "bookft.cli", "ingest", str(tmp_path / "big.pdf"), "-o",
                        str(tmp_path / "cli"), "--set", "tokenizer.vocab_size=400", "--set", "packing.seq_len=256",
                        "--set", "extract.pdf_pages_per_job=40", "--workers", "2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads((tmp_path / "cli" / "current" / "manifest.json").read_text())
    whole = build_corpus(_cfg(tmp_path / "whole", 0), sources=[(str(tmp_path / "big.pdf"), "auto", None)])
    assert m["work"]["pdf_page_ranges"] >= 3 and m["data_hash"] == whole["data_hash"]
