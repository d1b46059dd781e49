"""`bookft train`: thin CLI over bookft.train.trainer.train, with the eval probe attached as a hook."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bookft.errors import TrainError


def train_command(
    config: Annotated[Path | None, typer.Option("--config", "-c", help="Run config YAML (default configs/tiny-cpu.yaml).")] = None,
    corpus: Annotated[str | None, typer.Option(help="Corpus directory from `bookft ingest`.")] = None,
    model: Annotated[Path | None, typer.Option(help="Hugging Face model folder to fine-tune.")] = None,
    run_dir: Annotated[Path | None, typer.Option(help="Run directory (default runs/<name>); resumes if it has checkpoints.")] = None,
    steps: Annotated[int | None, typer.Option(help="Steps in all, gated stages included (larger than a finished run's = continue it, the last stage extended).")] = None,
    corpus_version: Annotated[str | None, typer.Option("--corpus-version", help="latest | N: move a resumed run to another version of its corpus (default: the version it started on).")] = None,
    strategy: Annotated[str | None, typer.Option(help="auto | allgather | ulysses | ring | usp | local (auto: chosen from heads, KV heads and the context degree, and said why)")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override a config key: a.b=value (repeatable).")] = None,
) -> None:
    """Fine-tune a model on a corpus (default: the tiny CPU preset on the sample corpus, ring over 4 devices)."""
    from rich.console import Console

    from bookft.train.config import load_run_config
    from bookft.train.progress import TrainProgress

    overrides = list(set_ or [])
    if corpus:
        overrides.append(f"data.corpus={corpus}")
    if steps is not None and steps < 0:
        raise TrainError(f"--steps {steps}: a number of steps, >= 0")
    if strategy:
        overrides.append(f"attention.strategy={strategy}")
    cfg = load_run_config(config, overrides)
    from bookft.train.program import resolve_model_config

    cfg = resolve_model_config(cfg, model)  # --model: the loaded folder's shape, which is what trains
    run = run_dir or Path("runs") / cfg.name
    from bookft.parallel.distributed import start

    primary = start(cfg.parallel) == 0  # multi-host: the runtime first; process 0 alone reports
    console = Console(quiet=not primary)
    source = f" from {cfg.model.hf_path}" if cfg.model.hf_path else ""
    console.print(f"[bold]bookft train[/] {cfg.name}: model {cfg.model.model_type} "
                  f"{cfg.model.num_layers}x{cfg.model.hidden_size}{source}, attention {cfg.attention.strategy}/"
                  f"{cfg.attention.kernel}, mesh {cfg.parallel.mesh}, corpus {cfg.data.corpus}, run dir {run}")
    from bookft.eval.probe import probe_hooks  # the command layer composes train and eval
    from bookft.train.trainer import train

    with TrainProgress(console, cfg.train.steps) as progress:
        result = train(cfg, run_dir=run, model_path=model, progress=progress.update, hooks=probe_hooks(cfg),
                       steps=steps, corpus_version=corpus_version, announce=lambda line: console.print(
                           "[cyan]{}[/]:{}".format(*line.split(":", 1))))
    if result.interrupted:
        console.print(f"[yellow]stopped by signal at step {result.step}; checkpoint saved in {run}/checkpoints")
        raise typer.Exit(143)
    if not primary:
        return
    if not result.losses and result.step == 0:
        raise TrainError("no steps were run (train.steps is 0)")
    if not result.losses:
        console.print(f"nothing trained: the run is at step {result.step} already, its end; "
                      f"checkpoints in {run}/checkpoints (--steps N continues it to N)")
        return
    last = result.losses.get(result.step)
    console.print(f"[green]done[/]: step {result.step}" + (f", loss {last:.4f}" if last is not None else "")
                  + f"; checkpoints in {run}/checkpoints, metrics in {run}/metrics.jsonl")


def register(app: typer.Typer) -> None:
    app.command("train")(train_command)
