"""`build_corpus(config)`: sources -> documents -> tokens -> packed sequences -> a published corpus version.

Design choices:
- Phases: resolve sources; extract (pure function per source, process pool of `workers`, results
  cached per content hash; in this process when the sources to extract hold under 16 MiB, where a
  pool's start would cost more than it saves); dedup (exact, by text sha256, first occurrence
  wins); tokenizer (given, reused from the previous version, or trained); tokenize (per source,
  cached per fingerprint); pack (pure plan over lengths); write (streamed Arrow) and publish
  atomically.
- Streaming: the extraction cache on disk is the document store between phases. A worker writes
  its source's entry itself and returns only the head (no texts), so whole sources never cross
  processes; dedup reads heads only (hashes computed at extraction); tokenize, train and write read
  one document's text at a time, and the encoder works in bounded batches. Tokens go to a flat int32
  file read back by slices (pread, not a memory map, so it never becomes resident), and Arrow
  batches go straight into the published shards. Memory is bounded by the largest single source
  (its extraction in a worker, its token arrays here), not by the corpus.
- Deterministic: results are assembled in source order, not completion order, so a rerun gives
  the same data hash.
- Refresh pipelines (issue 7) build on this: the manifest lists every source with its content hash
  (compare two manifests for added / changed / removed), `work` counts the extraction and
  tokenization actually done, and `build_corpus` only re-extracts sources whose hash changed.
  Locking two concurrent builds of one corpus is the pipeline's job.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from bookft.corpus.packing import pack
from bookft.corpus.store import FlatFile, check_corpus_dir, clean_stale, publish, staging_dir, write_json
from bookft.corpus.writer import write_version
from bookft.errors import IngestError
from bookft.ingest.cache import SourceCache, write_extract
from bookft.ingest.config import IngestConfig
from bookft.ingest.documents import Document
from bookft.ingest.neardup import NearDuplicates
from bookft.ingest.sources import content_hash, extract, job_key, resolve_sources
from bookft.ingest.tokenize import encode_source, fingerprint, load_tokenizer, special_ids, train_bpe, word_starts

LossWeightsFn = Callable[[Document, np.ndarray], "np.ndarray | None"]


class NullProgress:
    def start(self, phase: str, total: int | None = None, unit: str = "") -> None: ...
    def advance(self, n: int = 1, **counters) -> None: ...
    def end(self) -> None: ...


MAX_LISTED_SECRETS = 10_000  # findings listed in the manifest (all are counted)
IN_PROCESS_BYTES = 16 << 20  # extraction of less than this runs in this process: starting a worker pool
#                              (a fresh interpreter that imports the command line first) takes longer


def _small(paths: list[str], limit: int = IN_PROCESS_BYTES) -> bool:
    """The files at `paths` (folders walked, .git skipped) hold fewer than `limit` bytes in all."""
    total = 0
    for path in paths:
        p = Path(path)
        try:
            if p.is_file():
                total += p.stat().st_size
            else:
                for dirpath, dirs, names in os.walk(p):
                    dirs[:] = [d for d in dirs if d != ".git"]
                    for n in names:
                        try:
                            total += os.lstat(os.path.join(dirpath, n)).st_size
                        except OSError:
                            pass
                    if total >= limit:
                        return False
        except OSError:
            pass
        if total >= limit:
            return False
    return True


def _pool_map(fn, args: list, workers: int):
    """Yield (index, fn(*args[index])) in completion order; in this process when workers == 0 or one job."""
    if workers <= 0 or len(args) <= 1:
        for i, a in enumerate(args):
            yield i, fn(*a)
        return
    ctx = multiprocessing.get_context("forkserver" if os.name == "posix" else "spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as ex:
        futures = {ex.submit(fn, *a): i for i, a in enumerate(args)}
        for fut in as_completed(futures):
            yield futures[fut], fut.result()


def _pool_extract(jobs, workers, progress):
    """Yield (index, ExtractResult) for jobs (the results travel back whole: for small jobs and benchmarks)."""
    yield from _pool_map(extract, [(job,) for job in jobs], workers)


def _extract_to_cache(job, cache_root: Path, key: str, chash: str) -> dict:
    """Worker: extract one source, write it to the extraction cache, return only its head (no texts)."""
    res = extract(job)
    res.hash = chash
    return write_extract(cache_root, key, res)


def _previous_tokenizer(root: Path, cfg: IngestConfig):
    """Reuse the tokenizer trained for the current version when its settings match (stable token cache)."""
    cur = root / "current"
    try:
        man = json.loads((cur / "manifest.json").read_text())
        t = man["tokenizer"]
        if t.get("origin") == "trained" and t.get("trained_vocab_size") == cfg.tokenizer.vocab_size:
            return load_tokenizer(cur / "tokenizer" / "tokenizer.json")
    except (OSError, ValueError, KeyError, IngestError):
        pass
    return None


def build_corpus(cfg: IngestConfig, progress=None, *, sources: list[tuple] | None = None,
                 loss_weights: LossWeightsFn | None = None,
                 before_publish: Callable[[Path, dict], bool] | None = None) -> dict:
    """Build and publish a new corpus version in `cfg.out`; returns its manifest. Raises IngestError if
    nothing could be ingested.

    sources: [(path, kind, collection)] or [(path, kind, collection, pdf_password)] besides cfg.sources.

    loss_weights(document, token_ids int32 [n]) -> float32 [n] or None (= all 1.0): the hook for
    synthesized retrieval examples (issue 9); when given, sequences carry a `loss_weights` column.

    before_publish(staged_dir, manifest) -> bool: called when the new version is complete in its staging
    folder, before the rename (refresh pipelines validate here, issue 7). False discards it (the returned
    manifest then has `path` None); an exception discards it and propagates.
    """
    progress = progress or NullProgress()
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    cpu: dict[str, float] = {}  # CPU seconds of this process per phase (extraction workers not included)
    root = Path(cfg.out)
    check_corpus_dir(root)
    root.mkdir(parents=True, exist_ok=True)
    clean_stale(root)
    cache = SourceCache(root)

    specs = list(sources or [])
    if cfg.sample is not None:
        from bookft.ingest.sample import generate_sample

        specs = generate_sample(root / "sample-sources", cfg.sample) + specs
    specs += [(s.path, s.kind, s.collection, s.password()) for s in cfg.sources]  # password: from the environment
    if not specs:
        raise IngestError("no sources given: name files or folders, or a corpus YAML with `sources:`")
    jobs, bad = resolve_sources(specs, cfg.extract, cfg.limits)

    # --- extract -----------------------------------------------------------------------------------------
    t, c = time.perf_counter(), time.process_time()
    keys = []
    hashes = []
    for job in jobs:
        h = content_hash(job)
        hashes.append(h)
        keys.append(job_key(job, h))
    todo = [i for i, k in enumerate(keys) if not cache.has_extract(k)]
    cache.extract_hits = len(jobs) - len(todo)
    cache.extract_misses = len(todo)
    progress.start("extract", len(jobs), "sources")
    progress.advance(len(jobs) - len(todo))
    workers = cfg.workers if not _small([jobs[i].path for i in todo]) else 0
    for j, head in _pool_map(_extract_to_cache, [(jobs[i], cache.root, keys[i], hashes[i]) for i in todo],
                             workers):
        cache.remember(keys[todo[j]], head)
        progress.advance(1, pages=head["stats"].get("pages", 0), chars=sum(d["n_chars"] for d in head["documents"]))
    progress.end()
    heads = [cache.head(k) for k in keys]
    timings["extract"] = time.perf_counter() - t
    cpu["extract"] = time.process_time() - c

    entries: list[dict] = [asdict(e) for e in bad]
    stats_total: dict[str, int] = defaultdict(int)
    secrets: list[dict] = []  # redacted secrets: source, line, kind (bookft/ingest/secrets.py)
    secrets_per_source: dict[str, int] = {}
    for i, job in enumerate(jobs):
        s = heads[i]
        for e in s["entries"]:
            d = dict(e)
            if d["source"] == job.path:
                d["hash"] = hashes[i]
            entries.append(d)
        for k, v in s["stats"].items():
            stats_total[k] += v
        if s.get("secrets"):
            secrets_per_source[job.path] = len(s["secrets"])
            secrets.extend(s["secrets"][:MAX_LISTED_SECRETS - len(secrets)])

    # --- dedup -------------------------------------------------------------------------------------------
    t, c = time.perf_counter(), time.process_time()
    progress.start("dedup", len(jobs), "sources")
    seen: dict[str, str] = {}
    keep: dict[int, list[int]] = {}
    duplicates: list[dict] = []
    near = NearDuplicates(cfg.near_dedup) if cfg.near_dedup.enabled else None
    n_near = 0
    for i in range(len(jobs)):
        if not heads[i]["documents"]:
            continue
        keep[i] = []
        texts = cache.documents(keys[i]) if near is not None else None
        for k, d in enumerate(heads[i]["documents"]):
            text = next(texts).text if texts is not None else None
            h = d["hash"]
            if cfg.dedup and h in seen:
                duplicates.append({"source": d["source"], "duplicate_of": seen[h]})
                continue
            if near is not None:
                hit = near.check_add(text, d["source"])
                if hit is not None:
                    duplicates.append({"source": d["source"], "near_duplicate_of": hit[0], "jaccard": round(hit[1], 4)})
                    n_near += 1
                    continue
            seen[h] = d["source"]
            keep[i].append(k)
        progress.advance(1)
    del near
    progress.end()
    n_docs = sum(len(v) for v in keep.values())
    timings["dedup"] = time.perf_counter() - t
    cpu["dedup"] = time.process_time() - c
    if n_docs == 0:
        reasons = "; ".join(f"{e['source']}: {e['reason']}" for e in entries if e["status"] != "ingested")[:2000]
        raise IngestError(f"nothing could be ingested from {len(specs)} source(s): {reasons or 'no documents'}")

    def kept_docs():
        """(source index, Document) of every kept document, in order, one text in memory at a time."""
        for i in sorted(keep):
            for d in cache.documents(keys[i], keep[i]):
                yield i, d

    # --- tokenizer ---------------------------------------------------------------------------------------
    t, c = time.perf_counter(), time.process_time()
    tc = cfg.tokenizer
    origin = "trained"
    tok = None
    if tc.path:
        tok = load_tokenizer(tc.path)
        origin = str(tc.path)
    elif not tc.retrain:
        tok = _previous_tokenizer(root, cfg)
    if tok is None:
        progress.start("train tokenizer", None, "")

        def sample_texts():
            budget = tc.train_chars
            for _, d in kept_docs():
                if budget <= 0:
                    return
                yield d.text[:budget]
                budget -= len(d.text)

        tok = train_bpe(sample_texts(), tc.vocab_size, tc.min_frequency)
        progress.end()
    fp = fingerprint(tok)
    eos_id, pad_id = special_ids(tok, tc.path)
    timings["tokenizer"] = time.perf_counter() - t
    cpu["tokenizer"] = time.process_time() - c

    # --- tokenize ----------------------------------------------------------------------------------------
    t, c = time.perf_counter(), time.process_time()
    staged = staging_dir(root)
    tok_file = staged / ".tokens.bin"
    w_file = staged / ".weights.bin"
    w_out = open(w_file, "wb") if loss_weights is not None else None
    doc_off = [0]
    doc_coll: list[int] = []
    bounds_parts: list[np.ndarray] = []
    bound_off = [0]
    coll_ids: dict[str, int] = {}
    prev_coll = prev_key = None
    eos = eos_id if cfg.packing.append_eos else None
    progress.start("tokenize", len(keep), "sources")
    n_tok_total = 0
    with open(tok_file, "wb") as out:
        for i in sorted(keep):
            if not keep[i]:  # every document of this source was a duplicate
                continue
            cached = cache.load_tokens(fp, keys[i] + ("" if eos is not None else "-noeos"))
            if cached is None:
                cached = encode_source(tok, (d.text for d in cache.documents(keys[i])), eos)
                cache.save_tokens(fp, keys[i] + ("" if eos is not None else "-noeos"), *cached)
            ids, offs, bnds, boffs = cached
            docs_i = heads[i]["documents"]
            full = cache.documents(keys[i], keep[i]) if w_out is not None else None
            for k in keep[i]:
                coll = docs_i[k]["collection"]
                name = f"{i}:{coll}" if coll != prev_coll else prev_key
                prev_coll, prev_key = coll, name
                coll_ids.setdefault(name, len(coll_ids))
                seg = ids[offs[k]:offs[k + 1]]
                out.write(seg.tobytes())
                if full is not None:
                    doc = next(full)
                    wk = loss_weights(doc, seg)
                    wk = np.ones(len(seg), np.float32) if wk is None else np.asarray(wk, np.float32)
                    if wk.shape != seg.shape:
                        raise IngestError(f"loss_weights for {doc.source}: expected shape "
                                          f"{seg.shape}, got {wk.shape}")
                    w_out.write(wk.tobytes())
                doc_off.append(doc_off[-1] + len(seg))
                doc_coll.append(coll_ids[name])
                bounds_parts.append(bnds[boffs[k]:boffs[k + 1]])
                bound_off.append(bound_off[-1] + len(bounds_parts[-1]))
                n_tok_total += len(seg)
            progress.advance(1, tokens=int(offs[-1]))
    progress.end()
    if w_out is not None:
        w_out.close()
    timings["tokenize"] = time.perf_counter() - t
    cpu["tokenize"] = time.process_time() - c

    # --- pack --------------------------------------------------------------------------------------------
    t, c = time.perf_counter(), time.process_time()
    progress.start("pack", None, "")
    tokens = FlatFile(tok_file, np.int32)  # read by slices: the token file never becomes resident
    doc_off_a = np.array(doc_off, dtype=np.int64)
    bounds_flat = np.concatenate(bounds_parts) if bounds_parts else np.zeros(0, np.int64)
    bound_off_a = np.array(bound_off, dtype=np.int64)
    ws = word_starts(tok)

    def word_cut(d: int, lo: int, hi: int) -> int | None:
        a = max(lo + 1, hi - 4096)
        seg = tokens[doc_off_a[d] + a: doc_off_a[d] + hi + 1]
        seg = seg[seg < len(ws)]
        hit = np.nonzero(ws[seg])[0] if len(seg) else []
        return a + int(hit[-1]) if len(hit) else None

    seq_len = cfg.packing.seq_len
    plan = pack(np.diff(doc_off_a), doc_coll, seq_len,
                boundaries=lambda d: bounds_flat[bound_off_a[d]:bound_off_a[d + 1]],
                slack=int(cfg.packing.split_slack * seq_len), word_cut=word_cut)
    progress.end()
    timings["pack"] = time.perf_counter() - t
    cpu["pack"] = time.process_time() - c

    # --- write + publish ---------------------------------------------------------------------------------
    t, c = time.perf_counter(), time.process_time()
    progress.start("write", len(plan.sequences), "sequences")
    weights = None
    if loss_weights is not None:
        wmm = FlatFile(w_file, np.float32)
        weights = lambda d, s, e: wmm[doc_off_a[d] + s: doc_off_a[d] + e]
    info = write_version(staged, plan, tokens, doc_off_a, doc_coll, kept_docs(), cfg.packing.segments,
                         pad_id, progress, weights=weights)
    if loss_weights is not None:
        wmm.close()
        w_file.unlink()
    progress.end()
    tokens.close()
    tok_file.unlink()
    (staged / "tokenizer").mkdir()
    tok.save(str(staged / "tokenizer" / "tokenizer.json"))
    if tc.path and Path(tc.path).is_dir():
        for extra in ("tokenizer_config.json", "special_tokens_map.json"):
            if (Path(tc.path) / extra).is_file():
                (staged / "tokenizer" / extra).write_bytes((Path(tc.path) / extra).read_bytes())
    timings["write"] = time.perf_counter() - t
    cpu["write"] = time.process_time() - c

    status = defaultdict(int)
    for e in entries:
        status[e["status"]] += 1
    capacity = len(plan.sequences) * seq_len
    manifest = {
        "format": "bookft-corpus/1",
        "name": cfg.name,
        "version": None,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "seq_len": seq_len,
        "segments": cfg.packing.segments,
        "tokenizer": {"fingerprint": fp, "vocab_size": tok.get_vocab_size(with_added_tokens=True),
                      "eos_id": eos_id, "pad_id": pad_id, "origin": origin,
                      "trained_vocab_size": tc.vocab_size if origin == "trained" else None,
                      "eos_appended": eos is not None},
        "counts": {"sources": len(specs), "jobs": len(jobs), "entries": dict(status),
                   "documents": n_docs, "duplicates": len(duplicates) - n_near, "near_duplicates": n_near,
                   "tokens": n_tok_total,
                   "sequences": len(plan.sequences), "split_documents": plan.n_split_docs,
                   "padding_tokens": capacity - n_tok_total,
                   "fill": round(n_tok_total / capacity, 6) if capacity else 0.0,
                   "chars": info["chars"], "pdf_pages": stats_total.get("pages", 0),
                   "pdf_empty_pages": stats_total.get("empty_pages", 0),
                   "secrets_redacted": sum(secrets_per_source.values())},
        "secrets": {"per_source": secrets_per_source, "findings": secrets,
                    "findings_not_listed": sum(secrets_per_source.values()) - len(secrets),
                    "scanned": {"code": cfg.extract.secrets.code, "legal": cfg.extract.secrets.legal}},
        "per_kind": info["per_kind"],
        "data_hash": info["data_hash"],
        "loss_weights": loss_weights is not None,
        "work": {**cache.counters(), "documents_extracted": sum(len(heads[i]["documents"]) for i in todo),
                 "sources_unchanged": len(jobs) - len(todo)},
        "timings": {k: round(v, 3) for k, v in timings.items()},
        "cpu_seconds": {k: round(v, 3) for k, v in cpu.items()},
        "config": json.loads(json.dumps(asdict(cfg), default=str)),
        "sources": entries,
        "source_hashes": {job.path: hashes[i] for i, job in enumerate(jobs)},  # per job, for refresh diffs
        "duplicates": duplicates,
    }
    n = max([int(x) for x in os.listdir(root / "versions") if x.isdigit()], default=0) + 1
    manifest["version"] = n
    manifest["timings"]["total"] = round(time.perf_counter() - t0, 3)
    write_json(staged / "manifest.json", manifest)
    if before_publish is not None:
        try:
            keep_it = before_publish(staged, manifest)
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)
            raise
        if not keep_it:
            shutil.rmtree(staged, ignore_errors=True)
            manifest["path"] = None
            return manifest
    final = publish(root, staged, n)
    cache.prune(set(keys) | {k + "-noeos" for k in keys}, fp)
    manifest["path"] = str(final)
    return manifest

