"""`run_pipeline(path)`: one scheduled refresh of a corpus, safe to start from cron at any time.

Order of a run (each step's failure is reported with the exit code below):
    load + validate config                        -> 2 on any ConfigError
    take the corpus lock (runs/lock, flock)       -> 3 when another refresh holds it (or wait: --wait)
    plan: resolve sources, content hashes, diff   -> nothing changed: publish nothing, exit 0
    build_corpus with the extraction/token caches (only added/changed sources are extracted, by the
    local pool or, with `engine: ray`, as Ray Data tasks: bookft/ingest/engine/ray_engine.py), the
    synthesized training examples included when the definition asks for them (the same build as
    `bookft ingest`: ingest/corpus_build.py)
    validate the staged version (bookft.pipelines.validate) -> 1, nothing published
    same data as current (data hash, tokenizer, seq_len)? discard it: exit 0, nothing published
    publish: rename versions/.tmp-* -> versions/NNNN, switch `current` by rename (in build_corpus)
    prune versions beyond `retention` (never current, never a leased one)
    post-steps: eval on a named checkpoint      -> 5 if it fails (the version stays published)
    log one JSON line in CORPUS_DIR/runs/log.jsonl (+ the status file)

Exit codes (for schedulers to alert on):
    0 ok: published a new version, or nothing changed       3 locked: another refresh is running
    1 failed: nothing published, `current` untouched         4 partial: done, but sources failed or
    2 config error: the pipeline YAML is wrong                 are missing (non-strict)
                                                             5 published, but a post-step failed
A kill -9 at any point leaves `current` on the previous version (build_corpus writes aside and
renames); the next run takes over the lock and reuses every cached extraction.

Every run, "unchanged" ones included, first cleans what a dead run left and names each thing in
its record (`cleaned`): staging folders and half-pruned versions, a broken version (checked against
its manifest's inventory: corpus/integrity.py; removed, so this run rebuilds it), leases no longer
held, the lock of a dead run (whose log record it writes when the dead run wrote none: `killed`,
with the version it published if it got that far); and every run applies `retention`.

Test hook (corpus/crash.py): BOOKFT_TEST_CRASH_AT=NAME sends the run SIGKILL at that point:
extract (after the first fresh extraction), pack (before packing), write (mid-write), synthesize
(after the first batch of synthesized examples), publish (just before the rename), published (right
after `current` moved), prune (after the publish, before pruning), pruning (inside pruning, a version
half deleted), after-PHASE after each phase of a pass (extract, dedup, tokenizer, tokenize, pack,
write) and after-synthesize.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import time
import traceback
import uuid
from datetime import UTC, datetime
from pathlib import Path

from bookft.corpus.crash import CRASH_ENV, crash_point
from bookft.corpus.lease import sweep
from bookft.corpus.store import check_corpus_dir, version_numbers
from bookft.errors import BookftError, ConfigError, CorpusError, PipelineError
from bookft.pipelines.config import PipelineConfig, load_pipeline
from bookft.pipelines.lock import Locked, RunLock, leased_versions
from bookft.pipelines.plan import plan_refresh
from bookft.pipelines.runlog import append_record, log_dead_run, write_status_file
from bookft.pipelines.validate import validate_version

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_LOCKED, EXIT_PARTIAL, EXIT_POST_FAILED = 0, 1, 2, 3, 4, 5
__all__ = ["CRASH_ENV", "crash_point", "run_pipeline", "refresh", "prune_versions"]


class RunProgress:
    """Forwards build_corpus's progress calls and fires the crash points tied to its phases."""

    def __init__(self, inner=None) -> None:
        self.inner = inner
        self.phase = ""
        self.calls = 0

    def start(self, phase: str, total: int | None = None, unit: str = "") -> None:
        self.phase, self.calls = phase, 0
        if self.inner is not None:
            self.inner.start(phase, total, unit)

    def advance(self, n: int = 1, **counters) -> None:
        self.calls += 1
        if self.inner is not None:
            self.inner.advance(n, **counters)
        if self.phase == "extract" and self.calls == 2:  # call 1 = the cached batch, 2 = first fresh one
            crash_point("extract")
        if self.phase == "write" and self.calls == 1:
            crash_point("write")
        if self.phase == "synthesize" and self.calls == 1:
            crash_point("synthesize")

    def end(self) -> None:
        if self.inner is not None:
            self.inner.end()
        if self.phase == "tokenize":
            crash_point("pack")


def prune_versions(root: Path, retention: int) -> list[str]:
    """Delete versions beyond the newest `retention`, except current's and leased ones. A version is renamed
    aside first (versions/.tmp-PID-prune-NNNN) so nobody ever resolves a half-deleted folder."""
    names = [f"{n:04d}" for n in version_numbers(root)]
    keep = set(names[-retention:]) | leased_versions(root)
    cur = os.path.realpath(root / "current")
    keep.add(os.path.basename(cur))
    removed = []
    for name in names:
        if name in keep:
            continue
        aside = root / "versions" / f".tmp-{os.getpid()}-prune-{name}"
        os.rename(root / "versions" / name, aside)
        shutil.rmtree(aside / "sequences", ignore_errors=True)
        crash_point("pruning")  # a version half deleted, aside
        shutil.rmtree(aside, ignore_errors=True)
        removed.append(name)
    return removed


def _same_data(a: dict, b: dict | None) -> bool:
    if b is None:
        return False
    keys = ("data_hash", "seq_len", "segments", "loss_weights")
    return (all(a.get(k) == b.get(k) for k in keys) and a["tokenizer"]["fingerprint"] == b["tokenizer"]["fingerprint"]
            and (a.get("stale") or []) == (b.get("stale") or []))  # a stale mark set or cleared: a new version


def _failed_sources(entries: list[dict]) -> list[dict]:
    return [{"source": e["source"], "reason": e["reason"]} for e in entries if e["status"] == "failed"]


def in_process_extract(plan, icfg) -> bool:
    """A refresh with little to extract runs it in this process: starting the worker pool (a fresh
    interpreter per worker importing bookft) costs more than extracting a few hundred small text files.
    Not with `engine: ray`: a refresh pointed at Ray sends every changed source there, even one (Ray was
    chosen for its CPUs, a cluster's; on a local Ray instance a refresh pays its start, ~10 s here)."""
    todo = plan.added + plan.changed
    if icfg.engine != "local" or icfg.workers == 0 or plan.previous is None or plan.config_changed:
        return False
    if len(todo) <= 2 * icfg.workers:
        return True
    paths = [Path(t) for t in todo]
    if len(todo) > 2000 or any(not q.is_file() or q.suffix.lower() == ".pdf" for q in paths):
        return False
    try:
        return sum(q.stat().st_size for q in paths) <= 16 << 20
    except OSError:  # vanished since the plan: let build_corpus report it
        return False


def refresh(p: PipelineConfig, icfg, record: dict, progress=None, lock: RunLock | None = None) -> int:
    """The locked part of a run; fills `record` and returns the exit code."""
    from bookft.ingest.corpus_build import prepare

    root = Path(icfg.out)
    record.setdefault("cleaned", []).extend(prepare(root) + sweep(root))
    plan = plan_refresh(icfg, keep_stale=not p.strict)
    prev = plan.previous
    record["previous_version"] = prev.get("version") if prev else None
    record["version"] = record["previous_version"]
    record["counts"] = {**plan.counts(), "documents_extracted": 0, "failed_sources": 0}
    record["missing"] = plan.missing
    record["engine"] = icfg.engine
    if p.strict and plan.missing:
        raise PipelineError(f"strict: {len(plan.missing)} source(s) missing: "
                            + "; ".join(f"{m['source']}: {m['reason']}" for m in plan.missing[:10]))
    if plan.nothing_to_do:
        failed = _failed_sources(prev.get("sources", []))
        record["counts"]["failed_sources"] = len(failed)
        record["stale"] = [{k: v for k, v in s.items() if k != "paths"} for s in prev.get("stale") or []]
        record["result"] = "unchanged"
        record["detail"] = "no source or setting changed: nothing extracted, nothing published"
        record["pruned"] = prune_versions(root, p.retention)  # a dead run may have published and not pruned
        return EXIT_PARTIAL if failed else EXIT_OK

    if in_process_extract(plan, icfg):
        icfg = dataclasses.replace(icfg, workers=0)
        record["extract_in_process"] = True
    checked: dict = {}

    def before_publish(staged: Path, manifest: dict) -> bool:
        failed = _failed_sources(manifest["sources"])
        if p.strict and failed:
            raise PipelineError(f"strict: {len(failed)} source(s) failed: "
                                + "; ".join(f"{f['source']}: {f['reason']}" for f in failed[:10]))
        checked.update(validate_version(staged, manifest, prev, p.validate_))
        if _same_data(manifest, prev):
            return False
        if lock is not None:  # if this run dies from here on, the next one logs what it published
            lock.note(publishing=manifest["version"])
        crash_point("publish")
        return True

    from bookft.ingest.corpus_build import build_corpus

    m = build_corpus(icfg, RunProgress(progress), before_publish=before_publish, prepared=True,
                     previous=None if p.strict else prev)
    failed = _failed_sources(m["sources"])
    record["stale"] = [{k: v for k, v in s.items() if k != "paths"} for s in m.get("stale") or []]
    record["counts"]["documents_extracted"] = m["work"].get("documents_extracted", 0)
    record["counts"]["failed_sources"] = len(failed)
    record["failed"] = failed[:100]
    record["work"] = m["work"]
    record["validation"] = checked
    if m["path"] is None:
        record["result"] = "unchanged"
        record["detail"] = "sources changed but the built data is identical to current: nothing published"
        record["pruned"] = prune_versions(root, p.retention)
        return EXIT_PARTIAL if failed else EXIT_OK
    record["version"] = m["version"]
    record["path"] = m["path"]
    record["published"] = True
    crash_point("prune")
    record["pruned"] = prune_versions(root, p.retention)
    record["result"] = "partial" if failed else "ok"
    code = EXIT_PARTIAL if failed else EXIT_OK
    if p.post.eval.enabled:
        from bookft.pipelines.post import run_eval_step

        record["post"] = {"eval": run_eval_step(p.post.eval, Path(m["path"]), root, m["version"])}
        if not record["post"]["eval"]["ok"]:
            record["result"] = "post_failed"
            code = EXIT_POST_FAILED
    return code


def run_pipeline(path: str | Path, *, wait: bool = False, wait_timeout: float | None = None,
                 overrides: list[str] | tuple[str, ...] = (), progress=None) -> tuple[int, dict]:
    """Run one refresh; returns (exit code, run record). Never raises for a run that went wrong: the
    record says what happened (ConfigError is the exception: exit code 2, nothing logged)."""
    t0 = time.perf_counter()
    record: dict = {"pipeline": Path(path).stem, "run_id": uuid.uuid4().hex[:12],
                    "started": datetime.now(UTC).isoformat(timespec="seconds"), "host": socket.gethostname(),
                    "pid": os.getpid(), "definition": str(path), "published": False}
    try:
        p, icfg = load_pipeline(path, overrides)
        root = Path(icfg.out)
        check_corpus_dir(root)
    except (ConfigError, CorpusError) as e:
        record.update(result="config_error", exit_code=EXIT_CONFIG, error=str(e))
        return EXIT_CONFIG, record
    record["pipeline"] = p.name
    record["corpus"] = str(root)
    try:
        with RunLock(root, p.name, wait=wait, timeout=wait_timeout, run_id=record["run_id"]) as lock:
            if lock.previous.get("pid"):
                prev = lock.previous
                record["took_over_lock_from"] = prev
                record["cleaned"] = [f"runs/lock (held by pid {prev.get('pid')} on {prev.get('host')}, pipeline "
                                     f"{prev.get('pipeline')}, since {prev.get('started')}, which died): taken over"]
                log_dead_run(root, prev, record["run_id"])
            code = refresh(p, icfg, record, progress, lock)
    except Locked as e:
        record.update(result="locked", error=str(e))
        code = EXIT_LOCKED
    except BookftError as e:
        record.update(result="failed", error=f"{type(e).__name__}: {e}")
        code = EXIT_FAILED
    except Exception as e:  # a bug: still a failed run the scheduler must see, with where it happened
        tb = traceback.extract_tb(e.__traceback__)[-1]
        record.update(result="failed", error=f"{type(e).__name__}: {e} (at {tb.filename}:{tb.lineno})")
        code = EXIT_FAILED
    record["exit_code"] = code
    record["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    record["duration_s"] = round(time.perf_counter() - t0, 3)
    try:
        append_record(root, record)
        if p.post.status_file:
            write_status_file(p.post.status_file, record)
    except OSError as e:  # an unwritable log must not hide the run's own result
        record["log_error"] = f"cannot write the run log/status file: {e}"
        code = code or EXIT_FAILED
        record["exit_code"] = code
    return code, record
