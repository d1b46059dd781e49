"""`build_corpus(config)`: sources -> documents -> tokens -> packed sequences -> a published corpus version.

Design choices:
- Phases, each a function over one build state (`_Build`, what the phases hand on): resolve
  sources; extract (pure function per source, process pool of `workers`, results cached per
  content hash; in this process when the sources to extract hold under 16 MiB, where a pool's
  start would cost more than it saves; or, with `engine: ray`, the same jobs on Ray Data:
  ingest/ray_engine.py; the tasks are ingest/jobs.py's); dedup (exact, by text sha256, first occurrence wins);
  tokenizer (given, reused from the previous version, or trained); tokenize (per source, cached
  per fingerprint); pack (pure plan over lengths); write (streamed Arrow) and publish atomically.
- Streaming: the extraction cache on disk is the document store between phases. A worker writes
  its source's entry itself and returns only the head (no texts), so whole sources never cross
  processes; dedup reads heads only (hashes computed at extraction); tokenize, train and write read
  one document's text at a time, and the encoder works in bounded batches. Tokens go to a flat int32
  file read back by slices (pread, not a memory map, so it never becomes resident), and Arrow
  batches go straight into the published shards. Memory is bounded by the largest single source
  (its extraction in a worker, its token arrays here), not by the corpus.
- One big source uses every core (issue 18): a PDF of more than `extract.pdf_pages_per_job` pages
  (default 100) is read as near-equal page ranges, each its own task in the same pool (local or
  Ray), whenever the pool has more than one worker (even under 16 MiB: the split is the point).
  Locally this process reads ranges too, from the end of the queue, starting while the pool's
  forkserver is still importing (`_pool_map(local=...)`), and a given tokenizer loads in a thread
  once the tasks are handed out (`_Build.start_tokenizer_load`).
  pdfium reads each range exactly as it reads the whole file; this process puts the pages back in
  order and runs the document-level steps on all of them (running headers/footers are found over
  every page; paragraphs run over page breaks), so the document, its cache entry (one per source,
  whole, under the same key: the knob is not part of it) and the corpus are those of one job.
  A file pdfium does not open when planning (not a PDF, encrypted without its password, damaged)
  is never split; a range that fails (the file changed under us) sends the file to one whole-source
  job, so every failure reads exactly as without splitting. The split is planned only for PDFs of
  at least 512 bytes per threshold page (smaller files cannot have that many pages), and not with
  OCR or the pypdf backend (whole files there).
- Deterministic: results are assembled in source order, not completion order, so a rerun gives
  the same data hash.
- Refresh pipelines (issue 7) build on this: the manifest lists every source with its content hash
  (compare two manifests for added / changed / removed), `work` counts the extraction and
  tokenization actually done, and `build_corpus` only re-extracts sources whose hash changed.
  Locking two concurrent builds of one corpus is the pipeline's job.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from bookft.corpus.packing import pack
from bookft.corpus.store import FlatFile, check_corpus_dir, clean_stale, publish, staging_dir, write_json
from bookft.corpus.writer import write_version
from bookft.errors import IngestError
from bookft.ingest.cache import SourceCache
from bookft.ingest.config import IngestConfig
from bookft.ingest.documents import Document
from bookft.ingest.examples import MARK, SYNTHESIZED
from bookft.ingest.jobs import extract_to_cache, run_task
from bookft.ingest.manifest import build_manifest
from bookft.ingest.mix import mixing, plan_mix
from bookft.ingest.neardup import NearDuplicates
from bookft.ingest.pdf import pages_text, pdf_result, pdf_split_plan, text_document
from bookft.ingest.pool import IN_PROCESS_BYTES, SPLIT_MIN_BYTES_PER_PAGE
from bookft.ingest.pool import in_thread as _in_thread
from bookft.ingest.pool import pool_map as _pool_map
from bookft.ingest.sources import content_hash, extract, job_key, resolve_sources
from bookft.ingest.tokenize import encode_source, fingerprint, load_tokenizer, special_ids, train_bpe, word_starts

LossWeightsFn = Callable[[Document, np.ndarray], "np.ndarray | None"]


class NullProgress:
    def start(self, phase: str, total: int | None = None, unit: str = "") -> None: ...
    def advance(self, n: int = 1, **counters) -> None: ...
    def end(self) -> None: ...


MAX_LISTED_SECRETS = 10_000  # findings listed in the manifest (all are counted)
# IN_PROCESS_BYTES (ingest/pool.py): extraction of less than this runs in this process: starting a worker
# pool (a fresh interpreter that imports the command line first) takes longer.


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


def _pool_extract(jobs, workers, progress):
    """Yield (index, ExtractResult) for jobs (the results travel back whole: for small jobs and benchmarks)."""
    yield from _pool_map(extract, [(job,) for job in jobs], workers)


_extract_to_cache = extract_to_cache  # the whole-source worker (bookft/ingest/jobs.py)
# SPLIT_MIN_BYTES_PER_PAGE (ingest/pool.py): a PDF smaller than this per page of the split threshold is not
# opened to count its pages (it cannot have that many): no planning cost for small files.


def _page_ranges(n_pages: int, per_job: int) -> list[tuple[int, int]]:
    """[start, stop) ranges of near-equal size, at most `per_job` pages each, covering 0..n_pages."""
    k = -(-n_pages // per_job)
    cuts = [n_pages * r // k for r in range(k + 1)]
    return list(zip(cuts[:-1], cuts[1:], strict=True))


def _plan_splits(b: _Build) -> dict[int, tuple[list[tuple[int, int]], dict]]:
    """Jobs to extract as page ranges: job index -> (ranges, pdfium meta). A PDF of more than
    extract.pdf_pages_per_job pages that pdfium opens, when the pool has more than one worker (or Ray);
    not with OCR or the pypdf backend (the per-document OCR note, pypdf's own reading: whole files)."""
    cfg = b.cfg
    per_job = cfg.extract.pdf_pages_per_job
    if per_job <= 0 or (cfg.engine != "ray" and cfg.workers < 2):
        return {}
    out = {}
    for i in b.todo:
        job = b.jobs[i]
        if job.kind != "pdf" or job.extract.pdf_backend != "pdfium" or job.extract.ocr.enabled:
            continue
        try:
            size = os.stat(job.path).st_size
        except OSError:
            continue
        if size < per_job * SPLIT_MIN_BYTES_PER_PAGE or size > job.limits.max_file_mb * (1 << 20):
            continue
        plan = pdf_split_plan(job.path, job.pdf_password)
        if plan is not None and plan[0] > per_job:
            out[i] = (_page_ranges(plan[0], per_job), plan[1])
    return out


def _assemble_pdf(b: _Build, i: int, ranges: list[dict], meta: dict) -> dict:
    """A split PDF's ranges, in page order -> the same cache entry (and head) as extracting it whole."""
    job = b.jobs[i]
    source = str(Path(job.path))  # as extract() names it
    text, m = pages_text([p for rng in ranges for p in rng["pages"]], meta, "pdfium",
                         [c for rng in ranges for c in rng["chunks"]])
    res = pdf_result(source, *text_document(text, m, source, job.collection))
    res.hash = b.hashes[i]
    return b.cache.save_extract(b.keys[i], res)


def _map_tasks(b: _Build, tasks: list[tuple], workers: int):
    """Yield (index, run_task(tasks[index])) on the configured engine, in completion order."""
    if b.cfg.engine == "ray":  # the same tasks as Ray Data tasks (bookft/ingest/ray_engine.py)
        from bookft.ingest.ray_engine import ray_map

        b.start_tokenizer_load()
        return ray_map(run_task, [(t,) for t in tasks], b.cfg.workers, b.cfg.ray_address)
    return _pool_map(run_task, [(t,) for t in tasks], workers, local=lambda i: tasks[i][0] == "pages",
                     on_start=b.start_tokenizer_load)


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


@dataclass
class _Build:
    """What the phases of one build pass on: sources, their extraction heads, kept documents, the
    tokenizer, the token files, the packing plan. Each phase reads what earlier ones set."""

    cfg: IngestConfig
    progress: object
    root: Path
    cache: SourceCache
    loss_weights: LossWeightsFn | None
    fixed_tokenizer: tuple | None = None  # (tokenizer, origin) used as it is (build_pass's `tokenizer`)
    timings: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds of this process (workers not included)
    specs: list = field(default_factory=list)
    labels: list[str] = field(default_factory=list)  # each spec's source name (the mix's and the manifest's)
    unmixed: list[str] = field(default_factory=list)  # names of sources packed once each, outside the mix
    jobs: list = field(default_factory=list)
    job_label: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    hashes: list[str] = field(default_factory=list)
    todo: list[int] = field(default_factory=list)  # indices of the jobs extracted this time
    page_ranges: int = 0  # page-range jobs run for split PDFs (extract.pdf_pages_per_job)
    heads: list[dict] = field(default_factory=list)
    entries: list[dict] = field(default_factory=list)
    stats_total: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    secrets: list[dict] = field(default_factory=list)  # redacted secrets: source, line, kind (ingest/secrets.py)
    secrets_per_source: dict[str, int] = field(default_factory=dict)
    keep: dict[int, list[int]] = field(default_factory=dict)  # source index -> kept document indices
    duplicates: list[dict] = field(default_factory=list)
    n_near: int = 0
    n_docs: int = 0
    tok: object = None
    given_tokenizer: Future | None = None  # tokenizer.path, loading in a thread since extraction began
    origin: str = "trained"
    fp: str = ""
    eos_id: int | None = None
    pad_id: int | None = None
    eos: int | None = None
    staged: Path | None = None
    tok_file: Path | None = None
    w_file: Path | None = None
    doc_off: list[int] = field(default_factory=lambda: [0])
    doc_coll: list[int] = field(default_factory=list)
    doc_label: list[str] = field(default_factory=list)  # each kept document's source name
    mix: dict | None = None  # the mix record (ingest/mix.py) when the build mixes
    bounds_parts: list[np.ndarray] = field(default_factory=list)
    bound_off: list[int] = field(default_factory=lambda: [0])
    n_tok_total: int = 0
    plan: object = None
    info: dict = field(default_factory=dict)

    def start_tokenizer_load(self) -> None:
        """A given tokenizer (tokenizer.path) loads in a thread from here on (about 0.2 s of this process
        for a 49k vocabulary, GIL held): called once the extraction tasks are handed out, so the pool
        does not wait for it."""
        if self.cfg.tokenizer.path and self.given_tokenizer is None:
            self.given_tokenizer = _in_thread(load_tokenizer, self.cfg.tokenizer.path)

    @contextmanager
    def phase(self, name: str):
        t, c = time.perf_counter(), time.process_time()
        yield
        self.timings[name] = time.perf_counter() - t
        self.cpu[name] = time.process_time() - c

    def kept_docs(self):
        """(source index, Document) of every kept document, in order, one text in memory at a time."""
        for i in sorted(self.keep):
            for d in self.cache.documents(self.keys[i], self.keep[i]):
                yield i, d


def _resolve(b: _Build, sources, unmixed) -> None:
    cfg = b.cfg
    specs = list(sources or [])
    b.unmixed = [str(s[0]) for s in unmixed or []]
    specs += list(unmixed or [])  # before cfg.sources, where the retrieval build has always put them
    if cfg.sample is not None:
        from bookft.ingest.sample import generate_sample

        specs = generate_sample(b.root / "sample-sources", cfg.sample) + specs
    b.labels = [str(s[0]) for s in specs] + [s.label for s in cfg.sources]
    specs += [(s.path, s.kind, s.collection, s.password()) for s in cfg.sources]  # password: from the environment
    if not specs:
        raise IngestError("no sources given: name files or folders, or a corpus YAML with `sources:`")
    if mixing(cfg) and any(s.weight is not None for s in cfg.sources) and \
            len(specs) > len(cfg.sources) + len(b.unmixed):
        raise IngestError("the corpus YAML gives its sources weights, but sources named on the command line "
                          "have none: list them under `sources:` with a weight")
    b.specs = specs
    for spec, label in zip(specs, b.labels, strict=True):  # one spec at a time: each job knows its source
        jobs, bad = resolve_sources([spec], cfg.extract, cfg.limits)
        b.jobs += jobs
        b.job_label += [label] * len(jobs)
        b.entries += [asdict(e) for e in bad]


def _extract(b: _Build) -> None:
    """Extract every source whose content changed (a pool of workers writes the cache itself)."""
    cache, jobs, progress = b.cache, b.jobs, b.progress
    for job in jobs:
        h = content_hash(job)
        b.hashes.append(h)
        b.keys.append(job_key(job, h))
    b.todo = todo = [i for i, k in enumerate(b.keys) if not cache.has_extract(k)]
    cache.extract_hits = len(jobs) - len(todo)
    cache.extract_misses = len(todo)
    progress.start("extract", len(jobs), "sources")
    progress.advance(len(jobs) - len(todo))
    splits = _plan_splits(b)
    b.page_ranges = sum(len(ranges) for ranges, _ in splits.values())
    tasks, owner = [], []  # owner: (job index, range number), or (job index, None) for a whole source
    for i, (ranges, _) in splits.items():  # the big ones first: the pool balances the rest around them
        for r, (lo, hi) in enumerate(ranges):
            tasks.append(("pages", jobs[i].path, lo, hi, jobs[i].pdf_password))
            owner.append((i, r))
    for i in todo:
        if i not in splits:
            tasks.append(("source", jobs[i], cache.root, b.keys[i], b.hashes[i]))
            owner.append((i, None))
    workers = b.cfg.workers if splits or not _small([jobs[i].path for i in todo]) else 0
    parts: dict[int, list] = {i: [None] * len(ranges) for i, (ranges, _) in splits.items()}  # range outputs
    whole: list[int] = []  # split sources with a failed range: extracted again, whole

    def done(i: int, head: dict) -> None:
        cache.remember(b.keys[i], head)
        progress.advance(1, pages=head["stats"].get("pages", 0), chars=sum(d["n_chars"] for d in head["documents"]))

    for t, out in _map_tasks(b, tasks, workers):
        i, r = owner[t]
        if r is None:
            done(i, out)
        elif i in whole:
            continue
        elif "error" in out:
            whole.append(i)
        else:
            parts[i][r] = out
            if all(p is not None for p in parts[i]):
                done(i, _assemble_pdf(b, i, parts.pop(i), splits[i][1]))
    retry = [("source", jobs[i], cache.root, b.keys[i], b.hashes[i]) for i in whole]
    for t, head in (_map_tasks(b, retry, workers) if retry else ()):  # no second map (a Ray job) for none
        done(whole[t], head)
    progress.end()
    b.heads = [cache.head(k) for k in b.keys]


def _collect_entries(b: _Build) -> None:
    """The manifest's per-source entries, extraction stats and secret findings, in source order."""
    for i, job in enumerate(b.jobs):
        s = b.heads[i]
        for e in s["entries"]:
            d = dict(e)
            if d["source"] == job.path:
                d["hash"] = b.hashes[i]
            b.entries.append(d)
        for k, v in s["stats"].items():
            b.stats_total[k] += v
        if s.get("secrets"):
            b.secrets_per_source[job.path] = len(s["secrets"])
            b.secrets.extend(s["secrets"][:MAX_LISTED_SECRETS - len(b.secrets)])


def _dedup(b: _Build) -> None:
    """Exact (text sha256, first occurrence wins) and, when enabled, near-duplicate removal."""
    cfg, progress = b.cfg, b.progress
    progress.start("dedup", len(b.jobs), "sources")
    seen: dict[str, str] = {}
    near = NearDuplicates(cfg.near_dedup) if cfg.near_dedup.enabled else None
    for i in range(len(b.jobs)):
        if not b.heads[i]["documents"]:
            continue
        b.keep[i] = []
        texts = b.cache.documents(b.keys[i]) if near is not None else None
        for k, d in enumerate(b.heads[i]["documents"]):
            text = next(texts).text if texts is not None else None
            h = d["hash"]
            if cfg.dedup and h in seen:
                b.duplicates.append({"source": d["source"], "duplicate_of": seen[h]})
                continue
            if near is not None:
                hit = near.check_add(text, d["source"])
                if hit is not None:
                    b.duplicates.append({"source": d["source"], "near_duplicate_of": hit[0],
                                         "jaccard": round(hit[1], 4)})
                    b.n_near += 1
                    continue
            seen[h] = d["source"]
            b.keep[i].append(k)
        progress.advance(1)
    del near
    progress.end()
    b.n_docs = sum(len(v) for v in b.keep.values())


def _tokenizer(b: _Build) -> None:
    """The tokenizer: given (tokenizer.path), reused from the current version, or trained on the kept text."""
    tc = b.cfg.tokenizer
    tok = None
    if b.fixed_tokenizer is not None:
        tok, b.origin = b.fixed_tokenizer
    elif tc.path:
        tok = b.given_tokenizer.result() if b.given_tokenizer is not None else load_tokenizer(tc.path)
        b.origin = str(tc.path)
    elif not tc.retrain:
        tok = _previous_tokenizer(b.root, b.cfg)
    if tok is None:
        b.progress.start("train tokenizer", None, "")

        def sample_texts():
            budget = tc.train_chars
            for _, d in b.kept_docs():
                if budget <= 0:
                    return
                yield d.text[:budget]
                budget -= len(d.text)

        tok = train_bpe(sample_texts(), tc.vocab_size, tc.min_frequency)
        b.progress.end()
    b.tok, b.fp = tok, fingerprint(tok)
    b.eos_id, b.pad_id = special_ids(tok, tc.path)


def _tokenize(b: _Build) -> None:
    """Kept documents' tokens (cached per source and tokenizer) into one flat int32 file, with their
    offsets, collections and split boundaries (and loss weights when the hook is given)."""
    cache, heads, keep, loss_weights = b.cache, b.heads, b.keep, b.loss_weights
    b.staged = staging_dir(b.root)
    b.tok_file = b.staged / ".tokens.bin"
    b.w_file = b.staged / ".weights.bin"
    w_out = open(b.w_file, "wb") if loss_weights is not None else None
    coll_ids: dict[str, int] = {}
    prev_coll = prev_key = None
    b.eos = eos = b.eos_id if b.cfg.packing.append_eos else None
    b.progress.start("tokenize", len(keep), "sources")
    with open(b.tok_file, "wb") as out:
        for i in sorted(keep):
            if not keep[i]:  # every document of this source was a duplicate
                continue
            cached = cache.load_tokens(b.fp, b.keys[i] + ("" if eos is not None else "-noeos"))
            if cached is None:
                cached = encode_source(b.tok, (d.text for d in cache.documents(b.keys[i])), eos)
                cache.save_tokens(b.fp, b.keys[i] + ("" if eos is not None else "-noeos"), *cached)
            ids, offs, bnds, boffs = cached
            docs_i = heads[i]["documents"]
            full = cache.documents(b.keys[i], keep[i]) if w_out is not None else None
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
                b.doc_off.append(b.doc_off[-1] + len(seg))
                b.doc_coll.append(coll_ids[name])
                b.doc_label.append(b.job_label[i])
                b.bounds_parts.append(bnds[boffs[k]:boffs[k + 1]])
                b.bound_off.append(b.bound_off[-1] + len(b.bounds_parts[-1]))
                b.n_tok_total += len(seg)
            b.progress.advance(1, tokens=int(offs[-1]))
    b.progress.end()
    if w_out is not None:
        w_out.close()


def _pack(b: _Build, tokens: FlatFile, doc_off_a: np.ndarray) -> None:
    """The packing plan (corpus/packing.py, pure), cutting split documents at word starts."""
    b.progress.start("pack", None, "")
    bounds_flat = np.concatenate(b.bounds_parts) if b.bounds_parts else np.zeros(0, np.int64)
    bound_off_a = np.array(b.bound_off, dtype=np.int64)
    ws = word_starts(b.tok)

    def word_cut(d: int, lo: int, hi: int) -> int | None:
        a = max(lo + 1, hi - 4096)
        seg = tokens[doc_off_a[d] + a: doc_off_a[d] + hi + 1]
        seg = seg[seg < len(ws)]
        hit = np.nonzero(ws[seg])[0] if len(seg) else []
        return a + int(hit[-1]) if len(hit) else None

    seq_len = b.cfg.packing.seq_len
    bounds = lambda d: bounds_flat[bound_off_a[d]:bound_off_a[d + 1]]
    slack = int(b.cfg.packing.split_slack * seq_len)
    if mixing(b.cfg):
        b.plan, b.mix = plan_mix(b.cfg, b.labels, b.doc_label, np.diff(doc_off_a), b.doc_coll,
                                 boundaries=bounds, slack=slack, word_cut=word_cut, unmixed=set(b.unmixed))
    else:
        b.plan = pack(np.diff(doc_off_a), b.doc_coll, seq_len, boundaries=bounds, slack=slack, word_cut=word_cut)
    b.progress.end()


def manifest_kind(doc: Document) -> str:
    """The kind a document is counted under in the manifest: a synthesized training example is a kind
    of its own (SYNTHESIZED), whatever file format carried it."""
    return SYNTHESIZED if MARK in (doc.meta or {}) else doc.kind


def _write(b: _Build, tokens: FlatFile, doc_off_a: np.ndarray) -> None:
    """The sequences (streamed Arrow shards) and the tokenizer into the staging folder."""
    staged, tc = b.staged, b.cfg.tokenizer
    b.progress.start("write", len(b.plan.sequences), "sequences")
    weights = None
    if b.loss_weights is not None:
        wmm = FlatFile(b.w_file, np.float32)
        weights = lambda d, s, e: wmm[doc_off_a[d] + s: doc_off_a[d] + e]
    b.info = write_version(staged, b.plan, tokens, doc_off_a, b.doc_coll, b.kept_docs(), b.cfg.packing.segments,
                           b.pad_id, b.progress, weights=weights, kind_of=manifest_kind)
    if b.loss_weights is not None:
        wmm.close()
        b.w_file.unlink()
    b.progress.end()
    tokens.close()
    b.tok_file.unlink()
    (staged / "tokenizer").mkdir()
    b.tok.save(str(staged / "tokenizer" / "tokenizer.json"))
    if tc.path and Path(tc.path).is_dir():
        for extra in ("tokenizer_config.json", "special_tokens_map.json"):
            if (Path(tc.path) / extra).is_file():
                (staged / "tokenizer" / extra).write_bytes((Path(tc.path) / extra).read_bytes())


def build_pass(cfg: IngestConfig, progress=None, *, sources: list[tuple] | None = None,
               unmixed: list[tuple] | None = None, loss_weights: LossWeightsFn | None = None,
               tokenizer=None, before_publish: Callable[[Path, dict], bool] | None = None) -> dict:
    """One pass of the build: a new corpus version in `cfg.out`, published unless `before_publish` says
    no; returns its manifest. Raises IngestError if nothing could be ingested. `build_corpus`
    (ingest/corpus_build.py) is the whole build: this pass, plus the synthesis phase when the
    definition asks for training examples.

    sources: [(path, kind, collection)] or [(path, kind, collection, pdf_password)] besides cfg.sources.
    unmixed: sources like those, that a mix (ingest/mix.py) packs once each, whole, outside its shares
    (the synthesized retrieval examples, whose share is retrieval.rate); without a mix, plain sources.

    loss_weights(document, token_ids int32 [n]) -> float32 [n] or None (= all 1.0): the hook for
    synthesized retrieval examples; when given, sequences carry a `loss_weights` column.

    tokenizer: (tokenizers.Tokenizer, origin) to use as it is (the synthesis phase's second pass keeps
    the first pass's tokenizer), instead of the configured or trained one.

    before_publish(staged_dir, manifest) -> bool: called when the new version is complete in its staging
    folder, before the rename (refresh pipelines validate here). False discards it (the returned
    manifest then has `path` None); an exception discards it and propagates.
    """
    t0 = time.perf_counter()
    root = Path(cfg.out)
    check_corpus_dir(root)
    if cfg.engine == "ray":  # fail before any work when the extra is missing
        from bookft.ingest.ray_engine import require_ray

        require_ray()
    root.mkdir(parents=True, exist_ok=True)
    clean_stale(root)
    b = _Build(cfg=cfg, progress=progress or NullProgress(), root=root, cache=SourceCache(root),
               loss_weights=loss_weights, fixed_tokenizer=tokenizer)
    _resolve(b, sources, unmixed)
    with b.phase("extract"):
        _extract(b)
    _collect_entries(b)
    with b.phase("dedup"):
        _dedup(b)
    if b.n_docs == 0:
        reasons = "; ".join(f"{e['source']}: {e['reason']}" for e in b.entries if e["status"] != "ingested")[:2000]
        raise IngestError(f"nothing could be ingested from {len(b.specs)} source(s): {reasons or 'no documents'}")
    with b.phase("tokenizer"):
        _tokenizer(b)
    with b.phase("tokenize"):
        _tokenize(b)
    tokens = FlatFile(b.tok_file, np.int32)  # read by slices: the token file never becomes resident
    doc_off_a = np.array(b.doc_off, dtype=np.int64)
    with b.phase("pack"):
        _pack(b, tokens, doc_off_a)
    with b.phase("write"):
        _write(b, tokens, doc_off_a)
    manifest = build_manifest(b)
    n = max([int(x) for x in os.listdir(root / "versions") if x.isdigit()], default=0) + 1
    manifest["version"] = n
    manifest["timings"]["total"] = round(time.perf_counter() - t0, 3)
    staged = b.staged
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
    b.cache.prune(set(b.keys) | {k + "-noeos" for k in b.keys}, b.fp)
    manifest["path"] = str(final)
    return manifest
