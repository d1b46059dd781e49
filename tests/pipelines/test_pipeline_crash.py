"""The lock (exit 3, --wait, takeover) and two concurrent runs (kill -9 at each crash point:
test_pipeline_crash_points.py)."""

import threading
import time

from pipeline_helpers import make_sources, run_subprocess, write_pipeline

from bookft.pipelines import EXIT_LOCKED, EXIT_OK, RunLock, run_pipeline
from bookft.pipelines.runlog import read_records


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
