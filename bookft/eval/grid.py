"""Grid axes: context lengths (linear | log) and needle depths (linear | sigmoid).

The sigmoid spacing is the one of the original needle-in-a-haystack test (gkamradt): a logistic
of linearly spaced points, so that depths crowd near 0 % and 100 % where models differ most, with
the end points pinned to exactly 0 and 100.
"""

from __future__ import annotations

import math

import numpy as np

from bookft.eval.config import EvalConfig


def grid_lengths(cfg: EvalConfig) -> list[int]:
    if cfg.lengths:
        return sorted(set(int(n) for n in cfg.lengths))
    lo, hi, n = cfg.min_length, cfg.max_length, cfg.num_lengths
    if n == 1:
        raw = [hi]
    elif cfg.length_spacing == "log":
        raw = np.geomspace(lo, hi, n).tolist()
    else:
        raw = np.linspace(lo, hi, n).tolist()
    m = cfg.length_multiple
    out = sorted({max(m, int(round(x / m)) * m) for x in raw})
    return out


def _logistic(x: float, top: float = 100.0, x0: float = 50.0, k: float = 0.1) -> float:
    return top / (1.0 + math.exp(-k * (x - x0)))


def grid_depths(cfg: EvalConfig) -> list[float]:
    if cfg.depths:
        return sorted(set(float(d) for d in cfg.depths))
    n = cfg.num_depths
    if n == 1:
        return [50.0]
    xs = np.linspace(0.0, 100.0, n)
    if cfg.depth_spacing == "linear":
        return [round(float(x), 3) for x in xs]
    mids = [round(_logistic(float(x)), 3) for x in xs[1:-1]]
    return [0.0, *mids, 100.0]
