"""Per-source caches in CORPUS_DIR/cache/, keyed by content hash, so unchanged sources cost nothing.

Design choices:
- `extract/KEY.text` + `extract/KEY.head.json`: the ExtractResult of one source (KEY = job_key: content
  hash + extractor version + options), split so that no phase needs a whole source in memory: the
  texts, UTF-8, one after the other, in `.text`; everything else (entries, stats, and per document its
  source, collection, kind, title, meta, sha256, byte offset and length) in `.head.json`. Dedup reads
  only heads; tokenize and write read one document's text at a time. The extraction worker writes the
  entry itself (`write_extract`) and sends back only the small head, so whole sources are never
  pickled between processes. `tokens/FP16/KEY.tok`: that source's token ids, per-document offsets and
  unit boundaries for tokenizer fingerprint FP. Everything is written atomically (temp + rename; the
  head last, so a head on disk means its text is complete).
- The cache is not versioned data: it can be deleted at any time; `prune` keeps only the keys the
  last successful build used (and only the current tokenizer's token folder). Entries of the older
  one-file format (`KEY.json`, texts inline) are not read and are pruned.
- Counters (`hits`, `misses`) let refresh pipelines prove that no work was redone.
- Speed of a refresh (most sources cached): tokens are one flat file per source (`KEY.tok`:
  magic, 4 lengths, 4 dtypes, then the raw arrays; ~50x faster to read than an .npz; old `.npz`
  entries are still read); heads are small and kept in memory for the build.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from pathlib import Path

import numpy as np

from bookft.ingest.documents import Document, Entry, ExtractResult, text_hash

_TOK_MAGIC = b"BFTOK1\0\0"
HEAD_FORMAT = 2


def extract_paths(root: Path, key: str) -> tuple[Path, Path]:
    """(head, text) files of one extraction cache entry under CORPUS_DIR/cache."""
    d = root / "extract"
    return d / f"{key}.head.json", d / f"{key}.text"


def write_extract(root: Path, key: str, res: ExtractResult) -> dict:
    """Write one source's ExtractResult as a cache entry (texts streamed, one document at a time);
    returns its head: the result without texts (what the build keeps in memory)."""
    head_p, text_p = extract_paths(root, key)
    head_p.parent.mkdir(parents=True, exist_ok=True)
    tmp = text_p.with_name(f".{key}.tmp{os.getpid()}.text")
    docs = []
    off = 0
    with open(tmp, "wb") as f:
        for d in res.documents:
            b = d.text.encode("utf-8", "surrogatepass")
            f.write(b)
            docs.append({"source": d.source, "collection": d.collection, "kind": d.kind, "title": d.title,
                         "meta": d.meta, "hash": text_hash(d.text), "offset": off, "nbytes": len(b),
                         "n_chars": len(d.text)})
            off += len(b)
    os.replace(tmp, text_p)
    head = {"format": HEAD_FORMAT, "source": res.source, "kind": res.kind, "hash": res.hash,
            "entries": [asdict(e) for e in res.entries], "stats": res.stats, "documents": docs,
            "secrets": res.secrets}
    tmp = head_p.with_name(f".{key}.tmp{os.getpid()}.json")
    tmp.write_text(json.dumps(head, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, head_p)
    return head


class SourceCache:
    def __init__(self, root: Path, enabled: bool = True) -> None:
        self.root = root / "cache"
        self.enabled = enabled
        self.extract_hits = self.extract_misses = self.token_hits = self.token_misses = 0
        self._heads: dict[str, dict] = {}

    # --- extraction results ---------------------------------------------------------------------------
    def has_extract(self, key: str) -> bool:
        """A complete, readable entry (an unreadable or foreign head counts as missing: extracted again)."""
        if not (self.enabled and extract_paths(self.root, key)[1].is_file()):
            return False
        try:
            self.head(key)
        except (OSError, ValueError):
            return False
        return True

    def head(self, key: str) -> dict:
        """The cached head of a source (entries, stats, documents without text); kept in memory."""
        h = self._heads.get(key)
        if h is None:
            h = json.loads(extract_paths(self.root, key)[0].read_text(encoding="utf-8"))
            if h.get("format") != HEAD_FORMAT:
                raise ValueError(f"{extract_paths(self.root, key)[0]}: unknown extraction cache format")
            self._heads[key] = h
        return h

    def save_extract(self, key: str, res: ExtractResult) -> dict:
        self._heads[key] = h = write_extract(self.root, key, res)
        return h

    def remember(self, key: str, head: dict) -> None:
        """A head written by an extraction worker."""
        self._heads[key] = head

    def documents(self, key: str, indices: Iterable[int] | None = None) -> Iterator[Document]:
        """The source's documents (all, or those at `indices`, ascending), read one text at a time."""
        docs = self.head(key)["documents"]
        with open(extract_paths(self.root, key)[1], "rb") as f:
            for k in range(len(docs)) if indices is None else indices:
                d = docs[k]
                f.seek(d["offset"])
                text = f.read(d["nbytes"]).decode("utf-8", "surrogatepass")
                yield Document(d["source"], d["collection"], d["kind"], text, d["title"], d["meta"])

    def load_extract(self, key: str) -> ExtractResult:
        """The whole ExtractResult (texts included) of a source: for tests and tools, not the build."""
        h = self.head(key)
        return ExtractResult(source=h["source"], kind=h["kind"], hash=h["hash"], documents=list(self.documents(key)),
                             entries=[Entry(**e) for e in h["entries"]], stats=h["stats"],
                             secrets=h.get("secrets", []))

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
            wanted = {n for k in keys for n in (f"{k}.head.json", f"{k}.text")}
            for f in xdir.iterdir():
                if f.name not in wanted:  # other keys, old-format KEY.json, temp files of killed runs
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
