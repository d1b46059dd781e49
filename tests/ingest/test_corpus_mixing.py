"""corpus/mixing.py, the pure part of the mix: draws meet their budget to the token, copies are
floor or ceil of their expected count, identity when the budget is the source itself, and copies of
one collection stay separate segments."""

import numpy as np
import pytest

from bookft.corpus.mixing import bucket_name, draw, pack_spans, spans
from bookft.corpus.packing import segment_numbers


@pytest.mark.parametrize("seed", range(5))
def test_draw_meets_the_budget_with_floor_or_ceil_copies(seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(5, 3000, size=40)
    weights = np.where(lengths > 1000, 3.0, 1.0)
    budget = int(rng.integers(1000, 3 * lengths.sum()))
    got = draw(lengths, weights, budget, np.random.default_rng(seed))
    assert sum(n for _, n in got) == budget
    expected = budget / float(weights @ lengths) * weights  # copies each document is due
    copies = np.zeros(len(lengths))
    for d, n in got:
        copies[d] += n / lengths[d]
    assert np.all(copies >= np.floor(expected) - 1e-9) and np.all(copies <= np.ceil(expected) + 1e-9)
    assert sum(1 for d, n in got if n < lengths[d]) <= 1  # at most one partial copy


def test_draw_of_a_whole_source_is_every_document_once_in_order():
    lengths = np.array([7, 300, 12, 45])
    assert draw(lengths, np.ones(4), int(lengths.sum()), np.random.default_rng(0)) == [
        (0, 7), (1, 300), (2, 12), (3, 45)]


def test_copies_of_one_collection_are_separate_segments():
    lengths, collections = [10, 10], [0, 0]  # one collection of two documents, drawn twice
    items = spans([(0, 10), (1, 10), (0, 10), (1, 10)], lengths, collections, None)
    assert [(s.doc, s.group) for s in items] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    plan = pack_spans(items, 64)
    (seq,) = plan.sequences
    assert sorted((p.doc, p.start, p.end) for p in seq) == [(0, 0, 10), (0, 0, 10), (1, 0, 10), (1, 0, 10)]
    segs = segment_numbers(seq, collections, "collection")
    assert len(set(segs)) == 2 and segs == sorted(segs)  # each copy is one segment of two documents


def test_partial_copies_end_at_a_word_start_and_buckets_are_named():
    items = spans([(0, 50)], [80], [0], None, word_cut=lambda d, lo, hi: 47)
    assert [(s.start, s.end) for s in items] == [(0, 47)]
    assert [bucket_name(n) for n in (1, 1023, 1024, 5000, 70_000, 2 << 20)] == [
        "<1K", "<1K", "1K-4K", "4K-16K", "64K-256K", ">=1M"]
