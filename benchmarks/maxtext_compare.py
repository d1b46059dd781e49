"""bookft beside MaxText 0.2.5 at equal settings: Llama-3.1-8B on v5p-128, compiled ahead of time here.

    python -m benchmarks.maxtext_compare                      # v5p-128: 1M, 4M, longest; both tools
    python -m benchmarks.maxtext_compare --topology tpu7x-128 --no-search

Both tools compile the same train step (stock Llama-3.1-8B, one sequence per step, ring attention
over all 64 chips (CP 64), 512-token splash blocks, bf16 activations with fp32 weights, each layer's
input offloaded to host and the rest recomputed) with the same JAX and libtpu, in one Python 3.12
environment that this script makes: `maxtext[tpu]==0.2.5` first, then bookft (`pip install -e`,
no test extra) constrained to the jax, jaxlib and libtpu that MaxText resolved. Per tool: per-chip
peak HBM at 1M and 4M tokens, and the longest sequence that fits a chip, found by the same search
of at most 4 compiles (`search_longest`). bookft's 1M cell is compiled once more by the Python
that runs this script (the default environment's older JAX and libtpu), to show what the compiler
versions alone change. Results: benchmarks/results/maxtext_compare_<preset>_<hardware>_<date>.json.

Design choices:
- Every compile runs in its own process (benchmarks/maxtext_worker.py): the memory a compile at
  millions of tokens holds is only returned when its process ends, and MaxText needs Python 3.12.
  The two tools' compiles run side by side (two processes, about 3 GB of memory each at 1M; MaxText
  needs 15-18 GB at 7M-16M tokens, more than a 24 GiB host shared with other jobs could give).
- A compile killed from outside (the OOM killer, a signal) is no answer: the search ends there and
  the longest fit so far is recorded as a lower bound; `--reuse` continues from the log later.
- The search starts from the measured 1M and 4M peaks: it probes where the line through the two
  longest fitting lengths reaches the chip's HBM, and bisects between the longest fit and the
  shortest failure once a probe has failed. Lengths are whole multiples of 1M tokens.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from bookft.benchrecord import record_header, result_path, write_result
from bookft.plan.topology import parse_topology

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "benchmarks" / "maxtext_worker.py"
RESULT_TAG = "MAXTEXT_COMPARE_RESULT "
MAXTEXT = "maxtext[tpu]==0.2.5"
PINNED = ("jax", "jaxlib", "libtpu")
M = 1 << 20
SETTINGS = {"batch": 1, "remat": "offload_input (MaxText: remat_policy=custom decoder_layer_input=offload)",
            "strategy": "ring", "dtype": "bfloat16 activations, float32 weights"}

Probe = Callable[[int], dict]
NOT_RUN = {"fits": None, "peak_gib": None, "error": "not compiled: past --stop-at or not --only"}


def next_length(fit: dict[int, float], failed: list[int], capacity: float, unit: int = M) -> int | None:
    """The next length to compile, or None when the answer is known to `unit`.

    `fit` maps lengths that fit to their peak GiB, `failed` lists lengths that did not fit. Before
    any failure: where the line through the two longest fits reaches `capacity` (at least one
    unit past the longest fit, at most four times it). After one: the middle of the gap."""
    lo = max(fit)
    hi = min((n for n in failed if n > lo), default=None)
    if hi is not None:
        mid = (lo + hi) // 2 // unit * unit
        return mid if lo < mid < hi else None
    points = sorted(fit.items())
    (n1, p1), (n2, p2) = points[-2:] if len(points) > 1 else ((0, 0.0), points[-1])
    slope = (p2 - p1) / (n2 - n1)
    guess = n2 + (capacity - p2) / slope if slope > 0 else 4 * n2
    return int(min(max(guess // unit * unit, lo + unit), 4 * lo))


def search_longest(probe: Probe, known: dict[int, dict], capacity: float, *, budget: int = 4, unit: int = M,
                   stop: Callable[[int], bool] = lambda n: False) -> tuple[int | None, list[dict], bool]:
    """(longest length that fits, the probes made, whether the search ran to its end) from the
    `known` cells and at most `budget` calls of `probe` (length -> {"fits", "peak_gib"}). The search
    ends early where `stop(length)` is true: the longest fit is then a lower bound. (None, [], True) when no
    known cell fits."""
    fit = {n: c["peak_gib"] for n, c in known.items() if c.get("fits")}
    failed = [n for n, c in known.items() if c.get("fits") is False]
    if not fit:  # nothing to start from; complete only when every known cell has an answer
        return None, [], all(c.get("fits") is not None for c in known.values())
    tried: list[dict] = []
    while len(tried) < budget and (n := next_length(fit, failed, capacity, unit)) is not None:
        if stop(n):
            return max(fit), tried, False
        cell = probe(n)
        tried.append(cell)
        if cell.get("fits") is None:  # interrupted: no answer at this length
            return max(fit), tried, False
        if cell.get("fits"):
            fit[n] = cell["peak_gib"]
        else:
            failed.append(n)
    return max(fit), tried, True


def tool_entry(tool: str, topology: str, cp: int, cells: dict[int, dict], longest: int | None,
               tried: list[dict], complete: bool = True) -> dict:
    """One tool's entry in the result file: settings, versions, peaks at 1M / 4M, longest."""
    first = next(iter(cells.values()), {})
    return {
        "settings": {"topology": topology, "cp": cp, **SETTINGS},
        "versions": {k: first.get("versions", {}).get(k) for k in (*PINNED, "python", "tokamax", "maxtext")},
        "peak_gib": {f"{n // M}M": cells[n].get("peak_gib") for n in sorted(cells)},
        "fits": {f"{n // M}M": cells[n].get("fits") for n in sorted(cells)},
        "longest": longest,
        "longest_is_lower_bound": not complete,
        "search": [{k: c.get(k) for k in ("seq_len", "fits", "peak_gib", "compile_s", "error")} for c in tried],
        "cells": [cells[n] for n in sorted(cells)],
    }


def ratios(tools: dict[str, dict]) -> dict[str, float | None]:
    """bookft / MaxText per-chip memory at each length and longest sequence."""
    b, m = tools["bookft"], tools["maxtext"]
    out = {f"peak_{k}": (b["peak_gib"][k] / m["peak_gib"][k] if b["peak_gib"].get(k) and m["peak_gib"].get(k)
                         else None) for k in b["peak_gib"]}
    r = b["longest"] / m["longest"] if b.get("longest") and m.get("longest") else None
    out["longest_from_lower_bounds"] = bool(b.get("longest_is_lower_bound") or m.get("longest_is_lower_bound"))
    # MaxText's longest only a lower bound: the ratio is then only an upper bound, not a figure
    out["longest"] = None if m.get("longest_is_lower_bound") else r
    out["longest_at_most"] = r if m.get("longest_is_lower_bound") and not b.get("longest_is_lower_bound") else None
    return out


def command_key(cmd: list[str] | str) -> str:
    """A worker command as the log's results are matched: the worker script named relative to its
    checkout, so a result logged from another checkout of the same code still matches."""
    words = cmd.split(" ") if isinstance(cmd, str) else list(cmd)
    return " ".join("benchmarks/maxtext_worker.py" if w.endswith("/benchmarks/maxtext_worker.py") else w for w in words)


def logged_results(log: Path) -> dict[str, dict]:
    """Worker results in an earlier run's log, by the command that produced them (command_key)."""
    out: dict[str, dict] = {}
    if not log.is_file():
        return out
    text = "\n" + log.read_text()
    for block in text.split("\n$ ")[1:]:
        cmd, _, rest = block.partition("\n")
        for line in rest.splitlines():
            if line.startswith(RESULT_TAG):
                out[command_key(cmd)] = {**json.loads(line[len(RESULT_TAG):]), "reused_from": str(log)}
    return out


def worker_cmd(python: str, tool: str, seq_len: int, topology: str) -> list[str]:
    return ["nice", "-n", "10", python, str(WORKER), "--tool", tool, "--seq-len", str(seq_len), "--topology", topology]


def run_worker(python: str, tool: str, seq_len: int, topology: str, log: Path, reuse: dict | None = None) -> dict:
    """One compile in a fresh process under `python` (or its result in `reuse`, same command)."""
    cmd = worker_cmd(python, tool, seq_len, topology)
    if reuse and command_key(cmd) in reuse:
        row = reuse[command_key(cmd)]
    else:
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as f:
            f.write(f"$ {' '.join(cmd)}\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}\n")
        tagged = [ln for ln in out.stdout.splitlines() if ln.startswith(RESULT_TAG)]
        if not tagged:  # killed (fits unknown) or crashed (reported, counted as not fitting)
            err = (out.stderr.strip().splitlines() or ["no output"])[-1][:400]
            return {"tool": tool, "seq_len": seq_len, "fits": None if out.returncode < 0 else False,
                    "peak_gib": None, "error": f"worker failed (exit {out.returncode}): {err}"}
        row = json.loads(tagged[-1][len(RESULT_TAG):])
    print(f"{tool:8s} {seq_len:>11,}  fits={row['fits']}  peak={row.get('peak_gib')}  {row['compile_s']:.0f} s"
          + ("  (reused)" if "reused_from" in row else ""), flush=True)
    return row


def ensure_env(venv: Path, python: str) -> str:
    """The Python 3.12 environment with MaxText 0.2.5 and bookft on the same jax/libtpu; its python."""
    py = venv / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "-q"]
    if not py.exists():
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
    have = subprocess.run([str(py), "-c", "import importlib.metadata as m; print(m.version('maxtext'))"],
                          capture_output=True, text=True).stdout.strip()
    if have != MAXTEXT.split("==")[1]:
        subprocess.run([*pip, MAXTEXT], check=True)
    # from "/", so the import finds the installed bookft, not this checkout's folder beside the cwd
    where = subprocess.run([str(py), "-c", "import bookft; print(bookft.__file__)"], capture_output=True, text=True,
                           cwd="/")
    if where.stdout.strip().startswith(str(ROOT)):  # this checkout is already installed there (editable)
        return str(py)
    frozen = subprocess.run([str(py), "-m", "pip", "freeze"], capture_output=True, text=True, check=True).stdout
    pins = [ln for ln in frozen.splitlines() if ln.split("==")[0].lower() in PINNED]
    constraints = venv / "bookft-constraints.txt"
    constraints.write_text("\n".join(pins) + "\n")
    subprocess.run([*pip, "-e", str(ROOT), "-c", str(constraints)], check=True)
    return str(py)


def past(hhmm: str | None) -> Callable[[], bool]:
    """A test that is true once the UTC clock reads `hhmm` or later today (never when None)."""
    if hhmm is None:
        return lambda: False
    h, m = (int(x) for x in hhmm.split(":"))
    return lambda: dt.datetime.now(dt.UTC).time() >= dt.time(h, m)


def stopper(key: Callable[[int], str], reuse: dict | None, deadline: Callable[[], bool],
            held: bool = False) -> Callable[[int], bool]:
    """stop(length) for one tool: true when that length would need a new compile (its command,
    `key(length)`, is not in `reuse`) past the deadline, or at all when the tool is `held` (the one
    that --only leaves out)."""
    return lambda n: (held or deadline()) and key(n) not in (reuse or {})


def default_python() -> str:
    try:
        prefix = subprocess.run(["pyenv", "prefix", "3.12.1"], capture_output=True, text=True, check=True)
        return str(Path(prefix.stdout.strip()) / "bin" / "python")
    except (OSError, subprocess.CalledProcessError):
        return "python3.12"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default="v5p-128", help="v5p-128 (64 chips) or tpu7x-128 (64 chips)")
    ap.add_argument("--seq-lens", default=f"{M},{4 * M}")
    ap.add_argument("--no-search", action="store_true", help="peaks only, no longest-sequence search")
    ap.add_argument("--budget", type=int, default=4, help="compiles per tool in the search")
    ap.add_argument("--venv", type=Path, default=Path.home() / ".cache" / "bookft-maxtext" / "venv")
    ap.add_argument("--python", default=None, help="Python 3.12 for the environment (default: pyenv 3.12.1)")
    ap.add_argument("--no-baseline", action="store_true", help="skip bookft's 1M cell on this Python")
    ap.add_argument("--reuse", action="store_true", help="take results of identical commands from compiles.log")
    ap.add_argument("--rerun", choices=("bookft", "maxtext"), action="append", default=[],
                    help="with --reuse, compile this tool's cells again (its code changed since the log)")
    ap.add_argument("--stop-at", default=None, help="UTC HH:MM after which no search compile starts (the "
                    "longest fit so far is then recorded as a lower bound)")
    ap.add_argument("--only", choices=("bookft", "maxtext"), default=None,
                    help="compile only this tool; the other's cells come from the log (--reuse) alone")
    ap.add_argument("--note", action="append", default=[], help="a line for the result's notes (repeatable)")
    a = ap.parse_args()
    header = record_header()
    py = ensure_env(a.venv, a.python or default_python())
    log = a.venv.parent / "compiles.log"
    topo = parse_topology(a.topology)
    capacity = topo.hbm_per_device / 2**30  # v5p: the 95.73 GB libtpu reports per chip
    lengths = [int(x) for x in a.seq_lens.split(",")]
    tools: dict[str, dict] = {}
    reuse = logged_results(log) if a.reuse else None
    if reuse:
        reuse = {cmd: row for cmd, row in reuse.items() if not any(f"--tool {t} " in cmd for t in a.rerun)}

    deadline = past(a.stop_at)

    def one_tool(tool: str) -> None:
        stop = stopper(lambda n: command_key(worker_cmd(py, tool, n, a.topology)), reuse, deadline,
                       held=a.only is not None and tool != a.only)
        probe = lambda n: (NOT_RUN | {"seq_len": n} if stop(n) else  # noqa: E731
                           run_worker(py, tool, n, a.topology, log, reuse))
        cells = {n: probe(n) for n in lengths}
        longest, tried, complete = ((None, [], True) if a.no_search else
                                    search_longest(probe, cells, capacity, budget=a.budget, stop=stop))
        tools[tool] = tool_entry(tool, a.topology, topo.n_devices, cells, longest, tried, complete)

    threads = [threading.Thread(target=one_tool, args=(t,)) for t in ("bookft", "maxtext")]
    for t in threads:
        t.start()
    baseline = None if a.no_baseline else run_worker(sys.executable, "bookft", lengths[0], a.topology, log, reuse)
    for t in threads:
        t.join()
    preset = f"llama-3.1-8b-ring-cp{topo.n_devices}"
    body = {"preset": preset, "capacity_gib": capacity, "tools": tools, "ratios": ratios(tools),
            "targets": {"peak": "bookft <= 0.7x MaxText at 1M and 4M", "longest": "bookft >= 1.5x MaxText"},
            "note": "the header's versions are those of the Python that ran this script; each tool compiled "
                    "under tools.<tool>.versions", "notes": a.note}
    if baseline:
        body["bookft_versions_effect"] = {
            "seq_len": lengths[0],
            "default_env": {"peak_gib": baseline.get("peak_gib"), "versions": baseline.get("versions")},
            "compare_env": {"peak_gib": tools["bookft"]["peak_gib"].get(f"{lengths[0] // M}M"),
                            "versions": tools["bookft"]["versions"]}}
    path = write_result(result_path("maxtext_compare", preset, f"{a.topology}-aot"), header, body)
    print_table(body)
    print(f"wrote {path.relative_to(ROOT)}")


def print_table(body: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    tools, r = body["tools"], body["ratios"]
    t = Table(title=f"Llama-3.1-8B, {tools['bookft']['settings']['topology']}, ring CP "
                    f"{tools['bookft']['settings']['cp']}, AOT: GiB per chip (capacity {body['capacity_gib']:.1f})")
    keys = list(tools["bookft"]["peak_gib"])
    for c in ("tool", "jax / libtpu", *keys, "longest"):
        t.add_column(c)
    fmt = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
    for name, e in tools.items():
        v = e["versions"]
        t.add_row(name, f"{v['jax']} / {v['libtpu']}", *(fmt(e["peak_gib"][k]) for k in keys),
                  (">= " if e.get("longest_is_lower_bound") else "") + (f"{e['longest']:,}" if e["longest"] else "-"))
    t.add_row("bookft / MaxText", "", *(fmt(r[f"peak_{k}"]) for k in keys),
              fmt(r["longest"]) if r.get("longest_at_most") is None else f"<= {r['longest_at_most']:.2f}")
    Console().print(t)


if __name__ == "__main__":
    main()
