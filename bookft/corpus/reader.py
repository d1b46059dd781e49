"""Read a corpus: `open_corpus(path) -> Corpus` with random access to packed sequences.

Design choices:
- `current` is resolved once when the corpus is opened, so a reader keeps its version while a
  refresh publishes a new one.
- The sequences' Arrow files are memory-mapped (pyarrow IPC stream over `pa.memory_map`); reading
  sequence i touches only that row's pages. `input_ids` comes back zero-copy.
- segment_ids / positions / loss_weights are derived from the stored per-piece lengths and segment
  numbers (`doc_lengths`, `doc_segments`), so they are exact by construction.
- A host of a multi-host job reads only the tokens its devices hold: `layout(i)` gives a sequence's
  segment ids, positions and loss weights (metadata, no tokens) and `tokens(i, at)` the token ids
  at the positions `at`. `reads` counts what was read (distinct sequences, token ids), which
  `bookft train` reports per host (RUN_DIR/hosts/).
"""

from __future__ import annotations

import bisect
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from bookft.corpus.packing import expand_segments
from bookft.errors import CorpusError


def resolve_version(path: str | Path) -> Path:
    p = Path(path)
    if (p / "current").exists():
        return Path(os.path.realpath(p / "current"))
    if (p / "manifest.json").is_file():
        return p
    if not p.exists():
        raise CorpusError(f"{p}: no such corpus (run `bookft ingest ... --out {p}` first)")
    raise CorpusError(f"{p}: not a bookft corpus (no `current` link and no manifest.json)")


class _ArrowRows:
    """Memory-mapped rows of a `save_to_disk` folder."""

    def __init__(self, folder: Path) -> None:
        try:
            state = json.loads((folder / "state.json").read_text())
            files = [folder / f["filename"] for f in state["_data_files"]]
        except (OSError, KeyError, ValueError) as e:
            raise CorpusError(f"{folder}: not a datasets folder ({e})") from None
        self.tables = [pa.ipc.open_stream(pa.memory_map(str(f), "r")).read_all() for f in files]
        self.starts = [0]
        for t in self.tables:
            self.starts.append(self.starts[-1] + t.num_rows)

    def __len__(self) -> int:
        return self.starts[-1]

    def row(self, i: int, columns: list[str]) -> dict[str, pa.Array]:
        if not 0 <= i < len(self):
            raise IndexError(f"row {i} out of range [0, {len(self)})")
        k = bisect.bisect_right(self.starts, i) - 1
        t = self.tables[k].slice(i - self.starts[k], 1)
        return {c: t.column(c).chunk(0).flatten() if c in t.column_names else None for c in columns}


@dataclass
class ReadCounts:
    """What a reader has read: the distinct sequences it fetched token ids of, how many token ids,
    and the distinct sequences whose layout alone (segments, positions, loss weights) it read."""

    sequences: set[int] = field(default_factory=set)
    tokens: int = 0
    layouts: set[int] = field(default_factory=set)

    def as_dict(self) -> dict[str, int]:
        return {"sequences": len(self.sequences), "tokens": self.tokens, "layouts": len(self.layouts)}


class Corpus:
    def __init__(self, path: str | Path) -> None:
        self.path = resolve_version(path)
        try:
            self.manifest = json.loads((self.path / "manifest.json").read_text())
        except (OSError, ValueError) as e:
            raise CorpusError(f"{self.path}/manifest.json: cannot read ({e})") from None
        self.seq_len = int(self.manifest["seq_len"])
        self.tokenizer_path = self.path / "tokenizer" / "tokenizer.json"
        tok = self.manifest.get("tokenizer", {})
        self.fingerprint = tok.get("fingerprint", "")
        self.vocab_size = int(tok.get("vocab_size", 0))
        self.pad_id = int(tok.get("pad_id", 0))
        self.eos_id = tok.get("eos_id")
        self._rows = _ArrowRows(self.path / "sequences")
        self._has_weights = "loss_weights" in self._rows.tables[0].column_names if self._rows.tables else False
        self.reads = ReadCounts()

    def __len__(self) -> int:
        return len(self._rows)

    def __repr__(self) -> str:
        return f"Corpus({str(self.path)!r}, sequences={len(self)}, seq_len={self.seq_len})"

    def sequence(self, i: int) -> dict[str, np.ndarray]:
        """input_ids, segment_ids, positions (int32) and loss_weights (float32), each [seq_len]."""
        return {"input_ids": self.tokens(i), **self.layout(i)}

    def layout(self, i: int) -> dict[str, np.ndarray]:
        """segment_ids, positions (int32) and loss_weights (float32) of sequence i, each [seq_len]:
        everything but the token ids."""
        cols = ["doc_lengths", "doc_segments"] + (["loss_weights"] if self._has_weights else [])
        r = self._rows.row(i, cols)
        seg, pos = expand_segments(r["doc_lengths"].to_numpy(), r["doc_segments"].to_numpy(), self.seq_len)
        w = r.get("loss_weights")
        if w is not None and len(w) == self.seq_len:
            weights = w.to_numpy(zero_copy_only=False).astype(np.float32)
        else:
            weights = (seg > 0).astype(np.float32)
        self.reads.layouts.add(i)
        return {"segment_ids": seg, "positions": pos, "loss_weights": weights}

    def tokens(self, i: int, at: np.ndarray | None = None) -> np.ndarray:
        """The token ids of sequence i (int32 [seq_len]), or only those at positions `at`; the file is
        memory-mapped, so only the pages holding them are touched."""
        ids = self._rows.row(i, ["input_ids"])["input_ids"].to_numpy(zero_copy_only=True)
        self.reads.sequences.add(i)
        if at is None:
            self.reads.tokens += len(ids)
            return ids
        self.reads.tokens += len(at)
        return ids[at]

    def pieces(self, i: int) -> list[dict]:
        """The document pieces of sequence i: doc (row in documents), start/end token offsets, segment."""
        r = self._rows.row(i, ["doc_lengths", "doc_segments", "doc_index", "doc_start"])
        cols = [r[c].to_pylist() for c in ("doc_lengths", "doc_segments", "doc_index", "doc_start")]
        return [{"doc": d, "start": s, "end": s + n, "segment": g} for n, g, d, s in zip(*cols, strict=True)]

    def piece_arrays(self) -> dict[str, np.ndarray]:
        """Every piece of every sequence, flat and in order: `seq`, `doc` (row in documents) and `length`
        (int64 [n_pieces]); read column-wise from the memory-mapped shards, no per-row Python."""
        seq, doc, length = [], [], []
        for k, t in enumerate(self._rows.tables):
            col = t.column("doc_lengths").combine_chunks()
            parents = pa.compute.list_parent_indices(col).to_numpy().astype(np.int64)
            seq.append(parents + self._rows.starts[k])
            length.append(pa.compute.list_flatten(col).to_numpy().astype(np.int64))
            doc.append(pa.compute.list_flatten(t.column("doc_index").combine_chunks()).to_numpy().astype(np.int64))
        cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0, np.int64)
        return {"seq": cat(seq), "doc": cat(doc), "length": cat(length)}

    def tokenizer(self):
        from tokenizers import Tokenizer

        return Tokenizer.from_file(str(self.tokenizer_path))

    def documents(self):
        """The documents as a `datasets.Dataset` (memory-mapped)."""
        import datasets

        return datasets.load_from_disk(str(self.path / "documents"))


def open_corpus(path: str | Path) -> Corpus:
    return Corpus(path)
