"""The run directory: its saved config (a run keeps its model shape), config digest, metrics log."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

from bookft.config import to_dict
from bookft.errors import TrainError
from bookft.train.config import RunConfig


def check_run_dir(run_dir: Path, cfg: RunConfig) -> None:
    """A run dir keeps its model shape; refuse a different one (it would not restore)."""
    saved = run_dir / "config.yaml"
    if not saved.is_file():
        return
    old = yaml.safe_load(saved.read_text()) or {}
    new = to_dict(cfg)
    if old.get("model") != new["model"]:
        raise TrainError(f"{saved}: this run directory was trained with a different model section; "
                         "use another --run-dir (or delete this one)")


def write_config(run_dir: Path, cfg: RunConfig) -> None:
    (run_dir / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))


def config_digest(cfg: RunConfig) -> str:
    return hashlib.sha256(json.dumps(to_dict(cfg), sort_keys=True).encode()).hexdigest()[:16]


def run_facts(cfg: RunConfig, corpus) -> dict[str, str]:
    """What every host of a job must agree on: each key of the run config (flattened, a.b.c) and the
    corpus version (its resolved folder, manifest version, data hash and tokenizer fingerprint: the data
    hash tells apart two copies at one path that differ, say a host's stale local copy)."""
    facts = {f"config.{k}": json.dumps(v, sort_keys=True) for k, v in _flat(to_dict(cfg)).items()}
    manifest = getattr(corpus, "manifest", {})
    facts.update({"corpus.path": str(corpus.path), "corpus.version": str(manifest.get("version", "")),
                  "corpus.data_hash": str(manifest.get("data_hash", "")), "corpus.sequences": str(len(corpus)),
                  "corpus.tokenizer_fingerprint": str(getattr(corpus, "fingerprint", ""))})
    return facts


def _flat(d: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def losses_from_log(run_dir: str | Path) -> dict[int, float]:
    p = Path(run_dir) / "metrics.jsonl"
    out: dict[int, float] = {}
    if p.is_file():
        for ln in p.read_text().splitlines():
            if ln.strip():
                row: dict[str, Any] = json.loads(ln)
                out[int(row["step"])] = float(row["loss"])
    return out
