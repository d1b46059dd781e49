"""A source that cannot be read keeps its last good documents in a non-strict refresh, marked stale
(manifest, run record, `bookft inspect --json`), exit 4; validation refuses a version that loses any
source's documents unless validate.allow_lost_sources; a strict refresh still fails."""

import json
import shutil

from pipeline_helpers import current, make_sources, manifest, text, write_pipeline
from typer.testing import CliRunner

from bookft.cli import app
from bookft.pipelines import EXIT_FAILED, EXIT_OK, EXIT_PARTIAL, run_pipeline

RETRIEVAL = {"retrieval": {"rate": 0.3, "lengths": [512], "kinds": ["magic_number"]}}


def _two_folders(tmp_path, **over):
    a = make_sources(tmp_path / "a", range(4))
    b = make_sources(tmp_path / "b", range(10, 14))
    path = write_pipeline(tmp_path, a, sources=[{"path": str(a)}, {"path": str(b)}], **over)
    code, r = run_pipeline(path)
    assert code == EXIT_OK, r
    return a, b, path


def test_vanished_folder_keeps_its_documents_marked_stale(tmp_path):
    a, b, path = _two_folders(tmp_path, seq_len=512, ingest=RETRIEVAL)
    corpus = tmp_path / "corpus"
    v1 = manifest(corpus)
    saved = tmp_path / "saved-b"
    shutil.move(b, saved)  # the folder vanishes (an unmounted disk)
    code, r = run_pipeline(path)
    assert code == EXIT_PARTIAL and r["result"] == "partial" and r["published"], r
    m = manifest(corpus)
    assert m["data_hash"] == v1["data_hash"] and m["per_kind"] == v1["per_kind"]  # nothing lost
    assert [(s["source"], s["since_version"], len(s["paths"])) for s in m["stale"]] == [(str(b), 1, 4)]
    assert sum(1 for e in m["sources"] if e.get("stale")) == 4
    assert r["stale"][0]["source"] == str(b) and "does not exist" in r["stale"][0]["reason"]
    res = CliRunner().invoke(app, ["inspect", str(corpus), "--json"])
    out = json.loads(res.stdout)
    assert out["stale"][0]["source"] == str(b) and out["stale"][0]["files"] == 4
    assert out["stale"][0]["since_version"] == 1
    res = CliRunner().invoke(app, ["inspect", str(corpus)])
    assert res.exit_code == 0 and "stale source" in res.output
    # still gone: nothing to do, still partial; the mark keeps its first version
    code, r = run_pipeline(path)
    assert code == EXIT_PARTIAL and r["result"] == "unchanged" and r["stale"][0]["since_version"] == 1
    # one file of the other folder changes while b is away: b's documents still kept
    (a / "doc0.txt").write_text(text(0) + "\n\nMore.")
    code, r = run_pipeline(path)
    assert code == EXIT_PARTIAL and r["published"] and manifest(corpus)["stale"][0]["since_version"] == 1
    assert manifest(corpus)["per_kind"]["text"]["documents"] == 8
    # back again: built afresh, the mark gone, exit 0
    shutil.move(saved, b)
    code, r = run_pipeline(path)
    assert code == EXIT_OK and r["published"] and manifest(corpus)["stale"] == [], r


def test_lost_source_refused_unless_allowed(tmp_path):
    a, b, path = _two_folders(tmp_path)
    corpus = tmp_path / "corpus"
    path = write_pipeline(tmp_path, a)  # b dropped from the definition: its documents would be lost
    code, r = run_pipeline(path)
    assert code == EXIT_FAILED and "lose every document of 1 source(s)" in r["error"] and str(b) in r["error"]
    assert "validate.allow_lost_sources" in r["error"] and current(corpus) == "versions/0001"
    path = write_pipeline(tmp_path, a, validate={"allow_lost_sources": [str(b)]})
    code, r = run_pipeline(path)
    assert code == EXIT_OK and r["version"] == 2


def test_strict_refresh_fails_on_a_vanished_folder(tmp_path):
    a, b, path = _two_folders(tmp_path, strict=True)
    shutil.rmtree(b)
    code, r = run_pipeline(path)
    assert code == EXIT_FAILED and "strict: 1 source(s) missing" in r["error"]
    assert current(tmp_path / "corpus") == "versions/0001"
