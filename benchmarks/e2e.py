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
    # Written by hand from the tuning runs of 2026-11-30 (2-core machine shared with 5 other jobs,
    # load average 11-16 throughout, so wall times were 3-6x inflated; CPU-seconds are the guide).
    "Data: corpora/sample.yaml synthesizes the eval's own NIAH needle ('One of the special magic numbers "
    "for K is: V.') at a uniform depth of a window of the sample's documents (digits scrubbed, as the "
    "eval's haystacks have none), question + answer prefix at the end, loss weight 1 on the 8 answer "
    "tokens, 0.05 on the rest and on ordinary documents. Examples of 256/512/1024 tokens, one length "
    "per sequence, packed at offset 0, so a curriculum row of that length holds whole examples.",
    "Checked: synthesized sequences are aligned (examples start at multiples of their length, a few "
    "tokens short at most) and the batch targets/weights hit exactly ' DDDDDDD' after the prefix.",
    "FAILED (run A): plain Llama 2x128 (tiny.yaml), batch 2 x 2048, lengths 256/512/1024/2048 equal "
    "shares, 1 question per example, lr 2e-3 constant x0.6/stage: 0% teacher-forced at 256 and 512 "
    "after 300 steps (1.2M tokens); it predicts a constant digit string (learned 'digits go here').",
    "Run B = A + qk_norm: same loss curve to step 150, not evaluated further (stopped for CPU).",
    "FAILED so far (run C): lengths 256/512/1024 with shares 2:1:1 and questions: 3 (the question "
    "asked and answered twice more after the fact): 0% on its own training examples at step 230.",
    "Cost: 1.6 CPU-s per step of 4,096 tokens at 256 (ring over 4 simulated devices, xla kernel, "
    "block 128), 1.95 at 512; the same step with the local strategy on 1 device was not faster. "
    "That is about 2x the CPU per token of the plain-JAX reference in STACK-FACTS (0.49 s per 8,192 "
    "tokens on 2 cores), so the 20-minute budget buys about 2.7M training tokens, under half of what "
    "the reference recipe needed (with its short convolution) to reach 90% at 1,024.",
    "Not tried for lack of time: the short convolution (not a model option here), a seed sweep, "
    "longer training, answer-only warm-up at 256 without longer examples in the mix.",
]


def machine() -> dict:
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {"platform": platform.platform(), "python": sys.version.split()[0], "cpus": os.cpu_count(),
            "load_avg_at_end": load}


def collect(out: str, run_dir: str, note: str) -> dict:
    """Figures of an interrupted loop from what it left on disk (corpus manifest, evals, metrics)."""
    import statistics

    from bookft.corpus import open_corpus
    from bookft.quickstart import _per_depth

    man = open_corpus("data/sample").manifest
    res: dict = {"status": f"incomplete: {note}",
                 "corpus": {"path": str(open_corpus("data/sample").path), "sequences": man["counts"]["sequences"],
                            "last_pass_timings_s": man["timings"]}}
    for name in ("base", "tuned"):
        p = Path(out) / f"eval-{name}" / "results.json"
        if p.is_file():
            r = json.loads(p.read_text())
            res[name] = {"per_depth": _per_depth(r), "summary": r["summary"], "timing": r["timing"]}
    m = Path(run_dir) / "metrics.jsonl"
    if m.is_file():
        rows = [json.loads(x) for x in m.read_text().splitlines() if x.strip()]
        per_len: dict = {}
        for r in rows[1:]:
            per_len.setdefault(str(r["seq_len"]), []).append(r["step_time_s"])
        res["train"] = {"steps_done": len(rows), "last_loss": rows[-1]["loss"] if rows else None,
                        "median_step_s": {k: round(statistics.median(v), 2) for k, v in per_len.items()},
                        "tokens_per_step": 2 * 2048}
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", action="append", default=[], help="run config override a.b=value")
    ap.add_argument("--out", default="quickstart-out")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "e2e.json"))
    ap.add_argument("--collect", metavar="NOTE", help="write the figures an interrupted run left (no run)")
    args = ap.parse_args()
    os.chdir(ROOT)
    if args.collect:
        result = {"benchmark": "e2e", "machine": machine(), "command": "python benchmarks/e2e.py (interrupted)",
                  **collect(args.out, "runs/tiny-cpu", args.collect), "notes": NOTES}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))
        print(json.dumps({k: result[k] for k in ("status", "train") if k in result}, indent=1))
        return
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
