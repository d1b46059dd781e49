"""Where the copying head looks when a tuned model answers a needle: the diagnosis behind the dense
short-convolution taps (model.short_conv_mix: dense) of the default recipe.

Owner: the default recipe's maintainer (configs/tiny-cpu.yaml). Status: decided (dense taps adopted,
docs/log.md); kept while tests/eval/test_eval_copy_attention.py guards the recording attention, and
removed with that test once the owner retires the diagnosis.

Scores a run's NIAH grid teacher-forced, as `bookft eval niah` does, with a recording attention: the
dense reference attention on one device, keeping every layer's attention probabilities at the
positions that predict the answer's tokens. For answer token j the copy's source is the needle
token it repeats (found by matching the answer's tokens inside the needle span); an induction-style
copy attends there (the short convolution gives each key the tokens before it, the query matches
them, the value at the source carries the token to write). For each layer and head it reports:
  p_src      the attention probability on the source token;
  offset     argmax key position minus the source position (0: on the right token; -1: the token
             before, whose copy repeats the digit already written; +1: the one after), and where the
             argmax is: "0", "-1", "+1", elsewhere in the "needle", in the "prompt" after it (the
             question and the answer written so far) or "before" it (the haystack);
  p_needle   the attention mass on the whole needle.
For each answer token also `pred_at`: the offsets from the source (within 8 tokens, inside the needle)
where the predicted token sits (a wrong token found at -1 or -2 is a neighbour read).
The copying head is the (layer, head) with the largest mean p_src over all answer tokens. Its
offsets and p_src are then split by whether the model's argmax was right: a wrong token at offset 0
with a high p_src is a right look and a wrong read, a wrong token at offset -1/+1 a slip of the
look itself, a low p_needle a copy that never found the needle.

    python -m experiments.copy_attention --checkpoint runs/tiny-cpu [--lengths 1024,2048] [--seeds 0,1,2]
        [--json PATH]

Prints a rich table per length and depth, writes a new
experiments/results/copy-attention_<run>_<hardware>_<date>.json (every answer token of every sample).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from benchmarks.common import Record
from bookft.benchrecord import ROOT


def _find(hay: np.ndarray, needle: np.ndarray) -> int | None:
    """First index of the token sequence `needle` in `hay`, or None."""
    n = len(needle)
    for i in range(len(hay) - n + 1):
        if np.array_equal(hay[i:i + n], needle):
            return i
    return None


def recording_attend(store: list):
    """The dense reference attention that also appends each call's probabilities [B, Hq, S, S] to store."""
    import jax
    import jax.numpy as jnp

    from bookft.model import layers as L

    def attend(q, k, v, segment_ids, positions, window=0):
        b, s, hq, d = q.shape
        hkv = k.shape[2]
        kk = jnp.repeat(k, hq // hkv, axis=2)
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, kk, preferred_element_type=jnp.float32) / jnp.sqrt(d)
        causal = jnp.tril(jnp.ones((s, s), dtype=bool))
        if window:
            causal = causal & ~jnp.tril(jnp.ones((s, s), dtype=bool), -window)
        mask = (causal[None] & (segment_ids[:, :, None] == segment_ids[:, None, :]))[:, None]
        store.append(np.asarray(jax.nn.softmax(jnp.where(mask, scores, L.NEG_INF), axis=-1)))
        return L.reference_attention(q, k, v, segment_ids, positions, window)

    return attend


def one_device(model):
    """The model's parameters on the first device, its layers run as a Python loop (so the recording
    attention is called eagerly once per layer)."""
    import jax
    from flax import nnx

    graphdef, state = nnx.split(model)
    state = jax.device_put(jax.device_get(state), jax.devices()[0])
    model = nnx.merge(graphdef, state)
    model.config = dataclasses.replace(model.config, scan_layers=False)
    return model


def analyse(model, sample) -> list[dict]:
    """Every answer token of one sample: the prediction, and per layer and head p_src, offset, p_needle."""
    import jax.numpy as jnp

    ids = np.asarray(sample.input_ids, np.int32)[None]
    pos = np.arange(ids.shape[1], dtype=np.int32)[None]
    seg = np.ones_like(ids)
    a0, a1 = sample.answer_span
    n0, n1 = sample.needle_spans[0]
    answer = ids[0, a0:a1]
    v0 = _find(ids[0, n0:n1], answer)
    store: list = []
    hidden, _ = model.run(jnp.asarray(ids), jnp.asarray(pos), jnp.asarray(seg), attend=recording_attend(store))
    logits = np.asarray(model.logits(hidden[:, a0 - 1:a1 - 1]))[0]
    rows = []
    for j in range(a1 - a0):
        t = a0 - 1 + j  # the position whose logits predict answer token j
        row = {"j": j, "target": int(answer[j]), "pred": int(logits[j].argmax()), "heads": {}}
        row["right"] = row["pred"] == row["target"]
        if v0 is not None:  # where in the needle (offsets from the source, within 8) the predicted token sits
            src = n0 + v0 + j
            row["pred_at"] = [d for d in range(-8, 9) if n0 <= src + d < n1 and ids[0, src + d] == row["pred"]]
        for layer, probs in enumerate(store):
            for h in range(probs.shape[1]):
                p = probs[0, h, t]
                cell = {"p_needle": float(p[n0:n1].sum()), "argmax": int(p.argmax())}
                if v0 is not None:
                    src, top = n0 + v0 + j, int(p.argmax())
                    d = top - src
                    where = ("0" if d == 0 else f"{d:+d}" if abs(d) == 1 else "needle" if n0 <= top < n1
                             else "prompt" if top >= n1 else "before")
                    cell.update(p_src=float(p[src]), offset=top - src, where=where)
                row["heads"][f"L{layer}H{h}"] = cell
        rows.append(row)
    return rows


def summarise(samples: list[dict]) -> dict:
    tokens = [r for s in samples for r in s["tokens"] if "p_src" in next(iter(r["heads"].values()))]
    if not tokens:
        return {"copy_head": None, "tokens": 0}
    heads = list(tokens[0]["heads"])
    mean_src = {h: float(np.mean([r["heads"][h]["p_src"] for r in tokens])) for h in heads}
    copy = max(mean_src, key=mean_src.get)
    out = {"copy_head": copy, "mean_p_src_per_head": mean_src, "tokens": len(tokens)}
    for name, group in (("right", [r for r in tokens if r["right"]]), ("wrong", [r for r in tokens if not r["right"]])):
        cells = [r["heads"][copy] for r in group]
        out[name] = {
            "tokens": len(group),
            "mean_p_src": float(np.mean([c["p_src"] for c in cells])) if cells else None,
            "mean_p_needle": float(np.mean([c["p_needle"] for c in cells])) if cells else None,
            "looks": dict(Counter(c["where"] for c in cells).most_common()),
            "pred_at": dict(Counter(",".join(f"{d:+d}" for d in r.get("pred_at", [])) or "not in the needle"
                                    for r in group).most_common()),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True, help="run directory (its eval settings, tokenizer, params)")
    ap.add_argument("--lengths", default=None, help="comma list (default: the run's eval lengths)")
    ap.add_argument("--depths", default=None, help="comma list of percents (default: the run's eval depths)")
    ap.add_argument("--seeds", default=None, help="comma list (default: the run's eval seeds)")
    ap.add_argument("--json", type=Path, default=None, help="default: a new file under experiments/results/")
    args = ap.parse_args()
    record = Record("copy_attention", Path(args.checkpoint).name, path=args.json, results=ROOT / "experiments/results")

    from bookft.commands.eval import load_settings
    from bookft.eval.entry import load_subject
    from bookft.eval.grid import grid_depths, grid_lengths
    from bookft.eval.haystack import build_haystack
    from bookft.needles import make_task
    from bookft.needles.placement import build_sample

    t0 = time.perf_counter()
    run = Path(args.checkpoint)
    model, tok, _, _, info = load_subject(str(run), None, None)
    over = {k: [int(x) if k != "depths" else float(x) for x in v.split(",")]
            for k, v in (("lengths", args.lengths), ("depths", args.depths), ("seeds", args.seeds)) if v}
    cfg = load_settings(run / "config.yaml", [], over, has_chat_template=tok.chat_template is not None)
    model = one_device(model)
    lengths, depths = grid_lengths(cfg), grid_depths(cfg)
    hay = {s: build_haystack(cfg.haystack, tok, s, max(lengths), cfg.corpus) for s in cfg.seeds}
    samples = []
    for length in lengths:
        for depth in depths:
            for seed in cfg.seeds:
                s = build_sample(make_task(cfg, seed, depth), hay[seed], tok, length, depth,
                                 chat=cfg.chat_template, add_bos=cfg.add_bos)
                toks = analyse(model, s)
                samples.append({"length": length, "depth": depth, "seed": seed, "answer": s.answer,
                                "exact": all(r["right"] for r in toks), "tokens": toks})
    summary = summarise(samples)
    per_cell = defaultdict(list)
    for s in samples:
        per_cell[(s["length"], s["depth"])].append(s)
    copy = summary["copy_head"]
    con = Console()
    table = Table(title=f"copying head {copy} of {run} (teacher-forced, {len(cfg.seeds)} seeds per cell)")
    for col in ("length", "depth %", "exact", "wrong tokens", "p_src right", "p_src wrong", "argmax of wrong"):
        table.add_column(col, justify="right")
    cells = []
    for (length, depth), group in per_cell.items():
        sm = summarise(group) if copy else {}
        c = {"length": length, "depth": depth, "exact": float(np.mean([g["exact"] for g in group])),
             **({"right": sm["right"], "wrong": sm["wrong"]} if copy else {})}
        cells.append(c)
        f = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
        table.add_row(str(length), f"{depth:g}", f"{c['exact']:.1f}",
                      str(c["wrong"]["tokens"]) if copy else "-",
                      f(c["right"]["mean_p_src"]) if copy else "-", f(c["wrong"]["mean_p_src"]) if copy else "-",
                      " ".join(f"{k}:{v}" for k, v in c["wrong"]["looks"].items()) if copy else "-")
    con.print(table)
    con.print({k: summary[k] for k in summary if k in ("copy_head", "tokens", "right", "wrong")})
    missing = sum(1 for s in samples for r in s["tokens"][:1] if "p_src" not in next(iter(r["heads"].values())))
    out = {"benchmark": "copy_attention", "checkpoint": str(run), "info": info, "lengths": lengths,
           "depths": depths, "seeds": list(cfg.seeds), "summary": summary, "cells": cells,
           "answers_not_found_in_needle": missing, "samples": samples,
           "wall_s": round(time.perf_counter() - t0, 1)}
    record.write(out)


if __name__ == "__main__":
    main()
