"""The built-in sample corpus is fixed: the same bytes in every checkout and at every commit.

The sample used to embed the live bookft source tree, so every commit was a new corpus (tokenizer,
haystacks) and a new training run. Its code repository is now generated (bookft.ingest.sample.code);
this test pins the content hash of everything `generate_sample` writes. A deliberate change to the
sample changes the hash here, in the same commit, and is a new draw for the default loop's figures.
"""

import ast
from pathlib import Path

from bookft.ingest.config import SampleConfig
from bookft.ingest.formats.code import extract_code
from bookft.ingest.sample import default_corpus_yaml, generate_sample, sample_digest

SAMPLE_DIGEST = "653e04a81f68af7c4a3fc0762985776cbfc8aae5e4919e9f1bcd8eeb767cfd18"


def test_sample_content_is_pinned(tmp_path):
    specs = generate_sample(tmp_path / "s", SampleConfig())
    assert [k for _, k, _ in specs] == ["pdf", "pdf", "pdf", "legal", "jsonl", "code"]
    assert sample_digest(tmp_path / "s") == SAMPLE_DIGEST
    generate_sample(tmp_path / "s", SampleConfig())  # rewriting changes nothing
    assert sample_digest(tmp_path / "s") == SAMPLE_DIGEST


def test_generated_repository_is_real_python(tmp_path):
    generate_sample(tmp_path / "s", SampleConfig())
    repo = tmp_path / "s" / "code"
    files = sorted(p for p in repo.rglob("*.py"))
    assert len(files) > 90 and sum(p.stat().st_size for p in files) > 500_000
    for p in files:
        ast.parse(p.read_text(), str(p))  # every module parses
    res = extract_code(repo, "samplekit")
    assert len(res.documents) == 1
    text = res.documents[0].text
    assert text.startswith("=== FILE: README.md")  # README first, as gitingest/repomix order it
    assert "generated/cache.py" not in text  # .gitignore honoured
    assert [e.reason for e in res.entries if e.status == "skipped"] == ["binary content"]


def test_default_definition_ships_with_the_package():
    """`bookft ingest` with no source reads the package's copy; corpora/sample.yaml is the same file."""
    shipped = default_corpus_yaml()
    assert shipped.is_file() and "bookft/ingest/sample" in shipped.as_posix()
    repo_copy = Path(__file__).resolve().parents[2] / "corpora" / "sample.yaml"
    assert shipped.read_bytes() == repo_copy.read_bytes()
