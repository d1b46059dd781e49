"""Benchmark: streaming load of a 1B-shape checkpoint (Llama-3.2-1B shapes, random weights).

Writes a random safetensors checkpoint (sharded, like HF's) with the configs/models/llama-3.2-1b.yaml
shapes, then loads it with `bookft.model.load_hf` in a fresh child process and reports the load
time and the child's peak RSS (VmHWM), also net of the RSS after imports. Target: peak RSS
< 1.3 x checkpoint size. The generated checkpoint is deleted afterwards unless --keep.

    python benchmarks/model.py [--dtype float32|bfloat16] [--dir /tmp/bookft-bench-1b] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def generate(path: Path, dtype: str) -> int:
    import numpy as np
    from safetensors.numpy import save_file

    from bookft.config import from_dict, read_yaml
    from bookft.model import ModelConfig, abstract_model, config_to_hf
    from bookft.model.hf_config import hf_tensor_names
    from bookft.model.hf_io import hf_shape

    config = from_dict(ModelConfig, read_yaml(ROOT / "configs/models/llama-3.2-1b.yaml")["model"], "model")
    model = abstract_model(config)
    import ml_dtypes

    np_dtype = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(np.float32)
    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    names = hf_tensor_names(config, model.layers.names)
    shard, shard_bytes, n_files, weight_map, total = {}, 0, 0, {}, 0

    def flush():
        nonlocal shard, shard_bytes, n_files
        if shard:
            n_files += 1
            fname = f"model-{n_files:05d}.safetensors"
            save_file(shard, str(path / fname), metadata={"format": "pt"})
            weight_map.update(dict.fromkeys(shard, fname))
            shard, shard_bytes = {}, 0

    for hf_name, (ours, layer) in names.items():
        key = ours.split(".")
        var = getattr(model.layers, key[1]) if layer is not None else getattr(model, key[0])
        shape = tuple(var.get_value().shape)
        shape = hf_shape(key[-1], shape[1:] if layer is not None else shape)
        t = (0.02 * rng.standard_normal(shape, dtype=np.float32)).astype(np_dtype)
        shard[hf_name] = t
        shard_bytes += t.nbytes
        total += t.nbytes
        if shard_bytes > 1 << 30:
            flush()
    flush()
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (path / "model.safetensors.index.json").write_text(json.dumps(index))
    (path / "config.json").write_text(json.dumps(config_to_hf(config, dtype=np_dtype.name)))
    return total


def _proc_status(key: str) -> int:
    """VmRSS / VmHWM of this process in bytes (VmHWM, unlike ru_maxrss, does not inherit the
    parent's peak across fork + exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{key} not in /proc/self/status")


def load_child(path: str, dtype: str) -> None:
    """Run in a fresh process: import, measure baseline RSS, load, report JSON on stdout."""
    import jax

    import bookft.model as bm

    jax.numpy.zeros(1).block_until_ready()
    base = _proc_status("VmRSS")
    t0 = time.perf_counter()
    model, config = bm.load_hf(path, dtype=dtype)
    from flax import nnx

    jax.block_until_ready(jax.tree.leaves(nnx.state(model)))
    seconds = time.perf_counter() - t0
    peak = _proc_status("VmHWM")
    n_params = sum(x.size for x in jax.tree.leaves(nnx.state(model)))
    print(json.dumps({"load_seconds": seconds, "peak_rss_bytes": peak, "rss_after_imports_bytes": base,
                      "params": int(n_params)}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--dir", default="/tmp/bookft-bench-1b")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--generate", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        load_child(args.child, args.dtype)
        return
    if args.generate:
        print(generate(Path(args.generate), args.dtype))
        return
    from rich.console import Console
    from rich.table import Table

    path = Path(args.dir)
    try:
        t0 = time.perf_counter()
        env = {**os.environ, "JAX_PLATFORMS": "cpu"}
        gen = subprocess.run([sys.executable, __file__, "--generate", str(path), "--dtype", args.dtype],
                             capture_output=True, text=True, env=env, check=True)
        size = int(gen.stdout.strip().splitlines()[-1])
        gen_s = time.perf_counter() - t0
        proc = subprocess.run([sys.executable, __file__, "--child", str(path), "--dtype", args.dtype],
                              capture_output=True, text=True, env=env, check=True)
        child = json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        if not args.keep:
            shutil.rmtree(path, ignore_errors=True)
    peak, base = child["peak_rss_bytes"], child["rss_after_imports_bytes"]
    result = {
        "benchmark": "model.load_hf streaming, llama-3.2-1b shapes, random weights",
        "dtype": args.dtype, "checkpoint_bytes": size, "params": child["params"],
        "generate_seconds": round(gen_s, 1), "load_seconds": round(child["load_seconds"], 2),
        "load_gb_per_s": round(size / child["load_seconds"] / 1e9, 3),
        "peak_rss_bytes": peak, "rss_after_imports_bytes": base,
        "peak_rss_over_checkpoint": round(peak / size, 3),
        "peak_rss_net_of_imports_over_checkpoint": round((peak - base) / size, 3),
        "target": "peak_rss_over_checkpoint < 1.3", "passed": peak / size < 1.3,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "load_avg_1m": os.getloadavg()[0]},
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    table = Table(title="bookft.model load_hf (1B shapes)")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("checkpoint", f"{size / 1e9:.2f} GB ({args.dtype}, {child['params'] / 1e9:.3f} B params)")
    table.add_row("load time", f"{child['load_seconds']:.1f} s ({result['load_gb_per_s']} GB/s)")
    table.add_row("peak RSS", f"{peak / 1e9:.2f} GB = {peak / size:.2f} x checkpoint")
    table.add_row("RSS after imports", f"{base / 1e9:.2f} GB")
    table.add_row("peak - imports", f"{(peak - base) / 1e9:.2f} GB = {(peak - base) / size:.2f} x checkpoint")
    table.add_row("target < 1.3x", "pass" if result["passed"] else "FAIL")
    Console().print(table)
    out = ROOT / "benchmarks" / "results" / "model.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
