"""The one summary shape of a flow, and the base-vs-tuned grid figures and table in it.

Design choices:
- Every flow returns (and the tune flow writes as summary.json) one dict: "settings", "tasks"
  ({task: {"per_length": {length: {depth: {"base", "tuned"}}}, "mean": {"base", "tuned"}}}),
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


def task_figures(base: dict[str, dict], tuned: dict[str, dict]) -> dict[str, Any]:
    """{task: {"per_length": {length: {depth: {base, tuned}}}, "mean": {base, tuned}}} of {task: results}."""
    out: dict[str, Any] = {}
    for task in tuned:
        b, t = per_depth(base[task]), per_depth(tuned[task])
        cells = {n: {d: {"base": round(b.get(n, {}).get(d, float("nan")), 4), "tuned": round(v, 4)}
                     for d, v in ds.items()} for n, ds in t.items()}
        out[task] = {"per_length": cells, "mean": {"base": round(base[task]["summary"]["mean"], 4),
                                                   "tuned": round(tuned[task]["summary"]["mean"], 4)}}
    return out


def figures_table(figs: dict[str, Any], title: str) -> Table:
    """The base -> tuned table: a row per task and length, a column per depth."""
    t = Table(title=title)
    depths = sorted({d for f in figs.values() for ds in f["per_length"].values() for d in ds}, key=float)
    for col in ["task", "length", *[f"depth {float(d):g}%" for d in depths], "mean"]:
        t.add_column(col, justify="left" if col == "task" else "right")
    for task, f in figs.items():
        for i, (n, ds) in enumerate(sorted(f["per_length"].items(), key=lambda x: int(x[0]))):
            mean = f"{f['mean']['base']:.2f}→{f['mean']['tuned']:.2f}" if i == 0 else ""
            t.add_row(task if i == 0 else "", n, *[f"{ds[d]['base']:.2f}→{ds[d]['tuned']:.2f}" if d in ds else ""
                                                   for d in depths], mean)
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
