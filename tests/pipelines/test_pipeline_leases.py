"""A training run's lease belongs to its run directory: it outlives the process, moves with the run,
and ends when the directory is gone (named in the next refresh's record) or on `bookft corpus release`."""

import shutil

from pipeline_helpers import make_sources, text, write_pipeline
from typer.testing import CliRunner

from bookft.cli import app
from bookft.corpus.lease import Lease, holders, leased_versions
from bookft.pipelines import EXIT_OK, run_pipeline


def _corpus_with_versions(tmp_path, n):
    src = make_sources(tmp_path / "src", range(2))
    path = write_pipeline(tmp_path, src, retention=1)
    for k in range(n):
        (src / f"more{k}.txt").write_text(text(20 + k))
        assert run_pipeline(path)[0] == EXIT_OK
    return tmp_path / "corpus", src, path


def test_run_lease_moves_with_the_run_and_ends_with_its_directory(tmp_path):
    corpus, src, path = _corpus_with_versions(tmp_path, 1)
    run = tmp_path / "run"
    run.mkdir()
    Lease(corpus, version=1, run_dir=run).__enter__()  # never released: the process "died"
    (src / "x.txt").write_text(text(40))
    code, r = run_pipeline(path)
    assert code == EXIT_OK and r["pruned"] == [] and leased_versions(corpus) == {"0001"}
    Lease(corpus, version=2, run_dir=run).__enter__()  # the run moved on (--corpus-version latest)
    assert [(h["version"], h["run_dir"]) for h in holders(corpus)] == [(2, str(run.resolve()))]
    shutil.rmtree(run)  # the user deleted the run
    (src / "y.txt").write_text(text(41))
    code, r = run_pipeline(path)
    assert code == EXIT_OK and "0002" in r["pruned"] and holders(corpus) == []
    assert any("its run directory is gone" in line and "released" in line for line in r["cleaned"]), r["cleaned"]


def test_corpus_release_by_version_and_errors(tmp_path):
    corpus, _, _ = _corpus_with_versions(tmp_path, 1)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        Lease(corpus, version=1, run_dir=tmp_path / name).__enter__()
    runner = CliRunner()
    res = runner.invoke(app, ["corpus", "release", str(corpus)])
    assert res.exit_code != 0 and "--run RUN_DIR or --version N" in str(res.exception)
    res = runner.invoke(app, ["corpus", "release", str(corpus), "--run", str(tmp_path / "nobody")])
    assert res.exit_code != 0 and "no lease of run" in str(res.exception)
    res = runner.invoke(app, ["corpus", "release", str(corpus), "--version", "1"])
    assert res.exit_code == 0 and res.output.count("released leases/0001@run@") == 2
    res = runner.invoke(app, ["corpus", "leases", str(corpus)])
    assert res.exit_code == 0 and "no version is held" in res.output
