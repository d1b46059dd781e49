"""The local process pool of the extraction map (build.py), and its early start from the command line.

Design choices:
- A forkserver (spawn off POSIX), never a plain fork: the building process may hold threads (the
  progress display, a tokenizer loading) and, in `bookft quickstart`, JAX. The server imports once
  what every worker needs and each worker forks from it with that loaded. Each worker also runs the
  main module again before its first task (CPython's forkserver does not preload `__main__`: it
  looks for a `main_path` that spawn never gives), so when the main module is the command line,
  the server preloads it too (typer, rich, every command module): once, not per worker.
- That start costs about 0.5 s of one core (the server's imports). `prestart()` lets it happen while
  the command line is still importing the build and loading its config; `bookft ingest` calls it
  when a source on the command line is big enough to use the pool (`may_use_pool`).
- `pool_map(local=...)`: the building process also runs tasks it may run itself (a split PDF's page
  ranges), from the end of the queue while the pool takes the front, so its core is not idle
  while the pool starts or while it waits.

Light on purpose (standard library only): the command line imports it before anything heavy.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path

IN_PROCESS_BYTES = 16 << 20  # extraction of less than this runs in the building process (build.py)
SPLIT_MIN_BYTES_PER_PAGE = 512  # a PDF smaller than this per page of the split threshold is not split


def context():
    """The pool's multiprocessing context, with the forkserver's preloads set."""
    if os.name != "posix":
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    cli = [m for m in ("bookft.cli",) if m in sys.modules]
    ctx.set_forkserver_preload(["__main__", "bookft.ingest.jobs", *cli])
    return ctx


def prestart() -> None:
    """Start the forkserver now (it imports in its own process, in parallel with this one)."""
    if os.name == "posix":
        context()
        from multiprocessing import forkserver

        forkserver.ensure_running()


def may_use_pool(paths: list[str], workers: int | None, engine: str | None,
                 pages_per_job: int = 300) -> bool:
    """A cheap guess, before any config is read, that extraction will use the local pool: not Ray, not
    workers 0, and a PDF that may be split or sources of at least IN_PROCESS_BYTES."""
    if engine == "ray" or workers == 0 or not paths:
        return False
    total = 0
    for path in paths:
        try:
            p = Path(path)
            if not p.is_file():
                return True  # a folder or archive walk is the build's job; a big one is likely
            size = p.stat().st_size
        except OSError:
            continue
        if p.suffix.lower() == ".pdf" and size >= pages_per_job * SPLIT_MIN_BYTES_PER_PAGE:
            return True
        total += size
    return total >= IN_PROCESS_BYTES


def in_thread(fn, *args) -> Future:
    """fn(*args) in a daemon thread; its result (or exception) in the returned future."""
    fut: Future = Future()

    def run() -> None:
        try:
            fut.set_result(fn(*args))
        except BaseException as e:  # noqa: BLE001  handed to whoever asks for the result
            fut.set_exception(e)

    threading.Thread(target=run, name=f"bookft-{fn.__name__}", daemon=True).start()
    return fut


def pool_map(fn, args: list, workers: int, local=None):
    """Yield (index, fn(*args[index])) in completion order; in this process when workers == 0 or one job.

    local(index) -> bool: tasks this process may also run itself while it waits for the pool. It takes
    them from the end of the queue while the pool takes from the front, at most `workers` in flight
    there, so the first one runs while the pool is still starting."""
    if workers <= 0 or len(args) <= 1:
        for i, a in enumerate(args):
            yield i, fn(*a)
        return
    queue = deque(range(len(args)))
    with ProcessPoolExecutor(max_workers=workers, mp_context=context()) as ex:
        running: dict = {}

        def fill() -> None:
            while queue and len(running) < workers:
                i = queue.popleft()
                running[ex.submit(fn, *args[i])] = i

        if local is not None and any(local(i) for i in queue):
            # The first submit blocks until the forkserver has imported its preloads and forked: let a
            # thread wait for that while this process runs its first task.
            mine = next(i for i in reversed(queue) if local(i))
            queue.remove(mine)  # before the thread starts: it pops from the same queue
            starter = in_thread(fill)
            try:
                out = fn(*args[mine])
            finally:
                starter.exception()  # waits; a pool that failed to start raises below, in this thread
            starter.result()
            yield mine, out
        while queue or running:
            fill()
            mine = next((i for i in reversed(queue) if local is not None and local(i)), None)
            if mine is not None:
                queue.remove(mine)
                yield mine, fn(*args[mine])
                done = [f for f in running if f.done()]
            else:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                yield running.pop(fut), fut.result()
