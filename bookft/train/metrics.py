"""Per-step metrics: a JSON Lines log in the run directory, TensorBoard when installed, MFU.

Hooks style (levanter): the loop calls `MetricsLog.write(step, metrics)`; nothing here runs inside
the jitted step.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


class MetricsLog:
    def __init__(self, run_dir: str | Path, *, enabled: bool = True):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.enabled = enabled
        self._tb = None
        if enabled:
            self._tb = _tensorboard_writer(Path(run_dir) / "tensorboard")

    def write(self, step: int, metrics: dict[str, Any]) -> None:
        if not self.enabled:
            return
        row = {"step": step, **{k: _plain(v) for k, v in metrics.items()}}
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        if self._tb is not None:
            for k, v in row.items():
                if k != "step" and isinstance(v, (int, float)) and v is not None and math.isfinite(v):
                    self._tb.add_scalar(f"train/{k}", v, step)
            self._tb.flush()

    def truncate_after(self, step: int) -> None:
        """Drop log rows of steps > `step` (a resumed run redoes them), and a line torn by a kill -9;
        rewritten aside and renamed, so a kill now loses no row."""
        if not self.path.is_file():
            return
        keep = [ln for ln in self.path.read_text().splitlines() if (s := _step(ln)) is not None and s <= step]
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text("".join(ln + "\n" for ln in keep))
        tmp.replace(self.path)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def _step(line: str) -> int | None:
    """The step of a log line; None for a blank or torn one."""
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return int(row.get("step", 0)) if isinstance(row, dict) else None


def _plain(v):
    try:
        import numpy as np

        if isinstance(v, np.generic) or getattr(v, "shape", None) == ():
            return float(v)
    except Exception:
        pass
    return v


def _tensorboard_writer(path: Path):
    for mod in ("tensorboardX", "torch.utils.tensorboard"):
        try:
            m = __import__(mod, fromlist=["SummaryWriter"])
            return m.SummaryWriter(str(path))
        except Exception:
            continue
    return None


def mfu(flops_per_token: float, tokens_per_s: float, n_devices: int, peak_flops: float | None):
    if not peak_flops:
        return None
    return flops_per_token * tokens_per_s / (peak_flops * n_devices)
