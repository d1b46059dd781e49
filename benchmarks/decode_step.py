"""Benchmark: one greedy decode step of a real model, the sharded step against the one-device step.

The eval's generation (bookft/model/generate.py) prefills a batch of prompts, then emits one token per
step over the KV cache. The sharded step (a cache stacked over layers, written by a one-hot select,
read through a layer scan) keeps a sequence-sharded cache sharded; on one device the cache is one
buffer per layer, written in place. Both run here on the same zero cache and the same weights, after
one warm-up step, in float32 as the flow's preset scores, and must return the same logits. Prints a
table and writes a new benchmarks/results/decode_step_<model>_<hardware>_<date>.json.

    python -m benchmarks.decode_step [--model models/smollm2-135m] [--batch 4] [--cache 4160] [--steps 16]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from benchmarks.common import Record
from bookft.benchrecord import ROOT


def timed_steps(kind: str, model, batch: int, cache: int, steps: int):
    """(seconds of the first step, median seconds of the others, last logits) of `steps` decode steps."""
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from bookft.model import generate as G

    graphdef, state = nnx.split(model)
    c = model.config
    shape = (c.num_layers, batch, cache, c.num_kv_heads, c.head_dim or c.hidden_size // c.num_heads)
    k, v = jnp.zeros(shape), jnp.zeros(shape)
    step = G.decode_step_fn(graphdef, kind == "one-device")
    if kind == "one-device":  # per-layer head-major buffers [B,Hkv,T,D]
        k, v = (tuple(jnp.swapaxes(x, 1, 2) for x in c) for c in (k, v))
    valid, pos = jnp.ones((batch, cache), bool), jnp.zeros((batch, cache), jnp.int32)
    token, times = jnp.zeros((batch,), jnp.int32), []
    for i in range(steps):
        t = time.perf_counter()
        at = cache - steps + i
        logits, k, v, valid, pos = step(state, k, v, valid, token, jnp.full((batch,), at, jnp.int32), jnp.int32(at),
                                        None, pos)
        logits.block_until_ready()
        times.append(time.perf_counter() - t)
    return times[0], float(np.median(times[1:])), np.asarray(logits)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=ROOT / "models/smollm2-135m")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--cache", type=int, default=4160, help="cache slots (a 4,096-token prompt + 64 new)")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    import jax
    import numpy as np
    from rich.console import Console
    from rich.table import Table

    from bookft.model.hf_io import load_hf

    record = Record("decode_step", a.model.name, path=a.json)
    record.use_devices(jax.devices())
    import dataclasses

    _, config = load_hf(a.model)  # float32 compute, as the eval's preset scores (the folder's default is bf16)
    model, _ = load_hf(a.model, like=dataclasses.replace(config, compute_dtype="float32", param_dtype="float32"))
    rows, logits = [], {}
    for kind in ("sharded", "one-device"):
        first, per, logits[kind] = timed_steps(kind, model, a.batch, a.cache, a.steps)
        rows.append({"step": kind, "first_s": round(first, 3), "median_s": round(per, 4)})
    diff = float(np.max(np.abs(logits["sharded"] - logits["one-device"])))
    t = Table(title=f"decode step, batch {a.batch}, {a.cache:,} cache slots, {a.model.name}")
    for col in ("step", "first (compile) s", "median s"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["step"], f"{r['first_s']:.2f}", f"{r['median_s']:.3f}")
    Console().print(t)
    print(f"one-device / sharded: {rows[1]['median_s'] / rows[0]['median_s']:.2f}x; max |logit diff| {diff:.2e}")
    record.write({"benchmark": "decode_step", "model": str(a.model), "batch": a.batch, "cache": a.cache,
                  "steps": a.steps, "rows": rows, "ratio": round(rows[1]["median_s"] / rows[0]["median_s"], 3),
                  "max_abs_logit_diff": diff})


if __name__ == "__main__":
    main()
