"""Packing: a pure function over lengths; checked against exact expectations and invariants."""

import numpy as np
import pytest

from bookft.corpus.packing import expand_segments, materialize, pack, segment_numbers


def _check_invariants(plan, lengths, collections):
    # every token of every document appears exactly once, in order, nothing truncated
    covered = {d: [] for d in range(len(lengths))}
    for seq in plan.sequences:
        assert sum(p.length for p in seq) <= plan.seq_len
        for p in seq:
            assert p.length > 0
            covered[p.doc].append((p.start, p.end))
    for d, spans in covered.items():
        spans.sort()
        assert spans[0][0] == 0 and spans[-1][1] == lengths[d]
        for (_, e), (s, _) in zip(spans, spans[1:], strict=False):
            assert e == s


def test_small_collections_best_fit_decreasing():
    # items 6, 5, 4, 3, 2 into bins of 10: BFD gives [6,4], [5,3,2]
    lengths = [6, 5, 4, 3, 2]
    plan = pack(lengths, [0, 1, 2, 3, 4], 10)
    assert [[p.doc for p in s] for s in plan.sequences] == [[0, 2], [1, 3, 4]]
    assert plan.fill == 1.0
    assert plan.n_split_docs == 0
    _check_invariants(plan, lengths, [0, 1, 2, 3, 4])


def test_collection_kept_together_and_in_order():
    lengths = [3, 3, 3, 4]
    colls = [7, 7, 7, 8]
    plan = pack(lengths, colls, 10)
    seqs = [[p.doc for p in s] for s in plan.sequences]
    assert [0, 1, 2] in seqs  # the 9-token collection is one item, in order
    _check_invariants(plan, lengths, colls)


def test_long_document_split_at_paragraph_boundary_never_truncated():
    # one 25-token doc, paragraphs start at 8, 15, 22; seq_len 10 with slack 3
    plan = pack([25], [0], 10, boundaries=[np.array([8, 15, 22])], slack=3)
    cuts = [(p.start, p.end) for s in plan.sequences for p in s]
    assert cuts == [(0, 8), (8, 15), (15, 25)]
    assert plan.n_split_docs == 1
    _check_invariants(plan, [25], [0])


def test_word_cut_when_paragraph_boundary_wastes_too_much():
    calls = []

    def word_cut(d, lo, hi):
        calls.append((d, lo, hi))
        return hi - 1

    plan = pack([30], [0], 10, boundaries=[np.array([2])], slack=1, word_cut=word_cut)
    assert [(p.start, p.end) for s in plan.sequences for p in s][0] == (0, 9)
    assert calls[0] == (0, 0, 10)
    _check_invariants(plan, [30], [0])


def test_hard_cut_without_boundaries():
    plan = pack([35], [0], 10)
    assert [(p.start, p.end) for s in plan.sequences for p in s] == [(0, 10), (10, 20), (20, 30), (30, 35)]


@pytest.mark.parametrize("seq_len", [1_048_576, 4_194_304])
def test_million_token_sequences(seq_len):
    rng = np.random.default_rng(0)
    lengths = rng.integers(1000, 400_000, size=300).tolist()
    colls = list(range(300))
    bounds = [np.arange(500, n, 500) for n in lengths]
    plan = pack(lengths, colls, seq_len, boundaries=bounds, slack=int(0.005 * seq_len))
    _check_invariants(plan, lengths, colls)
    used = sorted(sum(p.length for p in s) for s in plan.sequences)
    assert min(used[1:]) >= 0.99 * seq_len  # every sequence but the emptiest is full
    # a collection longer than the sequence is laid out contiguously
    big = pack([seq_len * 2 + 7], [0], seq_len, boundaries=[np.arange(1000, seq_len * 2, 1000)],
               slack=int(0.005 * seq_len))
    _check_invariants(big, [seq_len * 2 + 7], [0])
    assert big.fill > 0.66


def test_fill_high_when_corpus_much_longer_than_sequence():
    rng = np.random.default_rng(1)
    lengths = rng.integers(50, 3000, size=2000).tolist()
    colls = (np.arange(2000) // 7).tolist()  # collections of 7 documents
    plan = pack(lengths, colls, 2048, boundaries=[np.arange(100, n, 100) for n in lengths], slack=10,
                word_cut=lambda d, lo, hi: hi - 2)
    _check_invariants(plan, lengths, colls)
    assert sum(lengths) > 20 * 2048
    assert plan.fill >= 0.99


def test_segments_and_positions_exact():
    plan = pack([3, 2, 4], [0, 0, 1], 12)
    seq = plan.sequences[0]
    segs = segment_numbers(seq, [0, 0, 1], "document")
    lens = [p.length for p in seq]
    seg_ids, pos = expand_segments(np.array(lens), np.array(segs), 12)
    # one collection of [3, 2] (item 5) and [4] go into the same 12-token bin
    expected_seg = np.repeat(np.array(segs), lens)
    assert (seg_ids[:9] == expected_seg).all() and (seg_ids[9:] == 0).all()
    starts = np.cumsum([0] + lens[:-1])
    expected_pos = np.concatenate([np.arange(n) for n in lens])
    assert (pos[:9] == expected_pos).all() and (pos[9:] == 0).all()
    del starts
    # collection mode: the two docs of collection 0 share one segment, positions continue
    csegs = segment_numbers(seq, [0, 0, 1], "collection")
    seg_c, pos_c = expand_segments(np.array(lens), np.array(csegs), 12)
    order = [p.doc for p in seq]
    if order[:2] == [0, 1]:
        assert seg_c[:5].tolist() == [1] * 5 and pos_c[:5].tolist() == [0, 1, 2, 3, 4]


def test_materialize_tokens_and_loss_weights():
    toks = {0: np.arange(100, 105, dtype=np.int32), 1: np.arange(200, 203, dtype=np.int32)}
    plan = pack([5, 3], [0, 1], 10)
    w = {1: np.array([0.5, 1.0, 2.0], np.float32)}
    ids, lw = materialize(plan.sequences[0], 10, lambda d, s, e: toks[d][s:e], pad_id=9,
                          weights=lambda d, s, e: w.get(d, None)[s:e] if d in w else None)
    assert ids.tolist() == [100, 101, 102, 103, 104, 200, 201, 202, 9, 9]
    assert lw.tolist() == [1, 1, 1, 1, 1, 0.5, 1.0, 2.0, 0, 0]


def test_long_collections_share_a_stream_so_tails_do_not_waste():
    # 40 books of 1.5 sequences each: laid out back to back, fill is ~1, not ~0.75
    seq_len = 131072
    lengths = [int(1.5 * seq_len) + 37 * i for i in range(40)]
    bounds = [np.arange(200, n, 200) for n in lengths]
    plan = pack(lengths, list(range(40)), seq_len, boundaries=bounds, slack=int(0.005 * seq_len))
    _check_invariants(plan, lengths, list(range(40)))
    used = [sum(p.length for p in s) for s in plan.sequences]
    assert min(used[:-1]) >= 0.995 * seq_len  # only the very last sequence is partial
    assert plan.fill >= 0.98
    # each book's pieces are in order and contiguous in the stream
    order = [(p.doc, p.start) for s in plan.sequences for p in s]
    assert order == sorted(order)


def test_long_collections_fill_the_room_small_items_leave():
    # 40 books of 36k tokens leave ~23k of room per 131k sequence (3 per bin); a 3M-token collection
    # (a text folder) pours into that room first, so fill stays ~1
    seq_len = 131072
    lengths = [36_000 + i for i in range(40)] + [30_000] * 100
    colls = list(range(40)) + [99] * 100
    bounds = [np.arange(200, n, 200) for n in lengths]
    plan = pack(lengths, colls, seq_len, boundaries=bounds, slack=int(0.005 * seq_len))
    _check_invariants(plan, lengths, colls)
    assert plan.fill >= 0.99
    book_pieces = [p for s in plan.sequences for p in s if p.doc < 40]
    assert len(book_pieces) == 40  # books (shorter than a sequence) are never split
    stream = [(p.doc, p.start) for s in plan.sequences for p in s if p.doc >= 40]
    assert stream == sorted(stream)  # the long collection stays in order
