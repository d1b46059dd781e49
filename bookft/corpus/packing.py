"""Packing: documents (token lengths only) -> sequences of exactly `seq_len` tokens. A pure function.

Design choices (levanter-style: the store is tokens + offsets, packing is a separate pure function):
- Input is lengths, collection ids and allowed split points; output is a *plan* (pieces per sequence).
  Tokens are only touched later, by `materialize`, so planning 100M tokens needs no token memory.
- Documents of one collection (a book, a repository, an archive) stay together and in order:
  a collection that fits in one sequence is one indivisible item, placed best-fit-decreasing
  (largest first, into the open sequence with the least room that still fits it). Collections longer
  than a sequence form one running stream, in order (each starts where the previous one ended, as
  its own segment): the stream first fills the room the items left, then fresh sequences, so only
  the very last sequence is partial.
- A document is split only where it must be (it does not fit the room left), never truncated: at the
  last paragraph/file boundary that fits, if that wastes at most `slack` tokens; otherwise at the
  last word start (`word_cut` callback); otherwise a hard cut exactly at the room left.
- Each piece records (doc, start, end) so segment ids and per-segment positions are exact;
  `segment_mode="collection"` makes the pieces of one collection inside a sequence one segment.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Piece:
    doc: int  # index into the document list
    start: int  # token offset inside the document (inclusive)
    end: int  # token offset inside the document (exclusive)
    copy: int = 0  # which drawn copy of its collection (corpus/mixing.py); 0 without a mix

    @property
    def length(self) -> int:
        return self.end - self.start


@dataclass
class PackPlan:
    seq_len: int
    sequences: list[list[Piece]] = field(default_factory=list)
    n_split_docs: int = 0  # documents cut into more than one piece

    @property
    def n_tokens(self) -> int:
        return sum(p.length for seq in self.sequences for p in seq)

    @property
    def fill(self) -> float:
        cap = len(self.sequences) * self.seq_len
        return self.n_tokens / cap if cap else 0.0


WordCut = Callable[[int, int, int], int | None]  # (doc, lo, hi) -> last word start p in (lo, hi] or None


def _cut(doc: int, start: int, room: int, length: int, bounds: np.ndarray, slack: int,
         word_cut: WordCut | None) -> int:
    """Where to end the piece that begins at `start` with `room` tokens of space (absolute offset)."""
    hi = start + room  # the piece may cover [start, hi)
    assert hi < length
    i = int(np.searchsorted(bounds, hi, side="right")) - 1
    if i >= 0 and bounds[i] > start and hi - int(bounds[i]) <= slack:
        return int(bounds[i])
    if word_cut is not None:
        w = word_cut(doc, start, hi)
        if w is not None and start < w <= hi:
            return w
    return hi


def _items(lengths: Sequence[int], collections: Sequence[int], seq_len: int):
    """Collections that fit one sequence, as (size, order, pieces) items, and the documents of the
    longer collections in order (the stream that is split across sequences)."""
    n = len(lengths)
    items: list[tuple[int, int, list[Piece]]] = []
    long_docs: list[int] = []
    d = 0
    while d < n:
        e = d
        while e < n and collections[e] == collections[d]:
            e += 1
        total = int(sum(lengths[d:e]))
        if total <= seq_len:
            items.append((total, len(items), [Piece(k, 0, int(lengths[k])) for k in range(d, e) if lengths[k]]))
        else:
            long_docs.extend(k for k in range(d, e) if lengths[k])
        d = e
    return items, long_docs


def _best_fit(items, seq_len: int) -> tuple[list[list[Piece]], list[int]]:
    """Best-fit decreasing of the items into bins of seq_len; `opened` is sorted by (room, bin index).
    Returns the bins and the room each has left."""
    items = sorted(items, key=lambda it: (-it[0], it[1]))
    bins: list[list[Piece]] = []
    rooms: list[int] = []
    opened: list[tuple[int, int]] = []
    for size, _, pieces in items:
        if size == 0:
            continue
        j = bisect.bisect_left(opened, (size, -1))
        if j < len(opened):
            _, b = opened.pop(j)
            bins[b].extend(pieces)
            rooms[b] -= size
        else:
            b = len(bins)
            bins.append(list(pieces))
            rooms.append(seq_len - size)
        if rooms[b] > 0:
            bisect.insort(opened, (rooms[b], b))
    return bins, rooms


def _stream(long_docs: list[int], lengths, bins, rooms, seq_len: int, slack: int, bounds_of,
            word_cut: WordCut | None) -> tuple[list[list[Piece]], set[int]]:
    """The long collections' documents, in order: first into the gaps the bins left (rooms above
    `slack`), then into new sequences; cut at paragraph/file starts (or word starts). Appends to the
    gap bins in place; returns the new sequences and the documents that were split."""
    gaps = [b for b in range(len(bins)) if rooms[b] > slack]
    g = 0
    fresh: list[list[Piece]] = []
    split_docs: set[int] = set()

    def next_target() -> tuple[list[Piece], int]:
        nonlocal g
        if g < len(gaps):
            g += 1
            return bins[gaps[g - 1]], rooms[gaps[g - 1]]
        fresh.append([])
        return fresh[-1], seq_len

    target, room = (None, 0) if not long_docs else next_target()
    for k in long_docs:
        length = int(lengths[k])
        start = 0
        bk = None
        while start < length:
            if length - start <= room:
                target.append(Piece(k, start, length))
                room -= length - start
                break
            if room <= slack:  # a sliver: go on in the next target, wasting at most `slack`
                target, room = next_target()
                continue
            if bk is None:
                bk = bounds_of(k)
            c = _cut(k, start, room, length, bk, slack, word_cut)
            target.append(Piece(k, start, c))
            split_docs.add(k)
            start = c
            target, room = next_target()
    return fresh, split_docs


def pack(lengths: Sequence[int], collections: Sequence[int], seq_len: int, *,
         boundaries: Callable[[int], np.ndarray] | Sequence[np.ndarray] | None = None,
         slack: int = 0, word_cut: WordCut | None = None) -> PackPlan:
    """Plan the packing of documents into sequences of `seq_len` tokens.

    lengths[d]: tokens of document d (> 0). collections[d]: collection id; the documents of a
    collection must be consecutive and are kept in this order. boundaries[d] (or boundaries(d)):
    sorted token offsets in (0, lengths[d]) where a paragraph or file starts.
    """
    if seq_len <= 0:
        raise ValueError(f"seq_len must be positive, got {seq_len}")
    if len(collections) != len(lengths):
        raise ValueError("lengths and collections differ in length")
    empty = np.zeros(0, dtype=np.int64)

    def bounds_of(d: int) -> np.ndarray:
        if boundaries is None:
            return empty
        b = boundaries(d) if callable(boundaries) else boundaries[d]
        return np.asarray(b, dtype=np.int64)

    items, long_docs = _items(lengths, collections, seq_len)
    bins, rooms = _best_fit(items, seq_len)
    fresh, split_docs = _stream(long_docs, lengths, bins, rooms, seq_len, slack, bounds_of, word_cut)
    plan = PackPlan(seq_len=seq_len)
    plan.sequences.extend(bins)
    plan.sequences.extend(f for f in fresh if f)
    plan.n_split_docs = len(split_docs)
    return plan


def segment_numbers(pieces: Sequence[Piece], collections: Sequence[int], mode: str = "document") -> list[int]:
    """Segment number (1-based) of each piece in a sequence: one per piece, or one per collection run."""
    out: list[int] = []
    seg = 0
    prev = None
    for p in pieces:
        key = (collections[p.doc], p.copy) if mode == "collection" else None  # two copies: two segments
        if mode != "collection" or key != prev or seg == 0:
            seg += 1
        prev = key
        out.append(seg)
    return out


def materialize(pieces: Sequence[Piece], seq_len: int, tokens: Callable[[int, int, int], np.ndarray], *,
                pad_id: int = 0, weights: Callable[[int, int, int], np.ndarray | None] | None = None
                ) -> tuple[np.ndarray, np.ndarray | None]:
    """Build one sequence: input_ids [seq_len] int32 and loss_weights [seq_len] float32 (or None)."""
    ids = np.full(seq_len, pad_id, dtype=np.int32)
    w = None
    pos = 0
    for p in pieces:
        ids[pos:pos + p.length] = tokens(p.doc, p.start, p.end)
        if weights is not None:
            pw = weights(p.doc, p.start, p.end)
            if pw is not None:
                if w is None:
                    w = np.zeros(seq_len, dtype=np.float32)
                    w[:pos] = 1.0
                w[pos:pos + p.length] = pw
            elif w is not None:
                w[pos:pos + p.length] = 1.0
        pos += p.length
    return ids, w


def expand_segments(piece_lengths: np.ndarray, piece_segments: np.ndarray, seq_len: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per-token segment_ids [seq_len] (0 = padding) and positions [seq_len] (restart per segment)."""
    piece_lengths = np.asarray(piece_lengths, dtype=np.int64)
    piece_segments = np.asarray(piece_segments, dtype=np.int32)
    used = int(piece_lengths.sum())
    seg = np.zeros(seq_len, dtype=np.int32)
    seg[:used] = np.repeat(piece_segments, piece_lengths)
    pos = np.zeros(seq_len, dtype=np.int32)
    if used:
        idx = np.arange(used, dtype=np.int64)
        # start index of each token's segment: first token where seg changes
        change = np.ones(used, dtype=bool)
        change[1:] = seg[1:used] != seg[:used - 1]
        starts = np.maximum.accumulate(np.where(change, idx, 0))
        pos[:used] = (idx - starts).astype(np.int32)
    return seg, pos
