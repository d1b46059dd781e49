"""Extraction workers die with their parent: a kill -9 of the building process leaves no worker
behind (it would run on under PID 1, holding its memory), with the local pool and with Ray."""

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

POOL = ("import time; from bookft.ingest.engine.pool import pool_map; "
        "list(pool_map(time.sleep, [(300,)] * 4, 2))")
RAY = ("import time; from bookft.ingest.engine.ray_engine import ray_map; "
       "list(ray_map(time.sleep, [(300,)] * 4, 2))")


def _descendants_once_busy(proc: subprocess.Popen, n: int, timeout: float = 90) -> list[psutil.Process]:
    parent = psutil.Process(proc.pid)
    deadline = time.time() + timeout
    while time.time() < deadline:
        kids = parent.children(recursive=True)
        if len(kids) >= n:
            time.sleep(2.0)  # the tasks have started
            return parent.children(recursive=True)
        assert proc.poll() is None, proc.communicate()[0]
        time.sleep(0.2)
    raise AssertionError(f"fewer than {n} worker processes appeared")


def _all_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    deadline = time.time() + timeout
    alive = [p for p in procs if _running(p)]
    while alive and time.time() < deadline:
        time.sleep(0.25)
        alive = [p for p in alive if _running(p)]
    for p in alive:  # do not leave them behind when the test fails
        p.kill()
    return alive


def _running(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _kill9_parent(code: str, n_workers: int, timeout: float) -> list[psutil.Process]:
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        workers = _descendants_once_busy(proc, n_workers)
    except BaseException:
        proc.kill()
        raise
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return _all_gone(workers, timeout)


def test_pool_workers_die_with_the_parent():
    left = _kill9_parent(POOL, 3, timeout=10)  # forkserver + 2 workers, each in a 300 s task
    assert not left, [(p.pid, p.cmdline()) for p in left]


@pytest.mark.slow
def test_ray_workers_die_with_the_parent():
    pytest.importorskip("ray.data")
    left = _kill9_parent(RAY, 4, timeout=90)  # Ray's own processes share the driver's fate
    assert not left, [(p.pid, p.name()) for p in left]
