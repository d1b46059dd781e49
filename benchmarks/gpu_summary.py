"""The JSON of benchmarks/gpu.sh: base vs tuned NIAH grids, the length-extension target, train throughput.

Target: at the longest length, the tuned model scores at least 0.8 in every depth where
the base model (with the same YaRN) scores below 0.5. MFU is the trainer's own (bookft's FLOP
count per token over the chip's dense bf16 peak, bookft/parallel/hardware.py); it is null on a CPU.

    python -m benchmarks.gpu_summary --work runs/gpu-bench [--results benchmarks/results] [--seconds N]

Writes a new RESULTS/gpu_smollm2-135m-<seq_len>_<hardware>_<date>.json (or --json PATH).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from benchmarks.common import RESULTS, Record


def grid(results: dict) -> dict[str, dict[str, float]]:
    """{length: {depth: score}} with the report's headline score."""
    score = results["summary"]["score"]
    out: dict[str, dict[str, float]] = {}
    for c in results["cells"]:
        out.setdefault(str(c["length"]), {})[f"{float(c['depth']):g}"] = c["scores"][score]
    return out


def target(base: dict, tuned: dict) -> dict:
    longest = max(base, key=int)
    weak = [d for d, s in base[longest].items() if s < 0.5]
    misses = [d for d in weak if tuned[longest].get(d, 0.0) < 0.8]
    return {"length": int(longest), "depths_base_below_0.5": weak, "depths_tuned_below_0.8_there": misses,
            "met": bool(weak) and not misses, "note": None if weak else "base is >= 0.5 at every depth: "
            "the target has no depth to test at this length"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--results", type=Path, default=RESULTS, help="the folder of the new result file")
    ap.add_argument("--json", type=Path, default=None, help="this path instead (never overwritten)")
    ap.add_argument("--seconds", type=float, default=None, help="the whole script's wall time")
    args = ap.parse_args()
    rows = [json.loads(x) for x in (args.work / "run" / "metrics.jsonl").read_text().splitlines() if x.strip()]
    steps = [r for r in rows if "loss" in r and "tokens_per_s" in r]
    timed = steps[1:] or steps  # the first step compiles
    base = json.loads((args.work / "eval-base" / "results.json").read_text())
    tuned = json.loads((args.work / "eval-tuned" / "results.json").read_text())
    gb, gt = grid(base), grid(tuned)
    mfus = [r["mfu"] for r in timed if r.get("mfu") is not None]
    import jax

    record = Record("gpu", f"smollm2-135m-{steps[-1]['seq_len'] if steps else 0}", path=args.json,
                    results=args.results)
    record.use_devices(jax.devices())
    result = {
        "benchmark": "gpu",
        "wall_s": args.seconds,
        "train": {"steps": len(steps), "seq_len": steps[-1]["seq_len"] if steps else None,
                  "first_loss": steps[0]["loss"] if steps else None, "last_loss": steps[-1]["loss"] if steps else None,
                  "tokens_per_s": statistics.median(r["tokens_per_s"] for r in timed) if timed else None,
                  "step_time_s": statistics.median(r["step_time_s"] for r in timed) if timed else None,
                  "mfu": statistics.median(mfus) if mfus else None,
                  "peak_memory_bytes": max((r.get("peak_memory_bytes") or 0) for r in steps) or None},
        "niah": {"score": base["summary"]["score"], "base": gb, "tuned": gt,
                 "base_summary": base["summary"], "tuned_summary": tuned["summary"],
                 "eval_seconds": {"base": base["timing"]["seconds"], "tuned": tuned["timing"]["seconds"]}},
        "target": target(gb, gt),
    }
    record.write(result)
    print(f"{'length':>8} {'depth':>6} {'base':>6} {'tuned':>6}")
    for length in sorted(gb, key=int):
        for depth in gb[length]:
            tuned_score = gt.get(length, {}).get(depth, float("nan"))
            print(f"{length:>8} {depth:>6} {gb[length][depth]:>6.2f} {tuned_score:>6.2f}")
    t = result["train"]
    print(f"train: {t['steps']} steps at {t['seq_len']}, {t['tokens_per_s']} tokens/s, MFU {t['mfu']}; "
          f"target {'met' if result['target']['met'] else 'not met'}: {result['target']}")


if __name__ == "__main__":
    main()
