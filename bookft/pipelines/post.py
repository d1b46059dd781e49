"""Post-steps after a new version is published: NIAH eval of a named checkpoint against the new corpus.

Design choices:
- The step calls the library entry of `bookft eval niah` (bookft.eval.entry.evaluate) in this
  process, with the pipeline's small grid and, by default, the new version as the haystack.
- It never raises: any failure (checkpoint missing, model/tokenizer mismatch, a bug) becomes
  {"ok": false, "error": ...} in the run record and exit code 5; the version stays published,
  because the data is valid: it is the model check that failed.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path

from rich.console import Console

from bookft.pipelines.config import EvalStep


def run_eval_step(step: EvalStep, version_dir: Path, root: Path, version: int) -> dict:
    out = Path(step.out) if step.out else root / "runs" / "eval" / f"{version:04d}"
    flags = dict(step.settings)
    if step.corpus_haystack:
        flags.update(haystack="corpus", corpus=str(version_dir))
    t0 = time.perf_counter()
    info = {"checkpoint": step.checkpoint, "model": step.model, "out": str(out), "settings": flags}
    try:
        from bookft.eval.entry import evaluate

        results = evaluate(checkpoint=step.checkpoint, model_dir=step.model, tokenizer=step.tokenizer,
                           config=None, overrides=[], flags=flags, out=out, console=Console(stderr=True),
                           progress=False)
    except Exception as e:  # BookftError or a bug: recorded, the run goes on to log it
        where = traceback.extract_tb(e.__traceback__)[-1]
        return {**info, "ok": False, "seconds": round(time.perf_counter() - t0, 3),
                "error": f"{type(e).__name__}: {e} (at {Path(where.filename).name}:{where.lineno})"}
    s = results.get("summary", {})
    return {**info, "ok": True, "seconds": round(time.perf_counter() - t0, 3),
            "mean": s.get("mean"), "effective_length": s.get("effective_length"), "score": s.get("score")}
