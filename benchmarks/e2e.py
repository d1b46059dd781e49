"""The full default loop, timed: ingest -> eval base -> train -> eval tuned (bookft quickstart).

Prints a table (wall time per stage, accuracy per length and depth, base vs tuned, tokens/s) and
writes benchmarks/results/e2e.json with the machine it ran on and the notes of what worked.

    python benchmarks/e2e.py                       # the defaults (corpora/sample.yaml, configs/tiny-cpu.yaml)
    python benchmarks/e2e.py --set train.seed=1    # another seed
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
NOTES = [
    "see the `recipe` entry; notes are written by hand after each tuning round (benchmarks/e2e.py NOTES)",
]


def machine() -> dict:
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {"platform": platform.platform(), "python": sys.version.split()[0], "cpus": os.cpu_count(),
            "load_avg_at_end": load}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", action="append", default=[], help="run config override a.b=value")
    ap.add_argument("--out", default="quickstart-out")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "e2e.json"))
    args = ap.parse_args()
    os.chdir(ROOT)
    from bookft.quickstart import run_quickstart

    console = Console()
    t0 = time.perf_counter()
    got = run_quickstart(out=args.out, overrides=args.set, console=console)
    wall = time.perf_counter() - t0
    t = Table(title=f"bookft e2e default loop: {wall:.0f} s wall")
    t.add_column("stage")
    t.add_column("seconds", justify="right")
    for k, v in got["times"].items():
        t.add_row(k.removesuffix("_s"), f"{v:.1f}")
    console.print(t)
    from bookft.train.config import load_run_config

    cfg = load_run_config(None, args.set)
    result = {
        "benchmark": "e2e", "machine": machine(), "command": "python benchmarks/e2e.py "
        + " ".join(f"--set {s}" for s in args.set), "wall_s": round(wall, 1), **got,
        "train_tokens_per_s": got["train"]["tokens_per_s"],
        "config": {"curriculum": [vars(s) for s in cfg.train.curriculum], "batch_size": cfg.data.batch_size,
                   "model": {k: getattr(cfg.model, k) for k in ("num_layers", "hidden_size", "num_heads",
                                                                "qk_norm", "vocab_size")},
                   "attention": vars(cfg.attention), "mesh": cfg.parallel.mesh},
        "notes": NOTES,
    }
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, default=str))
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
