"""kill -9 at several points of a refresh, the lock (exit 3, --wait, takeover), and two concurrent runs."""

import shutil
import threading
import time

import pytest
from pipeline_helpers import current, make_sources, manifest, run_subprocess, text, write_pipeline

from bookft.corpus import open_corpus
from bookft.pipelines import EXIT_LOCKED, EXIT_OK, RunLock, run_pipeline
from bookft.pipelines.runlog import read_records


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A corpus at version 1 (template), then sources changed (one added, one changed, one deleted), and
    the reference: the same refresh run without interruption."""
    tmp = tmp_path_factory.mktemp("crash")
    src = make_sources(tmp / "src", range(4))
    path = write_pipeline(tmp, src)
    assert run_pipeline(path)[0] == EXIT_OK
    shutil.copytree(tmp / "corpus", tmp / "template", symlinks=True)
    (src / "doc8.txt").write_text(text(8))
    (src / "doc0.txt").write_text(text(0) + "\n\nA new ending.")
    (src / "doc3.txt").unlink()
    code, ref = run_pipeline(path)
    assert code == EXIT_OK and ref["version"] == 2
    return tmp, src, manifest(tmp / "template"), manifest(tmp / "corpus")


@pytest.mark.parametrize("point", ["extract", "pack", "write", "publish", "prune"])
def test_kill9_then_rerun_equals_uninterrupted(world, point):
    tmp, src, v1, v2 = world
    corpus = tmp / f"c-{point}"
    shutil.copytree(tmp / "template", corpus, symlinks=True)
    path = write_pipeline(tmp, src, name=f"p-{point}", out=str(corpus))
    proc = run_subprocess(path, crash_at=point)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 137, out
    after = manifest(corpus)
    if point == "prune":  # killed after the rename: the new version is complete and current
        assert current(corpus) == "versions/0002" and after["data_hash"] == v2["data_hash"]
    else:  # killed before the rename: current is still version 1, readable, unchanged
        assert current(corpus) == "versions/0001" and after["data_hash"] == v1["data_hash"]
        assert not (corpus / "versions" / "0002").exists()
    c = open_corpus(corpus)
    c.sequence(len(c) - 1)
    code, r = run_pipeline(path)
    assert code == EXIT_OK
    assert r["took_over_lock_from"]["pid"] == proc.pid  # the killed run's lock was taken over
    final = manifest(corpus)
    assert current(corpus) == "versions/0002" and final["data_hash"] == v2["data_hash"]
    assert final["tokenizer"]["fingerprint"] == v2["tokenizer"]["fingerprint"]
    assert final["counts"] == v2["counts"]
    assert r["result"] == ("unchanged" if point == "prune" else "ok")
    if point in ("pack", "write", "publish"):  # extraction finished before the kill: all cached now
        assert r["counts"]["documents_extracted"] == 0
    assert not [p for p in (corpus / "versions").iterdir() if p.name.startswith(".tmp")]


def test_lock_exit_3_wait_and_message(tmp_path):
    src = make_sources(tmp_path / "src", range(2))
    path = write_pipeline(tmp_path, src)
    corpus = tmp_path / "corpus"
    with RunLock(corpus, "someone-else"):
        code, r = run_pipeline(path)
        assert code == EXIT_LOCKED and r["result"] == "locked" and not r["published"]
        assert "already running" in r["error"] and "someone-else" in r["error"] and "--wait" in r["error"]
        assert run_pipeline(path, wait=True, wait_timeout=0.3)[0] == EXIT_LOCKED
    lock = RunLock(corpus, "briefly")
    lock.__enter__()
    threading.Timer(1.0, lock.__exit__, (None, None, None)).start()
    t0 = time.perf_counter()
    code, r = run_pipeline(path, wait=True)
    assert code == EXIT_OK and r["version"] == 1 and time.perf_counter() - t0 >= 0.9
    assert "took_over_lock_from" not in r  # a cleanly released lock is not a takeover
    assert [x["result"] for x in read_records(corpus)] == ["locked", "locked", "ok"]


def test_two_concurrent_runs_exactly_one_publishes(tmp_path):
    src = make_sources(tmp_path / "src", range(3))
    path = write_pipeline(tmp_path, src)
    procs = [run_subprocess(path), run_subprocess(path)]
    codes = sorted(p.wait(timeout=120) for p in procs)
    assert codes in ([EXIT_OK, EXIT_OK], [EXIT_OK, EXIT_LOCKED])
    recs = read_records(tmp_path / "corpus")
    assert len(recs) == 2 and sum(r["published"] for r in recs) == 1
    assert sorted(p.name for p in (tmp_path / "corpus" / "versions").iterdir()) == ["0001"]
