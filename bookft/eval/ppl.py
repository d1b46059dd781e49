"""Perplexity by window length: the context-extension table of Press et al. (2022), PI, YaRN and LongLoRA.

What is scored (`length` L, `stride` S; S = L, the default, gives non-overlapping windows):
- A document is its raw text tokenized with no special tokens (no BOS). Its windows are the full
  L-token spans starting at 0, S, 2S, ... (start + L <= n); a document shorter than L has none, and
  the tokens after the last full window (fewer than S) are not scored. Each window is a sequence of
  its own: positions 0..L-1, one segment, attending to nothing outside it.
- A scored token is named by its in-window position p (the number of tokens it is predicted from).
  The first window of a document scores p = 1..L-1 (its L-1 next-token targets); every later window
  scores p = max(1, L-S)..L-1, i.e. exactly the tokens no earlier window scored, each predicted from
  at least L-S tokens (HF's "perplexity of fixed-length models" sliding window, restricted to full
  windows: HF also scores the tail with one shorter last window). With S = L every window scores its
  L-1 targets and the first token of each window is never a target. S > L is taken as S = L.
- Perplexity at L = exp(sum of the scored tokens' NLL / number of scored tokens), pooled over every
  window of every document (a token-weighted mean, as training reports its loss).
- Loss by position: the mean NLL of the scored tokens in power-of-two buckets of p, [1,2), [2,4),
  ..., [2^k, L): the same buckets at every L (the last one cut at L), so lengths and models line up
  on one log-scale axis and the curve shows what the extra context buys (or costs) per octave.

How it runs (the forward pass training runs, as NIAH eval does; eval/drivers.py, eval/layout.py):
- Windows of one length are batched at most `batch_tokens // L` rows at a time, in batches of equal
  size (the last one padded with fewer empty rows than there are batches), padded to the attention's
  length rule with segment id 0 and weight 0, laid out by `SeqLayout` (zig-zag order, sharded along
  S over the context axes) and run with the configured attend; targets, weights and position buckets
  are shifted in natural order first and laid out with the tokens, so sums need no reordering.
- The NLL is computed per chunk of each device's tokens in a `lax.scan` (as train/loss.py chunks its
  cross-entropy): logits exist for one [B, cp*chunk, V] chunk at a time, never [B, L, V].
- Sums come back per bucket (a [B,S,buckets] one-hot contraction) and are accumulated in float64.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bookft.errors import EvalError
from bookft.eval.layout import SeqLayout
from bookft.host import to_host


def position_edges(length: int) -> list[int]:
    """Bucket edges of in-window positions: [1, 2, 4, ..., 2^k, length] (2^k < length)."""
    edges = [1]
    while edges[-1] * 2 < length:
        edges.append(edges[-1] * 2)
    return edges + [length]


def position_buckets(length: int) -> np.ndarray:
    """[length] int32: the bucket of in-window position p (p = 0, never scored, reads bucket 0)."""
    p = np.maximum(np.arange(length), 1)
    return np.minimum(np.floor(np.log2(p)).astype(np.int32), len(position_edges(length)) - 2)


def first_scored(window: int, length: int, stride: int) -> int:
    """The first scored in-window position of a document's `window`-th window (0-based)."""
    return 1 if window == 0 else max(1, length - stride)


def windows_of(n_tokens: int, length: int, stride: int) -> list[int]:
    """Start offsets of the full windows of a document of `n_tokens` tokens."""
    return list(range(0, n_tokens - length + 1, stride))


def token_nll(logits_fn, hidden, targets, *, cp: int = 1, chunk: int = 1024):
    """hidden [B,S,D], targets [B,S] -> NLL [B,S] float32, one [B, cp*c, V] chunk of logits at a time.

    The sequence axis is cut as [cp, n, c] with the (sharded) context factor outermost, so each device
    scans its own tokens (the layout of train/loss.py's chunked cross-entropy)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    from bookft.train.loss import pick_chunk

    b, s = targets.shape
    c = pick_chunk(s // cp, chunk)
    n = s // cp // c

    def split(x):  # [B, S, ...] -> [n, B, cp*c, ...]
        x = jnp.moveaxis(x.reshape(b, cp, n, c, *x.shape[2:]), 2, 0)
        return x.reshape(n, b, cp * c, *x.shape[4:])

    def body(carry, x):
        h, t = x
        logits = logits_fn(h).astype(jnp.float32)  # [B, cp*c, V]
        tgt = jnp.take_along_axis(logits, t[..., None], axis=-1)[..., 0]
        return carry, jax.nn.logsumexp(logits, axis=-1) - tgt

    _, nll = lax.scan(body, None, (split(hidden), split(targets)))  # [n, B, cp*c]
    return jnp.moveaxis(nll.reshape(n, b, cp, c), 0, 2).reshape(b, s)


@functools.lru_cache(maxsize=32)
def _sums_fn(graphdef, attend, n_buckets: int, cp: int, chunk: int):
    import jax
    import jax.numpy as jnp
    from flax import nnx

    @jax.jit
    def run(state, ids, pos, seg, targets, weights, buckets):
        model = nnx.merge(graphdef, state)
        hidden = model(ids, pos, seg, attend=attend)  # [B,S,D], stored order
        nll = token_nll(model.logits, hidden, targets, cp=cp, chunk=chunk)
        nll = jnp.where(weights > 0, nll, 0.0)  # padding may be NaN under some kernels: never multiplied
        hot = (buckets[..., None] == jnp.arange(n_buckets)).astype(jnp.float32) * weights[..., None]
        return jnp.einsum("bs,bsk->k", nll, hot), jnp.sum(hot, axis=(0, 1))  # [K] NLL sums, [K] counts
    return run


def window_batch(rows: list[tuple[np.ndarray, int]], length: int, seq_len: int, n_rows: int) -> tuple:
    """(ids, positions, segment_ids, targets, weights, buckets), each [n_rows, seq_len], natural order,
    from `rows` of (window tokens [length], first scored position)."""
    ids, pos, seg, tgt, bk = (np.zeros((n_rows, seq_len), np.int32) for _ in range(5))
    w = np.zeros((n_rows, seq_len), np.float32)
    buckets = position_buckets(length)
    for r, (win, p0) in enumerate(rows):
        ids[r, :length], pos[r, :length], seg[r, :length] = win, np.arange(length), 1
        tgt[r, :length - 1] = win[1:]  # index i predicts the token at position i + 1
        w[r, p0 - 1:length - 1] = 1.0
        bk[r, :length - 1] = buckets[1:]
    return ids, pos, seg, tgt, w, bk


@dataclass
class LengthScore:
    length: int
    stride: int
    nll: np.ndarray  # [K] float64 NLL sums per position bucket
    tokens: np.ndarray  # [K] scored tokens per bucket
    windows: int

    def as_dict(self) -> dict:
        total, count = float(self.nll.sum()), int(self.tokens.sum())
        edges = position_edges(self.length)
        per = [float(s / n) if n else None for s, n in zip(self.nll, self.tokens, strict=True)]
        return {"ppl": math.exp(total / count), "loss": total / count, "tokens": count, "windows": self.windows,
                "stride": self.stride, "loss_by_position": {"start": edges[:-1], "end": edges[1:], "loss": per,
                                                            "tokens": [int(n) for n in self.tokens]}}


def score_length(model, docs: list[np.ndarray], length: int, stride: int | None = None, *, attend=None,
                 layout: SeqLayout | None = None, batch_tokens: int = 8192, chunk: int = 1024,
                 advance: Callable[[int], None] | None = None) -> LengthScore:
    """NLL sums by position bucket of `model` over the windows (module doc) of token arrays `docs`."""
    if length < 2:
        raise EvalError(f"--lengths: a window needs at least 2 tokens, got {length}")
    if stride is not None and stride < 1:
        raise EvalError(f"--stride: must be >= 1, got {stride}")
    stride = min(stride or length, length)
    work = [(d, k, s) for d, doc in enumerate(docs) for k, s in enumerate(windows_of(len(doc), length, stride))]
    if not work:
        longest = max((len(d) for d in docs), default=0)
        raise EvalError(f"no document has {length} tokens (the longest has {longest}): pass longer --text "
                        "files or shorter --lengths")
    from flax import nnx

    layout = layout or SeqLayout(per_octave=0)
    graphdef, state = nnx.split(layout.place(model))
    n_buckets = len(position_edges(length)) - 1
    fn = _sums_fn(graphdef, attend, n_buckets, layout.cp, chunk)
    seq_len = layout.length(length)
    most = max(1, batch_tokens // length)
    n_rows = -(-len(work) // -(-len(work) // most))  # batches of equal size: the last one barely padded
    nll, tokens = np.zeros(n_buckets), np.zeros(n_buckets)
    for i in range(0, len(work), n_rows):
        rows = [(docs[d][s:s + length], first_scored(k, length, stride)) for d, k, s in work[i:i + n_rows]]
        arrays = window_batch(rows, length, seq_len, n_rows)
        with layout.rules():
            sums, counts = fn(state, *layout.arrange(*arrays))
        nll += to_host(sums, np.float64)
        tokens += to_host(counts, np.float64)
        if advance is not None:
            advance(len(rows))
    return LengthScore(length, stride, nll, tokens.round().astype(np.int64), len(work))


def perplexity(model, docs: list[np.ndarray], lengths: list[int], stride: int | None = None, **kw) -> dict:
    """{length: LengthScore.as_dict()} for every window length (kw: score_length's)."""
    return {n: score_length(model, docs, n, stride, **kw).as_dict() for n in lengths}
