"""The refresh lock: one refresh per corpus at a time (reader leases: bookft/corpus/lease.py).

Design choices:
- The lock is `fcntl.flock` on CORPUS_DIR/runs/lock. The kernel drops it when the holder dies
  (kill -9, OOM, reboot), so a killed run's lock is never stale: the next run simply takes it over
  and logs the previous holder it replaced. The file's text (pid, host, pipeline, start time, run
  id, the version being published) serves the "locked by ..." message and the record the next
  run writes for a holder that died (runlog.py `log_dead_run`). flock works on local filesystems and NFSv4; on a shared
  volume (Kubernetes) also set `concurrencyPolicy: Forbid` (see pipelines/deploy/).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from datetime import UTC, datetime
from pathlib import Path

from bookft.corpus.lease import Lease, leased_versions
from bookft.errors import PipelineError

__all__ = ["Lease", "Locked", "RunLock", "leased_versions"]


class Locked(PipelineError):
    """Another refresh of this corpus holds the lock."""


class RunLock:
    """`with RunLock(corpus_dir, pipeline, wait=False):` holds the corpus's refresh lock."""

    def __init__(self, corpus_dir: Path, pipeline: str, *, wait: bool = False, timeout: float | None = None,
                 poll: float = 0.2, run_id: str | None = None) -> None:
        self.path = Path(corpus_dir) / "runs" / "lock"
        self.pipeline, self.wait, self.timeout, self.poll = pipeline, wait, timeout, poll
        self.run_id = run_id
        self.fd: int | None = None
        self.previous: dict = {}  # what the lock file said before we took it (a killed run's holder)
        self.info: dict = {}

    def holder(self) -> dict:
        try:
            return json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return {}

    def __enter__(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        t0 = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not self.wait or (self.timeout is not None and time.monotonic() - t0 > self.timeout):
                    os.close(fd)
                    h = self.holder()
                    who = (f"pid {h.get('pid')} on {h.get('host')} (pipeline {h.get('pipeline')}, since "
                           f"{h.get('started')})") if h else "another process"
                    raise Locked(f"{self.path.parent.parent}: a refresh is already running: {who}; "
                                 "try again later or pass --wait") from None
                time.sleep(self.poll)
        self.fd = fd
        self.previous = self.holder()
        self.info = {"pid": os.getpid(), "host": socket.gethostname(), "pipeline": self.pipeline,
                     "started": datetime.now(UTC).isoformat(timespec="seconds"), "run_id": self.run_id}
        self._write()
        return self

    def _write(self) -> None:
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, json.dumps(self.info).encode(), 0)
        os.fsync(self.fd)

    def note(self, **fields) -> None:
        """Add to what the lock file says (the version being published): a dead run's record."""
        if self.fd is not None:
            self.info.update(fields)
            self._write()

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)  # an empty file: nobody holds it (a killed holder leaves its info)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
