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
from bookft.eval.haystack import build_haystack
from bookft.eval.layout import SeqLayout
from bookft.eval.scoring import GenerateFn, LogitsFn, generate, teacher_forced
from bookft.needles import make_task
from bookft.needles.placement import Sample, build_sample
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
        if generate_fn is None and "generate" in cfg.scoring:
            generate_fn = model_generate_fn(model, attend=attend, eos_id=tok.eos_id, layout=layout)
    if "teacher_forced" in cfg.scoring and logits_fn is None:
        raise ValueError("run_niah: teacher_forced scoring needs a model or a logits_fn")
    if "generate" in cfg.scoring and generate_fn is None:
        raise ValueError("run_niah: generate scoring needs a model or a generate_fn")

    haystacks = {s: build_haystack(cfg.haystack, tok, s, max(lengths), cfg.corpus) for s in cfg.seeds}
    start, tokens = time.perf_counter(), 0
    cells: list[dict] = []
    m = cfg.length_multiple
    with _progress(console, progress) as bar:
        job = bar.add_task("", total=len(lengths) * len(depths), rate="-")
        for length in lengths:
            bar.update(job, description=f"{cfg.task} length {length}")
            samples: list[tuple[float, int, Sample]] = []
            for depth in depths:
                for seed in cfg.seeds:
                    task = make_task(cfg, seed, depth)
                    s = build_sample(task, haystacks[seed], tok, length, depth, chat=cfg.chat_template,
                                     add_bos=cfg.add_bos)
                    samples.append((depth, seed, s))
            seq_len = layout.length(int(math.ceil(length / m) * m))
            tf: list[dict] = []
            gen: list[dict] = []
            only = [s for _, _, s in samples]
            done_cells = 0
            for k in range(0, len(only), cfg.batch_size):
                batch = only[k:k + cfg.batch_size]
                if logits_fn is not None and "teacher_forced" in cfg.scoring:
                    tf += teacher_forced(logits_fn, batch, seq_len)
                if generate_fn is not None and "generate" in cfg.scoring:
                    n_new = cfg.max_new_tokens or max(s.answer_span[1] - s.answer_span[0] for s in batch) + 8
                    gen += generate(generate_fn, batch, tok, n_new, cfg.batch_size)
                tokens += sum(s.actual_length for s in batch)
                rate = tokens / max(1e-9, time.perf_counter() - start)
                now_cells = (k + len(batch)) // len(cfg.seeds)
                bar.update(job, advance=now_cells - done_cells, rate=f"{rate:,.0f}")
                done_cells = now_cells
            for j, depth in enumerate(depths):
                rows = list(range(j * len(cfg.seeds), (j + 1) * len(cfg.seeds)))
                cells.append(_cell(length, depth, [samples[i] for i in rows],
                                   [tf[i] for i in rows] if tf else None,
                                   [gen[i] for i in rows] if gen else None, tok))
    seconds = time.perf_counter() - start
    score_key = cfg.scoring[0]
    return {
        "version": 1, "kind": "bookft-eval", "task": cfg.task,
        "settings": to_dict(cfg), "tokenizer": tok.info(), "model": model_info or {},
        "lengths": lengths, "depths": depths, "cells": cells,
        "summary": summarize(cells, score_key, cfg.threshold),
        "timing": {"seconds": round(seconds, 3), "tokens": tokens,
                   "tokens_per_s": round(tokens / max(seconds, 1e-9), 1)},
    }


def _cell(length: int, depth: float, rows: list[tuple[float, int, Sample]], tf, gen,
          tok: ModelTokenizer) -> dict:
    per_seed = []
    for i, (_, seed, s) in enumerate(rows):
        r: dict[str, Any] = {"seed": seed, "actual_length": s.actual_length,
                             "actual_depth": s.actual_depth, "answer": s.answer.strip()}
        if tf:
            r.update(teacher_forced=tf[i]["exact"], token_accuracy=tf[i]["token_accuracy"],
                     predicted=tok.decode(tf[i]["predicted_ids"]).strip())
        if gen:
            r.update(generate=gen[i]["string_match"], output=gen[i]["output"])
        per_seed.append(r)
    scores = {}
    for key in ("teacher_forced", "token_accuracy", "generate"):
        vals = [r[key] for r in per_seed if key in r]
        if vals:
            scores[key] = sum(vals) / len(vals)
    return {
        "length": length, "depth": depth,
        "actual_depth": round(sum(r["actual_depth"] for r in per_seed) / len(per_seed), 3),
        "actual_depths": [r["actual_depth"] for r in per_seed],
        "actual_lengths": [r["actual_length"] for r in per_seed],
        "seeds": [r["seed"] for r in per_seed], "scores": scores, "per_seed": per_seed,
    }
