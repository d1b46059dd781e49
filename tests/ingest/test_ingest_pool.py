"""The extraction pool (bookft/ingest/engine/pool.py) and the light command-line entry point: the feeder
keeps the pool busy while the building process runs a task of its own; a task's error reaches the
consumer; importing bookft.cli (what each worker does again) imports no typer."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bookft.ingest.engine.pool import pool_map


def _task(marks: str, i: int, local_wait: int) -> tuple[int, int]:
    """Pool task: leave mark i. Local task (local_wait > 0): wait until that many marks exist (60 s at most)."""
    d = Path(marks)
    if local_wait:
        deadline = time.monotonic() + 60
        while len(list(d.iterdir())) < local_wait and time.monotonic() < deadline:
            time.sleep(0.01)
        return os.getpid(), len(list(d.iterdir()))
    (d / str(i)).touch()
    time.sleep(0.05)
    return os.getpid(), -1


def test_the_pool_takes_new_tasks_while_this_process_runs_its_own(tmp_path):
    """Eight pool tasks and one local one that only ends once six pool tasks have finished: it ends (the
    feeder submits as tasks finish, not only when this process comes back for results), on_start runs
    once, and every task is yielded once."""
    n = 8
    args = [(str(tmp_path), i, 0) for i in range(n)] + [(str(tmp_path), n, 6)]
    started = []
    out = dict(pool_map(_task, args, 2, local=lambda i: i == n, on_start=lambda: started.append(1)))
    assert sorted(out) == list(range(n + 1)) and started == [1]
    assert out[n] == (os.getpid(), out[n][1]) and out[n][1] >= 6  # the local task saw six pool tasks end
    assert all(out[i][0] != os.getpid() for i in range(n))


def _fail(i: int) -> int:
    if i == 2:
        raise ValueError(f"task {i} failed")
    return i


def test_a_task_error_is_raised_by_the_consumer():
    with pytest.raises(ValueError, match="task 2 failed"):
        list(pool_map(_fail, [(i,) for i in range(5)], 2))
    started = []
    assert dict(pool_map(_fail, [(0,)], 2, on_start=lambda: started.append(1))) == {0: 0} and started == [1]


def test_the_entry_point_module_is_light():
    """Workers run the main module again: `import bookft.cli` must not import typer, rich or the
    commands; `from bookft.cli import app` still gives the typer app (bookft/app.py)."""
    code = ("import sys, bookft.cli; heavy = [m for m in ('typer', 'rich', 'numpy', 'bookft.app', 'bookft.commands')"
            " if m in sys.modules]; assert not heavy, heavy; from bookft.cli import app; import typer;"
            " assert isinstance(app, typer.Typer)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        import bookft.cli

        bookft.cli.nope  # noqa: B018
