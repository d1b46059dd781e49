"""Reports: results.json, heatmap.png, depth_curve.png, report.html, and a terminal summary.

Design choices:
- Matplotlib with the Agg backend (no display), the NIAH red-yellow-green scale from 0 to 1,
  depth on the y axis (0 % at the top, as in the original test) and length on the x axis.
- report.html is self-contained: every PNG is embedded as a base64 data URI (and linked by its
  file name next to it, for people who want the file). No scripts, no external CSS.
- The lost-in-the-middle curve is score against actual depth, one line per length and the mean.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import LinearSegmentedColormap  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bookft.errors import EvalError  # noqa: E402
from bookft.eval.ppl_report import ppl_section  # noqa: E402
from bookft.eval.short_report import read_json, short_section  # noqa: E402
from bookft.htmlpage import img as _img  # noqa: E402
from bookft.htmlpage import page as _page  # noqa: E402
from bookft.htmlpage import table as _table  # noqa: E402

NIAH_CMAP = LinearSegmentedColormap.from_list("niah", ["#F0496E", "#EBB839", "#0CD79F"])


def fmt_len(n: int) -> str:
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n >= 1024 and n % 1024 == 0:
        return f"{n >> 10}K"
    return str(n)


def fmt_depth(d: float) -> str:
    return f"{round(d, 1):g}%"


def score_matrix(results: dict) -> tuple[list[int], list[float], np.ndarray]:
    """[depths, lengths] matrix of the primary score (NaN where a cell is missing)."""
    lengths, depths = list(results["lengths"]), list(results["depths"])
    key = results["summary"]["score"]
    grid = np.full((len(depths), len(lengths)), np.nan)
    for c in results["cells"]:
        grid[depths.index(c["depth"]), lengths.index(c["length"])] = c["scores"][key]
    return lengths, depths, grid


def _draw_heatmap(ax, results: dict, title: str) -> None:
    lengths, depths, grid = score_matrix(results)
    im = ax.imshow(grid, cmap=NIAH_CMAP, vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(lengths)), [fmt_len(n) for n in lengths], rotation=45 if len(lengths) > 8 else 0)
    ax.set_yticks(range(len(depths)), [fmt_depth(d) for d in depths])
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("needle depth")
    if grid.size <= 200:
        for (i, j), v in np.ndenumerate(grid):
            if not np.isnan(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8, color="black")
    ax.set_title(title, fontsize=10)
    return im


def _title(results: dict, name: str = "") -> str:
    s = results["summary"]
    eff = s["effective_length"]
    eff_s = fmt_len(eff) if eff else f"< {fmt_len(min(results['lengths']))}"
    head = f"{name}: " if name else ""
    return f"{head}{results['task']} ({s['score']}), mean {s['mean']:.2f}, effective length {eff_s}"


def plot_heatmap(results: dict, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(max(6, 0.8 * len(results["lengths"]) + 3), 5))
    im = _draw_heatmap(ax, results, _title(results))
    fig.colorbar(im, ax=ax, label="score")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _draw_depth_curve(ax, results: dict, label_prefix: str = "", mean_only: bool = False) -> None:
    key = results["summary"]["score"]
    by_len: dict[int, list[tuple[float, float]]] = {}
    for c in results["cells"]:
        by_len.setdefault(c["length"], []).append((c["actual_depth"], c["scores"][key]))
    if not mean_only:
        for n, pts in sorted(by_len.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", alpha=0.5,
                    label=f"{label_prefix}{fmt_len(n)}")
    per_depth = results["summary"]["per_depth"]
    ax.plot([float(d) for d in per_depth], list(per_depth.values()), color="black" if not label_prefix else None,
            linewidth=2.5, marker="o", label=f"{label_prefix}mean")
    ax.set_xlabel("needle depth (%)")
    ax.set_ylabel("score")
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlim(-2, 102)
    ax.grid(alpha=0.3)


def plot_depth_curve(results: dict, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4))
    _draw_depth_curve(ax, results)
    ax.set_title("lost in the middle: score by depth", fontsize=10)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5), title="length")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _per_length_rows(results: dict) -> tuple[list[str], list[list[object]]]:
    key = results["summary"]["score"]
    depths = results["depths"]
    header = ["length", "mean", *[fmt_depth(d) for d in depths], "actual length (mean)"]
    rows = []
    for n in results["lengths"]:
        cells = {c["depth"]: c for c in results["cells"] if c["length"] == n}
        lens = [x for c in cells.values() for x in c["actual_lengths"]]
        rows.append([fmt_len(n), f"{results['summary']['per_length'][str(n)]:.3f}",
                     *[f"{cells[d]['scores'][key]:.2f}" if d in cells else "" for d in depths],
                     f"{sum(lens) / max(1, len(lens)):.1f}"])
    return header, rows


def _settings_rows(results: dict) -> list[list[object]]:
    rows = [[f"settings.{k}", json.dumps(v)] for k, v in results["settings"].items()]
    rows += [[f"tokenizer.{k}", json.dumps(v)] for k, v in results["tokenizer"].items()]
    rows += [[f"model.{k}", json.dumps(v)] for k, v in results.get("model", {}).items()]
    rows += [[f"timing.{k}", json.dumps(v)] for k, v in results.get("timing", {}).items()]
    return rows


def plot_probe(rows: list[dict], path: Path) -> Path:
    """Retrieval against training step: one line per probe length (train.probe_every rows of
    metrics.jsonl, bookft/eval/probe.py), the worst probed cell dashed."""
    fig, ax = plt.subplots(figsize=(7, 4))
    steps = [r["step"] for r in rows]
    keys = sorted({k for r in rows for k in r if k.startswith("probe/") and k[6:].isdigit()}, key=lambda k: int(k[6:]))
    for k in keys:
        ax.plot(steps, [r.get(k, np.nan) for r in rows], marker="o", ms=3, label=f"{fmt_len(int(k[6:]))} tokens")
    if any("probe/min" in r for r in rows):
        ax.plot(steps, [r.get("probe/min", np.nan) for r in rows], ls="--", color="grey", label="worst cell")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("training step")
    ax.set_ylabel("needle probe (teacher-forced exact match)")
    ax.set_title("retrieval while training", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _probe_section(rows: list[dict] | None, out: Path) -> str:
    if not rows:
        return ""
    png = plot_probe(rows, out / "probe.png")
    last = rows[-1]
    cells = ", ".join(f"{fmt_len(int(k[6:]))} {v:.2f}" for k, v in last.items()
                      if k.startswith("probe/") and k[6:].isdigit())
    return (f"<h2>Retrieval while training</h2><p>The needle probe (train.probe_every) on the live parameters; "
            f"at step {last['step']}: {html.escape(cells)}.</p>{_img(png)}")


def write_report(results: dict, out_dir: str | Path, probe_rows: list[dict] | None = None) -> dict[str, Path]:
    """results.json, heatmap.png, depth_curve.png, report.html in out_dir (and probe.png: retrieval
    against training step, when `probe_rows` from the run's metrics.jsonl are given; and the short-context
    check when `bookft eval short` wrote short.json to out_dir, the perplexity table when `bookft eval ppl`
    wrote ppl.json there)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"results": out / "results.json"}
    paths["results"].write_text(json.dumps(results, indent=1), encoding="utf-8")
    paths["heatmap"] = plot_heatmap(results, out / "heatmap.png")
    paths["depth_curve"] = plot_depth_curve(results, out / "depth_curve.png")
    s = results["summary"]
    eff = s["effective_length"]
    header, rows = _per_length_rows(results)
    body = (
        f"<p class='big'>{html.escape(_title(results))}</p>"
        f"<p>RULER effective length at threshold {s['threshold']:.2f}: "
        f"<b>{fmt_len(eff) if eff else 'below the shortest length'}</b> (the largest length such "
        "that it and every shorter length score at least the threshold).</p>"
        f"<h2>Heatmap</h2>{_img(paths['heatmap'])}"
        f"<h2>Lost in the middle</h2>{_img(paths['depth_curve'])}"
        f"<h2>Per length</h2>{_table(header, rows)}"
        f"{_probe_section(probe_rows, out)}"
        f"{short_section(out)}"
        f"{ppl_section(out)}"
        f"<h2>Settings</h2>{_table(['key', 'value'], _settings_rows(results))}")
    paths["report"] = out / "report.html"
    paths["report"].write_text(_page(f"bookft eval: {results['task']}", body), encoding="utf-8")
    return paths


def summary_table(results: dict) -> Table:
    lengths, depths, grid = score_matrix(results)
    s = results["summary"]
    table = Table(title=_title(results))
    table.add_column("depth", justify="right")
    for n in lengths:
        table.add_column(fmt_len(n), justify="right")
    color = lambda v: "green" if v >= s["threshold"] else ("yellow" if v >= 0.5 else "red")
    for i, d in enumerate(depths):
        table.add_row(fmt_depth(d), *[f"[{color(v)}]{v:.2f}[/]" if not np.isnan(v) else "" for v in grid[i]])
    table.add_row("[bold]mean", *[f"[bold]{s['per_length'][str(n)]:.2f}" for n in lengths])
    return table


def print_summary(results: dict, console: Console | None = None) -> None:
    (console or Console()).print(summary_table(results))


def load_results(path: str | Path) -> dict:
    """results.json, or a directory holding one."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    if not p.is_file():
        raise EvalError(f"{path}: no results.json found; pass an eval output directory or its results.json")
    data = read_json(p)
    if data.get("kind") != "bookft-eval" or "cells" not in data:
        raise EvalError(f"{p}: not a bookft eval results file")
    return data


def niah_results(out_dir: str | Path) -> dict | None:
    """The NIAH grid's results.json in out_dir, or None when there is none (or it is another command's)."""
    p = Path(out_dir) / "results.json"
    data = read_json(p) if p.is_file() else {}
    return data if data.get("kind") == "bookft-eval" and "cells" in data else None


def compare_reports(a: str | Path, b: str | Path, out_dir: str | Path,
                    names: tuple[str, str] = ("A", "B"), probe_rows: list[dict] | None = None) -> dict[str, Path]:
    """compare.png (A, B heatmaps and the depth curves) and compare.html, side by side; with
    `probe_rows` (B's training run), also B's retrieval against training step (probe.png)."""
    ra, rb = load_results(a), load_results(b)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 3, figsize=(18, 5), gridspec_kw={"width_ratios": [1, 1, 0.9]})
    _draw_heatmap(axes[0], ra, _title(ra, names[0]))
    im = _draw_heatmap(axes[1], rb, _title(rb, names[1]))
    fig.colorbar(im, ax=axes[1], label="score")
    _draw_depth_curve(axes[2], ra, f"{names[0]} ", mean_only=True)
    _draw_depth_curve(axes[2], rb, f"{names[1]} ", mean_only=True)
    axes[2].legend(fontsize=8)
    axes[2].set_title("score by depth (mean over lengths)", fontsize=10)
    fig.tight_layout()
    png = out / "compare.png"
    fig.savefig(png, dpi=100)
    plt.close(fig)
    lens = sorted(set(ra["lengths"]) | set(rb["lengths"]))
    pa, pb = ra["summary"]["per_length"], rb["summary"]["per_length"]
    rows = []
    for n in lens:
        va, vb = pa.get(str(n)), pb.get(str(n))
        delta = f"{vb - va:+.3f}" if va is not None and vb is not None else ""
        rows.append([fmt_len(n), "" if va is None else f"{va:.3f}", "" if vb is None else f"{vb:.3f}", delta])
    eff = lambda r: fmt_len(r["summary"]["effective_length"] or 0) or "-"
    rows.append(["effective length", eff(ra), eff(rb), ""])
    rows.append(["mean", f"{ra['summary']['mean']:.3f}", f"{rb['summary']['mean']:.3f}",
                 f"{rb['summary']['mean'] - ra['summary']['mean']:+.3f}"])
    body = (f"<p>{html.escape(names[0])}: {html.escape(str(a))}<br>{html.escape(names[1])}: "
            f"{html.escape(str(b))}</p>{_img(png)}"
            f"<h2>Per length</h2>{_table(['length', names[0], names[1], 'delta'], rows)}"
            f"{_probe_section(probe_rows, out)}")
    page = out / "compare.html"
    page.write_text(_page(f"bookft eval compare: {names[0]} vs {names[1]}", body), encoding="utf-8")
    return {"png": png, "html": page}
