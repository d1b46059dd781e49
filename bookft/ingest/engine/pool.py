"""The local process pool of the extraction map (phases/extract.py).

Design choices:
- A forkserver (spawn off POSIX), never a plain fork: the building process may hold threads (the
  progress display, a tokenizer loading) and, in `bookft quickstart`, JAX. The server imports once
  what every worker needs (bookft/ingest/engine/jobs.py: the extractors, pypdfium2, the cache) and each
  worker forks from it with that loaded. It starts with the pool, when extraction first needs it.
- Each worker also runs the main module again before its first task (spawn's preparation imports it
  as `__mp_main__`; CPython's forkserver cannot preload it: it looks for a `main_path` that spawn
  never gives). From the command line that is bookft/cli.py, light on purpose (its docstring gives
  the figure); the forkserver preloads only the extraction jobs.
- `pool_map(local=...)`: the building process also runs tasks it may run itself (a split PDF's page
  ranges), from the end of the queue while the pool takes the front, so its core is not idle
  while the pool starts or while it waits.
- Workers die with the building process (`die_with_parent`, the pool's initializer): a kill -9 of
  it would otherwise leave them extracting under PID 1 for minutes, each holding its memory (the
  executor's pipes only tell an idle worker). On Linux the kernel sends SIGKILL when the worker's
  parent (the forkserver) dies (prctl PR_SET_PDEATHSIG, through ctypes: no dependency for one
  call), and a watchdog thread ends the worker within half a second of the building process's
  death (the forkserver outlives it while workers hold its pipe; off Linux it is the only guard).
  Once the workers are gone the forkserver and the resource tracker see their pipes close and exit.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from queue import SimpleQueue

from bookft.corpus.procs import pid_alive

IN_PROCESS_BYTES = 16 << 20  # extraction of less than this runs in the building process (phases/extract.py)
SPLIT_MIN_BYTES_PER_PAGE = 512  # a PDF smaller than this per page of the split threshold is not split


def context():
    """The pool's multiprocessing context, with the forkserver's preloads set."""
    if os.name != "posix":
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["bookft.ingest.engine.jobs"])
    return ctx


PR_SET_PDEATHSIG = 1  # linux/prctl.h
WATCH_S = 0.5


def die_with_parent(pid: int) -> None:
    """Worker initializer: end this process when process `pid` (the building process) dies."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no prctl: the watchdog alone
            pass
    if not pid_alive(pid):  # died before the guard was set
        os._exit(1)
    threading.Thread(target=_watch, args=(pid,), name="bookft-parent-watchdog", daemon=True).start()


def _watch(pid: int) -> None:
    while pid_alive(pid):
        time.sleep(WATCH_S)
    os._exit(1)


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


def pool_map(fn, args: list, workers: int, local=None, on_start=None):
    """Yield (index, fn(*args[index])) in completion order; in this process when workers == 0 or one job.

    A feeder thread keeps the pool busy: it submits from the front of the queue the moment a task
    finishes, whatever this process is doing, and keeps one task more than `workers` in flight (it waits
    in the executor's call queue, so a worker that finishes while this process holds the GIL, e.g. in a
    tokenizer's Rust code, takes it at once). local(index) -> bool: tasks this process may also run
    itself; it takes them from the end of the queue while the pool takes the front, so its core works
    while the pool starts (the first submit waits for the forkserver to fork) and while it waits. A
    task's exception is raised here, when its result is yielded.

    on_start(): called by the feeder once the pool has its first tasks (the workers have forked):
    work of this process that the map should not wait for (the extract phase starts loading a given tokenizer)."""
    if workers <= 0 or len(args) <= 1:
        if on_start is not None:
            on_start()
        for i, a in enumerate(args):
            yield i, fn(*a)
        return
    queue = deque(range(len(args)))
    lock = threading.Lock()
    done: SimpleQueue = SimpleQueue()  # (index, future) as the pool's tasks finish; (None, exc) if feeding fails

    def take_local() -> int | None:
        with lock:
            i = next((i for i in reversed(queue) if local(i)), None) if local is not None else None
            if i is not None:
                queue.remove(i)
            return i

    with ProcessPoolExecutor(max_workers=workers, mp_context=context(), initializer=die_with_parent,
                             initargs=(os.getpid(),)) as ex:
        def feed() -> None:
            running: dict = {}
            started = on_start is None
            try:
                while True:
                    while len(running) < workers + 1:
                        with lock:
                            i = queue.popleft() if queue else None
                        if i is None:
                            break
                        running[ex.submit(fn, *args[i])] = i
                    if not started:
                        started = True
                        on_start()
                    if not running:
                        return
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        done.put((running.pop(fut), fut))
            except BaseException as e:  # noqa: BLE001  e.g. a pool that cannot start: raised by the consumer
                done.put((None, e))

        feeder = threading.Thread(target=feed, name="bookft-pool-feeder", daemon=True)
        feeder.start()
        left = len(args)
        try:
            while left:
                mine = take_local()
                if mine is not None:
                    out = fn(*args[mine])
                    left -= 1
                    yield mine, out
                    pending = []
                    while not done.empty():
                        pending.append(done.get())
                else:
                    pending = [done.get()]
                for i, fut in pending:
                    if i is None:
                        raise fut
                    left -= 1
                    yield i, fut.result()
        finally:
            with lock:
                queue.clear()  # a consumer that stops early: the feeder submits nothing more
            feeder.join()
