"""Reader leases: a reader (a training run, an eval) keeps the corpus version it reads.

Design choices:
- A lease is a file in CORPUS_DIR/leases/. Pruning (a refresh's `retention`) never deletes a
  version with a live lease.
- A training run's lease belongs to the run, not to its process: `NNNN@run@KEY` (KEY: a digest of
  the run directory's absolute path; the file holds the run directory, host, pid and time). It
  outlives a kill -9, an OOM kill or a preemption, because that is when a user resumes; it ends
  when the run finishes its steps, when the run moves to another version, when the run directory
  is gone (checked on the lease's host; from another host it counts until `ttl_s` after the run
  last touched it), or by `bookft corpus release`.
- A process lease (`NNNN@HOST@PID`: an eval, a script) lasts while the process is alive: checked
  with kill(pid, 0) on the same host; from another host it counts until `ttl_s` after its last
  `refresh`.
- `Lease(corpus_dir)` leases the version `current` points to now; `Lease(corpus_dir, version=N)`
  leases version N; `run_dir=` makes it the run's lease.
- Without a lease, a reader that already opened a version keeps reading it even if it is pruned
  (POSIX keeps unlinked, memory-mapped files alive); the lease is for readers that reopen.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from datetime import UTC, datetime
from pathlib import Path

from bookft.corpus.procs import pid_alive
from bookft.errors import CorpusError

LEASE_TTL_S = 7 * 24 * 3600


def run_key(run_dir: str | Path) -> str:
    return hashlib.sha256(str(Path(run_dir).resolve()).encode()).hexdigest()[:16]


class Lease:
    """`with Lease(corpus_dir[, version=N][, run_dir=R]) as version_dir: ...`: pin a version (default:
    the one `current` points to now) so that pruning keeps it until released."""

    def __init__(self, corpus_dir: str | Path, version: int | None = None, run_dir: str | Path | None = None) -> None:
        self.root = Path(corpus_dir)
        self.version = version
        self.run_dir = Path(run_dir).resolve() if run_dir is not None else None
        self.file: Path | None = None

    def _target(self) -> Path:
        if self.version is None:
            return Path(os.path.realpath(self.root / "current"))
        return self.root / "versions" / f"{self.version:04d}"

    def _write(self, version: Path) -> Path:
        d = self.root / "leases"
        d.mkdir(exist_ok=True)
        since = datetime.now(UTC).isoformat(timespec="seconds")
        if self.run_dir is None:
            f = d / f"{version.name}@{socket.gethostname()}@{os.getpid()}"
            f.write_text(since + "\n")
            return f
        key = run_key(self.run_dir)
        f = d / f"{version.name}@run@{key}"
        tmp = d / f".{f.name}.tmp{os.getpid()}"
        tmp.write_text(json.dumps({"run_dir": str(self.run_dir), "version": int(version.name), "host":
                                   socket.gethostname(), "pid": os.getpid(), "since": since}) + "\n")
        os.replace(tmp, f)
        for other in d.glob(f"*@run@{key}"):  # the run moved on: its earlier version is not needed
            if other.name != f.name:
                other.unlink(missing_ok=True)
        return f

    def __enter__(self) -> Path:
        version = self._target()
        if not version.is_dir():
            what = "no current version" if self.version is None else f"no version {self.version}"
            raise CorpusError(f"{self.root}: {what} to lease")
        self.file = self._write(version)
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


def holders(corpus_dir: str | Path, ttl_s: float = LEASE_TTL_S) -> list[dict]:
    """Every lease file: {file, version, run_dir (runs) or pid (processes), host, since, live, why}."""
    d = Path(corpus_dir) / "leases"
    out: list[dict] = []
    if not d.is_dir():
        return out
    me = socket.gethostname()
    for f in sorted(d.iterdir()):
        parts = f.name.split("@")
        if len(parts) != 3 or not parts[0].isdigit() or f.name.startswith("."):
            continue
        try:
            age = time.time() - f.stat().st_mtime
        except OSError:
            continue
        h = {"file": f.name, "version": int(parts[0])}
        if parts[1] == "run":
            try:
                info = json.loads(f.read_text())
            except (OSError, ValueError):
                info = {}
            h.update(run_dir=info.get("run_dir"), host=info.get("host"), pid=info.get("pid"), since=info.get("since"))
            if info.get("host") == me or not info.get("host"):
                h["live"] = bool(h["run_dir"]) and Path(h["run_dir"]).is_dir()
                h["why"] = "its run directory exists" if h["live"] else "its run directory is gone"
            else:
                h["live"] = age <= ttl_s or (bool(h["run_dir"]) and Path(h["run_dir"]).is_dir())
                h["why"] = f"a run on {info.get('host')}, touched {age / 3600:.1f} h ago"
        elif parts[2].isdigit():
            pid = int(parts[2])
            h.update(run_dir=None, host=parts[1], pid=pid)
            if parts[1] == me:
                h["live"] = pid_alive(pid)
                h["why"] = f"process {pid} is {'alive' if h['live'] else 'gone'}"
            else:
                h["live"] = age <= ttl_s
                h["why"] = f"process {pid} on {parts[1]}, touched {age / 3600:.1f} h ago"
        else:
            continue
        out.append(h)
    return out


def sweep(corpus_dir: str | Path, ttl_s: float = LEASE_TTL_S) -> list[str]:
    """Remove the leases no longer held (a dead process's, a removed run directory's); one line each."""
    out = []
    for h in holders(corpus_dir, ttl_s):
        if not h["live"]:
            (Path(corpus_dir) / "leases" / h["file"]).unlink(missing_ok=True)
            out.append(f"leases/{h['file']} (version {h['version']}: {h['why']}): released")
    return out


def leased_versions(corpus_dir: Path, ttl_s: float = LEASE_TTL_S) -> set[str]:
    """Version names (NNNN) with a live lease; leases no longer held are removed."""
    sweep(corpus_dir, ttl_s)
    return {f"{h['version']:04d}" for h in holders(corpus_dir, ttl_s) if h["live"]}


def release(corpus_dir: str | Path, run_dir: str | Path | None = None, version: int | None = None) -> list[str]:
    """Remove the leases of `run_dir` and/or on `version` (both None: none); returns the files removed."""
    if run_dir is None and version is None:
        return []
    key = run_key(run_dir) if run_dir is not None else None
    out = []
    for h in holders(corpus_dir):
        if key is not None and not h["file"].endswith(f"@run@{key}"):
            continue
        if version is not None and h["version"] != version:
            continue
        (Path(corpus_dir) / "leases" / h["file"]).unlink(missing_ok=True)
        out.append(h["file"])
    return out

