"""Mixing: which document spans go into the packing, and how often. Pure functions over token lengths.

Design choices:
- A source's documents are drawn to fill a token budget (its share of the mix). Document d with
  weight w_d (the length upsampling factor of Fu et al. 2024, or 1) is expected c_d = r * w_d times,
  with r set so that sum(c_d * L_d) equals the budget: floor(c_d) whole copies each, then the
  fractional parts decide the rest in a seeded weighted order without replacement (Efraimidis &
  Spirakis keys u ** (1 / f_d)), the last one cut to the tokens still missing. So the budget is met to
  the token (then moved back to a word start), and a source whose budget is its own size with all
  weights 1 comes out as every document exactly once.
- A copy is a `Span` (doc, start, end) in a group: copy k of the documents of one collection is one
  group, kept together and in document order, so packing keeps its rules (collections whole or
  streamed in order). Groups are shuffled (seeded) so sources interleave in the long stream.
- `pack_spans` runs the unchanged packing (corpus/packing.py) over spans and maps pieces back to
  document offsets; each piece keeps its group (`Piece.copy`), so with `segments: collection` two
  copies of one collection side by side in a sequence stay two segments.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from bookft.corpus.packing import PackPlan, Piece, WordCut, pack

BUCKETS = (1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20)  # document length edges (tokens)


def bucket_name(length: int) -> str:
    """The length bucket of a document: '<1K', '1K-4K', ..., '256K-1M', '>=1M'."""
    names = ["<1K", "1K-4K", "4K-16K", "16K-64K", "64K-256K", "256K-1M", ">=1M"]
    return names[int(np.searchsorted(BUCKETS, length, side="right"))]


@dataclass(frozen=True)
class Span:
    doc: int
    start: int
    end: int
    group: int  # packing collection: copy k of one collection's documents


def draw(lengths: np.ndarray, weights: np.ndarray, budget: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Copies (doc, tokens) of documents whose lengths sum to `budget`: whole copies, the last may be a prefix.

    lengths: int [n] (> 0); weights: float [n] (> 0), relative draw rates. Order: doc order per copy round.
    """
    lengths = np.asarray(lengths, np.int64)
    weights = np.asarray(weights, np.float64)
    if budget <= 0 or not len(lengths):
        return []
    r = budget / float(np.dot(weights, lengths))
    c = r * weights
    whole = np.floor(c + 1e-9).astype(np.int64)
    frac = np.clip(c - whole, 0.0, None)
    out = [(d, int(lengths[d])) for d in range(len(lengths)) for _ in range(int(whole[d]))]
    rest = budget - int(np.dot(whole, lengths))
    if rest > 0:
        cand = np.nonzero(frac > 1e-12)[0]
        if not len(cand):  # rounding left a few tokens and no fraction: top up from the first document
            cand = np.arange(len(lengths))
            frac = np.ones(len(lengths))
        keys = rng.random(len(cand)) ** (1.0 / frac[cand])
        for d in cand[np.argsort(-keys, kind="stable")]:
            take = min(int(lengths[d]), rest)
            out.append((int(d), take))
            rest -= take
            if rest <= 0:
                break
    out.sort(key=lambda x: x[0])
    return out


def spans(copies: Sequence[tuple[int, int]], lengths: Sequence[int], collections: Sequence[int],
          rng: np.random.Generator | None, word_cut: WordCut | None = None) -> list[Span]:
    """Spans for copies of documents; copy k of one collection's documents is one group; groups shuffled
    when `rng` is given. A partial copy (tokens < the document's length) ends at its last word start."""
    seen: dict[int, int] = {}
    groups: dict[tuple[int, int], list[Span]] = {}
    order: list[tuple[int, int]] = []
    for d, n in copies:
        k = seen.get(d, 0)
        seen[d] = k + 1
        key = (collections[d], k)
        if key not in groups:
            groups[key] = []
            order.append(key)
        end = n
        if word_cut is not None and n < lengths[d]:  # a partial copy: back to its last word start
            w = word_cut(d, 0, n)
            end = w if w is not None and 0 < w <= n else n
        groups[key].append(Span(d, 0, end, 0))
    if rng is not None:
        order = [order[i] for i in rng.permutation(len(order))]
    out: list[Span] = []
    for g, key in enumerate(order):
        out.extend(Span(s.doc, s.start, s.end, g) for s in groups[key])
    return out


def pack_spans(items: Sequence[Span], seq_len: int, *, boundaries: Callable[[int], np.ndarray] | None = None,
               slack: int = 0, word_cut: WordCut | None = None) -> PackPlan:
    """`pack` over spans (as if each were a document), pieces mapped back to document offsets."""
    lengths = [s.end - s.start for s in items]
    groups = [s.group for s in items]

    def bounds(i: int) -> np.ndarray:
        if boundaries is None:
            return np.zeros(0, np.int64)
        s = items[i]
        b = np.asarray(boundaries(s.doc), np.int64)
        return b[(b > s.start) & (b < s.end)] - s.start

    def cut(i: int, lo: int, hi: int) -> int | None:
        s = items[i]
        w = word_cut(s.doc, s.start + lo, s.start + hi)
        return None if w is None else w - s.start

    plan = pack(lengths, groups, seq_len, boundaries=bounds, slack=slack,
                word_cut=cut if word_cut is not None else None)
    plan.sequences = [[Piece(items[p.doc].doc, items[p.doc].start + p.start, items[p.doc].start + p.end,
                             items[p.doc].group) for p in seq] for seq in plan.sequences]
    return plan
