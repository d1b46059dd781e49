"""Per-source caches in CORPUS_DIR/cache/, keyed by content hash, so unchanged sources cost nothing.

Design choices:
- `extract/KEY.json`: the ExtractResult of one source (KEY = job_key: content hash + extractor
  version + options). `tokens/FP16/KEY.npz`: that source's token ids, per-document offsets and unit
  boundaries for tokenizer fingerprint FP. Both are written atomically (temp + rename).
- The cache is not versioned data: it can be deleted at any time; `prune` keeps only the keys the
  last successful build used (and only the current tokenizer's token folder).
- Counters (`hits`, `misses`) let refresh pipelines (issue 7) prove that no work was redone.
- Speed of a refresh (issue 7: most sources cached): tokens are one flat file per source (`KEY.tok`:
  magic, 4 lengths, 4 dtypes, then the raw arrays; ~50x faster to read than an .npz; old `.npz`
  entries are still read), and extraction results are kept in memory, LRU, up to MEMO_CHARS of text
  per build, because build_corpus reads each one in several phases.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import OrderedDict
from pathlib import Path

import numpy as np

from bookft.ingest.documents import ExtractResult

MEMO_CHARS = 256 << 20  # characters of extracted text kept in memory per build (bounded: big corpora stream)
_TOK_MAGIC = b"BFTOK1\0\0"


class SourceCache:
    def __init__(self, root: Path, enabled: bool = True) -> None:
        self.root = root / "cache"
        self.enabled = enabled
        self.extract_hits = self.extract_misses = self.token_hits = self.token_misses = 0
        self._memo: OrderedDict[str, tuple[ExtractResult, int]] = OrderedDict()
        self._memo_chars = 0

    def _remember(self, key: str, res: ExtractResult) -> None:
        size = sum(len(d.text) for d in res.documents) + 1
        if size > MEMO_CHARS // 4:
            return
        self._memo[key] = (res, size)
        self._memo_chars += size
        while self._memo_chars > MEMO_CHARS:
            _, (_, n) = self._memo.popitem(last=False)
            self._memo_chars -= n

    # --- extraction results ---------------------------------------------------------------------------
    def _x(self, key: str) -> Path:
        return self.root / "extract" / f"{key}.json"

    def has_extract(self, key: str) -> bool:
        return self.enabled and self._x(key).is_file()

    def load_extract(self, key: str) -> ExtractResult:
        hit = self._memo.get(key)
        if hit is not None:
            self._memo.move_to_end(key)
            return hit[0]
        res = ExtractResult.from_json(json.loads(self._x(key).read_text(encoding="utf-8")))
        self._remember(key, res)
        return res

    def save_extract(self, key: str, res: ExtractResult) -> None:
        p = self._x(key)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(res.to_json(), ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, p)
        self._remember(key, res)

    # --- tokens ---------------------------------------------------------------------------------------
    def _t(self, fp: str, key: str, ext: str = ".tok") -> Path:
        return self.root / "tokens" / fp[:16] / f"{key}{ext}"

    def load_tokens(self, fp: str, key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        p = self._t(fp, key)
        out = None
        if self.enabled:
            try:
                out = _read_tok(p) if p.is_file() else _read_npz(self._t(fp, key, ".npz"))
            except (OSError, ValueError, KeyError):
                out = None
        if out is None:
            self.token_misses += 1
            return None
        self.token_hits += 1
        return out

    def save_tokens(self, fp: str, key: str, ids, doc_offsets, bounds, bound_offsets) -> None:
        p = self._t(fp, key)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.stem}.tmp{os.getpid()}.tok")
        arrays = [np.ascontiguousarray(a) for a in (ids, doc_offsets, bounds, bound_offsets)]
        head = (_TOK_MAGIC + np.array([len(a) for a in arrays], "<i8").tobytes()
                + ",".join(a.dtype.str for a in arrays).encode().ljust(32))
        with open(tmp, "wb") as f:
            f.write(head)
            for a in arrays:
                f.write(a.tobytes())
        os.replace(tmp, p)

    def prune(self, keys: set[str], fp: str) -> None:
        xdir = self.root / "extract"
        if xdir.is_dir():
            for f in xdir.iterdir():
                if f.suffix == ".json" and f.stem not in keys:
                    f.unlink(missing_ok=True)
        tdir = self.root / "tokens"
        if tdir.is_dir():
            for d in tdir.iterdir():
                if d.name != fp[:16]:
                    shutil.rmtree(d, ignore_errors=True)
                    continue
                for f in d.iterdir():
                    if f.stem not in keys:
                        f.unlink(missing_ok=True)

    def counters(self) -> dict[str, int]:
        return {"extracted": self.extract_misses, "extract_cache_hits": self.extract_hits,
                "tokenized": self.token_misses, "token_cache_hits": self.token_hits}


def _read_tok(p: Path) -> tuple[np.ndarray, ...]:
    data = bytearray(p.read_bytes())  # writable, like arrays from np.load
    if data[:8] != _TOK_MAGIC or len(data) < 72:
        raise ValueError(f"{p}: not a token cache file")
    lens = np.frombuffer(data, "<i8", 4, 8)
    dtypes = [np.dtype(t) for t in bytes(data[40:72]).decode().strip().split(",")]
    out, off = [], 72
    for n, dt in zip(lens.tolist(), dtypes, strict=True):
        out.append(np.frombuffer(data, dt, n, off))
        off += n * dt.itemsize
    if off != len(data):
        raise ValueError(f"{p}: truncated token cache file")
    return tuple(out)


def _read_npz(p: Path) -> tuple[np.ndarray, ...] | None:
    if not p.is_file():
        return None
    with np.load(p) as z:
        return (z["ids"], z["doc_offsets"], z["bounds"], z["bound_offsets"])
