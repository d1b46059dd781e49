"""Scoring: teacher-forced exact match (one forward pass) and greedy generation + string match.

Design choices:
- The teacher-forced scorer only needs `logits_fn(input_ids [B,S], positions [B,S],
  segment_ids [B,S]) -> logits [B,T,V]`, so it runs against our model with any attention strategy,
  or against a stub in tests. T may be smaller than S: the logits are then those of the last T
  positions; or logits_fn returns `(logits, start)` for positions start..start+T-1 (the model
  driver does this so a 1M-token prompt never materializes [S, V]; the answer sits at the end of
  the real tokens, before any block padding).
- Samples of one cell length batch together; shorter samples (the tokenizer left a gap of a token
  or two) are padded after the answer with segment id 0, which a causal model never attends to
  from earlier positions.
- Exact match means every answer token is the argmax at the position before it. Token accuracy
  is kept beside it (partial credit for the curve, not the score).
- Generation uses `generate_fn(prompts, max_new_tokens) -> new ids [B,N]`, prompts a list of 1-D
  id arrays of any lengths (our model's driver pads them to one bucket and decodes with a KV
  cache), and RULER's string_match_all: the share of references found (case-insensitive) in the
  output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from bookft.errors import EvalError
from bookft.needles.placement import Sample
from bookft.needles.tokenizer import ModelTokenizer

LogitsFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
GenerateFn = Callable[[Sequence[np.ndarray], int], np.ndarray]


def string_match_all(prediction: str, references: Sequence[str]) -> float:
    """RULER string_match_all for one output: share of references contained in it (case-insensitive)."""
    if not references:
        return 0.0
    pred = prediction.lower()
    return sum(1.0 for r in references if r.lower() in pred) / len(references)


def pack_batch(samples: Sequence[Sample], seq_len: int, pad_id: int = 0):
    """input_ids, positions, segment_ids, each [B, seq_len] int32; padding after each sample."""
    b = len(samples)
    ids = np.full((b, seq_len), pad_id, dtype=np.int32)
    pos = np.zeros((b, seq_len), dtype=np.int32)
    seg = np.zeros((b, seq_len), dtype=np.int32)
    for i, s in enumerate(samples):
        n = s.actual_length
        if n > seq_len:
            raise EvalError(f"sample of {n} tokens does not fit the batch length {seq_len}")
        ids[i, :n] = s.input_ids
        pos[i, :n] = np.arange(n, dtype=np.int32)
        seg[i, :n] = 1
    return ids, pos, seg


def teacher_forced(logits_fn: LogitsFn, samples: Sequence[Sample], seq_len: int,
                   pad_id: int = 0) -> list[dict]:
    """Per sample: exact (0/1), token_accuracy, predicted ids of the answer."""
    ids, pos, seg = pack_batch(samples, seq_len, pad_id)
    out_fn = logits_fn(ids, pos, seg)
    logits, offset = (out_fn[0], out_fn[1]) if isinstance(out_fn, tuple) else (out_fn, None)
    logits = np.asarray(logits)
    if logits.ndim != 3 or logits.shape[0] != len(samples) or logits.shape[1] > seq_len:
        raise EvalError(f"logits_fn returned shape {logits.shape}; expected [B={len(samples)}, T<={seq_len}, V]")
    if offset is None:
        offset = seq_len - logits.shape[1]  # logits[:, t] belongs to position offset + t
    out = []
    for i, s in enumerate(samples):
        a0, a1 = s.answer_span
        if a0 - 1 < offset or a1 - 1 > offset + logits.shape[1]:
            raise EvalError(
                f"logits cover positions {offset}..{offset + logits.shape[1] - 1} but the answer needs "
                f"{a0 - 1}..{a1 - 2}; raise eval.logits_tail")
        pred = logits[i, a0 - 1 - offset:a1 - 1 - offset].argmax(-1)
        target = s.input_ids[a0:a1]
        hits = pred == target
        out.append({"exact": float(hits.all()), "token_accuracy": float(hits.mean()),
                    "predicted_ids": pred.astype(int).tolist()})
    return out


def generate(generate_fn: GenerateFn, samples: Sequence[Sample], tokenizer: ModelTokenizer,
             max_new_tokens: int, batch_size: int) -> list[dict]:
    """Per sample: string_match (RULER string_match_all) and the decoded output."""
    out: list[dict] = []
    for k in range(0, len(samples), batch_size):
        chunk = samples[k:k + batch_size]
        prompts = [np.asarray(s.input_ids[:s.answer_span[0]], np.int32) for s in chunk]
        new = np.asarray(generate_fn(prompts, max_new_tokens))
        if new.ndim != 2 or new.shape[0] != len(chunk):
            raise EvalError(f"generate_fn returned shape {new.shape}; expected [B={len(chunk)}, N]")
        for row, s in zip(new, chunk, strict=True):
            row = [int(t) for t in row]
            if tokenizer.eos_id is not None and tokenizer.eos_id in row:
                row = row[:row.index(tokenizer.eos_id)]
            text = tokenizer.tok.decode(row, skip_special_tokens=True)
            out.append({"string_match": string_match_all(text, s.references), "output": text})
    return out
