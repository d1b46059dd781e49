"""The tune flow's report (bookft/flows/tune.py): the perplexity and short-context figures, the
base-vs-tuned page linking one compare page per task, and the printed summary.

Design choices:
- report.html links one compare page per task (bookft.eval.report.compare_reports, base vs tuned)
  and carries the headline (per task, model and scoring: draws, score, 95% Wilson interval), the
  per-length, per-depth table of every model, the perplexity (held-out books, other kinds of
  text) and the short-context figures.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from bookft.flows import phases
from bookft.flows.summary import figures_table
from bookft.htmlpage import page, table

TITLE = "tasks, first scoring: {} ({} split, held-out haystacks)"


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


HEADLINE_COLUMNS = ["task", "model", "scoring", "split", "draws", "score", "95% CI"]


def headline_table(rows: list[dict]) -> list[list[str]]:
    """The headline rows as table rows: task, model, scoring, draws, score and its 95% interval."""
    return [[r["task"], r["model"], r["scoring"], r["split"], str(r["draws"]), f"{r['score']:.3f}",
             f"{r['ci'][0]:.3f}-{r['ci'][1]:.3f}"] for r in rows]


def write_index(out: Path, summary: dict, pages: dict[str, Path], extra: dict[str, Path]) -> Path:
    """out/report.html: the headline with intervals, the per-depth tables and links to every page."""
    figs, st = summary["tasks"], summary["settings"]
    models = list(next(iter(figs.values()))["mean"]) if figs else ["base", "tuned"]
    rows = [[task, n, d, *[f"{v[m]:.3f}" for m in models], f"{v['tuned'] - v['base']:+.3f}"]
            for task, f in figs.items() for n, ds in sorted(f["per_length"].items(), key=lambda x: int(x[0]))
            for d, v in sorted(ds.items(), key=lambda x: float(x[0]))]
    ppl = [[name, n, f"{v['base']:.3f}", f"{v['tuned']:.3f}"]
           for name, sec in (("books", summary["ppl"]), ("other", summary.get("ppl_other") or {}))
           for n, v in sec.items()]
    short = [[k, v["base_loss"], v["tuned_loss"], f"{v['loss_delta']:+.4f}", f"{v['accuracy_delta']:+.4f}"]
             for k, v in summary["short"].items()]
    links = "".join(f'<li><a href="{p.relative_to(out)}">{name}</a></li>'
                    for name, p in [*((f"compare: {t}", p) for t, p in pages.items()), *extra.items()])
    body = (f"<p>model: {summary['paths']['model']}<br>tuned: {summary['paths']['tuned_model']}<br>"
            f"size: {st['size']}; split: {st['split']}; training seed {summary.get('train_seed')}</p>"
            f"<ul>{links}</ul><h2>Headline: {max(st['lengths']):,} tokens, 95% Wilson intervals</h2>"
            f"<p>fewshot: the base model with {st['fewshot']} solved examples of the task in its prompt. "
            f"Untrained families (no training example asks them): {', '.join(st['families'])}. "
            f"docs/benchmarks.md explains how to read these.</p>"
            f"{table(HEADLINE_COLUMNS, headline_table(summary['headline']))}"
            f"<h2>Per depth ({st['scoring'][0]} scoring)</h2>"
            f"{table(['task', 'length', 'depth %', *models, 'tuned - base'], rows)}"
            f"<h2>Perplexity on held-out text</h2>{table(['text', 'length', 'base', 'tuned'], ppl)}"
            f"<h2>Short-context check</h2>"
            f"{table(['set', 'base loss', 'tuned loss', 'loss delta', 'accuracy delta'], short)}")
    path = out / "report.html"
    path.write_text(page("bookft: base vs tuned", body), encoding="utf-8")
    return path


def headline_rich(rows: list[dict], models: list[str]):
    """The headline as a rich table: one row per task, scoring and split (the dev rows of --dev-grids
    apart from the test ones), one column per model."""
    from rich.table import Table

    h = Table(title="headline: score [95% interval] (draws)")
    for col in ("task", "scoring", "split", *models):
        h.add_column(col, justify="left" if col in ("task", "scoring", "split") else "right")
    cell = {(r["task"], r["scoring"], r["split"], r["model"]): r for r in rows}
    shown = lambda r: f"{r['score']:.2f} [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}] ({r['draws']})" if r else ""  # noqa: E731
    for key in dict.fromkeys((r["task"], r["scoring"], r["split"]) for r in rows):
        h.add_row(*key, *[shown(cell.get((*key, m))) for m in models])
    return h


def print_summary(summary: dict, console: Console) -> None:
    from rich.table import Table

    figs = summary["tasks"]
    models = list(next(iter(figs.values()))["mean"]) if figs else []
    console.print(figures_table(figs, TITLE.format("→".join(models), summary["settings"]["split"])))
    console.print(headline_rich(summary["headline"], models))
    t = Table(title="held-out perplexity: base -> tuned")
    for col in ("text", "length", "base", "tuned"):
        t.add_column(col, justify="right")
    for name, sec in (("books", summary["ppl"]), ("other", summary.get("ppl_other") or {})):
        for n, v in sec.items():
            t.add_row(name, n, f"{v['base']:.3f}", f"{v['tuned']:.3f}")
    console.print(t)
    for name, v in summary["short"].items():
        console.print(f"short-context {name}: loss {v['base_loss']:.4f} -> {v['tuned_loss']:.4f} "
                      f"({v['loss_delta']:+.4f}), accuracy {v['accuracy_delta']:+.4f}")
    phases.print_times(summary["times"], console)
    console.print(f"[green]report[/]: {summary['paths']['report']}  (summary {summary['paths']['summary']})")
