"""`bookft quickstart`: the whole product on the defaults, with a base-vs-tuned needle report.

Design choices:
- Four phases, in one process, each timed (phases.py): ingest (corpora/sample.yaml, which asks for
  synthesized retrieval examples), eval of the freshly initialised model (the same init seed and
  shape that training starts from, saved as an HF folder), train (configs/tiny-cpu.yaml: a length
  curriculum, ring attention over 4 simulated CPU devices), eval of the tuned checkpoint (exported
  to an HF folder, so both evals load identically); then the two reports side by side.
- Both evals score under the one run config the flow loads (its attention, parallel and eval
  sections), so they score the same grid (lengths x depths x seeds) the same way, and the tuned
  model is judged on exactly the format the synthesized examples taught (bookft.needles' NIAH needle).
- The summary has the flows' one shape (summary.py): the table per length and depth (base vs
  tuned) is printed, and the same figures come back in the dict (benchmarks/e2e.py writes it to JSON).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from bookft.flows import phases
from bookft.flows.summary import corpus_figures, figures_table, flow_summary, per_depth, task_figures, train_figures


def _ingest(corpus_yaml, ingest_overrides, console: Console, progress: bool) -> dict:
    from bookft.config import load
    from bookft.ingest.config import IngestConfig
    from bookft.ingest.sample import default_corpus_yaml

    icfg = load(IngestConfig, corpus_yaml or default_corpus_yaml(), list(ingest_overrides or []))
    manifest = phases.build(icfg, console, progress)
    console.print(phases.corpus_line(manifest))
    return manifest


def run_quickstart(*, corpus_yaml: str | Path | None = None, config: str | Path | None = None,
                   run_dir: str | Path | None = None, out: str | Path = "quickstart-out",
                   overrides: list[str] | None = None, ingest_overrides: list[str] | None = None,
                   fresh: bool = True, console: Console | None = None, progress: bool = True) -> dict[str, Any]:
    """ingest -> eval base -> train -> eval tuned -> compare. Returns the summary (summary.py)."""
    from bookft.corpus import open_corpus
    from bookft.train.config import DEFAULT_CONFIG, load_run_config

    console = console or Console()
    out = Path(out)
    steps = phases.Steps(console, 4)
    steps.rule("ingest")
    manifest = steps.timed("ingest_s", _ingest, corpus_yaml, ingest_overrides, console, progress)
    cfg = load_run_config(config, [f"data.corpus={manifest['corpus_dir']}", *(overrides or [])])
    run = Path(run_dir) if run_dir else Path("runs") / cfg.name
    if cfg.parallel.cpu_devices:
        from bookft.parallel.mesh import ensure_cpu_devices

        ensure_cpu_devices(cfg.parallel.cpu_devices)  # before jax starts its backend
    tok_dir = Path(open_corpus(manifest["corpus_dir"]).tokenizer_path).parent
    steps.rule("eval: the freshly initialised model")
    base = steps.timed("eval_base_s", _eval_base, cfg, tok_dir, out, console, progress)
    steps.rule(phases.train_title(cfg))
    result = steps.timed("train_s", _train, cfg, run, fresh, console, progress)
    steps.rule("eval: the tuned model")
    tuned_dir = steps.timed("export_s", phases.export, run, out / "tuned-model", tok_dir, bookft_only=True)
    tuned = steps.timed("eval_tuned_s", phases.evaluate, tuned_dir, cfg, cfg.eval, out / "eval-tuned", console,
                        progress)
    from bookft.eval.probe import probe_rows

    probes = probe_rows(run)
    paths = phases.compare(out / "eval-base", out / "eval-tuned", out / "compare", probe_rows=probes)
    summary = flow_summary(
        settings={"config": str(config or DEFAULT_CONFIG), "name": cfg.name}, tasks=task_figures(
            {"base": {"niah": base}, "tuned": {"niah": tuned}}), train=train_figures(result, probe=probes),
        corpus=corpus_figures(manifest), times=steps.finish(),
        paths={"out": out, "run": run, "tuned_model": tuned_dir, "report": paths["html"], "compare_png": paths["png"]},
        base={"per_depth": per_depth(base), "summary": base["summary"], "timing": base["timing"]},
        tuned={"per_depth": per_depth(tuned), "summary": tuned["summary"], "timing": tuned["timing"]})
    console.print(figures_table(summary["tasks"], "needle accuracy (teacher-forced exact match): base→tuned"))
    phases.print_times(summary["times"], console)
    console.print(f"[green]report[/]: {paths['html']}  (base {out / 'eval-base'}/report.html, "
                  f"tuned {out / 'eval-tuned'}/report.html; checkpoints in {run}/checkpoints, "
                  f"tuned model as an HF folder in {tuned_dir})")
    return summary


def _eval_base(cfg, tok_dir: Path, out: Path, console: Console, progress: bool) -> dict:
    """The freshly initialised model (the seed and shape training starts from) as an HF folder, scored."""
    from bookft.model import init_model

    folder = phases.save_model(init_model(cfg.model, seed=cfg.train.seed), cfg.model, out / "base-model", tok_dir)
    return phases.evaluate(folder, cfg, cfg.eval, out / "eval-base", console, progress)


def _train(cfg, run: Path, fresh: bool, console: Console, progress: bool):
    from bookft.eval.probe import probe_hooks

    return phases.train(cfg, run, console, progress, fresh=fresh, hooks=probe_hooks(cfg),
                        again="run `bookft train --resume` with this run config to go on")
