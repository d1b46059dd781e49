"""Benchmark: the independent checks of a finished real-model flow (benchmarks/real_flow.py's OUT).

The flow judges the tuned model on held-out books. These checks judge it on text that no part of the
flow touched:
- the RULER grids (generation scoring, the flow's lengths, depths and seeds) on the eval's generated
  essay as the haystack, for the trained tasks (multikey and vartrack by default). The base model's
  grids are cached under --cache (committed, keyed like the flow's base grids), so each seed only
  runs the tuned ones;
- `eval short` on passages of the reserved books (Shakespeare's plays and the King James Bible,
  which benchmarks/books.py keeps out of every corpus): three passages per book, at 20%, 50% and
  80% of the way in;
- `eval ppl` at the flow's window lengths on a stretch of each reserved book from 20% of the way in
  (the first --ppl-chars characters after it).

Writes a new benchmarks/results/real_flow_checks_<size>[-<label>]-seed<N>_<hardware>_<date>.json once
the grids and short are done (ppl still null) and again with ppl, and prints the tables.

    python -m benchmarks.real_flow_checks [--seed 0] [--run runs/real-flow-full-seed0] [--label lora]
        [--tasks multikey,vartrack] [--cache benchmarks/cache/real_flow_base_essay]
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from benchmarks.common import CACHE, Record
from bookft.benchrecord import ROOT

PASSAGE_AT = (0.2, 0.5, 0.8)


def reserved_texts(books: Path, out: Path, *, passage_chars: int, ppl_chars: int) -> tuple[list[Path], list[Path]]:
    """OUT/reserved-short/*.txt (passages) and OUT/reserved-ppl/*.txt (one stretch per book)."""
    from bookft.flows.inputs import cut_text, read_text

    paths = sorted(books.glob("*.txt"))
    if not paths:
        raise SystemExit(f"{books}: no reserved books (*.txt); run python -m benchmarks.books first")
    short_dir, ppl_dir = out / "reserved-short", out / "reserved-ppl"
    for d in (short_dir, ppl_dir):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    short, ppl = [], []
    for p in paths:
        text = read_text(p)
        for i, frac in enumerate(PASSAGE_AT):
            short.append(short_dir / f"{p.stem}-{i}.txt")
            short[-1].write_text(cut_text(text, int(len(text) * frac), passage_chars), encoding="utf-8")
        ppl.append(ppl_dir / f"{p.stem}.txt")
        ppl[-1].write_text(cut_text(text, int(len(text) * PASSAGE_AT[0]), ppl_chars), encoding="utf-8")
    return short, ppl


def essay_grids(model: Path, tuned: Path, tasks: list[str], s: dict, *, config: Path, overrides: list[str],
                cache: Path, out: Path, console) -> dict:
    """{cache_key, task: {per_length, mean}} on the essay haystack; base grids from `cache`."""
    from bookft.flows import tune_evals as ev
    from bookft.flows.summary import task_figures
    from bookft.flows.tune_settings import settings_for
    from bookft.train.config import load_run_config

    grid = {k: s[k] for k in ("lengths", "depths", "seeds")}
    settings = settings_for("full", {**{k: tuple(v) for k, v in grid.items()}, "tasks": tuple(tasks), "families": ()})
    run_config = load_run_config(config, overrides)
    key = ev.cache_key(model, {**grid, "haystack": "essay"}, run_config, [])
    kw = {"run_config": run_config, "haystack": "essay", "console": console, "progress": False}
    base = ev.grids(model, settings, out / "essay-base", cache=cache, key=key, **kw)
    tuned_res = ev.grids(tuned, settings, out / "essay-tuned", cache=None, key=None, **kw)
    return {"cache_key": key, **task_figures({"base": base, "tuned": tuned_res})}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--run", type=Path, default=None, help="the flow's OUT (default runs/real-flow-full-seed{N})")
    ap.add_argument("--model", type=Path, default=ROOT / "models/smollm2-135m")
    ap.add_argument("--books", type=Path, default=ROOT / "data/books/reserved")
    ap.add_argument("--config", type=Path, default=ROOT / "configs/smollm2-135m-books.yaml")
    ap.add_argument("--tasks", default="multikey,vartrack")
    ap.add_argument("--cache", type=Path, default=CACHE / "real_flow_base_essay")
    ap.add_argument("--passage-chars", type=int, default=1_500)
    ap.add_argument("--ppl-chars", type=int, default=40_000)
    ap.add_argument("--label", default="", help="the flow's --label, for the result's name")
    ap.add_argument("--json", type=Path, default=None, help="default: a new file under benchmarks/results/")
    a = ap.parse_args()
    from rich.console import Console

    from bookft.eval.entry import Subject
    from bookft.eval.short_entry import ShortConfig, evaluate_short
    from bookft.flows import tune_evals as ev
    from bookft.flows.summary import figures_table
    from bookft.flows.tune_report import TITLE, ppl_figures, short_figures
    from bookft.train.config import load_run_config

    console = Console()
    run = (a.run or ROOT / f"runs/real-flow-full-seed{a.seed}").resolve()
    summary_path = run / "summary.json"
    if not summary_path.is_file():
        raise SystemExit(f"{summary_path}: missing; run python -m benchmarks.real_flow --seed {a.seed} first")
    s = json.loads(summary_path.read_text())["settings"]
    tuned, out = run / "tuned-model", run / "checks"
    overrides = [f"model.hf_path={a.model.resolve()}", f"data.seq_len={max(s['lengths'])}", *s["overrides"]]
    short_files, ppl_files = reserved_texts(a.books, out, passage_chars=a.passage_chars, ppl_chars=a.ppl_chars)
    rec = Record("real_flow_checks", "-".join(filter(None, (s["size"], a.label, f"seed{a.seed}"))), path=a.json)
    times, t0 = {}, time.perf_counter()
    tasks = [t for t in a.tasks.split(",") if t]
    grids = essay_grids(a.model.resolve(), tuned, tasks, s, config=a.config, overrides=overrides, cache=a.cache,
                        out=out, console=console)
    times["essay_grids_s"] = round(time.perf_counter() - t0, 1)
    t1 = time.perf_counter()
    short_config = ShortConfig(base=str(a.model.resolve()), corpus=str(run / "heldout-corpus"),
                               texts=tuple(str(p) for p in short_files), max_tokens=s["short_tokens"])
    short = evaluate_short(None, short_config, Subject(model_dir=str(tuned)), out=out / "short", console=console)
    times["short_s"] = round(time.perf_counter() - t1, 1)
    short_figs = short_figures(short)
    import jax

    rec.use_devices(jax.devices())
    record = {"benchmark": "real_flow_checks", "seed": a.seed, "run": str(run), "essay_grids": grids,
              "reserved_short": {"passages": [p.name for p in short_files], "tokens_per_passage": s["short_tokens"],
                                 **short_figs["generic"]},
              "reserved_ppl": None, "times": times}
    console.print(figures_table({k: v for k, v in grids.items() if k != "cache_key"}, TITLE.format("the essay")))
    r = record["reserved_short"]
    console.print(f"reserved passages, eval short: {r['base_loss']:.4f} -> {r['tuned_loss']:.4f} "
                  f"({r['loss_delta']:+.4f} nats/token)")
    rec.write(record)  # the grids and short stand before ppl runs
    t2 = time.perf_counter()
    run_config = load_run_config(a.config, overrides)
    base = ev.base_ppl(a.model.resolve(), ppl_files, s["ppl_lengths"], run_config=run_config,
                       out=out / "ppl-base", console=console, progress=False, cache=a.cache, key=grids["cache_key"])
    ppl = ev.run_ppl(a.model.resolve(), tuned, ppl_files, s["ppl_lengths"], run_config=run_config,
                     out=out / "ppl", console=console, progress=False, base=base)
    times["ppl_s"] = round(time.perf_counter() - t2, 1)
    record["reserved_ppl"] = {"texts": [p.name for p in ppl_files], "chars": a.ppl_chars, "ppl": ppl_figures(ppl)}
    for n, v in record["reserved_ppl"]["ppl"].items():
        console.print(f"reserved ppl at {n}: {v['base']:.3f} -> {v['tuned']:.3f}")
    rec.write(record)
    print(f"wall {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
