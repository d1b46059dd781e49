"""`bookft plan` at scale: Llama-3.1-8B (preset shape) on v5p-128 and v5p-512, AOT on this host.

    python -m benchmarks.plan                                   # peaks at 1M and 4M, ring + usp, offload_input
    python -m benchmarks.plan --strategies ring,usp,allgather,ulysses --max-seq-len
    python -m benchmarks.plan --topologies v5p-128 --seq-lens 1048576 --remats full,offload
    python -m benchmarks.plan --topologies v5p-128 --strategies ring --max-seq-len --start 16777216

Per cell: per-chip peak HBM, temporaries, fits, compile time; with --max-seq-len the longest
sequence that fits per strategy (doubling, then bisection). MaxText 0.2.5 figures on the same AOT
path (../shared/STACK-FACTS.md): ring 1M 14.8 GiB (dq3) / 17.1 default; ring 4M 32.5 GiB (dq3 +
vocab tiling 16). Each run writes a new benchmarks/results/plan_<config>_v5p-aot_<date>.json holding
the newest earlier file's cells and searches and its own (a cell of the same program is reused, not
recompiled).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from benchmarks.common import Record, latest

MAXTEXT = {("ring", 1048576): 14.8, ("ring", 4194304): 32.5}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/llama-3.1-8b-v5p-1m.yaml")
    ap.add_argument("--topologies", default="v5p-128,v5p-512")
    ap.add_argument("--strategies", default="ring,usp")
    ap.add_argument("--remats", default="offload_input")
    ap.add_argument("--seq-lens", default="1048576,4194304")
    ap.add_argument("--max-seq-len", action="store_true")
    ap.add_argument("--start", type=int, default=1 << 20, help="--max-seq-len: first length tried")
    ap.add_argument("--set", action="append", default=[], help="config override key=value (repeatable)")
    a = ap.parse_args()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from rich.console import Console
    from rich.table import Table

    from bookft.plan.planner import max_seq_len
    from bookft.plan.record import cell_key, reusable, timed_plan
    from bookft.plan.topology import parse_topology, topology_devices
    from bookft.train.config import load_run_config

    cfg = load_run_config(a.config, a.set)
    prev = latest("plan") or {}
    result = {"cells": prev.get("cells", []), "max_seq_len": prev.get("max_seq_len", [])}
    record = Record("plan", Path(a.config).stem, hardware="v5p-aot")
    cells = {cell_key(c): c for c in result.get("cells", [])}

    def save():
        result["cells"] = list(cells.values())
        record.write(result)

    def key(topo, n, s, r):
        return cfg.name, topo.libtpu_name, n, s, r, cfg.model.mlp_chunk, cfg.train.loss_chunk

    def run_cell(topo, devices, n, s, r):
        """A recorded cell of the same program, or a new compile recorded at once (resumable)."""
        old = reusable(cells.values(), key(topo, n, s, r))
        if old is not None:
            return None, old
        res, cell = timed_plan(cfg, topo, devices, seq_len=n, strategy=s, remat=r, overrides=a.set)
        cell["maxtext_gib"] = MAXTEXT.get((s, n)) if topo.chips == 64 else None
        print(cell, flush=True)
        cells[cell_key(cell)] = cell
        save()
        return res, cell

    for tname in a.topologies.split(","):
        topo = parse_topology(tname)
        devices = topology_devices(topo)
        for s in a.strategies.split(","):
            for r in a.remats.split(","):
                if not a.max_seq_len:
                    for n in (int(x) for x in a.seq_lens.split(",")):
                        run_cell(topo, devices, n, s, r)
                    continue
                # lengths this program was already planned at (same code and knobs): not recompiled
                known = {c["seq_len"]: c["fits"] for c in cells.values()
                         if reusable([c], key(topo, c["seq_len"], s, r)) is c}
                t0 = time.perf_counter()
                best, tried = max_seq_len(cfg, topo, strategy=s, remat=r, start=a.start, devices=devices, known=known,
                                          evaluate=lambda n, t=topo, d=devices, s=s, r=r: run_cell(t, d, n, s, r)[0])
                row = {"topology": topo.libtpu_name, "strategy": s, "remat": r, "config": cfg.name,
                       "mlp_chunk": cfg.model.mlp_chunk, "loss_chunk": cfg.train.loss_chunk, "max_seq_len": best,
                       "start": a.start, "known": sorted(known.items()),
                       "tried": [(x.seq_len, x.fits, x.as_dict().get("peak_gib"), x.error) for x in tried],
                       "wall_s": time.perf_counter() - t0, "overrides": a.set}
                print(row, flush=True)
                result.setdefault("max_seq_len", []).append(row)
                save()
    table = Table(title=f"bookft plan: {cfg.name}")
    for c in ("topology", "seq_len", "strategy", "remat", "fits", "peak GiB", "MaxText GiB", "temp GiB", "compile s",
              "CPU s"):
        table.add_column(c)
    num = lambda x, f: "-" if x is None else format(x, f)  # noqa: E731
    for c in result.get("cells", []):
        table.add_row(c["topology"], f"{c['seq_len']:,}", c["strategy"], c["remat"], str(c["fits"]),
                      num(c["peak_gib"], ".1f"), num(c.get("maxtext_gib"), ".1f"), num(c["temp_gib"], ".1f"),
                      num(c["compile_s"], ".0f"), num(c.get("cpu_s"), ".0f"))
    Console().print(table)
    save()


if __name__ == "__main__":
    main()
