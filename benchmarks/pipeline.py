"""Refresh after 1% of files change vs a full ingest of the same generated text corpus.

    python -m benchmarks.pipeline [--files 10000] [--changed 0.01] [--workers 2] [--work DIR]

Steps (each a `run_pipeline` of one pipeline YAML, wall time measured around it):
  full       first run on an empty corpus dir: extract + train BPE + tokenize + pack + write + publish
  full_tok   a full ingest into a second, empty corpus dir with the tokenizer of `full` given by path
             (no BPE training: the like-for-like baseline for a refresh, which reuses the BPE)
  refresh    after rewriting `changed` of the files: plan (hash all), extract/tokenize only those,
             re-pack, validate, publish
  no_change  a second refresh with nothing changed: content hashes only, nothing published
Target: refresh < 15% of the full ingest. Prints a rich table and writes a new
benchmarks/results/pipeline_<files>-files_<hardware>_<date>.json (the shared header: machine, load).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import time
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

from benchmarks.common import Record
from bookft.pipelines import run_pipeline

WORDS = ("river stone lantern harbor meadow archive winter summer quiet ancient merchant sailor garden letter "
         "window mountain valley forest candle journey evening morning silver copper market village bridge "
         "tower library scholar captain engine signal island shadow harvest thunder festival chapter").split()


def paragraph(rng: random.Random) -> str:
    return " ".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 16))).capitalize() + "."
                    for _ in range(rng.randint(2, 5)))


def write_file(path: Path, seed: int, chars: int) -> None:
    rng = random.Random(seed)
    parts, n = [], 0
    while n < chars:
        parts.append(paragraph(rng))
        n += len(parts[-1]) + 2
    path.write_text("\n\n".join(parts) + "\n")


def pipeline_yaml(work: Path, name: str, src: Path, out: Path, workers: int, tokenizer) -> Path:
    cfg = {"name": name, "schedule": "17 3 * * *", "sources": [{"path": str(src), "kind": "text",
                                                               "collection": "generated"}],
           "out": str(out), "tokenizer": tokenizer, "seq_len": 2048, "workers": workers, "retention": 2}
    p = work / f"{name}.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def timed(path: Path) -> tuple[float, dict]:
    t0 = time.perf_counter()
    code, rec = run_pipeline(path)
    dt = time.perf_counter() - t0
    if code != 0:
        raise SystemExit(f"{path}: exit {code}: {rec.get('error')}")
    return dt, rec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--chars", type=int, default=1500, help="characters per generated file")
    ap.add_argument("--changed", type=float, default=0.01)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--work", default="/tmp/bookft-bench-pipeline")
    ap.add_argument("--out", type=Path, default=None, help="default: a new file under benchmarks/results/")
    args = ap.parse_args()
    record = Record("pipeline", f"{args.files}-files", path=args.out)
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    src = work / "src"
    src.mkdir(parents=True)
    for i in range(args.files):
        write_file(src / f"f{i:05d}.txt", i, args.chars)
    rows: dict[str, dict] = {}

    p_full = pipeline_yaml(work, "full", src, work / "corpus", args.workers, {"vocab_size": 2048})
    dt, rec = timed(p_full)
    rows["full"] = {"seconds": dt, "record": rec}
    man = json.loads((work / "corpus" / "current" / "manifest.json").read_text())
    tok_path = str(work / "tok.json")
    shutil.copy(work / "corpus" / "current" / "tokenizer" / "tokenizer.json", tok_path)

    p_tok = pipeline_yaml(work, "full_tok", src, work / "corpus-tok", args.workers, tok_path)
    dt, rec = timed(p_tok)
    rows["full_tok"] = {"seconds": dt, "record": rec}
    shutil.rmtree(work / "corpus-tok", ignore_errors=True)

    n_change = max(1, round(args.files * args.changed))
    rng = random.Random(1)
    for i in rng.sample(range(args.files), n_change):
        write_file(src / f"f{i:05d}.txt", 10_000_000 + i, args.chars)
    dt, rec = timed(p_full)
    rows["refresh"] = {"seconds": dt, "record": rec}
    dt, rec = timed(p_full)
    rows["no_change"] = {"seconds": dt, "record": rec}

    full, full_tok = rows["full"]["seconds"], rows["full_tok"]["seconds"]
    result = {
        "files": args.files, "chars_per_file": args.chars, "changed_files": n_change, "workers": args.workers,
        "tokens": man["counts"]["tokens"], "sequences": man["counts"]["sequences"],
        "seconds": {k: round(v["seconds"], 3) for k, v in rows.items()},
        "refresh_vs_full": round(rows["refresh"]["seconds"] / full, 4),
        "refresh_vs_full_same_tokenizer": round(rows["refresh"]["seconds"] / full_tok, 4),
        "target": 0.15,
        "counts": {k: v["record"].get("counts") for k, v in rows.items()},
        "work": {k: v["record"].get("work") for k, v in rows.items()},
        "build_timings": {"full": man["timings"],  # after no_change, current is still the refresh's version
                          "refresh": json.loads((work / "corpus" / "current" / "manifest.json").read_text())[
                              "timings"]},
    }
    t = Table(title=f"refresh of {args.files:,} files after {n_change} changed ({os.cpu_count()} CPUs, "
                    f"load {record.header['load_avg_start'][:1]})")
    for col in ("run", "seconds", "vs full", "extracted", "published"):
        t.add_column(col, justify="right")
    for k, v in rows.items():
        r = v["record"]
        t.add_row(k, f"{v['seconds']:.1f}", f"{v['seconds'] / full:.1%}",
                  str((r.get("work") or {}).get("extracted", 0)), str(r.get("published")))
    Console().print(t)
    record.write(result)
    print(f"refresh / full = {result['refresh_vs_full']:.3f} (same tokenizer: "
          f"{result['refresh_vs_full_same_tokenizer']:.3f}); target < 0.15")


if __name__ == "__main__":
    main()
