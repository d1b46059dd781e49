"""The corpus directory: versions written aside and published atomically; Arrow datasets streamed to disk.

Layout (see CONTRACTS.md):
    CORPUS_DIR/current -> versions/NNNN      switched by os.replace of a temporary symlink
    CORPUS_DIR/versions/NNNN/{manifest.json, documents/, sequences/, tokenizer/}
    CORPUS_DIR/cache/                          per-source extraction and token caches (not versioned)

Design choices:
- A build writes into `versions/.tmp-PID-RAND/`, fsyncs every file, renames it to the next
  `versions/NNNN` and then switches `current`; a kill -9 at any point leaves the previous version
  and `current` intact (leftover `.tmp-*` folders are removed by the next build or refresh, which
  names them: `clean_stale`).
- Arrow data is streamed: record batches go straight into the shards of the standard layout that
  `datasets.load_from_disk` opens (the layout `save_to_disk` writes), as they are produced; nothing
  is read back and nothing holds the whole corpus in memory.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa

from bookft.corpus import hf_features
from bookft.corpus.crash import crash_point
from bookft.corpus.procs import pid_alive
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


def clean_stale(root: Path) -> list[str]:
    """Remove what dead builds left: staging folders `versions/.tmp-PID-*` (half-pruned versions
    `versions/.tmp-PID-prune-NNNN` included) of processes no longer alive, and `current.tmp-*` links.
    Returns what was removed, one line each (runs log it)."""
    vdir = root / "versions"
    removed: list[str] = []
    if not vdir.is_dir():
        return removed
    for name in sorted(os.listdir(vdir)):
        if name.startswith(".tmp-"):
            pid = name.split("-")[1]
            if pid.isdigit() and int(pid) != os.getpid() and pid_alive(int(pid)):
                continue
            what = "half-pruned version" if "-prune-" in name else "staging folder"
            shutil.rmtree(vdir / name, ignore_errors=True)
            removed.append(f"versions/{name} ({what} of a dead process {pid})")
    for name in sorted(os.listdir(root)):
        if name.startswith("current.tmp-"):
            try:
                os.unlink(root / name)
                removed.append(f"{name} (link of a publish that died)")
            except OSError:
                pass
    return removed



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
        fsync_dir(Path(dirpath))


def fsync_dir(path: Path) -> None:
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
    fsync_dir(root / "versions")
    tmp_link = root / f"current.tmp-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    os.symlink(os.path.join("versions", final.name), tmp_link)
    os.replace(tmp_link, root / "current")
    fsync_dir(root)
    crash_point("published")  # `current` moved, nothing else done yet
    return final


class ArrowDatasetWriter:
    """Stream record batches straight into a datasets `save_to_disk` folder (what `datasets.load_from_disk`
    opens): Arrow IPC stream shards `data-NNNNN-of-MMMMM.arrow` of at most about `max_shard_bytes`,
    with the features in the schema metadata, plus `state.json` and `dataset_info.json`. The data is
    written once and never read back, so memory holds one record batch, whatever the corpus size."""

    def __init__(self, dst: Path, schema: pa.Schema, max_shard_bytes: int = 500 << 20) -> None:
        self.dst = dst
        self.info = hf_features.dataset_info(schema)
        self.schema = hf_features.with_features(schema)  # the schema plus the `huggingface` features metadata
        self.max_shard_bytes = max_shard_bytes
        self.rows = 0
        self._shards: list[Path] = []
        self._sink = self._writer = None
        self._shard_bytes = 0
        dst.mkdir(parents=True)

    def _open(self) -> None:
        path = self.dst / f".shard-{len(self._shards):05d}.arrow"
        self._shards.append(path)
        self._sink = pa.OSFile(str(path), "wb")
        self._writer = pa.ipc.new_stream(self._sink, self.schema)
        self._shard_bytes = 0

    def _close_shard(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._sink.close()
            self._writer = self._sink = None

    def write(self, columns: dict) -> None:
        batch = pa.record_batch([_column(columns[f.name], f.type) for f in self.schema], schema=self.schema)
        if self._writer is None or (self._shard_bytes and self._shard_bytes + batch.nbytes > self.max_shard_bytes):
            self._close_shard()
            self._open()
        self._writer.write_batch(batch)
        self._shard_bytes += batch.nbytes
        self.rows += batch.num_rows

    def close(self) -> None:
        if not self._shards:
            self._open()  # an empty dataset still has one (empty) shard
        self._close_shard()
        n = len(self._shards)
        names = [f"data-{k:05d}-of-{n:05d}.arrow" for k in range(n)]
        for path, name in zip(self._shards, names, strict=True):
            os.replace(path, self.dst / name)
        state = {"_data_files": [{"filename": name} for name in names],
                 "_fingerprint": hf_features.random_fingerprint(), "_format_columns": None, "_format_kwargs": {},
                 "_format_type": None, "_output_all_columns": False, "_split": None}
        (self.dst / "state.json").write_text(json.dumps(state, indent=2, sort_keys=True), encoding="utf-8")
        (self.dst / "dataset_info.json").write_text(json.dumps(self.info, indent=2), encoding="utf-8")


class FlatFile:
    """A flat file of one numpy dtype read by slices with pread: unlike a memory map, the pages read do
    not stay in this process's resident set, so reading a 100M-token file costs only the slice."""

    def __init__(self, path: Path, dtype) -> None:
        self.dtype = np.dtype(dtype)
        self._fd = -1
        self._fd = os.open(path, os.O_RDONLY)
        self._n = os.fstat(self._fd).st_size // self.dtype.itemsize

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, s: slice) -> np.ndarray:
        start, stop, step = s.indices(self._n)
        if step != 1:
            raise ValueError("FlatFile supports contiguous slices only")
        n = max(0, stop - start)
        data = os.pread(self._fd, n * self.dtype.itemsize, start * self.dtype.itemsize)
        if len(data) != n * self.dtype.itemsize:
            raise OSError(f"short read from a flat {self.dtype} file: {len(data)} of {n * self.dtype.itemsize} bytes")
        return np.frombuffer(data, self.dtype)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        self.close()


_NUMERIC = {pa.int32(): np.int32, pa.int64(): np.int64, pa.float32(): np.float32, pa.float64(): np.float64}


def _numeric(a: np.ndarray, typ: pa.DataType) -> pa.Array:
    a = np.ascontiguousarray(a, dtype=_NUMERIC[typ])
    return pa.Array.from_buffers(typ, len(a), [None, pa.py_buffer(a)])


def _column(values: list, typ: pa.DataType) -> pa.Array:
    """One column of a record batch, assembled from buffers for the writer's types: lists of numpy arrays
    from one concatenated buffer (no per-element Python), strings from their UTF-8 bytes and offsets,
    numbers from one numpy array. `pa.array` is the fallback (nulls, other types) and not the rule: it
    asks whether pandas is installed and imports it when it is (about 0.3 s of a one-book ingest)."""
    if pa.types.is_list(typ) and typ.value_type in _NUMERIC and all(isinstance(v, np.ndarray) for v in values):
        offsets = np.zeros(len(values) + 1, dtype=np.int32)
        np.cumsum([len(v) for v in values], out=offsets[1:])
        flat = np.concatenate(values) if values else np.zeros(0)
        return pa.ListArray.from_arrays(_numeric(offsets, pa.int32()), _numeric(flat, typ.value_type))
    if typ in (pa.string(), pa.large_string()) and all(isinstance(v, str) for v in values):
        data = [v.encode("utf-8") for v in values]
        offsets = np.zeros(len(values) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in data], out=offsets[1:])
        if typ == pa.string() and offsets[-1] >= 1 << 31:
            raise ValueError(f"a string column of {offsets[-1]:,} bytes in one batch (more than 32-bit offsets)")
        offsets = offsets.astype(np.int64 if typ == pa.large_string() else np.int32)
        return pa.Array.from_buffers(typ, len(values), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])
    if typ in _NUMERIC and all(isinstance(v, (int, float, np.integer, np.floating)) for v in values):
        return _numeric(np.array(values), typ)
    return pa.array(values, type=typ)


def write_json(path: Path, obj) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
