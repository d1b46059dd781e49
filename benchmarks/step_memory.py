"""The train step's XLA memory on this host's CPU backend, compiled ahead of time (no weights, no data).

For a run config, at each --seq-len and with --set overrides: the step that `bookft train` runs,
lowered with abstract inputs and compiled by XLA for the CPU, then `memory_analysis()`: temporaries,
arguments and outputs per device. Prints a table and writes JSON. Used to size a one-device GPU run
before spending device time on it (the temporaries' structure is the program's, not the backend's).

    python -m benchmarks.step_memory [-c configs/smollm2-135m-cpu.yaml] [--seq-len 8192,32768]
        [--devices 1] [--set key=value ...] [--preset gpu-scan] [--json PATH]

Writes a new benchmarks/results/step_memory_<preset>_<hardware>_<date>.json (--preset names the
settings: gpu-scan for gpu.sh's, gpu-unrolled with --set model.scan_layers=false added).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from benchmarks.common import Record

GPU_SET = ["model.hf_path=models/smollm2-135m", "model.compute_dtype=bfloat16", "parallel.cpu_devices=1",
           "parallel.mesh.context=1", "attention.strategy=local"]  # benchmarks/gpu.sh's run settings


def step_memory(config: str, seq_len: int, overrides: list[str]) -> dict:
    from bookft.train.config import load_run_config
    from bookft.train.program import build_program, resolve_model_config, train_mesh

    cfg = load_run_config(config, [*overrides, f"data.seq_len={seq_len}"])
    cfg = resolve_model_config(cfg, cfg.model.hf_path)
    cfg, mesh, _ = train_mesh(cfg)
    program = build_program(cfg, mesh)
    t0 = time.perf_counter()
    m = program.step.lower(*program.abstract_inputs(seq_len)).compile().memory_analysis()
    gib = 2**30
    return {"seq_len": seq_len, "overrides": overrides, "compile_s": round(time.perf_counter() - t0, 1),
            "temp_gib": round(m.temp_size_in_bytes / gib, 2), "argument_gib": round(m.argument_size_in_bytes / gib, 2),
            "output_gib": round(m.output_size_in_bytes / gib, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-c", "--config", default="configs/smollm2-135m-cpu.yaml")
    ap.add_argument("--seq-len", default="8192,32768")
    ap.add_argument("--devices", type=int, default=1, help="simulated CPU devices (the config's mesh)")
    ap.add_argument("--set", action="append", default=None, help="key=value; default: gpu.sh's run settings")
    ap.add_argument("--preset", default="gpu-scan", help="a word for the result's name")
    ap.add_argument("--json", type=Path, default=None, help="default: a new file under benchmarks/results/")
    a = ap.parse_args()
    record = Record("step_memory", a.preset, path=a.json)
    from bookft.parallel.mesh import ensure_cpu_devices

    ensure_cpu_devices(a.devices)
    overrides = GPU_SET if a.set is None else a.set
    rows = [step_memory(a.config, int(n), overrides) for n in a.seq_len.split(",")]
    print(f"{'seq_len':>8} {'temp GiB':>9} {'args GiB':>9} {'compile s':>10}  overrides")
    for r in rows:
        print(f"{r['seq_len']:>8} {r['temp_gib']:>9.2f} {r['argument_gib']:>9.2f} {r['compile_s']:>10.1f}  "
              f"{' '.join(r['overrides'])}")
    record.write({"benchmark": "step_memory", "config": a.config, "devices": a.devices, "rows": rows})


if __name__ == "__main__":
    main()
