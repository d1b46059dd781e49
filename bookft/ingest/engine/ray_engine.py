"""The Ray engine of ingest (`bookft ingest --engine ray [--ray-address ADDR]`, config `engine: ray`).

Design choices:
- The same per-source tasks as the local process pool (pool.py `pool_map`: a module-level function
  and its picklable arguments, jobs.py `run_task`) is mapped over a Ray cluster with Ray Data
  (`ray.data.from_items(...).map(...)`, one block per job so every source is its own task).
  Everything after it (dedup, tokenizer, tokenize, pack, write, the atomic publish) stays in this
  process, and results are assembled in source order as before, so the corpus is byte-identical to
  the local engine's (same data_hash and tokenizer fingerprint).
- A job's exception is caught in the worker and raised again here unchanged, so a failing job
  surfaces exactly as it does from the local pool; bad sources (an encrypted PDF, a zip slip) are
  manifest entries of the job's result in both engines, never exceptions.
- The workers write the extraction cache under CORPUS_DIR and read the sources by path, so on a
  remote cluster (`--ray-address`) both must be on storage every node sees at the same path.
- A PDF password travels inside its job, as with the local pool; on Ray that is the object store
  (shared memory, which Ray may spill to its session folder on disk), so use Ray for password-protected
  PDFs only on a cluster you trust with them.
- Ray is an optional extra (`pip install 'bookft[ray]'`), imported only here and only when the Ray
  engine is chosen. With no address, a local Ray instance is started (`workers` CPUs when > 0) and
  shut down after the map; an instance already initialised in this process is used as it is.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Iterator

from bookft.errors import IngestError

INSTALL_HINT = "pip install 'bookft[ray]'"


def require_ray():
    """The `ray` module with Ray Data, or an IngestError that says how to install it."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as e:
        raise IngestError(f"--engine ray needs Ray Data, which is not installed (import failed: {e.name or e}); "
                          f"install it with: {INSTALL_HINT}") from None
    return ray


def _run_row(row: dict) -> dict:
    """Ray Data worker: one job (fn, args) -> its pickled result, or its pickled exception."""
    fn, args = pickle.loads(row["task"])
    try:
        return {"i": row["i"], "ok": True, "out": pickle.dumps(fn(*args))}
    except Exception as e:  # raised again in the driver, as the local pool's future.result() does
        try:
            blob = pickle.dumps(e)
        except Exception:
            blob = pickle.dumps(IngestError(f"{type(e).__name__}: {e}"))
        return {"i": row["i"], "ok": False, "out": blob}


def ray_map(fn, args: list, workers: int = 0, address: str | None = None) -> Iterator[tuple[int, object]]:
    """Yield (index, fn(*args[index])) in completion order, each job a Ray Data task."""
    if not args:
        return
    ray = require_ray()
    started = False
    if not ray.is_initialized():
        kw = {"include_dashboard": False, "logging_level": "ERROR", "log_to_driver": False}
        if address:
            kw["address"] = address
        elif workers > 0:
            kw["num_cpus"] = workers
        try:
            ray.init(**kw)
        except Exception as e:
            raise IngestError(f"--engine ray: cannot start or reach Ray"
                              f"{f' at {address}' if address else ''}: {e}") from e
        started = True
    log = logging.getLogger("ray.data")  # its per-dataset INFO lines and the "progress bars disabled" warning
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False  # bookft's own progress bars count the sources
        ctx.print_on_execution_start = False
        items = [{"i": i, "task": pickle.dumps((fn, tuple(a)))} for i, a in enumerate(args)]
        ds = ray.data.from_items(items, override_num_blocks=len(items)).map(_run_row, num_cpus=1)
        for row in ds.iter_rows():
            out = pickle.loads(row["out"])
            if not row["ok"]:
                raise out
            yield int(row["i"]), out
    finally:
        log.setLevel(level)
        if started:
            ray.shutdown()
