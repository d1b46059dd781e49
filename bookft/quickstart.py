"""`bookft quickstart`: the whole product on the defaults, with a base-vs-tuned needle report.

Design choices:
- Four library calls, in one process, each timed: ingest (corpora/sample.yaml, which asks for
  synthesized retrieval examples), eval of the freshly initialised model (the same init seed and
  shape that training starts from, saved as an HF folder), train (configs/tiny-cpu.yaml: a length
  curriculum, ring attention over 4 simulated CPU devices), eval of the tuned checkpoint (exported
  to an HF folder the same way, so both evals load identically); then `compare_reports` draws base
  and tuned side by side.
- Both evals use the run config's attention, parallel and eval sections, so they score the same
  grid (lengths x depths x seeds) the same way, and the tuned model is judged on exactly the
  format the synthesized examples taught (bookft.needles' NIAH needle).
- The summary is a table per length and depth (base vs tuned) plus where the report is; the same
  figures come back as a dict (benchmarks/e2e.py writes them to JSON).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table


def _per_depth(results: dict) -> dict[str, dict[str, float]]:
    """{length: {depth: score}} from an eval results dict."""
    key = results["summary"]["score"]
    out: dict[str, dict[str, float]] = {}
    for c in results["cells"]:
        out.setdefault(str(c["length"]), {})[str(c["depth"])] = float(c["scores"][key])
    return out


def summary_table(base: dict, tuned: dict) -> Table:
    t = Table(title="needle accuracy (teacher-forced exact match): base -> tuned")
    t.add_column("length", justify="right")
    b, u = _per_depth(base), _per_depth(tuned)
    depths = sorted({d for v in u.values() for d in v}, key=float)
    for d in depths:
        t.add_column(f"depth {float(d):g}%", justify="center")
    for n in sorted(u, key=int):
        t.add_row(n, *[f"{b.get(n, {}).get(d, float('nan')):.2f} -> {u[n].get(d, float('nan')):.2f}"
                       for d in depths])
    return t


def _ingest(corpus_yaml, ingest_overrides, console: Console, progress: bool) -> dict:
    """Step 1: the corpus definition's one build (ingest/corpus_build.py); its manifest."""
    from bookft.config import load
    from bookft.ingest.config import IngestConfig
    from bookft.ingest.corpus_build import build_corpus
    from bookft.ingest.progress import RichProgress
    from bookft.ingest.sample import default_corpus_yaml

    console.rule("[bold]1/4 ingest")
    icfg = load(IngestConfig, corpus_yaml or default_corpus_yaml(), list(ingest_overrides or []))
    bar = RichProgress(console) if progress else None
    try:
        manifest = build_corpus(icfg, bar)
    finally:
        if bar is not None:
            bar.stop()
    manifest["corpus_dir"] = icfg.out
    console.print(f"corpus {manifest['path']}: {manifest['counts']['sequences']:,} sequences"
                  + (f", {manifest['retrieval']['examples']:,} retrieval examples" if "retrieval" in manifest else ""))
    return manifest


def _evaluate(model, model_cfg, folder: Path, tok_dir: Path, cfg_file, overrides, out: Path, console, progress):
    """Save `model` as an HF folder and run the run config's eval on it (base and tuned alike)."""
    from bookft.eval.entry import evaluate
    from bookft.model import save_hf

    save_hf(model, model_cfg, folder, tokenizer_dir=tok_dir)
    return evaluate(checkpoint=None, model_dir=str(folder), tokenizer=str(tok_dir), config=cfg_file,
                    overrides=overrides, flags={}, out=out, console=console, progress=progress)


def _train(cfg, run: Path, console: Console, progress: bool):
    from bookft.eval.probe import probe_hooks
    from bookft.train.progress import TrainProgress
    from bookft.train.trainer import train

    console.rule(f"[bold]3/4 train ({cfg.train.steps} steps, curriculum "
                 f"{' -> '.join(str(s.seq_len) for s in cfg.train.curriculum) or cfg.data.seq_len})")
    if not progress:
        return train(cfg, run_dir=run, hooks=probe_hooks(cfg))
    with TrainProgress(console, cfg.train.steps) as bar:
        return train(cfg, run_dir=run, progress=bar.update, hooks=probe_hooks(cfg))


def _summary(times, manifest, result, run, probes, base, tuned, paths) -> dict[str, Any]:
    return {
        "times": {k: round(v, 1) for k, v in times.items()},
        "corpus": {"path": manifest["path"], "sequences": manifest["counts"]["sequences"],
                   "retrieval": manifest.get("retrieval")},
        "train": {"steps": result.step, "final_loss": result.losses.get(result.step),
                  "tokens_per_s": result.tokens_per_s, "run_dir": str(run), "probe": probes},
        "base": {"per_depth": _per_depth(base), "summary": base["summary"], "timing": base["timing"]},
        "tuned": {"per_depth": _per_depth(tuned), "summary": tuned["summary"], "timing": tuned["timing"]},
        "report": str(paths["html"]), "compare_png": str(paths["png"]),
    }


def run_quickstart(*, corpus_yaml: str | Path | None = None, config: str | Path | None = None,
                   run_dir: str | Path | None = None, out: str | Path = "quickstart-out",
                   overrides: list[str] | None = None, ingest_overrides: list[str] | None = None,
                   fresh: bool = True, console: Console | None = None, progress: bool = True) -> dict[str, Any]:
    """ingest -> eval base -> train -> eval tuned -> compare. Returns timings, accuracies and paths."""
    import shutil

    from bookft.corpus import open_corpus
    from bookft.eval.probe import probe_rows
    from bookft.eval.report import compare_reports
    from bookft.train.config import DEFAULT_CONFIG, load_run_config

    console = console or Console()
    out = Path(out)
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    manifest = _ingest(corpus_yaml, ingest_overrides, console, progress)
    times["ingest_s"] = time.perf_counter() - t0
    overrides = [f"data.corpus={manifest['corpus_dir']}"] + list(overrides or [])
    cfg_path = config if config is not None else (DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None)
    cfg = load_run_config(cfg_path, overrides)
    cfg_file = Path(cfg_path) if cfg_path is not None else None
    run = Path(run_dir) if run_dir else Path("runs") / cfg.name
    if fresh and run.exists():
        shutil.rmtree(run)
    if cfg.parallel.cpu_devices:
        from bookft.parallel.mesh import ensure_cpu_devices

        ensure_cpu_devices(cfg.parallel.cpu_devices)  # before jax starts its backend
    from bookft.model import init_model
    from bookft.train.checkpoint import load_params

    tok_dir = Path(open_corpus(manifest["corpus_dir"]).tokenizer_path).parent
    eval_over = overrides + [f"name={cfg.name}"]
    t0 = time.perf_counter()
    console.rule("[bold]2/4 eval: the freshly initialised model")
    base = _evaluate(init_model(cfg.model, seed=cfg.train.seed), cfg.model, out / "base-model", tok_dir, cfg_file,
                     eval_over, out / "eval-base", console, progress)
    times["eval_base_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = _train(cfg, run, console, progress)
    times["train_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    console.rule("[bold]4/4 eval: the tuned model")
    tuned_model, run_cfg = load_params(run)  # through an HF folder like the base model: evaluated the same way
    tuned = _evaluate(tuned_model, run_cfg.model, out / "tuned-model", tok_dir, cfg_file, eval_over,
                      out / "eval-tuned", console, progress)
    del tuned_model
    probes = probe_rows(run)
    paths = compare_reports(out / "eval-base", out / "eval-tuned", out / "compare", names=("base", "tuned"),
                            probe_rows=probes)
    times["eval_tuned_s"] = time.perf_counter() - t0
    times["total_s"] = sum(times.values())
    console.print(summary_table(base, tuned))
    console.print(" ".join(f"{k[:-2]} {v:.0f} s" for k, v in times.items()))
    console.print(f"[green]report[/]: {paths['html']}  (base {out / 'eval-base'}/report.html, "
                  f"tuned {out / 'eval-tuned'}/report.html; checkpoints in {run}/checkpoints, "
                  f"tuned model as an HF folder in {out / 'tuned-model'})")
    return _summary(times, manifest, result, run, probes, base, tuned, paths)


def register(app) -> None:
    import typer

    @app.command()
    def quickstart(
        definition: Path = typer.Option(None, "--definition", "-d", help="Corpus definition YAML (default "
                                        "corpora/sample.yaml)."),
        config: Path = typer.Option(None, "--config", help="Run config YAML (default configs/tiny-cpu.yaml)."),
        run_dir: Path = typer.Option(None, "--run-dir", help="Run directory (default runs/<name>; replaced)."),
        out: Path = typer.Option(Path("quickstart-out"), "--out", help="Where the reports go."),
        set_: list[str] = typer.Option([], "--set", help="Run config override a.b=value (repeatable)."),
        model: Path = typer.Option(None, "--model", help="Your pretrained HF folder: tune it on --docs and "
                                   "report base vs tuned (bookft/tune_flow.py) instead of the tiny default."),
        docs: list[Path] = typer.Option([], "--docs", help="With --model: a document or folder (repeatable)."),
        heldout: list[Path] = typer.Option([], "--heldout", help="With --model: held-out plain-text documents "
                                           "(the haystacks and perplexity text; default: the last --docs file)."),
        size: str = typer.Option("small", "--size", help="With --model: small (minutes) or full (hours)."),
        seed: int = typer.Option(0, "--seed", help="With --model: the examples', data order's and init seed."),
        resume: bool = typer.Option(False, "--resume", help="With --model: go on with an interrupted flow in "
                                    "--out (its corpora and its run's last checkpoint), started the same way."),
    ) -> None:
        """ingest + eval (base) + train + eval (tuned) on the defaults; prints where the report is.
        With --model: the same on your model and documents (RULER tasks, perplexity, short check)."""
        if model is not None:
            from bookft.tune_flow import tune_command

            tune_command(model, list(docs), list(heldout), size=size, out=out, config=config, seed=seed,
                         overrides=list(set_), resume=resume)
            return
        run_quickstart(corpus_yaml=definition, config=config, run_dir=run_dir, out=out, overrides=list(set_))
