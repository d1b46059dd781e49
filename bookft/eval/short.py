"""The short-context check: loss and token accuracy of a model on short documents.

Design choices:
- Each document is scored on its own (positions from 0, one segment), at most `max_tokens` tokens;
  the loss is the mean next-token cross-entropy over all target tokens of all documents (a token-
  weighted mean, as training reports it), the accuracy the share of targets that are the argmax.
- Documents are batched into power-of-two length buckets (padding is its own segment with weight 0),
  so a set of documents compiles a handful of shapes; logits are [B, L, V] of short documents only.
- Two sets: the corpus's held-out short documents (manifest `mix.held_out`, never in a sequence) and a
  short generic text (the eval's generated essay, or files the user names), so a user sees what
  long-context tuning cost at short range, base against tuned.
"""

from __future__ import annotations

import functools
from itertools import islice

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from bookft.errors import EvalError
from bookft.needles.haystack import essay_sentences


@functools.lru_cache(maxsize=16)
def _sums_fn(graphdef):
    @jax.jit
    def run(state, ids, segs, weights):
        model = nnx.merge(graphdef, state)
        positions = jnp.broadcast_to(jnp.arange(ids.shape[1], dtype=jnp.int32), ids.shape)
        logits = model.logits(model(ids, positions, segs)).astype(jnp.float32)[:, :-1]  # [B, L-1, V]
        targets = ids[:, 1:]
        lse = jax.nn.logsumexp(logits, axis=-1)
        tgt = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
        hit = (jnp.argmax(logits, axis=-1) == targets).astype(jnp.float32)
        w = weights[:, 1:]
        return jnp.sum((lse - tgt) * w), jnp.sum(hit * w), jnp.sum(w)
    return run


def _bucket(n: int) -> int:
    return max(16, 1 << (n - 1).bit_length())


def score_documents(model, docs: list[np.ndarray], *, batch: int = 8) -> dict:
    """{loss, accuracy, targets, documents} of `model` on token id arrays `docs` (each >= 2 tokens)."""
    docs = [np.asarray(d, np.int32) for d in docs if len(d) >= 2]
    if not docs:
        raise EvalError("short eval: no document of at least 2 tokens to score")
    graphdef, state = nnx.split(model)
    fn = _sums_fn(graphdef)
    ce = hits = count = 0.0
    by_len: dict[int, list[np.ndarray]] = {}
    for d in docs:
        by_len.setdefault(_bucket(len(d)), []).append(d)
    for length, group in sorted(by_len.items()):
        for i in range(0, len(group), batch):
            rows = group[i:i + batch]
            ids = np.zeros((batch, length), np.int32)
            segs = np.full((batch, length), 2, np.int32)  # padding: a segment of its own, weight 0
            w = np.zeros((batch, length), np.float32)
            for r, d in enumerate(rows):
                ids[r, :len(d)] = d
                segs[r, :len(d)] = 1
                w[r, 1:len(d)] = 1.0  # targets are tokens 1..n-1 (w[:, 1:] lines up with targets)
            c, h, n = fn(state, jnp.asarray(ids), jnp.asarray(segs), jnp.asarray(w))
            ce, hits, count = ce + float(c), hits + float(h), count + float(n)
    return {"loss": ce / count, "accuracy": hits / count, "targets": int(count), "documents": len(docs)}


def generic_texts(n_docs: int = 8, words: int = 200, seed: int = 0) -> list[str]:
    """Short generic documents: the eval's generated essay (bookft.eval.haystack), about `words` words each."""
    out = []
    for k in range(n_docs):
        text, size = [], 0
        for s in islice(essay_sentences(seed + k), 10_000):
            text.append(s)
            size += len(s.split())
            if size >= words:
                break
        out.append(" ".join(text).strip())
    return out


def held_out_texts(corpus) -> list[str]:
    """The texts of a corpus's held-out documents (manifest mix.held_out); EvalError when it has none."""
    held = (corpus.manifest.get("mix") or {}).get("held_out") or []
    if not held:
        raise EvalError(f"{corpus.path}: the corpus holds no held-out documents; set `mix: {{holdout_docs: 32}}` "
                        "in its YAML and ingest again (they are kept out of every sequence)")
    docs = corpus.documents()
    return [docs[int(i)]["text"] for i in held]
