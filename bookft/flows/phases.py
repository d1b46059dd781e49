"""The phases every flow is made of, written once: build a corpus, train, export, evaluate, compare,
and the numbered progress with each phase's wall time (Steps).

Design choices:
- Steps numbers the rules ("2/5 eval: the base model") and times each phase into one dict of
  seconds ("ingest_s", "train_s", ...), rounded to 0.1 s as it is recorded; `total_s` is their sum.
- A phase takes typed configs (IngestConfig, RunConfig, EvalConfig) and shows a progress bar only
  when the flow asks for one (`progress`), so a test or a benchmark runs them quietly.
- A training run that stops before its last step (a SIGTERM, a preemption) is a TrainError naming
  its checkpoint, never a half-trained model judged as the tuned one.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console


@dataclass
class Steps:
    """The flow's numbered rules and the wall time of each phase (seconds, in `times`)."""

    console: Console
    total: int
    times: dict[str, float] = field(default_factory=dict)
    done: int = 0

    def rule(self, title: str) -> None:
        self.done += 1
        self.console.rule(f"[bold]{self.done}/{self.total} {title}")

    def timed(self, name: str, fn, /, *args, **kw):
        """fn(*args, **kw), its wall time recorded as times[name] (also when it raises)."""
        t0 = time.perf_counter()
        try:
            return fn(*args, **kw)
        finally:
            self.times[name] = round(self.times.get(name, 0.0) + time.perf_counter() - t0, 1)

    def finish(self) -> dict[str, float]:
        """times with total_s, their sum."""
        self.times["total_s"] = round(sum(v for k, v in self.times.items() if k != "total_s"), 1)
        return self.times


def print_times(times: dict[str, float], console: Console) -> None:
    console.print(" ".join(f"{k[:-2]} {v:.0f} s" for k, v in times.items()))


def build(cfg, console: Console, progress: bool, *, fresh: bool = False) -> dict:
    """The corpus definition's one build (bookft/ingest/corpus_build.py); its manifest, with
    `corpus_dir`. `fresh`: the corpus directory is removed first."""
    from bookft.ingest.corpus_build import build_corpus
    from bookft.ingest.progress import RichProgress

    if fresh:
        shutil.rmtree(cfg.out, ignore_errors=True)
    bar = RichProgress(console) if progress else None
    try:
        manifest = build_corpus(cfg, bar)
    finally:
        if bar is not None:
            bar.stop()
    manifest["corpus_dir"] = str(cfg.out)
    return manifest


def corpus_line(manifest: dict) -> str:
    r = manifest.get("retrieval") or {}
    made = f", {r.get('examples', 0):,} synthesized examples {r.get('per_kind', {})}" if r else ""
    return f"corpus {manifest['path']}: {manifest['counts']['sequences']:,} sequences{made}"


def train(cfg, run: Path, console: Console, progress: bool, *, fresh: bool = True, hooks: list | None = None,
          again: str = "run it again"):
    """Train `cfg` in `run` (removed first when `fresh`, else resumed from its last checkpoint); the
    TrainResult. A run stopped before its last step is a TrainError; `again` says how to go on."""
    from bookft.train.progress import TrainProgress
    from bookft.train.trainer import train as train_run

    if fresh:
        shutil.rmtree(run, ignore_errors=True)
    kw: dict[str, Any] = {"run_dir": run, **({"hooks": hooks} if hooks else {})}
    if progress:
        with TrainProgress(console, cfg.train.steps) as bar:
            result = train_run(cfg, progress=bar.update, **kw)
    else:
        result = train_run(cfg, **kw)
    if result.interrupted:
        from bookft.errors import TrainError

        raise TrainError(f"training stopped at step {result.step} of {cfg.train.steps}; its checkpoint is in "
                         f"{run / 'checkpoints'}: {again}")
    return result


def train_title(cfg) -> str:
    stages = " -> ".join(str(s.seq_len) for s in cfg.train.curriculum)
    return f"train ({cfg.train.steps} steps, " + (f"curriculum {stages})" if stages else
                                                 f"at {cfg.data.seq_len} tokens)")


def export(run: Path, dest: Path, tokenizer_dir: Path | None = None, *, bookft_only: bool = False) -> Path:
    """The run's last checkpoint, LoRA merged, as an HF folder at `dest` (replaced). `bookft_only`:
    a folder for bookft's own loader, which keeps what transformers' architectures lack (the tiny
    preset's short convolution, which export_checkpoint refuses)."""
    if not bookft_only:
        from bookft.train.export import export_checkpoint

        return Path(export_checkpoint(run, dest, tokenizer_dir=tokenizer_dir, overwrite=True))
    from bookft.train.checkpoint import load_params

    model, run_cfg = load_params(run)
    return save_model(model, run_cfg.model, dest, tokenizer_dir)


def save_model(model, model_cfg, dest: Path, tokenizer_dir: Path | None) -> Path:
    from bookft.model import save_hf

    save_hf(model, model_cfg, dest, tokenizer_dir=tokenizer_dir)
    return dest


def evaluate(subject, run_config, eval_config, out: Path, console: Console, progress: bool) -> dict:
    """The grid of `eval_config` on `subject` (an HF folder's path, or an eval Subject), scored under
    `run_config` (attention, parallel, model knobs): base and tuned alike; the results (report in `out`)."""
    from bookft.eval.entry import Subject
    from bookft.eval.entry import evaluate as run_eval

    subject = subject if isinstance(subject, Subject) else Subject(model_dir=str(subject))
    return run_eval(run_config, eval_config, subject, out=out, console=console, progress=progress)


def compare(base: Path, tuned: Path, out: Path, probe_rows: list | None = None) -> dict[str, Path]:
    """compare.html and compare.png of two eval folders, labelled base and tuned."""
    from bookft.eval.report import compare_reports

    return compare_reports(base, tuned, out, names=("base", "tuned"), probe_rows=probe_rows)
