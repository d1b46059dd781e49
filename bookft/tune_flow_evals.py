"""The evals of the tune flow (bookft/tune_flow.py): the RULER grids per task, the base grids' cache,
perplexity (base scored once and cached, tuned beside it), the short-context check (base and tuned in
one call), the base-vs-tuned pages.

Design choices:
- Every grid is `bookft eval niah` as a library call (bookft.eval.entry.evaluate) with the run
  preset as --config, so base and tuned are loaded with the same model knobs and attention, scored by
  generation (RULER's string match) in the tokenizer's chat template when it has one, on haystacks
  cut from the held-out corpus.
- The base grids are cached as `base_cache/<key>/<task>/results.json`, the key a hash of the model
  folder's files (config, tokenizer, weights' size and first and last MiB), the grid settings, the
  run config as it is scored (every section but train, data, checkpoint and the device layout) and
  the held-out texts: a second run of the flow on the same model and settings (a benchmark's seeds,
  a new recipe, another machine's mesh) reuses them. The tokenizer files count: a transformers
  release that writes another tokenizer for the same GGUF keys its own grids. Each run draws its own
  heatmap and page from the cached figures, so its reports stand alone; the cache is a few KB per
  task.
- Base perplexity is cached the same way, one file per lengths and texts beside the grids
  (cache/<key>/ppl-base-<lengths>-<texts' hash>.json); the flow scores it with the base grids, so its
  tuned phase loads only the tuned model.
- report.html links one compare page per task (bookft.eval.report.compare_reports) and carries the
  per-length, per-depth table, the perplexity and the short-context figures.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bookft.htmlpage import page, table

UNSCORED_SECTIONS = ("name", "train", "data", "checkpoint", "parallel")  # run-config sections outside the key
# attention fields that lay the computation out over devices and blocks: every strategy and kernel
# computes the same attention (tests/attention), so a grid scored on one GPU keys like one on a CPU mesh
LAYOUT_FIELDS = ("strategy", "kernel", "block_q", "block_kv", "max_chunk", "load_balance")
# model fields that choose what is kept for the backward pass or how layers are looped: the same function
MODEL_LAYOUT_FIELDS = ("remat", "scan_layers", "mlp_chunk")
WRITER_FIELDS = ("transformers_version",)  # config.json fields that name the writer, not the model


def model_fingerprint(model_dir: Path) -> str:
    """A hash of an HF folder's config (less WRITER_FIELDS, so the same model imported under another
    transformers release keys the same cache), tokenizer and weights (size plus the first and last MiB)."""
    h = hashlib.sha256()
    config = model_dir / "config.json"
    if config.is_file():
        fields = {k: v for k, v in json.loads(config.read_text()).items() if k not in WRITER_FIELDS}
        h.update(json.dumps(fields, sort_keys=True).encode())
    else:
        h.update(b"-")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        p = model_dir / name
        h.update(p.read_bytes() if p.is_file() else b"-")
    for p in sorted(model_dir.glob("*.safetensors")):
        size = p.stat().st_size
        with p.open("rb") as f:
            h.update(f"{p.name}:{size}".encode() + f.read(1 << 20))
            f.seek(max(0, size - (1 << 20)))
            h.update(f.read(1 << 20))
    return h.hexdigest()


def scored_config(cfg) -> dict:
    """The run config as a grid sees it: every section but the training run's and the device layout,
    no model path (the model's files are hashed instead), no LoRA adapter (zero until trained, so the
    base model's outputs do not depend on it) and no layout (LAYOUT_FIELDS, MODEL_LAYOUT_FIELDS): a
    change of recipe or of machine keeps the base grids."""
    d = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in UNSCORED_SECTIONS}
    d["model"] = {k: v for k, v in d["model"].items() if k not in ("hf_path", "lora", *MODEL_LAYOUT_FIELDS)}
    d["attention"] = {k: v for k, v in d["attention"].items() if k not in LAYOUT_FIELDS}
    return d


def cache_key(model_dir: Path, settings: dict, cfg, heldout: list[Path]) -> str:
    h = hashlib.sha256(model_fingerprint(model_dir).encode())
    h.update(json.dumps(settings, sort_keys=True).encode())
    h.update(json.dumps(scored_config(cfg), sort_keys=True, default=str).encode())
    for p in heldout:
        h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()[:16]


def run_grid(model_dir: Path, task: str, s, *, config: Path, overrides: list[str], haystack: Path | str,
             out: Path, console: Console, progress: bool) -> dict:
    """One task's grid (lengths x depths x seeds, generation scoring); `haystack` is a corpus directory
    (the held-out books) or the name of a built-in haystack ("essay")."""
    from bookft.eval.entry import evaluate

    source = ({"haystack": "corpus", "corpus": str(haystack)} if isinstance(haystack, Path)
              else {"haystack": haystack})
    flags = {"task": task, "lengths": list(s.lengths), "depths": list(s.depths), "seeds": list(s.seeds),
             **source, "scoring": ["generate"]}
    console.rule(f"[bold]eval {task}: {model_dir}")
    return evaluate(checkpoint=None, model_dir=str(model_dir), tokenizer=None, config=str(config),
                    overrides=list(overrides), flags=flags, out=out, console=console, progress=progress)


def grids(model_dir: Path, s, out_root: Path, *, cache: Path | None, key: str | None, **kw) -> dict[str, dict]:
    """{task: results} of every eval task, in out_root/<task>; with `cache`, base grids are reused
    from (or stored in) cache/<key>/<task>."""
    from bookft.eval.report import load_results, write_report

    res: dict[str, dict] = {}
    for task in s.tasks:
        dest = out_root / task
        hit = cache / key / task if cache is not None else None
        if hit is not None and (hit / "results.json").is_file():
            kw["console"].print(f"[green]base {task}[/]: cached in {hit}")
            if dest.exists():
                shutil.rmtree(dest)
            res[task] = load_results(hit)
            write_report(res[task], dest)  # the run's own heatmap and page, from the cached figures
            continue
        res[task] = run_grid(model_dir, task, s, out=dest, **kw)
        if hit is not None:
            hit.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(dest / "results.json", hit / "results.json")
    return res


def ppl_cache_file(cache: Path, key: str, texts: list[Path], lengths) -> Path:
    """cache/<key>/ppl-base-<lengths>-<hash of the texts>.json: base perplexity on these texts."""
    h = hashlib.sha256()
    for p in texts:
        h.update(hashlib.sha256(Path(p).read_bytes()).digest())
    return cache / key / f"ppl-base-{'-'.join(map(str, sorted(set(lengths))))}-{h.hexdigest()[:12]}.json"


def base_ppl(model_dir: Path, texts: list[Path], lengths, *, config: Path | None, overrides: list[str], out: Path,
             console: Console, progress: bool, cache: Path | None = None, key: str | None = None) -> dict:
    """The base model's perplexity as a record that `run_ppl(base=)` reuses (ppl_entry.subject_record):
    from cache/<key>/ when it holds these texts and lengths, else scored (report in `out`) and stored."""
    from bookft.eval.ppl_entry import evaluate_ppl, subject_record

    hit = ppl_cache_file(cache, key, texts, lengths) if cache is not None else None
    if hit is not None and hit.is_file():
        console.print(f"[green]base perplexity[/]: cached in {hit}")
        return json.loads(hit.read_text(encoding="utf-8"))
    console.rule("[bold]eval ppl: base")
    res = evaluate_ppl(models=[str(model_dir)], checkpoints=[], names=["base"], texts=[str(p) for p in texts],
                       corpus=None, lengths=sorted(set(lengths)), stride=None, out=out,
                       config=str(config) if config is not None else None, overrides=overrides, console=console,
                       progress=progress)
    record = subject_record(res, "base")
    if hit is not None:
        hit.parent.mkdir(parents=True, exist_ok=True)
        hit.write_text(json.dumps(record, indent=1), encoding="utf-8")
    return record


def run_ppl(model_dir: Path, tuned_dir: Path, texts: list[Path], lengths, *, config: Path | None,
            overrides: list[str], out: Path, console: Console, progress: bool, base: dict | None = None) -> dict:
    """Base and tuned perplexity in one report; `base` (a base_ppl record) is reused, not scored again."""
    from bookft.eval.ppl_entry import evaluate_ppl

    console.rule("[bold]eval ppl: " + ("tuned (base scored before)" if base else "base and tuned"))
    return evaluate_ppl(models=[str(model_dir), str(tuned_dir)], checkpoints=[], names=["base", "tuned"],
                        texts=[str(p) for p in texts], corpus=None, lengths=sorted(set(lengths)), stride=None,
                        out=out, config=str(config) if config is not None else None, overrides=overrides,
                        console=console, progress=progress, reuse={"base": base} if base else None)


def run_short(model_dir: Path, tuned_dir: Path, corpus: Path, s, *, out: Path, console: Console) -> dict:
    from bookft.eval.short_entry import evaluate_short

    console.rule("[bold]eval short: base and tuned")
    return evaluate_short(checkpoint=None, model_dir=str(tuned_dir), base=str(model_dir), tokenizer=None,
                          corpus=str(corpus), texts=None, max_tokens=s.short_tokens, out=out, console=console)


def per_depth(results: dict) -> dict[str, dict[str, float]]:
    """{length: {depth: score}} of a grid's results (mean over seeds, the headline scorer)."""
    key = results["summary"]["score"]
    acc: dict[str, dict[str, list[float]]] = {}
    for c in results["cells"]:
        acc.setdefault(str(c["length"]), {}).setdefault(f"{float(c['depth']):g}", []).append(
            float(c["scores"][key]))
    return {n: {d: sum(v) / len(v) for d, v in ds.items()} for n, ds in acc.items()}


def task_figures(base: dict[str, dict], tuned: dict[str, dict]) -> dict[str, Any]:
    """{task: {length: {depth: {base, tuned}}, "mean": {base, tuned}}}."""
    out: dict[str, Any] = {}
    for task in tuned:
        b, t = per_depth(base[task]), per_depth(tuned[task])
        cells = {n: {d: {"base": round(b.get(n, {}).get(d, float("nan")), 4), "tuned": round(v, 4)}
                     for d, v in ds.items()} for n, ds in t.items()}
        out[task] = {"per_length": cells, "mean": {"base": round(base[task]["summary"]["mean"], 4),
                                                   "tuned": round(tuned[task]["summary"]["mean"], 4)}}
    return out


def ppl_figures(res: dict) -> dict[str, dict[str, float]]:
    """{length: {base, tuned}} perplexity."""
    return {n: {lb: round(res["ppl"][lb][n], 4) for lb in ("base", "tuned")} for n in res["ppl"]["base"]}


def short_figures(res: dict) -> dict[str, dict[str, float]]:
    """{set: {base_loss, tuned_loss, loss_delta, accuracy_delta}}."""
    return {name: {"base_loss": round(s["base"]["loss"], 4), "tuned_loss": round(s["tuned"]["loss"], 4),
                   "loss_delta": round(s["tuned"]["loss"] - s["base"]["loss"], 4),
                   "accuracy_delta": round(s["tuned"]["accuracy"] - s["base"]["accuracy"], 4)}
            for name, s in res["sets"].items()}


def figures_table(figs: dict[str, Any], haystack: str = "held-out haystacks") -> Table:
    """The base -> tuned table: a row per task and length, a column per depth."""
    t = Table(title=f"RULER tasks, generation scoring: base→tuned ({haystack})")
    depths = sorted({d for f in figs.values() for ds in f["per_length"].values() for d in ds}, key=float)
    for col in ["task", "length", *[f"depth {d}%" for d in depths], "mean"]:
        t.add_column(col, justify="left" if col == "task" else "right")
    for task, f in figs.items():
        for i, (n, ds) in enumerate(sorted(f["per_length"].items(), key=lambda x: int(x[0]))):
            mean = f"{f['mean']['base']:.2f}→{f['mean']['tuned']:.2f}" if i == 0 else ""
            t.add_row(task if i == 0 else "", n, *[f"{ds[d]['base']:.2f}→{ds[d]['tuned']:.2f}" if d in ds else ""
                                                   for d in depths], mean)
    return t


def compare_all(base_root: Path, tuned_root: Path, out: Path, tasks: tuple[str, ...]) -> dict[str, Path]:
    """compare-<task>/compare.html per task; {task: page}."""
    from bookft.eval.report import compare_reports

    return {task: compare_reports(base_root / task, tuned_root / task, out / f"compare-{task}",
                                  names=("base", "tuned"))["html"] for task in tasks}


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
