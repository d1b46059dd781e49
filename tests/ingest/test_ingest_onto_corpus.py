"""`bookft ingest -o DIR` onto an existing corpus makes a refresh's checks against its current version
(sources, kinds, tokenizer) and refuses, naming --replace, when they fail; nothing is published then."""

import os

from typer.testing import CliRunner

from bookft.cli import app

TEXT = "The river carried old letters past the mill while a clerk counted salt. "


def _ingest(*args, vocab=300):
    return CliRunner().invoke(app, ["ingest", *map(str, args), "--seq-len", "64", "--vocab-size", str(vocab),
                                    "--workers", "0"])


def test_adhoc_ingest_onto_a_corpus_is_checked(tmp_path):
    books, extra = tmp_path / "books", tmp_path / "extra2"
    for folder, n in ((books, 3), (extra, 1)):
        folder.mkdir()
        for i in range(n):
            (folder / f"{folder.name}{i}.txt").write_text(TEXT * (30 + 7 * i) + f" {folder.name} {i}.")
    corpus = tmp_path / "c"
    assert _ingest(books, "-o", corpus).exit_code == 0
    (books / "books9.txt").write_text(TEXT * 12)  # the same source grown: passes the checks
    res = _ingest(books, "-o", corpus)
    assert res.exit_code == 0, res.output
    assert os.readlink(corpus / "current") == "versions/0002"
    res = _ingest(extra, "-o", corpus, vocab=310)  # another source, another tokenizer: documents lost
    assert res.exit_code != 0
    msg = " ".join(str(res.exception).split())
    assert "fails the checks a refresh makes" in msg and "--replace" in msg and str(books) in msg, msg
    assert "tokenizer fingerprint changed" in msg
    assert os.readlink(corpus / "current") == "versions/0002"
    assert sorted(p.name for p in (corpus / "versions").iterdir()) == ["0001", "0002"]
    res = _ingest(extra, "-o", corpus, "--replace", vocab=310)
    assert res.exit_code == 0, res.output
    assert os.readlink(corpus / "current") == "versions/0003"
