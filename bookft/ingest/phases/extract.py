"""The resolve and extract phases: sources -> extraction jobs -> cached extraction heads.

Design choices:
- Extraction is a pure function per source (sources.py `extract`), run by the process pool of
  `workers` (engine/pool.py), and its results are cached per content hash (engine/cache.py); in this
  process when the sources to extract hold under 16 MiB, where a pool's start would cost more than
  it saves; or, with `engine: ray`, the same tasks on Ray Data (engine/ray_engine.py). The tasks are
  engine/jobs.py's: a worker writes its source's cache entry itself and returns only the head (no
  texts), so whole sources never cross processes.
- One big source uses every core: a PDF of more than `extract.pdf_pages_per_job` pages (default
  100) is read as near-equal page ranges, each its own task in the same pool (local or Ray),
  whenever the pool has more than one worker (even under 16 MiB: the split is the point). Locally
  this process reads ranges too, from the end of the queue, starting while the pool's forkserver is
  still importing (`pool_map(local=...)`), and a given tokenizer loads in a thread once the tasks
  are handed out (`Build.start_tokenizer_load`).
  pdfium reads each range exactly as it reads the whole file; this process puts the pages back in
  order and runs the document-level steps on all of them (running headers/footers are found over
  every page; paragraphs run over page breaks), so the document, its cache entry (one per source,
  whole, under the same key: the knob is not part of it) and the corpus are those of one job.
  A file pdfium does not open when planning (not a PDF, encrypted without its password, damaged)
  is never split; a range that fails (the file changed under us) sends the file to one whole-source
  job, so every failure reads exactly as without splitting. The split is planned only for PDFs of
  at least 512 bytes per threshold page (smaller files cannot have that many pages), and not with
  OCR or the pypdf backend (whole files there).
- Results are assembled in source order, not completion order, so a rerun gives the same data hash.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path

from bookft.errors import IngestError
from bookft.ingest.documents import Entry
from bookft.ingest.engine.jobs import run_task
from bookft.ingest.engine.pool import IN_PROCESS_BYTES, SPLIT_MIN_BYTES_PER_PAGE, pool_map
from bookft.ingest.formats.pdf import pages_text, pdf_result, pdf_split_plan, text_document
from bookft.ingest.mix import mixing
from bookft.ingest.phases import stale
from bookft.ingest.phases.state import Build
from bookft.ingest.sources import content_hash, extract, job_key, resolve_sources

MAX_LISTED_SECRETS = 10_000  # findings listed in the manifest (all are counted)
# IN_PROCESS_BYTES (engine/pool.py): extraction of less than this runs in this process: starting a worker
# pool (a fresh interpreter that imports the command line first) takes longer.
# SPLIT_MIN_BYTES_PER_PAGE (engine/pool.py): a PDF smaller than this per page of the split threshold is not
# opened to count its pages (it cannot have that many): no planning cost for small files.


def resolve(b: Build, sources, unmixed) -> None:
    """The sources (sample, command line, synthesized, the definition's) -> jobs, their labels, and
    entries for the paths that cannot be used."""
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
        if not jobs and b.previous is not None and label not in b.unmixed:  # unreadable: its last documents
            reason = bad[0].reason if bad else "no files found"
            jobs = stale.keep(b, spec, label, reason)
            if jobs and not bad:
                bad = [Entry(str(spec[0]), "failed", reason, spec[1])]
        b.jobs += jobs
        b.job_label += [label] * len(jobs)
        b.entries += [asdict(e) for e in bad]


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


def pool_extract(jobs, workers, progress):
    """Yield (index, ExtractResult) for jobs (the results travel back whole: for small jobs and benchmarks)."""
    yield from pool_map(extract, [(job,) for job in jobs], workers)


def _page_ranges(n_pages: int, per_job: int) -> list[tuple[int, int]]:
    """[start, stop) ranges of near-equal size, at most `per_job` pages each, covering 0..n_pages."""
    k = -(-n_pages // per_job)
    cuts = [n_pages * r // k for r in range(k + 1)]
    return list(zip(cuts[:-1], cuts[1:], strict=True))


def _plan_splits(b: Build) -> dict[int, tuple[list[tuple[int, int]], dict]]:
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


def _assemble_pdf(b: Build, i: int, ranges: list[dict], meta: dict) -> dict:
    """A split PDF's ranges, in page order -> the same cache entry (and head) as extracting it whole."""
    job = b.jobs[i]
    source = str(Path(job.path))  # as extract() names it
    text, m = pages_text([p for rng in ranges for p in rng["pages"]], meta, "pdfium",
                         [c for rng in ranges for c in rng["chunks"]])
    res = pdf_result(source, *text_document(text, m, source, job.collection))
    res.hash = b.hashes[i]
    return b.cache.save_extract(b.keys[i], res)


def _map_tasks(b: Build, tasks: list[tuple], workers: int):
    """Yield (index, run_task(tasks[index])) on the configured engine, in completion order."""
    if b.cfg.engine == "ray":  # the same tasks as Ray Data tasks (bookft/ingest/engine/ray_engine.py)
        from bookft.ingest.engine.ray_engine import ray_map

        b.start_tokenizer_load()
        return ray_map(run_task, [(t,) for t in tasks], b.cfg.workers, b.cfg.ray_address)
    return pool_map(run_task, [(t,) for t in tasks], workers, local=lambda i: tasks[i][0] == "pages",
                    on_start=b.start_tokenizer_load)


def run(b: Build) -> None:
    """Extract every source whose content changed (a pool of workers writes the cache itself)."""
    cache, jobs, progress = b.cache, b.jobs, b.progress
    for i, job in enumerate(jobs):
        h, key = b.stale[i] if i in b.stale else (None, None)  # a stale source's: hash and key as they were
        h = content_hash(job) if h is None else h
        b.hashes.append(h)
        b.keys.append(job_key(job, h) if key is None else key)
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


def collect_entries(b: Build) -> None:
    """The manifest's per-source entries, extraction stats and secret findings, in source order."""
    for i, job in enumerate(b.jobs):
        s = b.heads[i]
        for e in s["entries"]:
            d = dict(e)
            if d["source"] == job.path:
                d["hash"] = b.hashes[i]
            if i in b.stale:
                d["stale"] = True
            b.entries.append(d)
        for k, v in s["stats"].items():
            b.stats_total[k] += v
        if s.get("secrets"):
            b.secrets_per_source[job.path] = len(s["secrets"])
            b.secrets.extend(s["secrets"][:MAX_LISTED_SECRETS - len(b.secrets)])

