"""Benchmark: more eval seeds per cell for a finished real-model flow (benchmarks/real_flow.py's OUT).

The flow scores each (length, depth) cell on the preset's eval seeds (5), so one miss moves a cell by
0.2 and a cell that reads 0.8 cannot tell a weak spot from one unlucky draw. This scores the base
and tuned models on further seeds (default 5-9) with the flow's own lengths, depths, held-out
haystacks and run config, and pools them with the flow's per-seed results: each cell then reads the
mean over every seed, with the seeds it missed. The base grids for the new seeds are cached under
--cache (keyed like the flow's, with these seeds), so a second run only scores the tuned model.

Writes a new benchmarks/results/real_flow_seeds_<size>[-<label>]-seed<N>_<hardware>_<date>.json (N:
the flow's seed) and prints the pooled table.

    python -m benchmarks.real_flow_seeds --run runs/real-flow-full-seed0 [--seeds 5-9] [--label lora]
        [--tasks multikey,vartrack] [--cache benchmarks/cache/real_flow_base] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from benchmarks.common import CACHE, Record
from bookft.benchrecord import ROOT


def parse_seeds(text: str) -> list[int]:
    """"5-9" or "5,6,7" -> sorted seeds."""
    seeds: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        seeds.update(range(int(lo), int(hi or lo) + 1))
    return sorted(seeds)


def per_seed_scores(results: dict) -> dict[tuple[str, str], dict[int, float]]:
    """{(length, depth): {seed: score}} of a grid's results.json (the headline scorer)."""
    key = results["summary"]["score"]
    return {(str(c["length"]), f"{float(c['depth']):g}"): {int(r["seed"]): float(r[key]) for r in c["per_seed"]}
            for c in results["cells"]}


def pooled(grids: list[dict]) -> dict[str, dict[str, dict]]:
    """{length: {depth: {seeds, mean, missed}}} over the seeds of every grid; a seed scored twice is an error."""
    cells: dict[tuple[str, str], dict[int, float]] = {}
    for g in grids:
        for cell, scores in per_seed_scores(g).items():
            twice = set(cells.get(cell, {})) & set(scores)
            if twice:
                raise SystemExit(f"cell {cell}: seeds {sorted(twice)} scored twice; pick --seeds the flow did not use")
            cells.setdefault(cell, {}).update(scores)
    out: dict[str, dict[str, dict]] = {}
    for (n, d), scores in sorted(cells.items(), key=lambda x: (int(x[0][0]), float(x[0][1]))):
        out.setdefault(n, {})[d] = {"seeds": len(scores), "mean": round(sum(scores.values()) / len(scores), 4),
                                    "missed": {str(s): v for s, v in sorted(scores.items()) if v < 1.0}}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, required=True, help="the flow's OUT (holds summary.json)")
    ap.add_argument("--seeds", default="5-9", help="eval seeds to add, e.g. 5-9 or 5,7")
    ap.add_argument("--tasks", default="multikey,vartrack")
    ap.add_argument("--model", type=Path, default=ROOT / "models/smollm2-135m")
    ap.add_argument("--books", type=Path, default=ROOT / "data/books")
    ap.add_argument("--config", type=Path, default=ROOT / "configs/smollm2-135m-books.yaml")
    ap.add_argument("--cache", type=Path, default=CACHE / "real_flow_base")
    ap.add_argument("--label", default="", help="the flow's --label, for the result's name")
    ap.add_argument("--json", type=Path, default=None, help="default: a new file under benchmarks/results/")
    a = ap.parse_args()
    from rich.console import Console
    from rich.table import Table

    from bookft.eval.report import load_results
    from bookft.flows import tune_evals as ev
    from bookft.flows.tune_settings import base_key_settings, settings_for
    from bookft.train.config import load_run_config

    console = Console()
    run = a.run.resolve()
    summary_path = run / "summary.json"
    if not summary_path.is_file():
        raise SystemExit(f"{summary_path}: missing; run python -m benchmarks.real_flow first")
    s = json.loads(summary_path.read_text())["settings"]
    seeds, tasks = parse_seeds(a.seeds), [t for t in a.tasks.split(",") if t]
    if missing := [t for t in tasks if t not in s["tasks"]]:
        raise SystemExit(f"--tasks {missing}: the flow in {run} did not score them ({s['tasks']})")
    heldout = sorted((a.books / "heldout").glob("*.txt"))
    if not heldout:
        raise SystemExit(f"{a.books / 'heldout'}: no held-out books (*.txt)")
    model, tuned = a.model.resolve(), run / "tuned-model"
    overrides = [f"model.hf_path={model}", f"data.seq_len={max(s['lengths'])}", *s["overrides"]]
    settings = settings_for(s["size"], {"lengths": tuple(s["lengths"]), "depths": tuple(s["depths"]),
                                        "seeds": tuple(seeds), "tasks": tuple(tasks)})
    run_config = load_run_config(a.config, overrides)
    key = ev.cache_key(model, base_key_settings(settings), run_config, heldout)
    kw = {"run_config": run_config, "haystack": run / "heldout-corpus", "console": console, "progress": False}
    rec = Record("real_flow_seeds", "-".join(filter(None, (s["size"], a.label, f"seed{s['seed']}"))), path=a.json)
    t0 = time.perf_counter()
    base = ev.grids(model, settings, run / "seeds-base", cache=a.cache, key=key, **kw)
    t1 = time.perf_counter()
    tuned_res = ev.grids(tuned, settings, run / "seeds-tuned", cache=None, key=None, **kw)
    t2 = time.perf_counter()
    figures = {task: {who: pooled([load_results(run / f"eval-{who}" / task), new[task]])
                      for who, new in (("base", base), ("tuned", tuned_res))} for task in tasks}
    import jax

    rec.use_devices(jax.devices())
    rec.write({"benchmark": "real_flow_seeds", "run": str(run), "flow_seed": s["seed"], "recipe": s["overrides"],
               "flow_seeds": s["seeds"], "added_seeds": seeds, "cache_key": key, "pooled": figures,
               "times": {"base_s": round(t1 - t0, 1), "tuned_s": round(t2 - t1, 1)}})
    table = Table(title=f"{run.name}: seeds {s['seeds'][0]}-{s['seeds'][-1]} and {a.seeds} pooled (base -> tuned)")
    for col in ("task", "length", *(f"depth {d:g}%" for d in s["depths"]), "tuned misses (seed: score)"):
        table.add_column(col)
    for task, f in figures.items():
        for n, ds in f["tuned"].items():
            misses = "; ".join(f"{d}%: " + ", ".join(f"{k}:{v:g}" for k, v in c["missed"].items())
                               for d, c in ds.items() if c["missed"])
            table.add_row(task, n, *(f"{f['base'][n][d]['mean']:.2f}->{c['mean']:.2f} (n={c['seeds']})"
                                     for d, c in ds.items()), misses or "-")
    console.print(table)
    print(f"wall {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
