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
    # Written by hand from the tuning runs of 2026-11-30 (session 2). Machine: this 2-core host,
    # shared with helper jobs (they ran at nice 10; the tuning runs at nice -10).
    "Recipe (the defaults): tiny Llama 2x128 (4 heads, SwiGLU 352, vocab 1024 BPE) + a width-8 causal "
    "short convolution on the embeddings (model.short_conv, zero-initialised); NIAH with phrasing "
    "'short' (answer prefix = the needle's words up to the value, so the answer is a copy); synthesized "
    "examples of 256/512/1024 tokens at 90% of the corpus (shares 2:1:1), the question asked up to 4 "
    "times while a quarter of the example stays context, loss weight 1 on answers and 0.05 elsewhere; "
    "curriculum 256 x 350 steps -> 512 x 150 (lr x0.6) -> 1024 x 200 (lr x0.4), 4,096 tokens per step, "
    "AdamW lr 2e-3 (b2 0.98, wd 0.01, clip 1, 50 warm-up), ring attention over 4 simulated devices.",
    "Data fixes that made it learn: (1) a curriculum row cut from a longer example asked about a fact "
    "it did not hold (about half of the answer targets at stage 256 were unanswerable noise): rows now "
    "drop the loss of an example they cut (train/data.py drop_cut_example) and a stage draws only the "
    "sequences whose examples its rows hold whole (Batches.eligible); (2) examples came out a few tokens "
    "short, so the next one straddled a row boundary: they are now topped up to exactly their length.",
    "Learning curve (run c7 = the defaults; exact match of whole answers on synthesized sequences, "
    "teacher-forced): 0 at steps 50-350 (loss 2.6 -> 1.5), then 0.83 (256) / 0.78 (512) at step 400, "
    "0.97 / 0.97 at step 450: the induction-copy transition happens around step 375 of stage 256.",
    "Ablation (standalone loop at 256 only: every row answerable, 16 rows per step, 1 device, local "
    "xla kernel, corpus version of the defaults; answer-token accuracy at steps 100/200/250/300/400): "
    "short conv seed 0 (earlier corpus): 0.22 (150) -> 0.86 (250) -> 0.99 (300); short conv seed 1: "
    "0.20/0.58/0.99/1.00; plain Llama (no conv): 0.23/0.32/0.37/0.40/0.85; plain + QK-norm: "
    "0.35/0.39/0.39/0.41/0.50. So the plain model does learn the copy with the fixed data, about 150 "
    "steps (1.7x) later, which the 20-minute budget cannot afford; QK-norm slows it further. Both conv "
    "seeds transition between steps 200 and 250.",
    "FAILED before (session 1): plain Llama without conv, RULER phrasing, noisy cut rows: 0% at 256 "
    "and 512 after 300 steps (predicts a constant digit string); with the conv but the same data: 0% "
    "after 200 steps (run c1-c4).",
    "Full default loop, run 1 (curriculum 256x350 -> 512x150 lr x0.6 -> 1024x200 lr x0.4, shares "
    "2:1:1, wsd decay 20%; load ~10, 1,196 s in all): tuned teacher-forced exact match at depths "
    "0/25/50/75/100%: 512: 0.7/0.7/1/1/1; 1024: 0/0.2/0.3/0.9/1; 2048: 0/0/0/0.1/1 (base 0 everywhere). "
    "The same model on a corpus haystack at 1024: 0/0/0.3/0.9/0.8, so the limit is distance, not the "
    "filler: the copy works within ~300 tokens of the needle.",
    "Run 2 = the defaults (256x330 -> 512x120 lr x0.8 -> 1024x250 lr x0.7, shares 2:1:2, wsd decay "
    "15%; machine quieter, 980 s in all): 512: 0.8/1/1/1/1; 1024: 0/0/0.9/1/1; 2048: 0/0/0/0.3/1. More "
    "steps at a higher lr at 1024 moved the reach to ~500 tokens; depths 0-25% at 1024 still fail.",
    "Next (not tried): a 2,048 stage (STACK-FACTS: training at 2,048 fixed depth 0 at 1,024), a 64-token "
    "sliding window in layer 0, a cheaper step (ring over 4 simulated devices costs ~1.6x the local "
    "kernel on this CPU) to afford the ~8M training tokens the reference recipe used (here ~2.9M).",
    "Cost on this host: 0.9-1.0 s per 4,096-token step at 256 with the machine to itself (ring over 4 "
    "simulated devices, xla kernel, block 128), 1.1-1.6 s while helper jobs ran.",
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
                                                                "qk_norm", "short_conv", "vocab_size")},
                   "attention": vars(cfg.attention), "mesh": cfg.parallel.mesh},
        "notes": NOTES,
    }
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, default=str))
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
