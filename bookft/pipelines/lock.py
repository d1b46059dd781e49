"""The refresh lock (one refresh per corpus at a time) and reader leases (a reader keeps its version).

Design choices:
- The lock is `fcntl.flock` on CORPUS_DIR/runs/lock. The kernel drops it when the holder dies
  (kill -9, OOM, reboot), so a killed run's lock is never stale: the next run simply takes it over
  and logs the previous holder it replaced. The file's text (pid, host, pipeline, start time) only
  serves the "locked by ..." message. flock works on local filesystems and NFSv4; on a shared
  volume (Kubernetes) also set `concurrencyPolicy: Forbid` (see pipelines/deploy/).
- A reader lease is a file CORPUS_DIR/leases/NNNN@HOST@PID. Pruning never deletes a leased
  version while the lease's process is alive (same host: checked with kill(pid, 0)); a lease from
  another host counts until it is older than `lease_ttl_s` (the holder should touch it, see
  `Lease.refresh`). Without a lease, a reader that already opened a version keeps reading it even
  if it is pruned (POSIX keeps unlinked, memory-mapped files alive), and `retention` keeps the last
  N versions for readers that reopen.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from datetime import UTC, datetime
from pathlib import Path

from bookft.errors import PipelineError

LEASE_TTL_S = 7 * 24 * 3600


class Locked(PipelineError):
    """Another refresh of this corpus holds the lock."""


class RunLock:
    """`with RunLock(corpus_dir, pipeline, wait=False):` holds the corpus's refresh lock."""

    def __init__(self, corpus_dir: Path, pipeline: str, *, wait: bool = False, timeout: float | None = None,
                 poll: float = 0.2) -> None:
        self.path = Path(corpus_dir) / "runs" / "lock"
        self.pipeline, self.wait, self.timeout, self.poll = pipeline, wait, timeout, poll
        self.fd: int | None = None
        self.previous: dict = {}  # what the lock file said before we took it (a killed run's holder)

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
        info = {"pid": os.getpid(), "host": socket.gethostname(), "pipeline": self.pipeline,
                "started": datetime.now(UTC).isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)  # an empty file: nobody holds it (a killed holder leaves its info)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


class Lease:
    """`with Lease(corpus_dir) as version_dir: corpus = open_corpus(version_dir)`: pin the version `current`
    points to now, so that pruning keeps it until the lease is released."""

    def __init__(self, corpus_dir: str | Path) -> None:
        self.root = Path(corpus_dir)
        self.file: Path | None = None

    def __enter__(self) -> Path:
        version = Path(os.path.realpath(self.root / "current"))
        if not version.is_dir():
            raise PipelineError(f"{self.root}: no current version to lease")
        d = self.root / "leases"
        d.mkdir(exist_ok=True)
        self.file = d / f"{version.name}@{socket.gethostname()}@{os.getpid()}"
        self.file.write_text(datetime.now(UTC).isoformat(timespec="seconds") + "\n")
        if not version.is_dir():  # pruned between resolving and leasing: take the new current
            self.release()
            return self.__enter__()
        return version

    def refresh(self) -> None:
        if self.file is not None:
            os.utime(self.file)

    def release(self) -> None:
        if self.file is not None:
            self.file.unlink(missing_ok=True)
            self.file = None

    def __exit__(self, *exc) -> None:
        self.release()


def leased_versions(corpus_dir: Path, ttl_s: float = LEASE_TTL_S) -> set[str]:
    """Version names (NNNN) with a live lease; dead same-host leases are removed."""
    d = Path(corpus_dir) / "leases"
    out: set[str] = set()
    if not d.is_dir():
        return out
    me = socket.gethostname()
    for f in d.iterdir():
        parts = f.name.split("@")
        if len(parts) != 3 or not parts[2].isdigit():
            continue
        version, host, pid = parts[0], parts[1], int(parts[2])
        if host == me:
            try:
                os.kill(pid, 0)
                alive = True
            except ProcessLookupError:
                alive = False
            except PermissionError:
                alive = True
            if not alive:
                f.unlink(missing_ok=True)
                continue
        else:
            try:
                if time.time() - f.stat().st_mtime > ttl_s:
                    continue
            except OSError:
                continue
        out.add(version)
    return out
