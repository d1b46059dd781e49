"""The corpus directory: versions written aside and published atomically; Arrow datasets streamed to disk.

Layout (see CONTRACTS.md):
    CORPUS_DIR/current -> versions/NNNN      switched by os.replace of a temporary symlink
    CORPUS_DIR/versions/NNNN/{manifest.json, documents/, sequences/, tokenizer/}
    CORPUS_DIR/cache/                          per-source extraction and token caches (not versioned)

Design choices:
- A build writes into `versions/.tmp-PID-RAND/`, fsyncs every file, renames it to the next
  `versions/NNNN` and then switches `current`; a kill -9 at any point leaves the previous version
  and `current` intact (leftover `.tmp-*` folders are removed by the next build).
- Arrow data is streamed: record batches go to an Arrow IPC stream file as they are produced, then
  `datasets.Dataset.from_file` (memory-mapped) + `save_to_disk` gives the standard layout that
  `datasets.load_from_disk` opens. Nothing holds the whole corpus in memory.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa

from bookft.errors import CorpusError

FORMAT = "bookft-corpus/1"


def check_corpus_dir(root: Path) -> None:
    """Refuse an existing, non-empty folder that is not a bookft corpus (never overwrite user data)."""
    if root.exists() and not root.is_dir():
        raise CorpusError(f"{root}: exists and is a file, not a corpus folder; choose another --out")
    if root.is_dir():
        names = set(os.listdir(root))
        if names and not ({"versions", "current"} & names) and names - {"cache", "sample-sources", "runs"}:
            raise CorpusError(f"{root}: folder exists, is not empty and is not a bookft corpus (no versions/ or "
                              "current); choose another --out or empty the folder")


def clean_stale(root: Path) -> None:
    vdir = root / "versions"
    if not vdir.is_dir():
        return
    for name in os.listdir(vdir):
        if name.startswith(".tmp-"):
            pid = name.split("-")[1]
            if pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid)):
                continue
            shutil.rmtree(vdir / name, ignore_errors=True)
    for name in os.listdir(root):
        if name.startswith("current.tmp-"):
            try:
                os.unlink(root / name)
            except OSError:
                pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def staging_dir(root: Path) -> Path:
    d = root / "versions" / f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    d.mkdir(parents=True)
    return d


def version_numbers(root: Path) -> list[int]:
    vdir = root / "versions"
    if not vdir.is_dir():
        return []
    return sorted(int(n) for n in os.listdir(vdir) if n.isdigit())


def _fsync_tree(path: Path) -> None:
    for dirpath, _, files in os.walk(path):
        for f in files:
            fd = os.open(os.path.join(dirpath, f), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(dirpath))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(root: Path, staged: Path, version: int | None = None) -> Path:
    """fsync `staged`, rename it to versions/NNNN, and point `current` at it atomically."""
    _fsync_tree(staged)
    n = version if version is not None else (max(version_numbers(root), default=0) + 1)
    final = root / "versions" / f"{n:04d}"
    os.rename(staged, final)
    _fsync_dir(root / "versions")
    tmp_link = root / f"current.tmp-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    os.symlink(os.path.join("versions", final.name), tmp_link)
    os.replace(tmp_link, root / "current")
    _fsync_dir(root)
    return final


class ArrowDatasetWriter:
    """Stream record batches to `dst` as a datasets `save_to_disk` folder."""

    def __init__(self, dst: Path, schema: pa.Schema, max_shard_size: str = "500MB") -> None:
        self.dst = dst
        self.schema = schema
        self.max_shard_size = max_shard_size
        self.tmp = dst.parent / f".{dst.name}.stream.arrow"
        self._sink = pa.OSFile(str(self.tmp), "wb")
        self._writer = pa.ipc.new_stream(self._sink, schema)
        self.rows = 0

    def write(self, columns: dict) -> None:
        batch = pa.record_batch([_column(columns[f.name], f.type) for f in self.schema], schema=self.schema)
        self._writer.write_batch(batch)
        self.rows += batch.num_rows

    def close(self) -> None:
        import datasets

        self._writer.close()
        self._sink.close()
        datasets.disable_progress_bars()
        ds = datasets.Dataset.from_file(str(self.tmp), in_memory=False)
        ds.save_to_disk(str(self.dst), max_shard_size=self.max_shard_size)
        del ds
        os.unlink(self.tmp)


def _column(values: list, typ: pa.DataType) -> pa.Array:
    """Lists of numpy arrays become a ListArray from one concatenated buffer (no per-element Python)."""
    if pa.types.is_list(typ) and values and isinstance(values[0], np.ndarray):
        lens = np.fromiter((len(v) for v in values), dtype=np.int32, count=len(values))
        offsets = np.zeros(len(values) + 1, dtype=np.int32)
        np.cumsum(lens, out=offsets[1:])
        flat = np.concatenate(values).astype(typ.value_type.to_pandas_dtype(), copy=False)
        return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, type=typ.value_type))
    return pa.array(values, type=typ)


def write_json(path: Path, obj) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
