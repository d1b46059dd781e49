"""The record every benchmark writes: one header (machine, load, commit, versions, command) and one
file name rule (`<bench>_<preset>_<hardware>_<date>.json`, never overwritten by a rerun).

Design choices:
- It sits at the bottom layer (beside config and host) so scripts under benchmarks/ import it
  through the installed package, without editing sys.path.
- The header is taken twice, at the start and at the end of a run (`finish`), because walls on a
  shared host mean little without the load average that went with them.
- `hardware` is a short slug of what ran the figures ("cpu2" for this 2-core host, "h100", "h200",
  "v5p-128-aot" for an ahead-of-time compile), so results of different machines never collide.
- The bench name keeps its underscores (`real_flow`); the preset and hardware fields never
  hold one, so a name splits from the right.
- A rerun on the same day gets a numeric suffix (`_2`, `_3`, ...) instead of replacing a file.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
_VERSIONED = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "transformers", "tokamax", "libtpu", "torch")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _commit(root: Path = ROOT) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out + ("+dirty" if dirty else "")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _load() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def hardware_slug(devices: list | None = None) -> str:
    """'cpu<N>' on a CPU host, else the accelerator kind in short ('h100', 'h200', 'v5p', ...)."""
    if devices:
        kind = str(getattr(devices[0], "device_kind", "")).lower()
        if getattr(devices[0], "platform", "cpu") != "cpu" and kind:
            m = re.search(r"(h100|h200|b200|a100|v\d+[a-z]*)", kind)
            return m.group(1) if m else re.sub(r"[^a-z0-9]+", "", kind)[:16]
    return f"cpu{os.cpu_count()}"


def machine(devices: list | None = None, *, hardware: str | None = None) -> dict[str, Any]:
    """The machine part of the header: host, Python, and the accelerator the figures ran on."""
    return {"platform": platform.platform(), "cpu": _cpu_model(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "hardware": hardware or hardware_slug(devices),
            "devices": [str(getattr(d, "device_kind", d)) for d in (devices or [])][:1] or None,
            "device_count": len(devices) if devices else None}


def record_header(argv: list[str] | None = None, *, devices: list | None = None) -> dict[str, Any]:
    """The shared header: machine, load at the start, commit, package versions, the command."""
    argv = list(sys.argv if argv is None else argv)
    return {
        "machine": machine(devices),
        "load_avg_start": _load(),
        "commit": _commit(),
        "versions": {d: v for d in _VERSIONED if (v := _version(d)) is not None},
        "command": " ".join(shlex.quote(a) for a in argv),
        "started": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


def finish(header: dict[str, Any]) -> dict[str, Any]:
    """The header with the load at the end and the finish time added (a new dict)."""
    return {**header, "load_avg_end": _load(),
            "finished": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}


def result_path(bench: str, preset: str, hardware: str, *, results: Path = RESULTS,
                date: _dt.date | None = None) -> Path:
    """A fresh `<bench>_<preset>_<hardware>_<date>.json` under `results`: a numeric suffix is added
    when that name is taken, so a rerun never overwrites a result."""
    def slug(s: str, keep: str = "") -> str:
        return re.sub(rf"[^A-Za-z0-9.{keep}-]+", "-", s).strip("-") or "default"

    day = (date or _dt.date.today()).isoformat()
    # the bench keeps its underscores (gpu_compare, real_flow): the last three fields never have one
    stem = "_".join([slug(bench, keep="_"), slug(preset), slug(hardware), day])
    path, n = results / f"{stem}.json", 1
    while path.exists():
        n += 1
        path = results / f"{stem}_{n}.json"
    return path


def write_result(path: Path, header: dict[str, Any], body: dict[str, Any]) -> Path:
    """Write {header..., body...} as JSON (header last-load filled in); refuse to overwrite."""
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path}: a benchmark result is never overwritten; take result_path() again")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({**finish(header), **body}, indent=1, default=str) + "\n")
    os.replace(tmp, path)
    return path
