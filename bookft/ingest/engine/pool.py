"""The local process pool of the extraction map (phases/extract.py), and its early start from the command line.

Design choices:
- A forkserver (spawn off POSIX), never a plain fork: the building process may hold threads (the
  progress display, a tokenizer loading) and, in `bookft quickstart`, JAX. The server imports once
  what every worker needs (bookft/ingest/engine/jobs.py: the extractors, pypdfium2, the cache) and each
  worker forks from it with that loaded. Each worker also runs the main module again before its
  first task (CPython's forkserver does not preload `__main__`: it looks for a `main_path` that
  spawn never gives); for the command line that is bookft/cli.py, light on purpose (typer, rich
  and the commands live in bookft/app.py), so nothing else is preloaded.
- That start costs about 0.2 s of one core (the server's imports). `prestart()` lets it happen while
  the command line is still importing and parsing: bookft/cli.py calls it before it imports typer when
  the raw arguments of `bookft ingest` name a source big enough to use the pool (`argv_may_use_pool`),
  and the ingest command checks again once parsed (`may_use_pool`).
- `pool_map(local=...)`: the building process also runs tasks it may run itself (a split PDF's page
  ranges), from the end of the queue while the pool takes the front, so its core is not idle
  while the pool starts or while it waits.

Light on purpose (standard library only): the command line imports it before anything heavy.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from queue import SimpleQueue

IN_PROCESS_BYTES = 16 << 20  # extraction of less than this runs in the building process (phases/extract.py)
SPLIT_MIN_BYTES_PER_PAGE = 512  # a PDF smaller than this per page of the split threshold is not split
PDF_PAGES_PER_JOB = 100  # extract.pdf_pages_per_job's default (config.py): here too for the guess before config


def context():
    """The pool's multiprocessing context, with the forkserver's preloads set."""
    if os.name != "posix":
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["__main__", "bookft.ingest.engine.jobs"])
    return ctx


def prestart() -> None:
    """Start the forkserver now (it imports in its own process, in parallel with this one)."""
    if os.name == "posix":
        context()
        from multiprocessing import forkserver

        forkserver.ensure_running()


def may_use_pool(paths: list[str], workers: int | None, engine: str | None,
                 pages_per_job: int = PDF_PAGES_PER_JOB) -> bool:
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


INGEST_FLAGS = frozenset({"--no-secret-scan", "--help"})  # `bookft ingest` options that take no value


def argv_may_use_pool(args: list[str]) -> bool:
    """`may_use_pool` from the raw arguments after `bookft ingest`, before the command line is parsed
    (bookft/cli.py). Positional sources are the words that follow no value-taking option; an option it
    does not know as a flag is taken to take a value, which at worst drops a source from the guess (the
    command's own check, once parsed, then starts the pool)."""
    sources, opts, i = [], {}, 0
    while i < len(args):
        a = args[i]
        if a == "--":
            sources += args[i + 1:]
            break
        if a.startswith("-") and a != "-":
            if "=" in a:
                k, v = a.split("=", 1)
                opts[k] = v
            elif a not in INGEST_FLAGS and i + 1 < len(args):
                opts[a] = args[i + 1]
                i += 1
        else:
            sources.append(a)
        i += 1
    try:
        workers = int(opts["--workers"]) if "--workers" in opts else None
    except ValueError:
        return False
    return may_use_pool(sources, workers, opts.get("--engine"))


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

    with ProcessPoolExecutor(max_workers=workers, mp_context=context()) as ex:
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
