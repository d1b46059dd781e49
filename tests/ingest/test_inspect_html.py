"""`bookft inspect CORPUS --html OUT` (issue 20): the page holds lengths per source and kind, fill per
sequence, the realised vs asked mix, failed sources with reasons and redaction counts, each checked
against the corpus itself; and (where Chromium is installed) a headless browser renders it."""

from __future__ import annotations

import base64
import html
import json
import random
import re
import shutil
import subprocess

import datasets
import numpy as np
import pytest
from typer.testing import CliRunner

from bookft.cli import app
from bookft.config import from_dict
from bookft.ingest import IngestConfig, build_corpus

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
WORDS = "river stone lantern harbor meadow archive winter summer quiet ancient merchant sailor".split()


def _jsonl(path, seed, sizes):
    rng = np.random.default_rng(seed)
    path.write_text("\n".join(json.dumps({"text": " ".join(rng.choice(WORDS, size=n)) + ".",
                                          "bookft_collection": f"{path.stem}{i}"}) for i, n in enumerate(sizes)))
    return str(path)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("inspect")
    rng = random.Random(3)
    aws = "AKIA" + "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16))  # made at run time
    repo = root / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "README.md").write_text("# Tool\n\nDoes things.\n" * 20)
    (repo / "settings.py").write_text(f'REGION = "eu-west-1"\nAWS_ACCESS_KEY_ID = "{aws}"\n' + "X = 1\n" * 200)
    (root / "broken.pdf").write_bytes(b"not a pdf")
    sources = [{"path": _jsonl(root / "books.jsonl", 0, [60, 900, 80, 1500, 700] * 4), "name": "books", "weight": 3},
               {"path": str(repo), "name": "code", "weight": 1},
               {"path": str(root / "broken.pdf"), "name": "broken", "weight": 1},
               {"path": _jsonl(root / "short.jsonl", 1, [20, 40, 30] * 20), "name": "short"}]
    cfg = from_dict(IngestConfig, {"out": str(root / "c"), "workers": 0, "tokenizer": {"vocab_size": 320},
                                   "packing": {"seq_len": 256}, "sources": sources,
                                   "mix": {"short_source": "short", "short_share": 0.2}})
    m = build_corpus(cfg)
    out = root / "page" / "report.html"
    r = CliRunner().invoke(app, ["inspect", str(root / "c"), "--html", str(out)])
    assert r.exit_code == 0, (r.output, r.exception)
    return root, m, out, aws


def test_page_content_matches_the_corpus(corpus):
    root, m, out, aws = corpus
    page = out.read_text()
    pngs = [base64.b64decode(u) for u in re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)]
    assert len(pngs) == 4 and all(p.startswith(PNG_MAGIC) for p in pngs)  # lengths/source, /kind, fill, mix
    for href in re.findall(r'href="([^"]+)"', page):
        assert (out.parent / href).is_file()
    for heading in ("Document lengths", "Fill per sequence", "Mix: realised vs asked", "Failed and skipped",
                    "Redacted secrets (1)"):
        assert heading in page
    # fill: counted here from the sequences' pieces
    seqs = datasets.load_from_disk(str(root / "c" / "current" / "sequences"))
    full = sum(sum(lens) == 256 for lens in seqs["doc_lengths"])
    assert f"{full:,} of {len(seqs):,} sequences are full" in page
    # the mix table: each source's asked and realised shares, as the manifest has them
    for name, v in m["mix"]["sources"].items():
        if name != "broken":
            assert re.search(rf"<td>{name}</td><td>{v['asked_share']:.4f}</td><td>{v['realised_share']:.4f}</td>", page)
    # failed source with its reason; the redaction counted per source and listed by file, line and kind
    reason = next(e["reason"] for e in m["sources"] if e["source"].endswith("broken.pdf"))
    assert "broken.pdf</td><td>failed</td><td>" + html.escape(reason) in page
    assert "Sources left out, nothing to draw: broken (" in page
    assert f"<td>{root / 'repo'}</td><td>1</td>" in page
    assert "settings.py</td><td>2</td><td>AWS Access Key</td>" in page
    assert aws not in page


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_page_renders_in_headless_chromium(corpus, tmp_path):
    from matplotlib.image import imread

    _, _, out, _ = corpus
    shot = tmp_path / "shot.png"
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1200,2400", out.as_uri()], check=True, capture_output=True, timeout=120)
    px = imread(str(shot))[..., :3]  # floats in [0, 1]
    assert px.shape[:2] == (2400, 1200)
    ink = (px.mean(-1) < 0.9).mean()  # share of non-white pixels: text, tables and figures drawn
    colour = (px.max(-1) - px.min(-1) > 0.2).mean()  # coloured pixels: the embedded charts decoded and drawn
    assert ink > 0.02 and colour > 0.005, (ink, colour)


def test_a_corpus_without_document_sources_shows_lengths_per_kind(corpus, tmp_path):
    """Corpora built before the manifest named each document's source: per kind only, and the page says so."""
    from bookft.corpus import open_corpus
    from bookft.corpus.html_report import write_html_report

    root, _, _, _ = corpus
    version = tmp_path / "v"
    shutil.copytree((root / "c" / "current").resolve(), version)
    man = json.loads((version / "manifest.json").read_text())
    del man["document_sources"], man["mix"]
    (version / "manifest.json").write_text(json.dumps(man))
    page = write_html_report(open_corpus(version), tmp_path / "old.html").read_text()
    assert "does not record each document's source: lengths per kind only" in page
    assert page.count("<img ") == 2  # lengths per kind and fill; no mix chart
    assert "No mix asked, and this corpus does not record" in page
