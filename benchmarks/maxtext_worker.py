"""One ahead-of-time compile of the Llama-3.1-8B train step, by bookft or by MaxText, in this process.

    python -m benchmarks.maxtext_worker --tool bookft  --seq-len 1048576 --topology v5p-128
    python -m benchmarks.maxtext_worker --tool maxtext --seq-len 1048576 --topology v5p-128

benchmarks/maxtext_compare.py runs it once per cell, in a fresh process (a compile at millions of
tokens holds gigabytes that are only returned when the process ends), under the Python that has
the versions being compared. It prints one JSON line prefixed with RESULT_TAG: `fits`, `peak_gib`
(arguments + outputs - aliased + temporaries + generated code, the rule bookft plan uses, taken
from XLA's `memory_analysis()` for both tools), `temp_gib`, `host_temp_gib`, `compile_s`, `error`
and the `versions` of jax, jaxlib and libtpu.

Design choices:
- MaxText's side is its own AOT entry point, `maxtext.trainers.pre_train.train_compile.main`, run
  with MaxText's flags. Its `jit_and_compile` is wrapped to keep the compiled object, because
  `main` only prints `memory_analysis()`; parsing that print would tie the figures to its repr.
- bookft's side is `bookft.plan.planner.plan_fast`, the function `bookft plan` calls.
- A compile that runs out of HBM (or of the host memory offloading may use) is a "does not fit"
  answer, not a failure: XLA reports RESOURCE_EXHAUSTED for both tools the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from importlib import metadata
from importlib.resources import files

RESULT_TAG = "MAXTEXT_COMPARE_RESULT "
GIB = 2**30
CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs",
                      "llama-3.1-8b-v5p-1m.yaml")


def versions() -> dict[str, str | None]:
    out = {}
    for dist in ("jax", "jaxlib", "libtpu", "tokamax", "maxtext", "flax"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    out["python"] = ".".join(map(str, sys.version_info[:3]))
    return out


def maxtext_flags(seq_len: int, topology: str, n_devices: int, *, batch: int = 1) -> list[str]:
    """MaxText's settings equal to bookft's preset (configs/llama-3.1-8b-v5p-1m.yaml): stock
    Llama-3.1-8B, one sequence per step, every device on the context axis with ring attention over
    Tokamax splash (MaxText's TPU ring needs it), 512-token blocks, bf16 activations with fp32
    weights, and each layer's input offloaded to host with everything else recomputed (bookft's
    offload_input). dq_reduction_steps=3 and 16 vocab tiles are MaxText's own long-context memory
    settings: without them its ring step fails at 4M (fp32 dq per KV block, full-vocab logits)."""
    return [
        "model_name=llama3.1-8b", f"compile_topology={topology}", "compile_topology_num_slices=1",
        f"max_target_length={seq_len}", f"per_device_batch_size={batch / n_devices}",
        "ici_fsdp_parallelism=1", f"ici_context_parallelism={n_devices}", "ici_data_parallelism=1",
        "context_parallel_strategy=ring", "context_parallel_load_balance=true", "use_tokamax_splash=true",
        "attention=flash", "sa_block_q=512", "sa_block_kv=512", "sa_block_kv_compute=512",
        "remat_policy=custom", "decoder_layer_input=offload", "dq_reduction_steps=3", "num_vocab_tiling=16",
        "dtype=bfloat16", "weight_dtype=float32", "scan_layers=true", "enable_checkpointing=false",
        "dataset_type=synthetic", "run_name=maxtext_compare", "base_output_directory=/tmp/maxtext_compare",
    ]


def exhausted(text: str) -> bool:
    """XLA's out-of-memory answers (HBM or host offload space), for either tool."""
    low = text.lower()
    return "resource_exhausted" in low or "out of memory" in low or "exceeds available hbm" in low


def stats(compiled) -> dict:
    m = compiled.memory_analysis()
    peak = (m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes
            + m.temp_size_in_bytes + m.generated_code_size_in_bytes)
    return {"peak_gib": peak / GIB, "temp_gib": m.temp_size_in_bytes / GIB,
            "argument_gib": m.argument_size_in_bytes / GIB,
            "host_temp_gib": getattr(m, "host_temp_size_in_bytes", 0) / GIB}


def compile_maxtext(seq_len: int, topology: str, n_devices: int, capacity_gib: float) -> dict:
    from maxtext.trainers.pre_train import train_compile

    kept = {}
    original = train_compile.jit_and_compile

    def keep(*args, **kwargs):
        kept["compiled"] = original(*args, **kwargs)
        return kept["compiled"]

    train_compile.jit_and_compile = keep
    argv = ["train_compile", str(files("maxtext") / "configs" / "base.yml"),
            *maxtext_flags(seq_len, topology, n_devices)]
    t0 = time.perf_counter()
    try:
        train_compile.main(argv)
    except Exception as e:  # noqa: BLE001 - an OOM is an answer; anything else is reported as is
        text = f"{type(e).__name__}: {e}"
        return {"fits": False, "compile_s": time.perf_counter() - t0, "flags": argv[2:],
                "error": ("does not fit: " if exhausted(text) else "failed: ") + text.strip()[:600]}
    out = stats(kept["compiled"])
    return {**out, "fits": out["peak_gib"] <= capacity_gib, "compile_s": time.perf_counter() - t0,
            "flags": argv[2:], "error": None}


def compile_bookft(seq_len: int, topology: str) -> dict:
    from bookft.plan.planner import plan_fast
    from bookft.plan.topology import parse_topology, topology_devices
    from bookft.train.config import load_run_config

    cfg = load_run_config(CONFIG)
    topo = parse_topology(topology)
    t0 = time.perf_counter()
    res = plan_fast(cfg, topo, topology_devices(topo), seq_len=seq_len, strategy=cfg.attention.strategy,
                    remat=cfg.model.remat)
    d = res.as_dict()
    return {"fits": res.fits, "peak_gib": d.get("peak_gib"), "temp_gib": d.get("temp_gib"),
            "argument_gib": d.get("argument_gib"), "compile_s": time.perf_counter() - t0,
            "error": res.error, "config": os.path.relpath(CONFIG, os.path.dirname(os.path.dirname(CONFIG))),
            "mesh": res.mesh}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tool", choices=("bookft", "maxtext"), required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--topology", default="v5p-128", help="as users say it: v5p-128, tpu7x-128")
    a = ap.parse_args()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v5p-8")
    os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    if a.tool == "bookft":
        row = compile_bookft(a.seq_len, a.topology)
    else:
        from bookft.plan.topology import parse_topology

        topo = parse_topology(a.topology)
        row = compile_maxtext(a.seq_len, a.topology, topo.n_devices, topo.hbm_per_device / GIB)
    row.update(tool=a.tool, seq_len=a.seq_len, topology=a.topology, versions=versions())
    print(RESULT_TAG + json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
