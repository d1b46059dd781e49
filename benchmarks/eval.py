"""Eval benchmark: teacher-forced scoring throughput of the tiny preset on CPU (dense reference,
local xla kernel, and ring attention over --cp simulated devices: the context-parallel path a TPU
slice runs), greedy generation (bucketed prefill + KV-cache decode, local and ring), the wall time
of a full default grid, and the cost of building one long sample (haystack + placement + encode).

The model is configs/models/tiny.yaml (random weights: throughput does not depend on them); the
tokenizer is a byte-level BPE with 1,024 entries trained on the essay filler on the fly. Prints a
rich table and writes a new benchmarks/results/eval_tiny_<hardware>_<date>.json. Simulated CPU devices
share the host's cores, so ring rows measure the overhead of the CP path, not a speed-up.

    python -m benchmarks.eval [--lengths 1024,2048,4096] [--batch 4] [--reps 3] [--cp 4] [--long 131072]
"""

from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()

import argparse  # noqa: E402
import time  # noqa: E402
from itertools import islice  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

from benchmarks.common import Record  # noqa: E402
from bookft.attention.config import AttentionConfig  # noqa: E402
from bookft.benchrecord import ROOT  # noqa: E402
from bookft.config import from_dict, read_yaml  # noqa: E402
from bookft.eval import EvalConfig, run_niah  # noqa: E402
from bookft.eval.drivers import attention_and_layout, model_generate_fn, model_logits_fn  # noqa: E402
from bookft.eval.haystack import build_haystack  # noqa: E402
from bookft.eval.layout import SeqLayout  # noqa: E402
from bookft.model import ModelConfig, init_model  # noqa: E402
from bookft.needles import make_task  # noqa: E402
from bookft.needles.haystack import essay_sentences  # noqa: E402
from bookft.needles.placement import build_sample  # noqa: E402
from bookft.needles.tokenizer import ModelTokenizer  # noqa: E402
from bookft.parallel.config import ParallelConfig  # noqa: E402
from bookft.parallel.mesh import make_mesh  # noqa: E402


def essay_tokenizer(vocab_size: int) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(list(islice(essay_sentences(7), 3000)), trainer)
    return tok


def teacher_forced_rows(model, tok, setups: dict, args, rng) -> list[dict]:
    """One forward pass + tail logits, batch x length tokens, per attention setup and length."""
    rows = []
    for name, (attend, layout) in setups.items():
        fn = model_logits_fn(model, attend=attend, tail=512, layout=layout)
        for n in [int(x) for x in args.lengths.split(",")]:
            ids = rng.integers(0, tok.vocab_size, (args.batch, n)).astype(np.int32)
            pos = np.broadcast_to(np.arange(n, dtype=np.int32), ids.shape)
            seg = np.ones_like(ids)
            t0 = time.perf_counter()
            fn(ids, pos, seg)  # compile
            compile_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            for _ in range(args.reps):
                fn(ids, pos, seg)
            dt = (time.perf_counter() - t0) / args.reps
            rows.append({"what": f"teacher_forced/{name}", "length": n, "batch": args.batch,
                         "seconds": round(dt, 4), "compile_s": round(compile_s, 2),
                         "tokens_per_s": round(args.batch * n / dt, 1)})
    return rows


def generate_rows(model, tok, setups: dict, args, rng) -> list[dict]:
    """Greedy generation: prompts of different lengths in one bucket, prefill + 16 decode steps."""
    rows = []
    n_new, plen = 16, int(args.lengths.split(",")[0])
    prompts = [rng.integers(0, tok.vocab_size, plen - 3 * i).astype(np.int32) for i in range(args.batch)]
    for name in ("xla", f"ring{args.cp}"):
        attend, layout = setups[name]
        gen = model_generate_fn(model, attend=attend, layout=layout)
        t0 = time.perf_counter()
        gen(prompts, n_new)  # compile prefill + decode step
        compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        gen(prompts, 1)
        prefill_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        gen(prompts, n_new)
        total_s = time.perf_counter() - t0
        rows.append({"what": f"generate/{name}", "length": layout.length(plen), "batch": args.batch,
                     "seconds": round(total_s, 4), "prefill_s": round(prefill_s, 4), "new_tokens": n_new,
                     "decode_ms_per_token": round(1e3 * (total_s - prefill_s) / (n_new - 1), 2),
                     "compile_s": round(compile_s, 2),
                     "tokens_per_s": round(sum(map(len, prompts)) / prefill_s, 1)})
    return rows


def grid_and_long_rows(model, tok, setups: dict, args, console) -> list[dict]:
    """The full default grid (EvalConfig(), the CLI's default local xla attention on CPU) end to end,
    then one long sample: haystack (count per sentence), placement, whole-text encode."""
    cfg = EvalConfig()
    attend, layout = setups["xla"]
    t0 = time.perf_counter()
    res = run_niah(model, tok, cfg, attend=attend, layout=layout, console=console, progress=False)
    grid_s = time.perf_counter() - t0
    rows = [{"what": "default_grid", "lengths": res["lengths"], "depths": res["depths"],
             "seeds": list(cfg.seeds), "cells": len(res["cells"]), "seconds": round(grid_s, 2),
             "buckets": sorted({layout.length(n) for n in res["lengths"]}),
             "tokens": res["timing"]["tokens"], "tokens_per_s": round(res["timing"]["tokens"] / grid_s, 1)}]
    t0 = time.perf_counter()
    hay = build_haystack("essay", tok, 0, args.long)
    hay_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    s = build_sample(make_task(cfg, 0, 50.0), hay, tok, args.long, 50.0)
    place_s = time.perf_counter() - t0
    rows.append({"what": "long_sample", "length": args.long, "actual_length": s.actual_length,
                 "actual_depth": s.actual_depth, "haystack_s": round(hay_s, 2), "placement_s": round(place_s, 2)})
    return rows


def print_table(rows: list[dict], console) -> None:
    table = Table(title="bookft eval benchmark (CPU)")
    for col in ("what", "length / grid", "batch", "seconds", "tokens/s", "notes"):
        table.add_column(col, justify="right" if col not in ("what", "notes") else "left", no_wrap=col == "what")
    for r in rows:
        if r["what"].startswith("generate"):
            table.add_row(r["what"], str(r["length"]), str(r["batch"]), f"{r['seconds']:.3f}",
                          f"{r['tokens_per_s']:,.0f}", f"prefill {r['prefill_s']} s, decode "
                          f"{r['decode_ms_per_token']} ms/token, compile {r['compile_s']} s")
        elif r["what"].startswith("teacher_forced"):
            table.add_row(r["what"], str(r["length"]), str(r["batch"]), f"{r['seconds']:.3f}",
                          f"{r['tokens_per_s']:,.0f}", f"compile {r['compile_s']} s")
        elif r["what"] == "default_grid":
            table.add_row(r["what"], f"{len(r['lengths'])}x{len(r['depths'])}x{len(r['seeds'])}", "4",
                          f"{r['seconds']:.2f}", f"{r['tokens_per_s']:,.0f}", f"{r['cells']} cells, {r['tokens']} tok")
        else:
            table.add_row(r["what"], str(r["length"]), "1", f"{r['haystack_s'] + r['placement_s']:.2f}", "",
                          f"haystack {r['haystack_s']} s, placement {r['placement_s']} s")
    console.print(table)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", default="1024,2048,4096")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cp", type=int, default=4, help="simulated devices on the context axis (ring rows)")
    ap.add_argument("--long", type=int, default=131072, help="length of the single long sample timed")
    ap.add_argument("--out", type=Path, default=None, help="default: a new file under benchmarks/results/")
    args = ap.parse_args()
    console = Console()
    record = Record("eval", "tiny", path=args.out)
    mcfg = from_dict(ModelConfig, read_yaml(ROOT / "configs" / "models" / "tiny.yaml")["model"], "model")
    model = init_model(mcfg, seed=0)
    tok = ModelTokenizer.load(essay_tokenizer(min(1024, mcfg.vocab_size)))
    # attention setups: (attend, layout); ring = the configured CP strategy over --cp devices
    mesh = make_mesh(ParallelConfig(mesh={"data": 1, "fsdp": 1, "context": args.cp}), jax.devices()[:args.cp])
    setups = {"reference": (None, SeqLayout()),
              "xla": attention_and_layout(AttentionConfig(strategy="local", kernel="xla")),
              f"ring{args.cp}": attention_and_layout(AttentionConfig(strategy="ring", kernel="xla"), mesh)}
    rng = np.random.default_rng(0)
    rows = [*teacher_forced_rows(model, tok, setups, args, rng), *generate_rows(model, tok, setups, args, rng),
            *grid_and_long_rows(model, tok, setups, args, console)]
    print_table(rows, console)
    record.write({"model": "configs/models/tiny.yaml", "results": rows})


if __name__ == "__main__":
    main()
