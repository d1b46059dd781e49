"""The tune flow's report (bookft/flows/tune.py): the perplexity and short-context figures, the
base-vs-tuned page linking one compare page per task, and the printed summary.

Design choices:
- report.html links one compare page per task (bookft.eval.report.compare_reports) and carries the
  per-length, per-depth table, the perplexity and the short-context figures.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from bookft.flows import phases
from bookft.flows.summary import figures_table
from bookft.htmlpage import page, table

TITLE = "RULER tasks, generation scoring: base→tuned ({})"


def ppl_figures(res: dict) -> dict[str, dict[str, float]]:
    """{length: {base, tuned}} perplexity."""
    return {n: {lb: round(res["ppl"][lb][n], 4) for lb in ("base", "tuned")} for n in res["ppl"]["base"]}


def short_figures(res: dict) -> dict[str, dict[str, float]]:
    """{set: {base_loss, tuned_loss, loss_delta, accuracy_delta}}."""
    return {name: {"base_loss": round(s["base"]["loss"], 4), "tuned_loss": round(s["tuned"]["loss"], 4),
                   "loss_delta": round(s["tuned"]["loss"] - s["base"]["loss"], 4),
                   "accuracy_delta": round(s["tuned"]["accuracy"] - s["base"]["accuracy"], 4)}
            for name, s in res["sets"].items()}


def compare_all(base_root: Path, tuned_root: Path, out: Path, tasks: tuple[str, ...]) -> dict[str, Path]:
    """compare-<task>/compare.html per task; {task: page}."""
    return {task: phases.compare(base_root / task, tuned_root / task, out / f"compare-{task}")["html"]
            for task in tasks}


def write_index(out: Path, summary: dict, pages: dict[str, Path], extra: dict[str, Path]) -> Path:
    """out/report.html: the base-vs-tuned tables and links to every page."""
    figs = summary["tasks"]
    rows = [[task, n, d, f"{v['base']:.3f}", f"{v['tuned']:.3f}", f"{v['tuned'] - v['base']:+.3f}"]
            for task, f in figs.items() for n, ds in sorted(f["per_length"].items(), key=lambda x: int(x[0]))
            for d, v in sorted(ds.items(), key=lambda x: float(x[0]))]
    ppl = [[n, f"{v['base']:.3f}", f"{v['tuned']:.3f}"] for n, v in summary["ppl"].items()]
    short = [[k, v["base_loss"], v["tuned_loss"], f"{v['loss_delta']:+.4f}", f"{v['accuracy_delta']:+.4f}"]
             for k, v in summary["short"].items()]
    links = "".join(f'<li><a href="{p.relative_to(out)}">{name}</a></li>'
                    for name, p in [*((f"compare: {t}", p) for t, p in pages.items()), *extra.items()])
    body = (f"<p>model: {summary['paths']['model']}<br>tuned: {summary['paths']['tuned_model']}<br>"
            f"size: {summary['settings']['size']}</p><ul>{links}</ul>"
            f"<h2>RULER tasks (generation scoring; {', '.join(summary['settings']['transfer'])} not trained on)</h2>"
            f"{table(['task', 'length', 'depth %', 'base', 'tuned', 'delta'], rows)}"
            f"<h2>Perplexity on held-out text</h2>{table(['length', 'base', 'tuned'], ppl)}"
            f"<h2>Short-context check</h2>"
            f"{table(['set', 'base loss', 'tuned loss', 'loss delta', 'accuracy delta'], short)}")
    path = out / "report.html"
    path.write_text(page("bookft: base vs tuned", body), encoding="utf-8")
    return path


def print_summary(summary: dict, console: Console) -> None:
    from rich.table import Table

    console.print(figures_table(summary["tasks"], TITLE.format("held-out haystacks")))
    t = Table(title="held-out perplexity: base -> tuned")
    t.add_column("length", justify="right")
    t.add_column("base", justify="right")
    t.add_column("tuned", justify="right")
    for n, v in summary["ppl"].items():
        t.add_row(n, f"{v['base']:.3f}", f"{v['tuned']:.3f}")
    console.print(t)
    for name, v in summary["short"].items():
        console.print(f"short-context {name}: loss {v['base_loss']:.4f} -> {v['tuned_loss']:.4f} "
                      f"({v['loss_delta']:+.4f}), accuracy {v['accuracy_delta']:+.4f}")
    phases.print_times(summary["times"], console)
    console.print(f"[green]report[/]: {summary['paths']['report']}  (summary {summary['paths']['summary']})")
