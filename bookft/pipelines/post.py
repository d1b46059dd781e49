"""Post-steps after a new version is published: NIAH eval of a named checkpoint against the new corpus.

Design choices:
- The step is the flows' evaluate phase (bookft.flows.phases.evaluate, the typed entry of
  `bookft eval niah`) in this process, timed by the flows' Steps: the settings are the
  checkpoint's run config's `eval:` section (an HF folder: the defaults) with the pipeline's small
  grid and, by default, the new version as the haystack.
- It never raises: any failure (checkpoint missing, model/tokenizer mismatch, a bug) becomes
  {"ok": false, "error": ...} in the run record and exit code 5; the version stays published,
  because the data is valid: it is the model check that failed.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from rich.console import Console

from bookft.pipelines.config import EvalStep


def run_eval_step(step: EvalStep, version_dir: Path, root: Path, version: int) -> dict:
    from bookft.flows.phases import Steps

    out = Path(step.out) if step.out else root / "runs" / "eval" / f"{version:04d}"
    flags = dict(step.settings)
    if step.corpus_haystack:
        flags.update(haystack="corpus", corpus=str(version_dir))
    info = {"checkpoint": step.checkpoint, "model": step.model, "out": str(out), "settings": flags}
    console = Console(stderr=True)
    timer = Steps(console, 1)
    try:
        results = timer.timed("eval_s", _evaluate, step, flags, out, console)
    except Exception as e:  # BookftError or a bug: recorded, the run goes on to log it
        where = traceback.extract_tb(e.__traceback__)[-1]
        return {**info, "ok": False, "seconds": timer.times["eval_s"],
                "error": f"{type(e).__name__}: {e} (at {Path(where.filename).name}:{where.lineno})"}
    s = results.get("summary", {})
    return {**info, "ok": True, "seconds": timer.times["eval_s"],
            "mean": s.get("mean"), "effective_length": s.get("effective_length"), "score": s.get("score")}


def _evaluate(step: EvalStep, flags: dict, out: Path, console: Console) -> dict:
    from bookft.eval.entry import Subject, settings_with
    from bookft.flows.phases import evaluate

    run_config = None
    if step.checkpoint:  # the run's own config: its eval section is the base of the settings
        from bookft.train.checkpoint import run_config_of

        run_config = run_config_of(step.checkpoint)
    subject = Subject(checkpoint=step.checkpoint, model_dir=step.model, tokenizer=step.tokenizer)
    return evaluate(subject, run_config, settings_with(getattr(run_config, "eval", None), **flags), out, console,
                    progress=False)
