"""Train-step throughput of the tiny preset per strategy on simulated CPU devices, and (with
--aot) per-chip peak HBM + compile time of the Llama-3.1-8B train step for TPU v5p-128.

    python -m benchmarks.train                 # CPU: 4 and 8 devices x strategies
    python -m benchmarks.train --aot           # 8B on v5p-128: 1M and 4M x remat policies x ring/usp/allgather

Each CPU cell runs in its own process (the simulated device count is fixed at start-up), compiles
once, then times `--steps` steps of random tokens. Writes a new
benchmarks/results/train_default_<hardware>_<date>.json holding the newest earlier file's other part.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.common import Record, latest

CELL = r"""
import json, os, sys, time
n, strategy, seq, steps = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={n}"
import jax, jax.numpy as jnp, numpy as np
from bookft.train.config import load_run_config
from bookft.parallel.mesh import make_mesh
from bookft.train.program import build_program
from bookft.train.step import BATCH_FIELDS, batch_sharding
mesh_axes = {"usp": {"data": 1, "fsdp": 1, "context": n // 2, "context_ulysses": 2}}.get(
    strategy, {"data": 1, "fsdp": 1, "context": n})
cfg = load_run_config("configs/tiny-cpu.yaml", [f"attention.strategy={strategy}", "parallel.cpu_devices=0",
                      "parallel.mesh=" + json.dumps(mesh_axes), "data.batch_size=2"])
mesh = make_mesh(cfg.parallel)
program = build_program(cfg, mesh)
state, frozen = program.init_state()
step = program.step
rng = np.random.default_rng(0)
shape = (1, 2, seq)
host = {"input_ids": rng.integers(0, cfg.model.vocab_size, shape).astype(np.int32),
        "positions": np.broadcast_to(np.arange(seq, dtype=np.int32), shape).copy(),
        "segment_ids": np.ones(shape, np.int32), "weights": np.ones(shape, np.float32)}
host["targets"] = np.roll(host["input_ids"], -1, -1)
bsh = batch_sharding(mesh)
batch = {f: jax.device_put(host[f], bsh) for f in BATCH_FIELDS}
t0 = time.perf_counter(); state, m = step(state, frozen, batch); float(m["loss"]); compile_s = time.perf_counter() - t0
t0 = time.perf_counter()
for _ in range(steps):
    state, m = step(state, frozen, batch)
float(m["loss"])
dt = (time.perf_counter() - t0) / steps
print(json.dumps({"devices": n, "strategy": strategy, "seq_len": seq, "tokens_per_step": 2 * seq,
                  "step_s": dt, "tokens_per_s": 2 * seq / dt, "compile_s": compile_s}))
"""


def cpu_cells(devices, strategies, seq, steps):
    rows = []
    for n in devices:
        for s in strategies:
            out = subprocess.run([sys.executable, "-c", CELL, str(n), s, str(seq), str(steps)], capture_output=True,
                                 text=True, cwd=Path(__file__).resolve().parents[1])
            line = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
            row = json.loads(line[-1]) if line else {"devices": n, "strategy": s, "error": out.stderr[-400:]}
            print(row, flush=True)
            rows.append(row)
    return rows


def aot_cells(record, result, seq_lens, strategies, remats, topology, config, overrides):
    """Per-chip peak HBM + compile time of the 8B train step per length x remat x strategy, through
    the planner (bookft.plan). A cell already in the newest train or plan result for the same program
    (same key, train-step code unchanged since its commit) is reused; every new cell is written at
    once, so an interrupted run resumes where it stopped."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from bookft.plan.record import cell_key, reusable, timed_cell
    from bookft.plan.topology import parse_topology, topology_devices
    from bookft.train.config import load_run_config

    cfg = load_run_config(config, overrides)
    topo = parse_topology(topology)
    devices = None
    plan_rows = (latest("plan") or {}).get("cells", [])
    rows = {cell_key(r): r for r in result.get("aot", [])}
    for n in seq_lens:
        for r in remats:
            for s in strategies:
                key = (cfg.name, topo.libtpu_name, n, s, r, cfg.model.mlp_chunk, cfg.train.loss_chunk)
                row = reusable(list(rows.values()), key)
                if row is None and (old := reusable(plan_rows, key)):
                    row = {**old, "source": "plan"}
                if row is None:
                    devices = devices or topology_devices(topo)
                    row = timed_cell(cfg, topo, devices, seq_len=n, strategy=s, remat=r, overrides=overrides)
                print(row, flush=True)
                rows[key] = row
                result["aot"] = list(rows.values())
                record.write(result)
    return [rows[k] for k in rows if k[0] == topo.libtpu_name and k[1] in seq_lens]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", default="4,8")
    ap.add_argument("--strategies", default="ring,allgather,ulysses,usp")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--aot", action="store_true")
    ap.add_argument("--seq-lens", default="1048576,4194304")
    ap.add_argument("--aot-strategies", default="ring,usp,allgather")
    ap.add_argument("--remats", default="offload_input,full,save_dots,offload,none")
    ap.add_argument("--config", default="configs/llama-3.1-8b-v5p-1m.yaml", help="AOT: run config")
    ap.add_argument("--set", action="append", default=[], help="AOT: config override key=value (repeatable)")
    ap.add_argument("--topology", default="v5p-128")
    a = ap.parse_args()
    from rich.console import Console
    from rich.table import Table

    prev = latest("train") or {}
    result = {k: prev[k] for k in ("cpu", "aot") if k in prev}
    record = Record("train", "default")
    t = Table(title="bookft train benchmark")
    if a.aot:
        rows = aot_cells(record, result, [int(x) for x in a.seq_lens.split(",")], a.aot_strategies.split(","),
                         a.remats.split(","), a.topology, a.config, a.set)
        for c in ("seq_len", "remat", "strategy", "fits", "peak GiB", "compile s", "CPU s", "load", "source"):
            t.add_column(c)
        num = lambda x, f: "-" if x is None else format(x, f)  # noqa: E731
        for r in rows:
            fits = str(r["fits"]) if not r["error"] else r["error"][:40]
            t.add_row(f"{r['seq_len']:,}", r["remat"], r["strategy"], fits,
                      num(r["peak_gib"], ".1f"), num(r["compile_s"], ".0f"), num(r.get("cpu_s"), ".0f"),
                      num(r.get("load_avg_start", r.get("load_avg")), ".1f"), r.get("source", "train"))
    else:
        rows = cpu_cells([int(x) for x in a.devices.split(",")], a.strategies.split(","), a.seq, a.steps)
        result["cpu"] = rows
        for c in ("devices", "strategy", "seq_len", "tokens/s", "step s", "compile s"):
            t.add_column(c)
        for r in rows:
            if "error" in r:
                t.add_row(str(r["devices"]), r["strategy"], "-", "error", "-", "-")
            else:
                t.add_row(str(r["devices"]), r["strategy"], str(r["seq_len"]), f"{r['tokens_per_s']:,.0f}",
                          f"{r['step_s']:.3f}", f"{r['compile_s']:.1f}")
    Console().print(t)
    record.write(result)


if __name__ == "__main__":
    main()
