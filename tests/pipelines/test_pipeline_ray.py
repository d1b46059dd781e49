"""`bookft pipeline run` on the Ray engine (issue 18): the refresh builds the corpus the local engine
builds, and a refresh after one source changed sends only that source to Ray. One local Ray instance
(2 CPUs, tests/conftest.py) serves the module."""

import json

import pytest
from pipeline_helpers import make_sources, manifest, text, write_pipeline
from typer.testing import CliRunner

from bookft.cli import app
from bookft.pipelines import EXIT_CONFIG, EXIT_OK, run_pipeline


@pytest.fixture
def ray_jobs(monkeypatch):
    """The number of jobs each Ray map of a build was given (build_corpus imports ray_map at call time)."""
    import bookft.ingest.engine.ray_engine as ray_engine

    calls = []
    real = ray_engine.ray_map

    def counting(fn, args, *a, **k):
        calls.append(len(args))
        yield from real(fn, args, *a, **k)

    monkeypatch.setattr(ray_engine, "ray_map", counting)
    return calls


def test_pipeline_on_ray_equals_local_and_extracts_only_what_changed(tmp_path, ray_instance, ray_jobs):
    src = make_sources(tmp_path / "src", range(4))
    local = write_pipeline(tmp_path, src, name="local", out=str(tmp_path / "c-local"), workers=2)
    on_ray = write_pipeline(tmp_path, src, name="onray", out=str(tmp_path / "c-ray"), workers=2, engine="ray")

    code, r = run_pipeline(local)
    assert code == EXIT_OK and r["engine"] == "local" and ray_jobs == []
    code, r = run_pipeline(on_ray)
    assert code == EXIT_OK and r["engine"] == "ray" and r["version"] == 1, r
    assert ray_jobs == [4] and r["work"]["extracted"] == 4
    v1 = manifest(tmp_path / "c-ray")
    assert v1["config"]["engine"] == "ray"
    assert v1["data_hash"] == manifest(tmp_path / "c-local")["data_hash"]

    # one source changed: only it goes to Ray (not extracted in process, as a small local refresh is)
    (src / "doc2.txt").write_text(text(2) + "\n\nA new closing paragraph.")
    code, r = run_pipeline(on_ray)
    assert code == EXIT_OK and r["published"] and r["version"] == 2, r
    assert ray_jobs == [4, 1] and "extract_in_process" not in r
    assert r["counts"]["changed"] == 1 and r["counts"]["unchanged"] == 3
    assert r["work"]["extracted"] == 1 and r["work"]["extract_cache_hits"] == 3
    code, r_local = run_pipeline(local)
    assert code == EXIT_OK and r_local["extract_in_process"] and r_local["work"]["extracted"] == 1
    assert manifest(tmp_path / "c-ray")["data_hash"] == manifest(tmp_path / "c-local")["data_hash"] != v1["data_hash"]

    # the CLI's --engine ray on the local pipeline: where extraction runs is no change of the corpus,
    # so with no source changed nothing is extracted and nothing published
    res = CliRunner().invoke(app, ["pipeline", "run", str(local), "--engine", "ray", "--json"])
    assert res.exit_code == 0, res.output
    record = json.loads(res.stdout)
    assert record["engine"] == "ray" and record["result"] == "unchanged" and not record["published"]
    assert ray_jobs == [4, 1]


def test_pipeline_engine_is_checked_before_any_work(tmp_path):
    path = write_pipeline(tmp_path, make_sources(tmp_path / "src", range(1)), engine="spark")
    code, r = run_pipeline(path)
    assert code == EXIT_CONFIG and "engine: expected one of local, ray, got 'spark'" in r["error"], r
    assert not (tmp_path / "corpus").exists()
