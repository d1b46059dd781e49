"""Run a grid: build every (length, depth, seed) sample, score it, collect a results dict.

Design choices:
- `run_niah(model, tokenizer, settings)` is the library entry. A model may be replaced by
  `logits_fn` / `generate_fn` (stubs in tests, other engines), so the grid logic never depends on
  how logits are made.
- One haystack per seed, built once for the longest length and cut for every shorter one, so a
  heatmap row (one seed) reads the same text at every length.
- Cells of one length are scored in batches of `batch_size` samples padded to that length,
  rounded up to `length_multiple`, then to the layout's bucket (power-of-two-ish steps, then the
  attention's chunks and blocks), so a grid compiles once per bucket. A rich progress bar
  counts cells and tokens/s.
- The results dict is plain JSON: settings, tokenizer, every cell with nominal and actual depth,
  actual lengths, per-seed scores, and a summary (per length, per depth, RULER effective length).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import defaultdict
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bookft.config import to_dict
from bookft.eval.config import EvalConfig, resolve_settings
from bookft.eval.drivers import check_model, model_generate_fn, model_logits_fn
from bookft.eval.grid import grid_depths, grid_lengths
from bookft.eval.layout import SeqLayout
from bookft.eval.protocol import cell_sample, generation_budget, grid_haystacks, score_keys
from bookft.eval.scoring import GenerateFn, LogitsFn, generate, teacher_forced
from bookft.eval.split import split_seeds
from bookft.eval.stats import interval, score_stats
from bookft.eval.strict import strict_match
from bookft.needles.eval_config import GENERATION_SCORERS
from bookft.needles.tokenizer import ModelTokenizer


def effective_length(per_length: dict[int, float], threshold: float) -> int | None:
    """RULER effective length: the largest length L such that every tested length <= L scores >= threshold."""
    best = None
    for n in sorted(per_length):
        if per_length[n] < threshold:
            break
        best = n
    return best


def summarize(cells: list[dict], score_key: str, threshold: float) -> dict:
    by_len: dict[int, list[float]] = defaultdict(list)
    by_depth: dict[float, list[float]] = defaultdict(list)
    for c in cells:
        by_len[c["length"]].append(c["scores"][score_key])
        by_depth[c["depth"]].append(c["scores"][score_key])
    per_length = {n: sum(v) / len(v) for n, v in sorted(by_len.items())}
    per_depth = {d: sum(v) / len(v) for d, v in sorted(by_depth.items())}
    allv = [c["scores"][score_key] for c in cells]
    return {
        "score": score_key, "threshold": threshold, "mean": sum(allv) / max(1, len(allv)),
        "per_length": {str(k): v for k, v in per_length.items()},
        "per_depth": {str(k): v for k, v in per_depth.items()},
        "effective_length": effective_length(per_length, threshold),
    }


def _progress(console: Console | None, enabled: bool) -> Progress:
    return Progress(TextColumn("[bold]eval[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("cells"), TextColumn("{task.fields[rate]:>10} tok/s"), TimeElapsedColumn(),
                    console=console, disable=not enabled, transient=False)


def run_niah(model: Any, tokenizer: Any, settings: EvalConfig, *, logits_fn: LogitsFn | None = None,
             generate_fn: GenerateFn | None = None, attend=None, layout: SeqLayout | None = None,
             model_config: Any = None, model_info: dict | None = None, console: Console | None = None,
             progress: bool = True) -> dict:
    """Score the grid of `settings` for `model` (a bookft Decoder) or the given functions.

    attend + layout: the attention and sequence layout both scorers use (drivers.attention_and_layout;
    default: the model's reference attention on one device). The layout's bucketing follows
    settings.length_buckets.
    """
    cfg = resolve_settings(settings)  # keys left None: the library defaults (bookft eval niah decided them)
    tok = ModelTokenizer.load(tokenizer)
    lengths, depths = grid_lengths(cfg), grid_depths(cfg)
    model_config = model_config if model_config is not None else getattr(model, "config", None)
    check_model(model_config, lengths, tok.vocab_size)
    layout = dataclasses.replace(layout or SeqLayout(), per_octave=cfg.length_buckets)
    if model is not None:
        model = layout.place(model)  # once, shared by both scorers (placing again is a no-op)
        if logits_fn is None and "teacher_forced" in cfg.scoring:
            logits_fn = model_logits_fn(model, attend=attend, tail=cfg.logits_tail, layout=layout)
        if generate_fn is None and any(k in cfg.scoring for k in GENERATION_SCORERS):
            generate_fn = model_generate_fn(model, attend=attend, eos_id=tok.eos_id, layout=layout)
    if "teacher_forced" in cfg.scoring and logits_fn is None:
        raise ValueError("run_niah: teacher_forced scoring needs a model or a logits_fn")
    if any(k in cfg.scoring for k in GENERATION_SCORERS) and generate_fn is None:
        raise ValueError(f"run_niah: {'/'.join(cfg.scoring)} scoring needs a model or a generate_fn")

    seeds = split_seeds(cfg.split, cfg.seeds)
    haystacks = grid_haystacks(cfg, tok, seeds, max(lengths))
    gen_on = any(k in cfg.scoring for k in GENERATION_SCORERS)
    start, tokens = time.perf_counter(), 0
    cells: list[dict] = []
    m = cfg.length_multiple
    with _progress(console, progress) as bar:
        job = bar.add_task("", total=len(lengths) * len(depths), rate="-")
        for length in lengths:
            bar.update(job, description=f"{cfg.task} length {length}")
            samples = [(depth, seed, *cell_sample(cfg, tok, haystacks[seed], seed, depth, length))
                       for depth in depths for seed in seeds]
            seq_len = layout.length(int(math.ceil(length / m) * m))
            tf: list[dict] = []
            gen: list[dict] = []
            only = [row[2] for row in samples]
            done_cells = 0
            for k in range(0, len(only), cfg.batch_size):
                batch = only[k:k + cfg.batch_size]
                if logits_fn is not None and "teacher_forced" in cfg.scoring:
                    tf += teacher_forced(logits_fn, batch, seq_len)
                if generate_fn is not None and gen_on:
                    gen += generate(generate_fn, batch, tok, generation_budget(cfg, batch), cfg.batch_size)
                tokens += sum(s.actual_length for s in batch)
                rate = tokens / max(1e-9, time.perf_counter() - start)
                now_cells = (k + len(batch)) // len(seeds)
                bar.update(job, advance=now_cells - done_cells, rate=f"{rate:,.0f}")
                done_cells = now_cells
            for j, depth in enumerate(depths):
                rows = list(range(j * len(seeds), (j + 1) * len(seeds)))
                cells.append(_cell(length, depth, [samples[i] for i in rows],
                                   [tf[i] for i in rows] if tf else None,
                                   [gen[i] for i in rows] if gen else None, tok, cfg.scoring))
    seconds = time.perf_counter() - start
    score_key = cfg.scoring[0]
    return {
        "version": 1, "kind": "bookft-eval", "task": cfg.task, "split": cfg.split or "none",
        "fewshot": cfg.fewshot, "seeds": seeds,
        "settings": to_dict(cfg), "tokenizer": tok.info(), "model": model_info or {},
        "lengths": lengths, "depths": depths, "cells": cells,
        "summary": summarize(cells, score_key, cfg.threshold),
        "stats": {k: score_stats(cells, k) for k in score_keys(cfg.scoring)},
        "timing": {"seconds": round(seconds, 3), "tokens": tokens,
                   "tokens_per_s": round(tokens / max(seconds, 1e-9), 1)},
    }


def _cell(length: int, depth: float, rows: list[tuple], tf, gen, tok: ModelTokenizer,
          scoring: tuple[str, ...] = ("teacher_forced",)) -> dict:
    per_seed = []
    for i, (_, seed, s, task) in enumerate(rows):
        r: dict[str, Any] = {"seed": seed, "actual_length": s.actual_length,
                             "actual_depth": s.actual_depth, "answer": s.answer.strip()}
        if tf:
            r.update(teacher_forced=tf[i]["exact"], token_accuracy=tf[i]["token_accuracy"],
                     predicted=tok.decode(tf[i]["predicted_ids"]).strip())
        if gen:
            r["output"] = gen[i]["output"]
            if "generate" in scoring:
                r["generate"] = gen[i]["string_match"]
            if "strict" in scoring or "ruler" in scoring:
                r["ruler"] = gen[i]["string_match"]
                r["strict"] = strict_match(gen[i]["output"], s.references, task.kind_pattern, task.candidates)
        per_seed.append(r)
    scores, ci = {}, {}
    for key in ("teacher_forced", "token_accuracy", "generate", "strict", "ruler"):
        vals = [r[key] for r in per_seed if key in r]
        if vals:
            scores[key] = sum(vals) / len(vals)
            if key != "token_accuracy":
                ci[key] = interval(vals)["ci"]
    return {
        "length": length, "depth": depth,
        "actual_depth": round(sum(r["actual_depth"] for r in per_seed) / len(per_seed), 3),
        "actual_depths": [r["actual_depth"] for r in per_seed],
        "actual_lengths": [r["actual_length"] for r in per_seed],
        "seeds": [r["seed"] for r in per_seed], "scores": scores, "ci": ci, "per_seed": per_seed,
    }
