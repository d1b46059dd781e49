"""Sources that cannot be read keep their last good documents (a refresh's stale sources).

Design choices:
- A source of the definition that resolves to no job at all (its folder vanished, a mount that came
  back empty, a dangling link) is, in a build given the current version's manifest (`previous`: a
  non-strict refresh), built from that version's jobs of it: the manifest's `source_jobs` names
  each job's kind, collection and cache key, and the extraction cache still holds them (it keeps
  what the current version used). The documents are the same ones, so nothing a run trains on
  disappears because a disk was away.
- They are marked: `stale` in the manifest (the source, why, since which version, its files) and
  `stale: true` on their entries; the source's own `failed` entry stays, so the refresh exits 4
  (partial). When the source is readable again the next refresh builds it afresh and the mark goes.
- A source matches the jobs under its path (the path itself, or files below it), as resolution
  names them; a job whose extraction is no longer cached is not kept (it cannot be read either).
"""

from __future__ import annotations

from pathlib import Path

from bookft.ingest.sources import ExtractJob


def stale_paths(previous: dict | None, spec_path: str) -> list[str]:
    """The previous version's job paths under the source path `spec_path`."""
    jobs = (previous or {}).get("source_jobs") or {}
    root = str(Path(spec_path))
    return [p for p in jobs if p == root or p.startswith(root.rstrip("/") + "/")]


def keep(b, spec: tuple, label: str, reason: str) -> list[ExtractJob]:
    """The previous version's jobs of the source `spec` (which resolved to none), registered in `b.stale`
    (job index -> (content hash, cache key)) and `b.stale_sources`; [] when there are none to keep."""
    prev = b.previous
    jobs: list[ExtractJob] = []
    for p in stale_paths(prev, str(spec[0])):
        info = prev["source_jobs"][p]
        if not b.cache.has_extract(info["key"]):
            continue
        b.stale[len(b.jobs) + len(jobs)] = (prev.get("source_hashes", {}).get(p, ""), info["key"])
        jobs.append(ExtractJob(p, info["kind"], info["collection"], b.cfg.extract, b.cfg.limits))
    if jobs:
        since = next((s.get("since_version") for s in prev.get("stale") or [] if s.get("source") == label),
                     prev.get("version"))
        b.stale_sources.append({"source": label, "reason": reason, "since_version": since,
                                "paths": [j.path for j in jobs]})
    return jobs
