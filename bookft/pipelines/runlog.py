"""The run log: one JSON line per refresh in CORPUS_DIR/runs/log.jsonl, and the status file.

Design choices:
- Append-only JSON lines, one `write` of one line per run (O_APPEND), so a crash never leaves
  half a record and concurrent writers (a locked-out run also logs) do not interleave.
- Unreadable lines (a truncated disk) are skipped by readers rather than failing `status`.
- A run killed before it logged gets its record from the next run (`log_dead_run`), from what its
  lock file said: result `killed`, and the version it published if it got that far.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def log_path(corpus_dir: str | Path) -> Path:
    return Path(corpus_dir) / "runs" / "log.jsonl"


def append_record(corpus_dir: str | Path, record: dict) -> None:
    p = log_path(corpus_dir)
    p.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(record, sort_keys=False, default=str) + "\n").encode()
    fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_records(corpus_dir: str | Path, pipeline: str | None = None) -> list[dict]:
    p = log_path(corpus_dir)
    if not p.is_file():
        return []
    out = []
    for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if pipeline is None or r.get("pipeline") == pipeline:
            out.append(r)
    return out


def log_dead_run(corpus_dir: str | Path, holder: dict, by: str) -> None:
    """Append the record a run killed while holding the lock never wrote (holder: what its lock file
    said); `published` when the version it was publishing is there. Nothing when it logged itself."""
    rid = holder.get("run_id")
    if not rid or any(r.get("run_id") == rid for r in read_records(corpus_dir)):
        return
    v = holder.get("publishing")
    published = v is not None and (Path(corpus_dir) / "versions" / f"{int(v):04d}" / "manifest.json").is_file()
    append_record(corpus_dir, {
        "pipeline": holder.get("pipeline"), "run_id": rid, "started": holder.get("started"),
        "host": holder.get("host"), "pid": holder.get("pid"), "result": "killed", "exit_code": None,
        "published": published, "version": int(v) if published else None,
        "detail": "the run died without logging (kill -9, OOM, reboot)"
                  + (f" after publishing version {v}" if published else "") + f"; recorded by run {by}"})


def write_status_file(path: str | Path, record: dict) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, p)
