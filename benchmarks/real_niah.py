"""Benchmark: NIAH on a real chat model, base vs tuned, on the CPU within a stated budget.

Runs `bookft eval niah` (RULER phrasing, the tokenizer's chat template, scored on generated text by
string match: the defaults for an HF folder) as child processes, one per group of cells, and
collects their grids into one JSON and one table:

- base: the imported SmolLM2 folder loaded with the preset's knobs (`--config`, so YaRN x4 over its
  native 8,192): every length given, past 8K too (the native RoPE is refused there);
- tuned: the export of benchmarks/real_model.py's run (LoRA merged, YaRN in its config.json), at the
  lengths within the native 8K (the target: no worse than base there);
- one corpus-haystack group (`--haystack corpus`): the needle inside the corpus's own text.

Lengths past `--one-seed-from` get one seed per cell (a 16K cell costs ~7 min on 2 cores). The wall of
each group is recorded with its load, so the budget is visible.

    python -m benchmarks.real_niah --tuned runs/real-model-bench/export [--lengths 1K,2K,4K,8K,16K]
        [--tuned-lengths 1K,2K,4K,8K] [--depths 0,50,100] [--seeds 0,1] [--one-seed-from 8K] [--json PATH]

Writes a new benchmarks/results/real_niah_smollm2-135m_<hardware>_<date>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import Record
from bookft.benchrecord import ROOT

PRESET = ROOT / "configs/smollm2-135m-cpu.yaml"


def tokens(s: str) -> int:
    """'16K' -> 16384, as `bookft eval niah --lengths` reads it."""
    from bookft.commands.eval import parse_lengths

    return parse_lengths([s])[0]


def run_group(model: Path, lengths: list[int], depths: str, seeds: str, out: Path, extra: list[str],
              reuse: bool = False) -> dict:
    done = out.with_suffix(".json")
    if reuse and done.is_file():
        g = json.loads(done.read_text())
        if g["lengths"] == lengths and g["seeds"] == [int(x) for x in seeds.split(",")] and g["model"] == str(model):
            print(f"reused {done}")
            return g
    cmd = [sys.executable, "-m", "bookft.cli", "eval", "niah", "--model", str(model), "--config", str(PRESET),
           "--lengths", ",".join(str(n) for n in lengths), "--depths", depths, "--seeds", seeds,
           "--out", str(out), "--no-progress", *extra]
    load0, t0 = os.getloadavg(), time.perf_counter()
    log = out.with_suffix(".log")
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as f:
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
    if rc != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {rc}); log {log}:\n{log.read_text()[-3000:]}")
    res = json.loads((out / "results.json").read_text())
    score = res["summary"]["score"]
    grid: dict[str, dict[str, float]] = {}
    for c in res["cells"]:
        grid.setdefault(str(c["length"]), {})[f"{c['depth']:g}"] = c["scores"][score]
    g = {"model": str(model), "lengths": lengths, "seeds": [int(s) for s in seeds.split(",")], "score": score,
         "grid": grid, "seconds": round(time.perf_counter() - t0, 1),
         "load_start_end": [load0[0], os.getloadavg()[0]], "out": str(out)}
    done.write_text(json.dumps(g, indent=1) + "\n")
    return g


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, default=ROOT / "models/smollm2-135m")
    ap.add_argument("--tuned", type=Path, required=True, help="the tuned HF folder (bookft export)")
    # --tuned-lengths '' (and --corpus-length ''): the base groups only, e.g. while the tuning runs
    ap.add_argument("--corpus", type=Path, default=ROOT / "data/sample-smollm2", help="for the corpus haystack")
    ap.add_argument("--lengths", default="1K,2K,4K,8K,16K")
    ap.add_argument("--tuned-lengths", default="1K,2K,4K,8K")
    ap.add_argument("--depths", default="0,50,100")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--one-seed-from", default="8K", help="lengths from here on get the first seed only")
    ap.add_argument("--corpus-length", default="1K", help="the corpus-haystack group's length ('' = none)")
    ap.add_argument("--work", type=Path, default=ROOT / "runs/real-niah")
    ap.add_argument("--json", type=Path, default=None, help="default: a new file under benchmarks/results/")
    ap.add_argument("--reuse", action="store_true", help="keep the groups an earlier run in --work finished")
    args = ap.parse_args()
    record = Record("real_niah", "smollm2-135m", path=args.json)
    cut, first_seed = tokens(args.one_seed_from), args.seeds.split(",")[0]
    groups: dict[str, dict] = {}

    def split(lengths: str) -> list[tuple[list[int], str]]:
        from bookft.commands.eval import parse_lengths

        ns = parse_lengths([lengths]) or []
        many, one = [n for n in ns if n < cut], [n for n in ns if n >= cut]
        return [(g, s) for g, s in ((many, args.seeds), (one, first_seed)) if g]

    for who, model, lengths in (("base", args.base, args.lengths), ("tuned", args.tuned, args.tuned_lengths)):
        for i, (ns, seeds) in enumerate(split(lengths)):
            groups[f"{who}/{i}"] = run_group(model, ns, args.depths, seeds, args.work / f"{who}-{i}", [], args.reuse)
            print(f"{who} {ns}: {groups[f'{who}/{i}']['grid']} ({groups[f'{who}/{i}']['seconds']} s)", flush=True)
    if args.corpus_length:
        n = [tokens(args.corpus_length)]
        for who, model in (("base", args.base), ("tuned", args.tuned)):
            if not (args.lengths if who == "base" else args.tuned_lengths).strip():
                continue
            groups[f"{who}/corpus"] = run_group(model, n, args.depths, first_seed, args.work / f"{who}-corpus",
                                                ["--haystack", "corpus", "--corpus", str(args.corpus)], args.reuse)

    def merged(who: str, haystack: str) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for key, g in groups.items():
            if key.startswith(who + "/") and (key.endswith("/corpus") == (haystack == "corpus")):
                out.update(g["grid"])
        return out

    base, tuned = merged("base", "essay"), merged("tuned", "essay")
    native = [n for n in tuned if int(n) <= 8192 and n in base]
    worse = {n: {d: (base[n][d], tuned[n][d]) for d in tuned[n] if tuned[n][d] < base[n].get(d, 0.0)} for n in native}
    result = {
        "benchmark": "real_niah",
        "models": {"base": str(args.base), "tuned": str(args.tuned), "preset": str(PRESET.relative_to(ROOT))},
        "depths": [float(d) for d in args.depths.split(",")],
        "essay": {"base": base, "tuned": tuned},
        "corpus": {"base": merged("base", "corpus"), "tuned": merged("tuned", "corpus")},
        "target": {"tuned_no_worse_than_base_within_8k": not any(worse.values()),
                   "cells_worse": {n: w for n, w in worse.items() if w}},
        "groups": groups,
        "seconds": round(sum(g["seconds"] for g in groups.values()), 1),
    }
    record.write(result)

    from rich.console import Console
    from rich.table import Table

    t = Table(title="NIAH, generated text with string match (RULER phrasing, chat template)")
    for col in ("model", "haystack", "length", *[f"{d}%" for d in args.depths.split(",")]):
        t.add_column(col, justify="right")
    for hay in ("essay", "corpus"):
        for who in ("base", "tuned"):
            for n, row in sorted(result[hay][who].items(), key=lambda x: int(x[0])):
                cells = [row.get(f"{float(d):g}", float("nan")) for d in args.depths.split(",")]
                t.add_row(who, hay, n, *[f"{c:.2f}" for c in cells])
    Console().print(t)
    print(f"tuned no worse than base within 8K: {result['target']['tuned_no_worse_than_base_within_8k']}; "
          f"{result['seconds']} s in all")


if __name__ == "__main__":
    main()
