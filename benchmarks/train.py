"""Train-step throughput of the tiny preset per strategy on simulated CPU devices, and (with
--aot) per-chip peak HBM + compile time of the Llama-3.1-8B train step for TPU v5p-128.

    python benchmarks/train.py                 # CPU: 4 and 8 devices x strategies
    python benchmarks/train.py --aot --seq-lens 1048576,4194304 --strategies ring,usp --remats full,offload

Each CPU cell runs in its own process (the simulated device count is fixed at start-up), compiles
once, then times `--steps` steps of random tokens. Writes benchmarks/results/train.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "train.json"

CELL = r"""
import json, os, sys, time
n, strategy, seq, steps = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={n}"
import jax, jax.numpy as jnp, numpy as np
from bookft.train.config import load_run_config
from bookft.parallel.mesh import make_mesh
from bookft.train.setup import init_state, make_attend
from bookft.train.step import BATCH_FIELDS, StepSettings, batch_sharding, jit_train_step, make_train_step
mesh_axes = {"usp": {"data": 1, "fsdp": 1, "context": n // 2, "context_ulysses": 2}}.get(
    strategy, {"data": 1, "fsdp": 1, "context": n})
cfg = load_run_config("configs/tiny-cpu.yaml", [f"attention.strategy={strategy}", "parallel.cpu_devices=0",
                      "parallel.mesh=" + json.dumps(mesh_axes), "data.batch_size=2"])
mesh = make_mesh(cfg.parallel)
attend, used = make_attend(cfg, mesh)
ts = init_state(cfg, mesh)
state, frozen = ts.state, ts.frozen
settings = StepSettings(cfg.train.loss_chunk, 0.0, "stop")
step = jit_train_step(make_train_step(ts.graphdef, ts.tx, attend, mesh, settings), ts.state_sh, ts.frozen_sh, mesh)
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


def aot_cells(seq_lens, strategies, remats, topology):
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from bookft.plan.planner import plan_fast
    from bookft.plan.topology import parse_topology, topology_devices
    from bookft.train.config import load_run_config

    cfg = load_run_config("configs/llama-3.1-8b-v5p-1m.yaml")
    topo = parse_topology(topology)
    devices = topology_devices(topo)
    rows = []
    for n in seq_lens:
        for s in strategies:
            for r in remats:
                t0 = time.perf_counter()
                res = plan_fast(cfg, topo, devices, seq_len=n, strategy=s, remat=r)
                d = res.as_dict()
                row = {"topology": topo.libtpu_name, "seq_len": n, "strategy": s, "remat": r, "fits": res.fits,
                       "peak_gib": d.get("peak_gib"), "temp_gib": d.get("temp_gib"), "compile_s": res.compile_s,
                       "wall_s": time.perf_counter() - t0, "error": res.error}
                print(row, flush=True)
                rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", default="4,8")
    ap.add_argument("--strategies", default="ring,allgather,ulysses,usp")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--aot", action="store_true")
    ap.add_argument("--seq-lens", default="1048576,4194304")
    ap.add_argument("--remats", default="full")
    ap.add_argument("--topology", default="v5p-128")
    a = ap.parse_args()
    from rich.console import Console
    from rich.table import Table

    result = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    result["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform(),
                         "load_avg_at_start": os.getloadavg()[0]}
    t = Table(title="bookft train benchmark")
    if a.aot:
        rows = aot_cells([int(x) for x in a.seq_lens.split(",")], a.strategies.split(","), a.remats.split(","),
                         a.topology)
        result["aot"] = rows
        for c in ("topology", "seq_len", "strategy", "remat", "fits", "peak GiB", "compile s"):
            t.add_column(c)
        for r in rows:
            t.add_row(r["topology"], f"{r['seq_len']:,}", r["strategy"], r["remat"], str(r["fits"]),
                      "-" if r["peak_gib"] is None else f"{r['peak_gib']:.1f}",
                      "-" if r["compile_s"] is None else f"{r['compile_s']:.0f}")
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
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
