"""One benchmark cell of `bookft plan` as a JSON row, and which recorded rows are still valid.

Both benchmarks/plan.py and benchmarks/train.py (its AOT section) record the same row: per-chip
memory from `plan_fast`, the wall time of the compile and the CPU seconds the process spent on it
(getrusage user+sys: on a shared 2-core host the wall time mostly measures the other jobs, CPU
seconds are the figure to compare with a "compiles in N minutes" target), the load average, the
config knobs that change the program (mlp_chunk, loss_chunk) and the git commit of the code.

A recorded row may stand for a new compile when topology, length, strategy, remat and those knobs
match and the train-step code has not changed since the row's commit (`step_unchanged`: git diff
over the modules the step is built from, minus data-path and decoding files that the compiled
step never calls), or since its `same_step_as` commit: a later code version for which the lowered
StableHLO of the same cell was compared and found identical (a change that leaves this program
alone, e.g. a feature the config does not use).
"""

from __future__ import annotations

import ast
import os
import resource
import subprocess
import time
from pathlib import Path

from bookft.plan.planner import plan_fast

ROOT = Path(__file__).resolve().parents[2]
# what the compiled train step is built from; the exclusions are data path / decode / multi-host I/O
STEP_PATHS = ["bookft/model", "bookft/attention", "bookft/train", "bookft/parallel", "bookft/plan/build.py",
              ":(exclude)bookft/train/data.py", ":(exclude)bookft/train/trainer.py",
              ":(exclude)bookft/train/rundir.py", ":(exclude)bookft/train/curriculum.py",
              ":(exclude)bookft/train/checkpoint.py", ":(exclude)bookft/train/metrics.py",
              ":(exclude)bookft/train/progress.py", ":(exclude)bookft/train/export.py",
              ":(exclude)bookft/attention/balance.py",
              ":(exclude)bookft/attention/swaps.py", ":(exclude)bookft/model/generate.py",
              ":(exclude)bookft/parallel/distributed.py",
              # package __init__ files only re-export names (lazily, bookft/_lazy.py)
              ":(exclude)bookft/model/__init__.py", ":(exclude)bookft/attention/__init__.py"]
# files the step uses only in part: top-level names in them that the compiled step never calls
PARTLY = {"bookft/model/short_conv.py": {"prompt_history"}}
KEY = ("config", "topology", "seq_len", "strategy", "remat", "mlp_chunk", "loss_chunk")


def git_head() -> str | None:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout.strip() or None


def step_unchanged(commit: str | None) -> bool:
    """True when the train-step code (STEP_PATHS, working tree included) equals the one at `commit`."""
    if not commit:
        return False
    out = subprocess.run(["git", "diff", "--name-only", commit, "--", *STEP_PATHS], cwd=ROOT, capture_output=True,
                         text=True)
    if out.returncode:
        return False
    return all(_same_used_part(commit, f) for f in out.stdout.split())


def _same_used_part(commit: str, path: str) -> bool:
    """A changed file still builds the same step when it is in PARTLY and only its unused names changed."""
    if path not in PARTLY:
        return False
    old = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, text=True)
    if old.returncode:
        return False

    def used(src: str) -> list[str]:
        return [ast.dump(n) for n in ast.parse(src).body
                if getattr(n, "name", None) not in PARTLY[path] and not isinstance(n, ast.Expr)]

    return used(old.stdout) == used((ROOT / path).read_text())


def cell_key(row: dict) -> tuple:
    return tuple(row.get(k) for k in KEY)


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed_cell(cfg, topo, devices, *, seq_len: int, strategy: str, remat: str, overrides=()) -> dict:
    """Plan (compile) one cell and return its JSON row with wall and CPU seconds and load."""
    return timed_plan(cfg, topo, devices, seq_len=seq_len, strategy=strategy, remat=remat, overrides=overrides)[1]


def timed_plan(cfg, topo, devices, *, seq_len: int, strategy: str, remat: str, overrides=()):
    """(PlanResult, JSON row) of one planned cell."""
    code = git_head()  # the code the compile starts from (modules are imported on the first plan)
    load0, cpu0, t0 = os.getloadavg()[0], cpu_seconds(), time.perf_counter()
    res = plan_fast(cfg, topo, devices, seq_len=seq_len, strategy=strategy, remat=remat)
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    d = res.as_dict()
    return res, {
        "topology": topo.libtpu_name, "seq_len": seq_len, "strategy": strategy, "remat": remat,
        "mlp_chunk": cfg.model.mlp_chunk, "loss_chunk": cfg.train.loss_chunk, "fits": res.fits,
        "peak_gib": d.get("peak_gib"), "temp_gib": d.get("temp_gib"), "params_gib": d.get("params_gib"),
        "opt_state_gib": d.get("opt_state_gib"), "mesh": res.mesh, "step_time_s": res.step_time_s,
        "compile_s": res.compile_s, "wall_s": wall, "cpu_s": cpu, "load_avg_start": load0,
        "load_avg_end": os.getloadavg()[0], "nice": os.nice(0), "error": res.error, "config": cfg.name,
        "overrides": list(overrides), "code": code, "source": "compiled"}


def reusable(rows, key: tuple) -> dict | None:
    """The first recorded row with this key whose train-step code is unchanged since its commit (or
    since `same_step_as`: a later commit whose lowered program was checked to be the same)."""
    for row in rows:
        if cell_key(row) == key and step_unchanged(row.get("same_step_as") or row.get("code")):
            return row
    return None
