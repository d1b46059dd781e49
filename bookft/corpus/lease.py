"""Reader leases: a reader (a training run, an eval) keeps the corpus version it reads.

Design choices:
- A lease is a file CORPUS_DIR/leases/NNNN@HOST@PID. Pruning (a refresh's `retention`) never
  deletes a leased version while the lease's process is alive: on the same host that is checked
  with kill(pid, 0), so a holder killed with -9 leaves a lease the next check removes; a lease from
  another host counts until it is older than `ttl_s` (its holder touches it: `Lease.refresh`).
- `Lease(corpus_dir)` leases the version `current` points to now; `Lease(corpus_dir, version=N)`
  leases version N (a run that resumes on the version it started on).
- Without a lease, a reader that already opened a version keeps reading it even if it is pruned
  (POSIX keeps unlinked, memory-mapped files alive); the lease is for readers that reopen.
"""

from __future__ import annotations

import os
import socket
import time
from datetime import UTC, datetime
from pathlib import Path

from bookft.errors import CorpusError

LEASE_TTL_S = 7 * 24 * 3600


class Lease:
    """`with Lease(corpus_dir[, version=N]) as version_dir: corpus = open_corpus(version_dir)`: pin a
    version (default: the one `current` points to now) so that pruning keeps it until released."""

    def __init__(self, corpus_dir: str | Path, version: int | None = None) -> None:
        self.root = Path(corpus_dir)
        self.version = version
        self.file: Path | None = None

    def _target(self) -> Path:
        if self.version is None:
            return Path(os.path.realpath(self.root / "current"))
        return self.root / "versions" / f"{self.version:04d}"

    def __enter__(self) -> Path:
        version = self._target()
        if not version.is_dir():
            what = "no current version" if self.version is None else f"no version {self.version}"
            raise CorpusError(f"{self.root}: {what} to lease")
        d = self.root / "leases"
        d.mkdir(exist_ok=True)
        self.file = d / f"{version.name}@{socket.gethostname()}@{os.getpid()}"
        self.file.write_text(datetime.now(UTC).isoformat(timespec="seconds") + "\n")
        if not version.is_dir():  # pruned between resolving and leasing
            self.release()
            if self.version is not None:
                raise CorpusError(f"{self.root}: version {self.version} was pruned while being leased")
            return self.__enter__()  # `current` moved on: lease the new one
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
            if not _alive(pid):
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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
