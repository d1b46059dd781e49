"""The evals of the tune flow (bookft/flows/tune.py): the grids per task and model, the base grids' cache,
perplexity (base scored once and cached, tuned beside it), the short-context check (base and tuned in
one call).

Design choices:
- Every grid is `bookft eval niah` as a typed library call (phases.evaluate) under the flow's run
  config, so base, few-shot base and tuned are loaded with the same model knobs and attention,
  scored on the same draws (one generation each, scored strict and ruler) in the tokenizer's chat
  template when it has one, on the flow's split of the held-out corpus. The grid's settings are
  the run config's `eval:` section with the flow's task, lengths, depths, seeds, split and scoring.
- Base and few-shot grids and base perplexity are cached under a key (base_cache.py); the flow
  scores base perplexity with the base grids, so its tuned phase loads only the tuned model.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from rich.console import Console

from bookft.flows import phases
from bookft.flows.base_cache import cache_key, ppl_cache_file

__all__ = ["base_ppl", "cache_key", "grids", "run_grid", "run_ppl", "run_short"]


def run_grid(model_dir: Path, task: str, s, *, run_config, haystack: Path | str, out: Path, console: Console,
             progress: bool, fewshot: int = 0) -> dict:
    """One task's grid (lengths x depths x the task's seeds on the flow's split, generation scored
    strict and ruler) under `run_config`; `haystack` is a corpus directory (the held-out books) or the
    name of a built-in haystack ("essay"); `fewshot` solved examples before each prompt."""
    from bookft.eval.entry import settings_with

    source = ({"haystack": "corpus", "corpus": str(haystack)} if isinstance(haystack, Path)
              else {"haystack": haystack})
    settings = settings_with(run_config.eval, task=task, lengths=list(s.lengths), depths=list(s.depths),
                             seeds=list(s.seeds_of(task)), scoring=list(s.scoring), split=s.split,
                             fewshot=fewshot, fewshot_tokens=s.fewshot_tokens, **source)
    console.rule(f"[bold]eval {task}{f' ({fewshot}-shot)' if fewshot else ''}: {model_dir}")
    return phases.evaluate(model_dir, run_config, settings, out, console, progress)


def grids(model_dir: Path, s, out_root: Path, *, model: str = "base", cache: Path | None, key: str | None,
          **kw) -> dict[str, dict]:
    """{task: results} of every headline task and untrained family for `model` (base, fewshot: the
    base with s.fewshot solved examples, tuned), in out_root/<task>; with `cache`, the grids are
    reused from (or stored in) cache/<key>/<model>/<task>."""
    from bookft.eval.report import load_results, write_report

    res: dict[str, dict] = {}
    for task in (*s.tasks, *s.families):
        dest = out_root / task
        hit = cache / key / model / task if cache is not None else None
        if hit is not None and (hit / "results.json").is_file():
            kw["console"].print(f"[green]{model} {task}[/]: cached in {hit}")
            if dest.exists():
                shutil.rmtree(dest)
            res[task] = load_results(hit)
            write_report(res[task], dest)  # the run's own heatmap and page, from the cached figures
            continue
        res[task] = run_grid(model_dir, task, s, out=dest, fewshot=s.fewshot if model == "fewshot" else 0, **kw)
        if hit is not None:
            hit.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(dest / "results.json", hit / "results.json")
    return res


def base_ppl(model_dir: Path, texts: list[Path], lengths, *, run_config, out: Path, console: Console,
             progress: bool, cache: Path | None = None, key: str | None = None) -> dict:
    """The base model's perplexity as a record that `run_ppl(base=)` reuses (ppl_entry.subject_record):
    from cache/<key>/ when it holds these texts and lengths, else scored (report in `out`) and stored."""
    from bookft.eval.entry import Subject
    from bookft.eval.ppl_entry import PplConfig, evaluate_ppl, subject_record

    hit = ppl_cache_file(cache, key, texts, lengths) if cache is not None else None
    if hit is not None and hit.is_file():
        console.print(f"[green]base perplexity[/]: cached in {hit}")
        return json.loads(hit.read_text(encoding="utf-8"))
    console.rule("[bold]eval ppl: base")
    settings = PplConfig(lengths=tuple(lengths), texts=tuple(str(p) for p in texts))
    res = evaluate_ppl(run_config, settings, [Subject(model_dir=str(model_dir), label="base")], out=out,
                       console=console, progress=progress)
    record = subject_record(res, "base")
    if hit is not None:
        hit.parent.mkdir(parents=True, exist_ok=True)
        hit.write_text(json.dumps(record, indent=1), encoding="utf-8")
    return record


def run_ppl(model_dir: Path, tuned_dir: Path, texts: list[Path], lengths, *, run_config, out: Path,
            console: Console, progress: bool, base: dict | None = None) -> dict:
    """Base and tuned perplexity in one report; `base` (a base_ppl record) is reused, not scored again."""
    from bookft.eval.entry import Subject
    from bookft.eval.ppl_entry import PplConfig, evaluate_ppl

    console.rule("[bold]eval ppl: " + ("tuned (base scored before)" if base else "base and tuned"))
    subjects = [Subject(model_dir=str(model_dir), label="base"), Subject(model_dir=str(tuned_dir), label="tuned")]
    return evaluate_ppl(run_config, PplConfig(lengths=tuple(lengths), texts=tuple(str(p) for p in texts)), subjects,
                        out=out, console=console, progress=progress, reuse={"base": base} if base else None)


def run_short(model_dir: Path, tuned_dir: Path, corpus: Path, s, *, out: Path, console: Console) -> dict:
    from bookft.eval.entry import Subject
    from bookft.eval.short_entry import ShortConfig, evaluate_short

    console.rule("[bold]eval short: base and tuned")
    return evaluate_short(None, ShortConfig(base=str(model_dir), corpus=str(corpus), max_tokens=s.short_tokens),
                          Subject(model_dir=str(tuned_dir)), out=out, console=console)
