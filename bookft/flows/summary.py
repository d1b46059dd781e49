"""The one summary shape of a flow, and the base-vs-tuned grid figures, headline rows and table in it.

Design choices:
- Every flow returns (and the tune flow writes as summary.json) one dict: "settings", "tasks"
  ({task: {"per_length": {length: {depth: {model: score}}}, "mean": {model: score}}}, the models
  base, the tune flow's few-shot base, tuned),
  "train", "corpus", "times" (seconds per phase, phases.Steps) and "paths"; a flow adds its own
  sections beside them (the tune flow's "ppl" and "short", the default loop's "base" and "tuned"
  eval summaries).
- per_depth is the one reading of a grid: {length: {depth: score}}, the headline scorer averaged
  over the cells of a length and depth, the depth keyed as the eval's own summary keys it ("50.0").
"""

from __future__ import annotations

from typing import Any

from rich.table import Table


def per_depth(results: dict) -> dict[str, dict[str, float]]:
    """{length: {depth: score}} of a grid's results (mean over seeds and cells, the headline scorer)."""
    key = results["summary"]["score"]
    acc: dict[str, dict[str, list[float]]] = {}
    for c in results["cells"]:
        acc.setdefault(str(c["length"]), {}).setdefault(str(float(c["depth"])), []).append(float(c["scores"][key]))
    return {n: {d: sum(v) / len(v) for d, v in ds.items()} for n, ds in acc.items()}


def task_figures(by_model: dict[str, dict[str, dict]]) -> dict[str, Any]:
    """{task: {"per_length": {length: {depth: {model: score}}}, "mean": {model: score}[, "stats":
    {model: intervals}]}} of {model: {task: results}} (models in the report's order, the last one
    the tuned; "stats" when the grids carry Wilson intervals: bookft.eval.stats)."""
    models = list(by_model)
    out: dict[str, Any] = {}
    for task in by_model[models[-1]]:
        pd = {m: per_depth(by_model[m][task]) for m in models}
        cells = {n: {d: {m: round(pd[m].get(n, {}).get(d, float("nan")), 4) for m in models} for d in ds}
                 for n, ds in pd[models[-1]].items()}
        fig: dict[str, Any] = {"per_length": cells,
                               "mean": {m: round(by_model[m][task]["summary"]["mean"], 4) for m in models}}
        if all("stats" in by_model[m][task] for m in models):
            fig["stats"] = {m: by_model[m][task]["stats"] for m in models}
        out[task] = fig
    return out


def headline(by_model: dict[str, dict[str, dict]], length: int) -> list[dict]:
    """The benchmark JSONs' headline rows at `length` (bookft.eval.stats.headline_rows): per task,
    model and scoring, the draws, the score and its 95% interval."""
    from bookft.eval.stats import headline_rows

    models = list(by_model)
    return [row for task in by_model[models[-1]] for m in models
            for row in headline_rows(by_model[m][task], m, (length,))]


def figures_table(figs: dict[str, Any], title: str) -> Table:
    """The models' table (base -> ... -> tuned per cell): a row per task and length, a column per depth."""
    t = Table(title=title)
    depths = sorted({d for f in figs.values() for ds in f["per_length"].values() for d in ds}, key=float)
    for col in ["task", "length", *[f"depth {float(d):g}%" for d in depths], "mean"]:
        t.add_column(col, justify="left" if col == "task" else "right")
    arrow = lambda v: "→".join(f"{x:.2f}" for x in v.values())  # noqa: E731
    for task, f in figs.items():
        for i, (n, ds) in enumerate(sorted(f["per_length"].items(), key=lambda x: int(x[0]))):
            t.add_row(task if i == 0 else "", n, *[arrow(ds[d]) if d in ds else "" for d in depths],
                      arrow(f["mean"]) if i == 0 else "")
    return t


def train_figures(result, **extra: Any) -> dict[str, Any]:
    return {"steps": result.step, "final_loss": result.losses.get(result.step), "tokens_per_s": result.tokens_per_s,
            **extra}


def corpus_figures(manifest: dict, heldout: dict | None = None) -> dict[str, Any]:
    out = {"path": manifest["path"], "sequences": manifest["counts"]["sequences"],
           "retrieval": manifest.get("retrieval")}
    if heldout is not None:
        out["heldout_sequences"] = heldout["counts"]["sequences"]
    return out


def flow_summary(*, settings: dict, tasks: dict, train: dict, corpus: dict, times: dict, paths: dict,
                 **sections: Any) -> dict[str, Any]:
    """The one shape (module doc): the common sections, then the flow's own."""
    return {"settings": settings, "tasks": tasks, **sections, "train": train, "corpus": corpus, "times": times,
            "paths": {k: str(v) for k, v in paths.items()}}
