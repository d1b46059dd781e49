"""Per-source caches in CORPUS_DIR/cache/, keyed by content hash, so unchanged sources cost nothing.

Design choices:
- `extract/KEY.json`: the ExtractResult of one source (KEY = job_key: content hash + extractor
  version + options). `tokens/FP16/KEY.npz`: that source's token ids, per-document offsets and unit
  boundaries for tokenizer fingerprint FP. Both are written atomically (temp + rename).
- The cache is not versioned data: it can be deleted at any time; `prune` keeps only the keys the
  last successful build used (and only the current tokenizer's token folder).
- Counters (`hits`, `misses`) let refresh pipelines (issue 7) prove that no work was redone.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from bookft.ingest.documents import ExtractResult


class SourceCache:
    def __init__(self, root: Path, enabled: bool = True) -> None:
        self.root = root / "cache"
        self.enabled = enabled
        self.extract_hits = self.extract_misses = self.token_hits = self.token_misses = 0

    # --- extraction results ---------------------------------------------------------------------------
    def _x(self, key: str) -> Path:
        return self.root / "extract" / f"{key}.json"

    def has_extract(self, key: str) -> bool:
        return self.enabled and self._x(key).is_file()

    def load_extract(self, key: str) -> ExtractResult:
        return ExtractResult.from_json(json.loads(self._x(key).read_text(encoding="utf-8")))

    def save_extract(self, key: str, res: ExtractResult) -> None:
        p = self._x(key)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(res.to_json(), ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, p)

    # --- tokens ---------------------------------------------------------------------------------------
    def _t(self, fp: str, key: str) -> Path:
        return self.root / "tokens" / fp[:16] / f"{key}.npz"

    def load_tokens(self, fp: str, key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        p = self._t(fp, key)
        if not (self.enabled and p.is_file()):
            self.token_misses += 1
            return None
        try:
            with np.load(p) as z:
                out = (z["ids"], z["doc_offsets"], z["bounds"], z["bound_offsets"])
        except (OSError, ValueError, KeyError):
            self.token_misses += 1
            return None
        self.token_hits += 1
        return out

    def save_tokens(self, fp: str, key: str, ids, doc_offsets, bounds, bound_offsets) -> None:
        p = self._t(fp, key)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.stem}.tmp{os.getpid()}.npz")
        np.savez(tmp, ids=ids, doc_offsets=doc_offsets, bounds=bounds, bound_offsets=bound_offsets)
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
