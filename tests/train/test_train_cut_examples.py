"""Curriculum rows cut from longer sequences drop the loss of a retrieval example they cut."""

import numpy as np

from bookft.train.data import drop_cut_example


def _row(pos0, weights, seg=None):
    n = len(weights)
    seg = np.ones(n, np.int32) if seg is None else np.asarray(seg, np.int32)
    pos = np.zeros(n, np.int32)
    for i in range(n):
        pos[i] = pos0 if i == 0 else (pos[i - 1] + 1 if seg[i] == seg[i - 1] else 0)
    return {"input_ids": np.arange(n, dtype=np.int32), "targets": np.arange(n, dtype=np.int32),
            "weights": np.asarray(weights, np.float32), "positions": pos, "segment_ids": seg}


def test_cut_retrieval_example_loses_its_answers_only():
    # the row starts inside document 1 (an example with answers at weight 1), then document 2 starts
    row = _row(40, [0.05, 0.05, 1, 1, 0, 0.05, 1, 1], seg=[1, 1, 1, 1, 1, 2, 2, 2])
    out = drop_cut_example(row)
    np.testing.assert_array_equal(out["weights"], np.float32([0, 0, 0, 0, 0, 0.05, 1, 1]))
    assert row["weights"][2] == 1  # the input is not modified


def test_cut_plain_text_and_whole_examples_keep_their_weights():
    plain = _row(40, [0.05] * 6)  # ordinary text cut mid-document: next-token loss needs no evidence
    np.testing.assert_array_equal(drop_cut_example(plain)["weights"], plain["weights"])
    whole = _row(0, [0.05, 0.05, 1, 1])  # the example starts in this row
    np.testing.assert_array_equal(drop_cut_example(whole)["weights"], whole["weights"])


class _Corpus:
    """Three sequences of 8 tokens: plain text, two examples of 4 tokens, one example of 8."""

    def __init__(self, path):
        self.path, self.seq_len = path, 8
        (path / "retrieval.json").write_text("{}")
        ex = [0.05, 0.05, 1, 1]
        self.seqs = [
            {"segment_ids": np.ones(8, np.int32), "loss_weights": np.full(8, 0.05, np.float32)},
            {"segment_ids": np.repeat([1, 2], 4).astype(np.int32), "loss_weights": np.float32(ex + ex)},
            {"segment_ids": np.ones(8, np.int32), "loss_weights": np.float32([0.05] * 6 + [1, 1])},
        ]
        for s in self.seqs:
            s["input_ids"] = np.arange(8, dtype=np.int32)
            s["positions"] = np.arange(8, dtype=np.int32)

    def __len__(self):
        return len(self.seqs)

    def sequence(self, i):
        return self.seqs[i]


def test_stage_draws_only_sequences_whose_examples_fit(tmp_path):
    from bookft.train.data import Batches, fitting_row_len

    corpus = _Corpus(tmp_path)
    assert [fitting_row_len(s) for s in corpus.seqs] == [0, 4, 8]
    b = Batches(corpus, batch_size=1, seed=0)
    np.testing.assert_array_equal(b.eligible(4), [0, 1])
    assert b.eligible(8) is None
    assert {b.sequence_index(i, 4) for i in range(20)} == {0, 1}
    assert {b.sequence_index(i, 8) for i in range(20)} == {0, 1, 2}
    # an example straddling a row boundary (tokens 2..5) needs rows of 8
    straddle = {"segment_ids": np.int32([1, 1, 2, 2, 2, 2, 3, 3]),
                "loss_weights": np.float32([0.05, 0.05, 0.05, 0.05, 1, 1, 0.05, 0.05])}
    assert fitting_row_len(straddle) == 8
