"""The training loop: set up mesh, model, state and data; run steps; log; checkpoint; resume.

Design choices:
- Everything that can be wrong is checked before anything compiles: config, mesh vs devices,
  attention strategy vs mesh and sequence length, corpus vocabulary vs model vocabulary.
- Resume is automatic: a run directory with checkpoints continues from the newest readable one
  (data position = step), so `--steps` larger than before continues the run, and a killed run
  rerun with the same arguments gives the same losses and parameters.
- SIGTERM (TPU preemption) and Ctrl-C set a flag; the loop finishes the current step, saves a
  checkpoint for it, waits for the write, and exits with status 143/130.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bookft.config import to_dict
from bookft.errors import TrainError
from bookft.train.config import RunConfig
from bookft.train.gate import stage_index


@dataclass
class TrainResult:
    run_dir: Path
    step: int
    losses: dict[int, float]
    interrupted: bool = False
    tokens_per_s: float | None = None
    curriculum_steps: list[int] | None = None  # the realised stage lengths (gated stages end early)


class Preempted(Exception):
    def __init__(self, signum: int):
        self.signum = signum


@contextmanager
def _signal_flag():
    flag = {"sig": None}

    def handler(signum, frame):
        if flag["sig"] is not None:  # second signal: stop now
            raise KeyboardInterrupt
        flag["sig"] = signum

    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        for s in old:
            signal.signal(s, handler)
    except ValueError:  # not the main thread
        old = {}
    try:
        yield flag
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def stage_at(cfg: RunConfig, step: int):
    """The curriculum stage of `step` (0-based; past the end, the last stage), or None without one."""
    i = stage_index(cfg, step)
    return None if i is None else cfg.train.curriculum[i]


def stage_len(cfg: RunConfig, step: int, corpus_len: int) -> int:
    """Row length of `step` (0-based) under the curriculum, else data.seq_len or the corpus's."""
    stage = stage_at(cfg, step)
    return stage.seq_len if stage is not None else (cfg.data.seq_len or corpus_len)


def stage_data(cfg: RunConfig, step: int) -> str:
    """What the rows of `step` are made of: "corpus" or "copy" (the synthetic warm-up)."""
    stage = stage_at(cfg, step)
    return stage.data if stage is not None else "corpus"


def _check_run_dir(run_dir: Path, cfg: RunConfig) -> None:
    """A run dir keeps its model shape; refuse a different one (it would not restore)."""
    saved = run_dir / "config.yaml"
    if not saved.is_file():
        return
    old = yaml.safe_load(saved.read_text()) or {}
    new = to_dict(cfg)
    if old.get("model") != new["model"]:
        raise TrainError(f"{saved}: this run directory was trained with a different model section; "
                         "use another --run-dir (or delete this one)")


def config_digest(cfg: RunConfig) -> str:
    return hashlib.sha256(json.dumps(to_dict(cfg), sort_keys=True).encode()).hexdigest()[:16]


def train(cfg: RunConfig, *, run_dir: str | Path, model_path: str | Path | None = None,
          progress=None, log_metrics: bool = True, hooks=()) -> TrainResult:
    """Train according to `cfg` in `run_dir` (resuming if it holds checkpoints); `hooks`: see Trainer.run."""
    from bookft.train.setup import build_trainer, resolve_model_config  # imports jax: keep CLI start fast

    cfg = resolve_model_config(cfg, model_path)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    _check_run_dir(run_dir, cfg)
    trainer = build_trainer(cfg, run_dir=run_dir, model_path=model_path)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))
    # The run's tokenizer travels with it (eval, export), whatever happens to the corpus later.
    shutil.copyfile(trainer.corpus.tokenizer_path, run_dir / "tokenizer.json")
    return trainer.run(progress=progress, log_metrics=log_metrics, hooks=hooks)


def losses_from_log(run_dir: str | Path) -> dict[int, float]:
    p = Path(run_dir) / "metrics.jsonl"
    out: dict[int, float] = {}
    if p.is_file():
        for ln in p.read_text().splitlines():
            if ln.strip():
                row: dict[str, Any] = json.loads(ln)
                out[int(row["step"])] = float(row["loss"])
    return out


def finite(x) -> bool:
    return bool(np.isfinite(np.asarray(x)).all())


def now() -> float:
    return time.perf_counter()
