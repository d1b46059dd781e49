"""Attention benchmarks: CPU time/memory vs cp, TPU AOT per-chip HBM, zig-zag load balance.

Usage:
  python -m benchmarks.attention cpu     # simulated CPU devices: fwd+bwd time and per-device bytes
  python -m benchmarks.attention tpu [--budget-s N] [--cases topo:strategy:S,...]
                                        # AOT compile for TPU topologies with libtpu (no TPU needed)
  python -m benchmarks.attention balance  # non-empty kv blocks per device, max/mean: plain, zig-zag,
                                          # arranged documents + zig-zag (causal, books, data/sample)
Each part writes a new benchmarks/results/attention_default_<hardware>_<date>.json holding the other
parts' figures from the newest earlier file and its own (bookft.benchrecord's header: the machine,
load, commit, versions, command), and prints a rich table. The TPU part builds the mesh from libtpu's
topology description, uses bf16 Llama-3.1-8B heads (32 q, 8 kv, head_dim 128) and the splash
kernel, and records per chip: argument, output, temp and total bytes from compiled.memory_analysis(),
compile seconds, and whether the compiled HLO contains the splash Mosaic custom call (`tpu_custom_call`).
"""

from __future__ import annotations

import argparse
import json
import os
import time

from benchmarks.common import Record, latest

GiB = 2**30
PARTS = ("balance", "tpu", "cpu")
PREVIOUS: dict = {}  # the parts of the newest earlier file, carried into this run's file
_RUN: dict[str, Record] = {}


def _save(part: str, payload) -> None:
    PREVIOUS[part] = {"date": time.strftime("%Y-%m-%d %H:%M"), **payload}
    _RUN["record"].write(PREVIOUS)


def _table(title, cols, rows):
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    for c in cols:
        t.add_column(c)
    for r in rows:
        t.add_row(*[f"{x:.4g}" if isinstance(x, float) else str(x) for x in r])
    Console().print(t)


def _mesh(devices, strategy, cp, uly=1):
    import numpy as np
    from jax.sharding import Mesh

    if strategy == "usp":
        return Mesh(np.array(devices[: cp]).reshape(1, 1, cp // uly, uly),
                    ("data", "fsdp", "context", "context_ulysses"))
    return Mesh(np.array(devices[:cp]).reshape(1, 1, cp), ("data", "fsdp", "context"))


def _fwd_bwd(attend):
    import jax
    import jax.numpy as jnp

    def loss(q, k, v, seg):
        return jnp.sum(attend(q, k, v, seg, None).astype(jnp.float32))

    return jax.jit(jax.grad(loss, argnums=(0, 1, 2)))


def _mem(compiled):
    m = compiled.memory_analysis()
    args, outs, temp = m.argument_size_in_bytes, m.output_size_in_bytes, m.temp_size_in_bytes
    alias = getattr(m, "alias_size_in_bytes", 0)
    return {"args_bytes": args, "out_bytes": outs, "temp_bytes": temp,
            "total_bytes": args + outs + temp - alias}


def run_cpu(seq=4096, hq=8, hkv=2, d=32):
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp

    from bookft.attention import make_attention

    rows, out = [], []
    q = jnp.ones((1, seq, hq, d), jnp.float32)
    k = jnp.ones((1, seq, hkv, d), jnp.float32)
    seg = jnp.ones((1, seq), jnp.int32)
    cases = [("local", 1)] + [(s, cp) for s in ("allgather", "ulysses", "ring") for cp in (2, 4, 8)]
    cases += [("usp", 4), ("usp", 8)]
    for strategy, cp in cases:
        mesh = None if strategy == "local" else _mesh(jax.devices(), strategy, cp, uly=2)
        attend = make_attention(strategy, "xla", mesh, block_q=256, block_kv=256, load_balanced=True)
        t0 = time.time()
        compiled = _fwd_bwd(attend).lower(q, k, k, seg).compile()
        compile_s = time.time() - t0
        jax.block_until_ready(compiled(q, k, k, seg))
        t0 = time.time()
        for _ in range(2):
            jax.block_until_ready(compiled(q, k, k, seg))
        step = (time.time() - t0) / 2
        rec = {"strategy": strategy, "cp": cp, "seq": seq, "compile_s": round(compile_s, 2),
               "fwd_bwd_s": round(step, 4), **_mem(compiled)}
        out.append(rec)
        rows.append((strategy, cp, rec["fwd_bwd_s"], rec["temp_bytes"] / 2**20, rec["total_bytes"] / 2**20))
    _table(f"CPU fwd+bwd, S={seq}, {hq}q/{hkv}kv heads, D={d}, xla kernel (8 simulated devices)",
           ["strategy", "cp", "seconds", "temp MiB/dev", "total MiB/dev"], rows)
    _save("cpu", {"config": {"seq": seq, "q_heads": hq, "kv_heads": hkv, "head_dim": d, "kernel": "xla",
                             "block": 256, "note": "8 simulated CPU devices share the host's cores"},
                  "results": out})


TOPOLOGIES = {"v5p:2x2x1": (2, 2, 1), "v5p:4x4x4": (2, 2, 1)}  # name -> chips_per_host_bounds
DEFAULT_TPU_CASES = (
    "v5p:2x2x1:ring:131072,v5p:2x2x1:usp:131072,v5p:2x2x1:allgather:131072,v5p:2x2x1:ulysses:131072,"
    "v5p:4x4x4:ring:1048576,v5p:4x4x4:usp:1048576,v5p:4x4x4:ring:4194304,v5p:4x4x4:usp:4194304,"
    "v5p:4x4x4:allgather:1048576,v5p:4x4x4:ulysses:1048576"
)


def run_tpu(cases: str, budget_s: float, uly: int = 8):
    os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v5p-8")
    os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")  # else libtpu's lockfile blocks others' AOT runs
    import jax
    import jax.numpy as jnp
    from jax.experimental import topologies
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from bookft.attention import make_attention
    from bookft.errors import AttentionError

    hq, hkv, d = 32, 8, 128
    prev = PREVIOUS.get("tpu", {})
    out = list(prev.get("results", []))
    start = time.time()
    for case in cases.split(","):
        gen, shape, strategy, seq = case.split(":")
        topo_name, seq = f"{gen}:{shape}", int(seq)
        if time.time() - start > budget_s:
            out.append({"topology": topo_name, "strategy": strategy, "seq": seq, "status": "not run (budget)"})
            continue
        topo = topologies.get_topology_desc(platform="tpu", topology_name=topo_name,
                                            chip_config_name="megacore",
                                            chips_per_host_bounds=TOPOLOGIES[topo_name], num_slices=1)
        devices = list(topo.devices)
        n = len(devices)
        u = min(uly, n // 2) if strategy == "usp" else 1
        mesh = _mesh(devices, strategy, n, uly=u)
        from bookft.attention.common import MAX_CHUNK

        rec = {"topology": topo_name, "chips": n, "strategy": strategy, "seq": seq, "max_chunk": MAX_CHUNK,
               "ulysses": u if strategy == "usp" else None, "kernel": "splash"}
        try:
            attend = make_attention(strategy, "splash", mesh, load_balanced=True)
            seq_axes = ("context", "context_ulysses") if strategy == "usp" else "context"
            xs = NamedSharding(mesh, P(None, seq_axes, None, None))
            ss = NamedSharding(mesh, P(None, seq_axes))
            q = jax.ShapeDtypeStruct((1, seq, hq, d), jnp.bfloat16, sharding=xs)
            k = jax.ShapeDtypeStruct((1, seq, hkv, d), jnp.bfloat16, sharding=xs)
            seg = jax.ShapeDtypeStruct((1, seq), jnp.int32, sharding=ss)
            t0 = time.time()
            compiled = _fwd_bwd(attend).lower(q, k, k, seg).compile()
            rec.update(_mem(compiled), compile_s=round(time.time() - t0, 1),
                       splash_custom_call="tpu_custom_call" in compiled.as_text(), status="ok")
            rec["total_gib"] = round(rec["total_bytes"] / GiB, 3)
        except AttentionError as e:
            rec.update(status=f"refused: {e}")
        except Exception as e:  # an out-of-memory compile is a result too
            rec.update(status=f"failed: {type(e).__name__}: {str(e)[:300]}")
        out = [r for r in out if (r["topology"], r["strategy"], r["seq"]) != (topo_name, strategy, seq)]
        out.append(rec)
        print(json.dumps(rec), flush=True)
        _save("tpu", {"config": {"q_heads": hq, "kv_heads": hkv, "head_dim": d, "dtype": "bfloat16",
                                 "batch": 1, "block_q": 512, "block_kv": 512,
                                 "what": "jit(grad(sum(attend(q,k,v)))) of one attention layer",
                                 "hbm_per_chip_gib": 95.73}, "results": out})
    rows = [(r["topology"], r["strategy"], r["seq"], r.get("total_gib", "-"), r.get("compile_s", "-"),
             r.get("splash_custom_call", "-"), r["status"][:40]) for r in out]
    _table("TPU AOT: one attention layer fwd+bwd, Llama-3.1-8B heads, bf16, per chip",
           ["topology", "strategy", "S", "GiB/chip", "compile s", "splash call", "status"], rows)


def block_work(seg, cp, balanced=True, block=512):
    """Per context rank: non-empty q x kv blocks of one row [S] in natural order, under the skip
    rules of kernel_xla (causal by global index, [min, max] segment-id ranges overlap)."""
    import numpy as np

    from bookft.attention.balance import shard_chunk_ids

    S = seg.shape[0]
    nb = S // block
    b = seg.reshape(nb, block)
    lo, hi = b.min(1), b.max(1)
    nonempty = (lo[None, :] <= hi[:, None]) & (lo[:, None] <= hi[None, :])  # [q block, kv block]
    nonempty &= np.tril(np.ones((nb, nb), bool))
    per_block = nonempty.sum(1)  # kv blocks each q block must visit
    n_chunks = 2 * cp if balanced else cp
    chunk_blocks = nb // n_chunks
    per_chunk = per_block.reshape(n_chunks, chunk_blocks).sum(1)
    return per_chunk[shard_chunk_ids(cp, balanced)].sum(1).astype(float)


def packed_books(S, rng, mean_tokens=200_000):
    import numpy as np

    seg, pos, doc = np.zeros(S, np.int32), 0, 1
    while pos < S:
        n = int(min(S - pos, max(1024, rng.lognormal(np.log(mean_tokens), 0.8))))
        seg[pos:pos + n] = doc
        pos, doc = pos + n, doc + 1
    return seg


def book_rows(S, rows, rng, lo=50_000, hi=500_000):
    """A stream of books (log-uniform lengths lo..hi tokens) packed back to back, cut into rows of S
    (so rows start and end with partial books, as the ingest packer does)."""
    import numpy as np

    need = S * rows
    lengths = []
    while sum(lengths) < need:
        lengths.append(int(np.exp(rng.uniform(np.log(lo), np.log(hi)))))
    stream = np.repeat(np.arange(1, len(lengths) + 1, dtype=np.int32), lengths)[:need]
    return [stream[i * S:(i + 1) * S] for i in range(rows)]


def sample_rows(path="data/sample"):
    import numpy as np

    from bookft.corpus.reader import Corpus

    c = Corpus(path)
    return c.seq_len, [np.asarray(c.sequence(i)["segment_ids"]) for i in range(len(c))]


def balance_case(name, rows, cp, block, min_piece):
    """max/mean of per-device work per row, for zig-zag alone and arranged documents + zig-zag."""
    import numpy as np

    from bookft.attention.balance import arrange_documents

    ratios = {"plain": [], "zigzag": [], "placed": [], "arranged": []}
    totals = {"zigzag": 0.0, "arranged": 0.0}
    worst = {"zigzag": 0.0, "arranged": 0.0}  # sum over rows of the busiest device's blocks
    t_arrange = 0.0
    for seg in rows:
        plain = block_work(seg, cp, False, block)
        zz = block_work(seg, cp, True, block)
        _, placed_ids = arrange_documents(seg, cp, block=min_piece, refine=False)
        placed = block_work(placed_ids, cp, True, block)
        t1 = time.time()
        _, new_ids = arrange_documents(seg, cp, block=min_piece)
        t_arrange += time.time() - t1
        ar = block_work(new_ids, cp, True, block)
        for key, w in (("plain", plain), ("zigzag", zz), ("placed", placed), ("arranged", ar)):
            ratios[key].append(w.max() / w.mean())
        totals["zigzag"] += zz.sum()
        totals["arranged"] += ar.sum()
        worst["zigzag"] += zz.max()
        worst["arranged"] += ar.max()
    arrange_s = t_arrange / len(rows)
    return {"corpus": name, "cp": cp, "block": block, "min_piece": min_piece, "rows": len(rows),
            "seq": int(rows[0].shape[0]),
            "plain_max_over_mean": round(float(np.max(ratios["plain"])), 4),
            "zigzag_max_over_mean": round(float(np.max(ratios["zigzag"])), 4),
            "placed_no_swaps_max_over_mean": round(float(np.max(ratios["placed"])), 4),
            "arranged_max_over_mean": round(float(np.max(ratios["arranged"])), 4),
            "arranged_mean_max_over_mean": round(float(np.mean(ratios["arranged"])), 4),
            "arranged_total_work_vs_zigzag": round(float(totals["arranged"] / totals["zigzag"]), 4),
            "busiest_device_arranged_vs_zigzag": round(float(worst["arranged"] / worst["zigzag"]), 4),
            "arrange_seconds_per_row": round(arrange_s, 3)}


def run_balance(S=1 << 20, n_rows=8):
    import numpy as np

    rng = np.random.default_rng(0)
    cases = [("causal", [np.ones(S, np.int32)], (8, 16, 64), 512)]
    cases.append(("books 50K-500K (log-uniform) in 1M rows", book_rows(S, n_rows, rng), (8, 16, 64), 512))
    splash_rows = book_rows(S, n_rows, np.random.default_rng(1))
    for chunk in (4096, 2048, 1024):  # attention.max_chunk: splash skips whole chunk pairs only
        cases.append((f"books 50K-500K, splash, max_chunk {chunk}", splash_rows, (8, 16, 64), chunk))
    cases.append(("packed books (lognormal, mean 200K)", [packed_books(S, rng) for _ in range(n_rows)],
                  (8, 16, 64), 512))
    try:
        seq, rows = sample_rows()
        cases.append((f"data/sample ({len(rows)} rows)", rows, (2, 4, 8), 64))
    except Exception as e:  # no sample corpus built: say so in the results
        print(f"data/sample not measured: {type(e).__name__}: {e}")
    out, table = [], []
    for name, rows, cps, block in cases:
        for cp in cps:
            rec = balance_case(name, rows, cp, block, min_piece=block)
            out.append(rec)
            print(json.dumps(rec), flush=True)
            table.append((name, cp, block, rec["plain_max_over_mean"], rec["zigzag_max_over_mean"],
                          rec["placed_no_swaps_max_over_mean"], rec["arranged_max_over_mean"],
                          rec["arranged_total_work_vs_zigzag"],
                          rec["busiest_device_arranged_vs_zigzag"], rec["arrange_seconds_per_row"]))
    _table("Load balance: non-empty q x kv blocks per device, max/mean (worst row)",
           ["corpus", "cp", "block", "plain", "zig-zag", "placed (no swaps)", "arranged+zig-zag",
            "total work vs zz", "busiest dev vs zz", "arrange s/row"], table)
    _save("balance", {"config": {"block_note": "512 = xla block; splash rows: the engine's chunk "
                                               "(attention.max_chunk), where splash skips; min_piece = block",
                                 "metric": "per row, per device: non-empty causal & same-segment-range "
                                           "q x kv blocks; max/mean is the worst row's",
                                 "arranged": "bookft.attention.balance.arrange_documents then zig-zag",
                                 "placed_no_swaps": "arrange_documents(refine=False): the constructive "
                                                    "placement without the block-swap search",
                                 "total_work_vs_zigzag": "all devices' blocks, arranged / zig-zag alone",
                                 "busiest_device_vs_zigzag": "step time proxy: busiest device's blocks, "
                                                             "arranged / zig-zag alone (summed over rows)"},
                      "results": out})


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("part", choices=["cpu", "tpu", "balance"])
    ap.add_argument("--cases", default=DEFAULT_TPU_CASES)
    ap.add_argument("--budget-s", type=float, default=1800)
    ap.add_argument("--ulysses", type=int, default=8, help="usp: ulysses degree (inner axis)")
    a = ap.parse_args(argv)
    PREVIOUS.update({k: v for k, v in (latest("attention") or {}).items() if k in PARTS})
    _RUN["record"] = Record("attention", "default")
    if a.part == "cpu":
        run_cpu()
    elif a.part == "tpu":
        run_tpu(a.cases, a.budget_s, a.ulysses)
    else:
        run_balance()


if __name__ == "__main__":
    main()
