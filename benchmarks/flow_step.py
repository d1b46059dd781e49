"""Benchmark: the real-model flow's LoRA training step on this host, per attention block size.

The flow's training (configs/smollm2-135m-books.yaml, SmolLM2-135M-Instruct, 4,096-token rows) on a
corpus that benchmarks/real_flow.py built (its OUT/corpus: book text and synthesized examples). Each
block size trains `--steps` steps in its own process, on the same rows in the same order, so the
cells see the same work and must report the same losses (the blocks change the order of the float
sums, not the function). The first step compiles and is reported apart. Prints a table and writes
a new benchmarks/results/flow_step_<config>_<hardware>_<date>.json (the machine, its load, every step).

    python -m benchmarks.flow_step --corpus runs/real-flow-full-seed0/corpus [--blocks 128,256,512,1024]
        [--steps 4] [--model models/smollm2-135m] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import Record
from bookft.benchrecord import ROOT

CELL = r"""
import json, sys
from bookft.parallel.mesh import ensure_cpu_devices
from bookft.train.config import load_run_config
from bookft.train.trainer import train
config, run, overrides = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
cfg = load_run_config(config, overrides)
if cfg.parallel.cpu_devices:
    ensure_cpu_devices(cfg.parallel.cpu_devices)
train(cfg, run_dir=run)
"""


def cell(config: Path, corpus: Path, model: Path, block: int, steps: int, sets: list[str]) -> dict:
    """One block size: its steps' times and losses (metrics.jsonl), or the error."""
    overrides = [f"model.hf_path={model}", f"data.corpus={corpus}", "data.seq_len=4096", "train.seed=0",
                 "data.seed=0", *sets, f"train.steps={steps}", "checkpoint.every=1000000",
                 f"attention.block_q={block}", f"attention.block_kv={block}"]
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        out = subprocess.run([sys.executable, "-c", CELL, str(config), str(run), json.dumps(overrides)],
                             capture_output=True, text=True, cwd=ROOT)
        log = run / "metrics.jsonl"
        rows = [json.loads(x) for x in log.read_text().splitlines()] if log.is_file() else []
    steps_ = [{"step": r["step"], "step_s": round(r["step_time_s"], 2), "loss": r["loss"]} for r in rows if "step" in r]
    if out.returncode or len(steps_) < steps:
        return {"block": block, "error": out.stderr[-600:]}
    later = [r["step_s"] for r in steps_[1:]]
    return {"block": block, "overrides": overrides, "steps": steps_, "compile_step_s": steps_[0]["step_s"],
            "later_steps_s": round(sum(later), 1), "mean_step_s": round(sum(later) / len(later), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=ROOT / "runs/real-flow-full-seed0/corpus")
    ap.add_argument("--model", type=Path, default=ROOT / "models/smollm2-135m")
    ap.add_argument("--config", type=Path, default=ROOT / "configs/smollm2-135m-books.yaml")
    ap.add_argument("--blocks", default="128,256,512,1024")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--json", type=Path, default=None, help="default: a new file under benchmarks/results/")
    a = ap.parse_args()
    from rich.console import Console
    from rich.table import Table

    if a.steps < 2:
        raise SystemExit("--steps: at least 2 (the first one compiles)")
    if not (a.corpus / "versions").is_dir():
        raise SystemExit(f"{a.corpus}: not a corpus; run python -m benchmarks.real_flow first (its OUT/corpus)")
    record = Record("flow_step", a.config.stem, path=a.json)
    cells = []
    for b in [int(x) for x in a.blocks.split(",")]:
        cells.append(cell(a.config.resolve(), a.corpus.resolve(), a.model.resolve(), b, a.steps, a.sets))
        print(json.dumps({k: v for k, v in cells[-1].items() if k not in ("overrides", "steps")}), flush=True)
    ok = [c for c in cells if "error" not in c]
    ref = next((c for c in ok if c["block"] == 512), ok[0] if ok else None)
    for c in ok:
        c["vs_512"] = round(c["later_steps_s"] / ref["later_steps_s"], 3) if ref else None
        c["same_losses_as_512"] = bool(ref) and all(
            abs(x["loss"] - y["loss"]) < 1e-3 for x, y in zip(c["steps"], ref["steps"], strict=True))
    t = Table(title=f"the flow's LoRA step at 4,096 tokens, {a.steps - 1} steps after the compiling one")
    for col in ("block", "compile step s", "later steps s", "mean s", "vs 512", "same losses"):
        t.add_column(col, justify="right")
    for c in cells:
        if "error" in c:
            t.add_row(str(c["block"]), "error", c["error"][-60:], "", "", "")
            continue
        t.add_row(str(c["block"]), f"{c['compile_step_s']:.1f}", f"{c['later_steps_s']:.1f}", f"{c['mean_step_s']:.1f}",
                  f"{c['vs_512']:.2f}", str(c["same_losses_as_512"]))
    Console().print(t)
    record.write({"benchmark": "flow_step", "cells": cells})


if __name__ == "__main__":
    main()
