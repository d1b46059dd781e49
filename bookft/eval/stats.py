"""Intervals for eval scores: 95% Wilson score intervals per cell, per length, per depth and overall.

Design choices:
- Wilson (Wilson 1927; Brown, Cai & DasGupta 2001) rather than the normal approximation: it stays
  inside [0, 1] and is honest at 0 and 1 successes out of a few draws, where eval cells live. Written
  out here (five lines) rather than importing statsmodels or scipy for one formula.
- A draw is one generation (one seed of one cell). Scores with partial credit (ruler's share of
  references found) count their sum as successes: the interval of a proportion with that mean.
"""

from __future__ import annotations

import math
from collections import defaultdict

Z95 = 1.959963984540054


def wilson(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of `successes` out of `n` draws ((0, 1) when n is 0)."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def interval(values: list[float]) -> dict:
    """{"draws", "score", "ci": [lo, hi]} of per-draw scores."""
    n = len(values)
    lo, hi = wilson(sum(values), n)
    return {"draws": n, "score": sum(values) / n if n else 0.0, "ci": [round(lo, 4), round(hi, 4)]}


def score_stats(cells: list[dict], key: str) -> dict:
    """Overall, per-length and per-depth intervals of per-seed score `key` across `cells`."""
    by_len: dict[int, list[float]] = defaultdict(list)
    by_depth: dict[float, list[float]] = defaultdict(list)
    every: list[float] = []
    for c in cells:
        vals = [float(r[key]) for r in c["per_seed"] if key in r]
        by_len[c["length"]] += vals
        by_depth[c["depth"]] += vals
        every += vals
    return {**interval(every),
            "per_length": {str(k): interval(v) for k, v in sorted(by_len.items())},
            "per_depth": {str(k): interval(v) for k, v in sorted(by_depth.items())}}


def headline_rows(results: dict, model: str, lengths: tuple[int, ...] | None = None) -> list[dict]:
    """Rows {task, length, model, scoring, split, draws, score, ci} of a grid's results (one per
    length and strict/ruler score it holds; `lengths`: only these), the benchmark JSONs' headline."""
    rows = []
    for scoring in ("strict", "ruler"):
        st = results.get("stats", {}).get(scoring)
        if st is None:
            continue
        for length, cell in st["per_length"].items():
            if lengths is None or int(length) in lengths:
                rows.append({"task": results["task"], "length": int(length), "model": model, "scoring": scoring,
                             "split": results.get("split", "none"), "draws": cell["draws"],
                             "score": round(cell["score"], 4), "ci": cell["ci"]})
    return rows
