"""Incremental refresh: no-change runs, exact add/change/delete counts, retention + leases, bad input, CLI."""

import json

import datasets
import pytest
from pipeline_helpers import current, make_sources, manifest, text, write_pipeline
from typer.testing import CliRunner

from bookft.corpus import open_corpus
from bookft.pipelines import EXIT_CONFIG, EXIT_FAILED, EXIT_OK, EXIT_PARTIAL, EXIT_POST_FAILED, Lease, run_pipeline
from bookft.pipelines.runlog import read_records


def _doc_sources(corpus):
    docs = datasets.load_from_disk(str(corpus / "current" / "documents"))
    return sorted(s.rsplit("/", 1)[-1] for s in docs["source"])


def test_no_change_add_change_delete(tmp_path):
    src = make_sources(tmp_path / "src", range(4))
    path = write_pipeline(tmp_path, src)
    corpus = tmp_path / "corpus"
    code, r = run_pipeline(path)
    assert code == EXIT_OK and r["result"] == "ok" and r["version"] == 1
    assert r["counts"] == {"added": 4, "changed": 0, "removed": 0, "unchanged": 0, "missing": 0, "stale": 0,
                           "documents_extracted": 4, "failed_sources": 0}
    assert r["work"]["extracted"] == 4 and r["validation"]["documents"] == 4
    v1 = manifest(corpus)

    # no change: nothing extracted, nothing published (current untouched, no versions/0002)
    code, r = run_pipeline(path)
    assert code == EXIT_OK and r["result"] == "unchanged" and not r["published"]
    assert r["counts"]["unchanged"] == 4 and r["counts"]["documents_extracted"] == 0 and "work" not in r
    assert current(corpus) == "versions/0001" and sorted(p.name for p in (corpus / "versions").iterdir()) == ["0001"]

    # one added, one changed, one deleted: exactly those, and only those two are extracted
    (src / "doc9.txt").write_text(text(9))
    (src / "doc1.txt").write_text(text(1) + "\n\nA changed closing paragraph.")
    (src / "doc2.txt").unlink()
    code, r = run_pipeline(path)
    assert code == EXIT_OK and r["published"] and r["version"] == 2 and current(corpus) == "versions/0002"
    assert r["counts"] == {"added": 1, "changed": 1, "removed": 1, "unchanged": 2, "missing": 0, "stale": 0,
                           "documents_extracted": 2, "failed_sources": 0}
    assert r["work"]["extracted"] == 2 and r["work"]["extract_cache_hits"] == 2
    assert r["work"]["tokenized"] == 2 and r["work"]["token_cache_hits"] == 2
    assert _doc_sources(corpus) == ["doc0.txt", "doc1.txt", "doc3.txt", "doc9.txt"]
    docs = datasets.load_from_disk(str(corpus / "current" / "documents"))
    assert any(t.endswith("A changed closing paragraph.") for t in docs["text"])
    v2 = manifest(corpus)
    assert v2["tokenizer"]["fingerprint"] == v1["tokenizer"]["fingerprint"]  # reused: caches stay valid
    # the log has one line per run with the same figures
    log = read_records(corpus, "demo")
    assert [x["result"] for x in log] == ["ok", "unchanged", "ok"] and log[-1]["counts"] == r["counts"]


def test_retention_keeps_current_and_leased(tmp_path):
    src = make_sources(tmp_path / "src", range(2))
    path = write_pipeline(tmp_path, src, retention=1)
    corpus = tmp_path / "corpus"
    assert run_pipeline(path)[0] == EXIT_OK
    with Lease(corpus) as held:
        assert held.name == "0001"
        reader = open_corpus(held)
        (src / "doc5.txt").write_text(text(5))
        code, r = run_pipeline(path)
        assert code == EXIT_OK and r["version"] == 2 and r["pruned"] == []  # 0001 is leased
        assert (corpus / "versions" / "0001").is_dir() and len(reader) > 0
        reader.sequence(len(reader) - 1)
    (src / "doc6.txt").write_text(text(6))
    code, r = run_pipeline(path)
    assert code == EXIT_OK and r["version"] == 3 and r["pruned"] == ["0001", "0002"]
    assert sorted(p.name for p in (corpus / "versions").iterdir()) == ["0003"]


def test_missing_source_non_strict_and_strict(tmp_path):
    src = make_sources(tmp_path / "src", range(2))
    gone = str(tmp_path / "nowhere.txt")
    sources = [{"path": str(src)}, {"path": gone}]
    path = write_pipeline(tmp_path, src, sources=sources)
    code, r = run_pipeline(path)
    assert code == EXIT_PARTIAL and r["result"] == "partial" and r["published"]
    assert r["counts"]["missing"] == 1 and r["counts"]["added"] == 2 and r["missing"][0]["source"] == gone
    assert r["counts"]["failed_sources"] == 1 and "does not exist" in r["failed"][0]["reason"]
    assert run_pipeline(path)[0] == EXIT_PARTIAL  # still missing: keeps alerting, publishes nothing
    # strict: fails, nothing published, current untouched
    (src / "doc7.txt").write_text(text(7))
    strict = write_pipeline(tmp_path, src, name="strict", sources=sources, strict=True)
    code, r = run_pipeline(strict)
    assert code == EXIT_FAILED and r["result"] == "failed" and "strict: 1 source(s) missing" in r["error"]
    assert current(tmp_path / "corpus") == "versions/0001"
    # a source that exists but cannot be extracted also fails a strict run, before publishing
    (src / "doc7.txt").unlink()
    (src / "broken.pdf").write_bytes(b"not a pdf")
    strict = write_pipeline(tmp_path, src, name="strict", strict=True)
    code, r = run_pipeline(strict)
    assert code == EXIT_FAILED and "source(s) failed" in r["error"] and "broken.pdf" in r["error"]
    assert current(tmp_path / "corpus") == "versions/0001"
    assert not [p for p in (tmp_path / "corpus" / "versions").iterdir() if p.name.startswith(".tmp")]


@pytest.mark.parametrize("over, words", [
    ({"retension": 3}, "unknown key retension"),
    ({"schedule": "61 * * * *"}, "minute: 61 is out of range"),
    ({"schedule": "daily"}, "expected 5 fields"),
    ({"tokenizer": {"vocab": 10}}, "unknown key tokenizer.vocab"),
    ({"validate": {"min_docs": 1}}, "unknown key validate.min_docs"),
    ({"retention": 0}, "retention: must be >= 1"),
    ({"post": {"eval": {"settings": {"lengths": [128]}}}}, "exactly one of checkpoint"),
    ({"post": {"eval": {"checkpoint": "x", "settings": {"lenghts": [128]}}}}, "unknown key post.eval.settings.lenghts"),
])
def test_bad_definitions_exit_2(tmp_path, over, words):
    path = write_pipeline(tmp_path, make_sources(tmp_path / "src", range(1)), **over)
    code, r = run_pipeline(path)
    assert code == EXIT_CONFIG and r["result"] == "config_error"
    assert words in r["error"] and str(path) in r["error"]
    assert not (tmp_path / "corpus").exists()


def test_validation_failure_publishes_nothing(tmp_path):
    src = make_sources(tmp_path / "src", range(2))
    path = write_pipeline(tmp_path, src)
    assert run_pipeline(path)[0] == EXIT_OK
    retrain = write_pipeline(tmp_path, src, tokenizer={"vocab_size": 330})  # a different BPE
    code, r = run_pipeline(retrain)
    assert code == EXIT_FAILED and "tokenizer fingerprint changed" in r["error"]
    assert current(tmp_path / "corpus") == "versions/0001"
    allowed = write_pipeline(tmp_path, src, tokenizer={"vocab_size": 330}, validate={"allow_tokenizer_change": True})
    code, r = run_pipeline(allowed)
    assert code == EXIT_OK and r["version"] == 2 and r["counts"]["documents_extracted"] == 0  # cached extracts


def test_eval_post_step_failure_is_recorded(tmp_path):
    src = make_sources(tmp_path / "src", range(2))
    status = tmp_path / "status.json"
    path = write_pipeline(tmp_path, src, post={"status_file": str(status), "eval": {
        "checkpoint": str(tmp_path / "no-such-run"), "settings": {"lengths": [128], "depths": [50], "seeds": [0]}}})
    code, r = run_pipeline(path)
    assert code == EXIT_POST_FAILED and r["result"] == "post_failed" and r["published"]
    ev = r["post"]["eval"]
    assert not ev["ok"] and "no-such-run" in ev["error"] and ev["settings"]["haystack"] == "corpus"
    assert ev["settings"]["corpus"].endswith("versions/0001")
    assert json.loads(status.read_text())["run_id"] == r["run_id"]


def test_cli_run_status_list(tmp_path, monkeypatch):
    from bookft.cli import app

    src = make_sources(tmp_path / "src", range(2))
    folder = tmp_path / "pipelines"
    folder.mkdir()
    path = write_pipeline(tmp_path, src)
    path.rename(folder / "demo.yaml")
    (folder / "broken.yaml").write_text("schedule: '* * *'\nsources: [{path: x}]\n")
    runner = CliRunner()
    res = runner.invoke(app, ["pipeline", "status", "demo", "--dir", str(folder), "--json"])
    assert res.exit_code == 1 and json.loads(res.stdout)["last_run"] is None
    res = runner.invoke(app, ["pipeline", "run", str(folder / "demo.yaml"), "--json"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["pipeline", "run", str(folder / "demo.yaml")])
    assert res.exit_code == 0 and "unchanged" in res.output
    res = runner.invoke(app, ["pipeline", "status", "demo", "--dir", str(folder), "--json"])
    st = json.loads(res.stdout)
    assert res.exit_code == 0 and st["runs"] == 2 and st["last_run"]["result"] == "unchanged"
    assert st["last_run"]["version"] == 1 and st["last_run"]["counts"]["unchanged"] == 2 and st["next_run"] != "-"
    res = runner.invoke(app, ["pipeline", "list", "--dir", str(folder)])
    assert res.exit_code == 0 and "demo" in res.output and "invalid" in res.output
    res = runner.invoke(app, ["pipeline", "run", str(folder / "broken.yaml")])
    assert res.exit_code == 2 and "expected 5 fields" in res.output
