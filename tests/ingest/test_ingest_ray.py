"""The Ray engine (`--engine ray`, issue 18): the same per-source jobs on Ray Data give a byte-identical
corpus and the same failed sources as the local process pool; without the extra, a clear error."""

import io
import json
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from pypdf import PdfReader, PdfWriter
from typer.testing import CliRunner

from bookft.cli import app, main
from bookft.config import from_dict
from bookft.errors import IngestError
from bookft.ingest import IngestConfig, build_corpus
from bookft.ingest.config import SampleConfig
from bookft.ingest.sample import generate_sample
from bookft.ingest.sample.pdfwriter import book_pdf

WORDS = "river stone lantern harbor meadow archive winter summer quiet ancient merchant sailor".split()


def _text(seed, n_par):
    rng = np.random.default_rng(seed)
    return "\n\n".join(" ".join(rng.choice(WORDS, size=rng.integers(5, 40))).capitalize() + "."
                       for _ in range(n_par))


def _encrypted_pdf() -> bytes:
    w = PdfWriter(clone_from=PdfReader(io.BytesIO(book_pdf("Owned", "Me", _text(7, 6).split("\n\n")))))
    w.encrypt(user_password="letmein", owner_password="owner", algorithm="AES-128")
    buf = io.BytesIO()
    w.write(buf)
    return buf.getvalue()


def _title_xml(n: int) -> bytes:
    return (f'<uscDoc xmlns="http://xml.house.gov/schemas/uslm/1.0"><main><title><num>Title {n}.</num>'
            f"<heading>Sample</heading><section><num>\u00a7 1.</num><content><p>Law text of title {n}. "
            f"{_text(n, 2)}</p></content></section></title></main></uscDoc>").encode()


def _zip(members) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zf.writestr(name, data)
    return buf.getvalue()


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """A small mixed corpus (the sample, made small, plus texts, a book, JSONL, a zip) with failing sources:
    an encrypted PDF, a zip slip member, a truncated zip, a file that is no PDF."""
    root = tmp_path_factory.mktemp("mixed")
    src = root / "src"
    src.mkdir()
    (src / "a.txt").write_text(_text(0, 30))
    (src / "dup.txt").write_text(_text(0, 30))  # exact duplicate of a.txt
    (src / "book.pdf").write_bytes(book_pdf("Book", "Me", _text(2, 30).split("\n\n")))
    (src / "locked.pdf").write_bytes(_encrypted_pdf())
    (src / "fake.pdf").write_bytes(b"not a pdf")
    (src / "ops.jsonl").write_text("".join(json.dumps({"case_name": f"X v. Y {i}", "text": _text(10 + i, 3)}) + "\n"
                                           for i in range(4)))
    (src / "usc01.zip").write_bytes(_zip([("usc01.xml", _title_xml(1)), ("../evil.xml", _title_xml(99))]))
    (src / "usc03.zip").write_bytes(b"PK\x03\x04 truncated, not a zip")
    sample = generate_sample(root / "sample", SampleConfig(books=1, pages_per_book=4, facts_per_book=3, legal_titles=1,
                                                           sections_per_title=3, opinions=3, code_modules=3))
    return [*sample, (str(src), "auto", None)]


def _cfg(out, **kw):
    return from_dict(IngestConfig, {"out": str(out), "tokenizer": {"vocab_size": 320},
                                    "packing": {"seq_len": 256}, **kw})


def _failed(m):
    return sorted((e["source"], e["status"], e["reason"]) for e in m["sources"] if e["status"] != "ingested")


def _files(version: Path) -> dict[str, bytes]:
    """Every file of a published version but its manifest (timings, date), with the random `_fingerprint`
    that `datasets` writes into state.json taken out (two local builds differ there too)."""
    out = {}
    for p in sorted(version.rglob("*")):
        if p.is_file() and p.name != "manifest.json":
            data = p.read_bytes()
            if p.name == "state.json":
                state = json.loads(data)
                state.pop("_fingerprint")
                data = json.dumps(state, sort_keys=True).encode()
            out[str(p.relative_to(version))] = data
    return out


def test_ray_engine_gives_the_local_corpus_byte_for_byte(tmp_path, mixed, ray_instance, monkeypatch):
    import bookft.ingest.engine.pool as pool
    import bookft.ingest.phases.extract as build

    pools = []

    class Pool(pool.ProcessPoolExecutor):
        def __init__(self, *a, **k):
            pools.append(k["max_workers"])
            super().__init__(*a, **k)

    monkeypatch.setattr(build, "_small", lambda *a, **k: False)  # the local pool, not in-process (small sources)
    monkeypatch.setattr(pool, "ProcessPoolExecutor", Pool)
    local = build_corpus(_cfg(tmp_path / "local", workers=2), sources=mixed)
    monkeypatch.undo()
    assert pools == [2]
    ray_m = build_corpus(_cfg(tmp_path / "ray", workers=2, engine="ray"), sources=mixed)
    assert ray_m["data_hash"] == local["data_hash"]
    assert ray_m["tokenizer"] == local["tokenizer"]
    for key in ("counts", "per_kind", "sources", "source_hashes", "duplicates", "secrets"):
        assert ray_m[key] == local[key], key
    assert ray_m["work"]["extracted"] == local["work"]["extracted"] > 5
    assert _files(Path(ray_m["path"])) == _files(Path(local["path"]))
    failed = {s.rsplit("/src/", 1)[-1]: (status, reason) for s, status, reason in _failed(ray_m)}
    assert failed["locked.pdf"][0] == "failed" and "encrypted PDF" in failed["locked.pdf"][1]
    assert "zip slip" in failed["usc01.zip:../evil.xml"][1]
    assert failed["usc03.zip"][0] == "failed" and failed["fake.pdf"][0] == "failed"
    assert _failed(ray_m) == _failed(local)

    # A rerun on Ray extracts nothing (the cache is shared by both engines' jobs) and changes nothing.
    again = build_corpus(_cfg(tmp_path / "ray", workers=2, engine="ray"), sources=mixed)
    assert again["work"]["extracted"] == 0 and again["data_hash"] == local["data_hash"]


def test_cli_engine_ray(tmp_path, mixed, ray_instance):
    src = [s for s, _, _ in mixed if s.endswith("src")][0]
    res = CliRunner().invoke(app, ["ingest", src, "-o", str(tmp_path / "c"), "--engine", "ray", "--seq-len", "256",
                                   "--vocab-size", "320"])
    assert res.exit_code == 0, res.output
    local = build_corpus(_cfg(tmp_path / "l", workers=0), sources=[(src, "auto", None)])
    m = json.loads((tmp_path / "c" / "current" / "manifest.json").read_text())
    assert m["config"]["engine"] == "ray" and m["data_hash"] == local["data_hash"]
    assert _failed(m) == _failed(local)


def test_a_failing_job_raises_as_in_the_local_pool(ray_instance):
    from bookft.ingest.engine.pool import pool_map as _pool_map
    from bookft.ingest.engine.ray_engine import ray_map

    assert dict(ray_map(int, [("1",), ("22",), ("333",)])) == dict(_pool_map(int, [("1",), ("22",), ("333",)], 0))
    with pytest.raises(ValueError, match="invalid literal for int") as on_ray:
        dict(ray_map(int, [("1",), ("x",)]))
    with pytest.raises(ValueError) as local:
        dict(_pool_map(int, [("1",), ("x",)], 0))
    assert str(on_ray.value) == str(local.value)


def test_missing_ray_extra_says_how_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    monkeypatch.setitem(sys.modules, "ray.data", None)
    (tmp_path / "a.txt").write_text(_text(0, 5))
    with pytest.raises(IngestError, match=r"pip install 'bookft\[ray\]'"):
        build_corpus(_cfg(tmp_path / "c", engine="ray"), sources=[(str(tmp_path / "a.txt"), "auto", None)])
    assert not (tmp_path / "c" / "current").exists()
    monkeypatch.setattr(sys, "argv", ["bookft", "ingest", str(tmp_path / "a.txt"), "-o", str(tmp_path / "c"),
                                      "--engine", "ray"])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--engine ray needs Ray Data" in err and "pip install 'bookft[ray]'" in err


def test_a_split_pdf_on_ray_gives_the_local_unsplit_corpus(tmp_path, ray_instance):
    """Page-range jobs of a large PDF (extract.pdf_pages_per_job) are Ray tasks too: same corpus as one job."""
    rng = np.random.default_rng(5)
    paras = [" ".join(rng.choice(WORDS, size=rng.integers(20, 90))).capitalize() + "." for _ in range(120)]
    (tmp_path / "long.pdf").write_bytes(book_pdf("Long", "Me", paras, lines_per_page=20))
    (tmp_path / "locked.pdf").write_bytes(_encrypted_pdf())
    sources = [(str(tmp_path / "long.pdf"), "auto", None), (str(tmp_path / "locked.pdf"), "auto", None)]
    local = build_corpus(_cfg(tmp_path / "local", workers=0), sources=sources)
    ray_m = build_corpus(_cfg(tmp_path / "ray", workers=2, engine="ray", extract={"pdf_pages_per_job": 10}),
                         sources=sources)
    assert local["work"]["pdf_page_ranges"] == 0 and ray_m["work"]["pdf_page_ranges"] == 4  # 36 pages
    assert ray_m["data_hash"] == local["data_hash"] and ray_m["sources"] == local["sources"]
    assert ray_m["counts"] == local["counts"]
    assert _files(Path(ray_m["path"])) == _files(Path(local["path"]))
    assert "encrypted PDF" in _failed(ray_m)[0][2]
