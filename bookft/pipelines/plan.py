"""What a refresh has to do: the sources now versus the ones the current version was built from.

Design choices:
- Sources are resolved exactly as `build_corpus` resolves them (same jobs, same content hashes),
  then compared, per job path, with the `source_hashes` the current version's manifest recorded:
  added, changed (hash differs), removed, unchanged. Paths that cannot be used (missing, dangling
  links) are listed as `missing`.
- "Nothing to do" = no added/changed/removed job and the same effective ingest config (and, for a
  pinned tokenizer, the same tokenizer fingerprint). Then the run publishes nothing: `current`
  stays as it is and no extraction happens (the content hashes are the only work).
- A source that resolves to no file at all (its folder vanished) is, in a non-strict refresh,
  `stale`, not removed: the build keeps its documents (ingest/phases/stale.py). A change in which
  sources are stale (one vanished, one came back) is something to do.
- A manifest written before `source_hashes` existed is matched through its per-file entries, so
  at worst a source counts as changed once.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bookft.ingest.config import IngestConfig
from bookft.ingest.phases.stale import stale_paths
from bookft.ingest.sources import content_hash, resolve_sources


@dataclass
class Plan:
    jobs: int = 0
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    missing: list[dict] = field(default_factory=list)  # {source, reason}
    stale: list[str] = field(default_factory=list)  # jobs of sources that cannot be read, kept (phases/stale.py)
    stale_changed: bool = False  # the stale ones differ from those the current version marks
    config_changed: bool = False
    previous: dict | None = None  # the current version's manifest

    @property
    def nothing_to_do(self) -> bool:
        return (self.previous is not None and not (self.added or self.changed or self.removed)
                and not self.config_changed and not self.stale_changed)

    def counts(self) -> dict[str, int]:
        return {"added": len(self.added), "changed": len(self.changed), "removed": len(self.removed),
                "unchanged": len(self.unchanged), "missing": len(self.missing), "stale": len(self.stale)}


def current_manifest(root: Path) -> dict | None:
    cur = root / "current"
    try:
        return json.loads((Path(os.path.realpath(cur)) / "manifest.json").read_text())
    except (OSError, ValueError):
        return None


def source_specs(cfg: IngestConfig) -> list[tuple[str, str, str | None]]:
    """The (path, kind, collection) list build_corpus will use (the sample's files are (re)generated)."""
    specs: list[tuple[str, str, str | None]] = []
    if cfg.sample is not None:
        from bookft.ingest.sample import generate_sample

        specs = generate_sample(Path(cfg.out) / "sample-sources", cfg.sample)
    return specs + [(s.path, s.kind, s.collection) for s in cfg.sources]


RUN_ONLY_KEYS = ("workers", "engine", "ray_address")  # how and where extraction runs does not change the data


def config_fingerprint(cfg: IngestConfig) -> dict:
    c = json.loads(json.dumps(asdict(cfg), default=str))
    for k in RUN_ONLY_KEYS:
        c.pop(k, None)
    return c


def plan_refresh(cfg: IngestConfig, keep_stale: bool = True) -> Plan:
    """The plan against the current version; `keep_stale` (a non-strict refresh): the jobs of a source
    that resolves to no file are not removed but stale (the build keeps their documents)."""
    root = Path(cfg.out)
    prev = current_manifest(root)
    jobs, bad, unreadable = [], [], []
    for spec in source_specs(cfg):  # one at a time: a source that resolves to nothing is known as such
        j, b = resolve_sources([spec], cfg.extract, cfg.limits)
        jobs += j
        bad += b
        if not j:
            unreadable.append(str(spec[0]))
    now = {j.path: content_hash(j) for j in jobs}
    plan = Plan(jobs=len(jobs), previous=prev,
                missing=[{"source": e.source, "reason": e.reason} for e in bad if e.status == "failed"])
    if keep_stale and prev is not None:
        plan.stale = sorted({p for u in unreadable for p in stale_paths(prev, u)})
        was = {p for s in prev.get("stale") or [] for p in s.get("paths", [])}
        plan.stale_changed = set(plan.stale) != was
    if prev is None:
        plan.added = list(now)
        return plan
    before = prev.get("source_hashes")
    if before is None:  # older manifest: per-file entries carry the hash of files named as sources
        before = {e["source"]: e.get("hash", "") for e in prev.get("sources", []) if e.get("hash")}
        before = {k: v for k, v in before.items() if k in now} or before
    for path, h in now.items():
        if path not in before:
            plan.added.append(path)
        elif before[path] != h:
            plan.changed.append(path)
        else:
            plan.unchanged.append(path)
    plan.removed = [p for p in before if p not in now and p not in plan.stale]
    old_cfg = dict(prev.get("config") or {})
    for k in RUN_ONLY_KEYS:
        old_cfg.pop(k, None)
    plan.config_changed = old_cfg != config_fingerprint(cfg)
    if not plan.config_changed and cfg.tokenizer.path:
        from bookft.ingest.tokenize import fingerprint, load_tokenizer

        plan.config_changed = fingerprint(load_tokenizer(cfg.tokenizer.path)) != prev["tokenizer"]["fingerprint"]
    return plan
