"""The run log: one JSON line per refresh in CORPUS_DIR/runs/log.jsonl, and the status file.

Design choices:
- Append-only JSON lines, one `write` of one line per run (O_APPEND), so a crash never leaves
  half a record and concurrent writers (a locked-out run also logs) do not interleave.
- Unreadable lines (a truncated disk) are skipped by readers rather than failing `status`.
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


def write_status_file(path: str | Path, record: dict) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, p)
