"""Scoring: a stub that copies the needle value scores 1.0, a random model about 0; RULER metrics."""

from __future__ import annotations

import numpy as np
import pytest
from eval_helpers import OracleModel, byte_bpe, random_logits_fn, wordpiece

from bookft.eval import EvalConfig, effective_length, run_niah, string_match_all
from bookft.needles.tokenizer import ModelTokenizer


@pytest.fixture(scope="module")
def bpe():
    return ModelTokenizer.load(byte_bpe())


def test_string_match_all_is_ruler():
    assert string_match_all("The numbers are 123 and 456.", ["123", "456"]) == 1.0
    assert string_match_all("only 123", ["123", "456"]) == 0.5
    assert string_match_all("ABCDE fghij", ["abcde", "FGHIJ", "KLMNO"]) == pytest.approx(2 / 3)
    assert string_match_all("anything", []) == 0.0


def test_effective_length():
    assert effective_length({1024: 0.95, 2048: 0.9, 4096: 0.5, 8192: 0.9}, 0.85) == 2048
    assert effective_length({1024: 0.5, 2048: 0.9}, 0.85) is None
    assert effective_length({1024: 0.85}, 0.85) == 1024


@pytest.mark.parametrize("task,phrasing", [("niah", "ruler"), ("niah", "short"), ("multikey", "ruler"),
                                          ("multivalue", "ruler"), ("multiquery", "ruler"),
                                          ("passkey", "ruler"), ("vartrack", "ruler")])
def test_oracle_scores_one_random_scores_zero(bpe, task, phrasing):
    cfg = EvalConfig(task=task, phrasing=phrasing, lengths=(600, 700), depths=(0, 50, 100), seeds=(0, 1),
                     scoring=("teacher_forced", "generate"), batch_size=4,
                     haystack="noise" if task == "passkey" else "essay")
    oracle = OracleModel(bpe, bpe.vocab_size)
    res = run_niah(None, bpe, cfg, logits_fn=oracle.logits_fn, generate_fn=oracle.generate_fn,
                   progress=False)
    assert len(res["cells"]) == 6
    for c in res["cells"]:
        assert c["scores"]["teacher_forced"] == 1.0, c
        assert c["scores"]["generate"] == 1.0, c
        assert c["per_seed"][0]["predicted"] == c["per_seed"][0]["answer"]
    assert res["summary"]["mean"] == 1.0 and res["summary"]["effective_length"] == 700
    # cells of one length are batched at that length's bucket (600 -> 640, 700 -> 768):
    # 3 depths x 2 seeds = 6 samples -> 4 + 2; generation batches the same way (prompt lengths may differ)
    assert oracle.shapes == [(4, 640), (2, 640), (4, 768), (2, 768)]
    assert [len(b) for b in oracle.prompt_lengths] == [4, 2, 4, 2]
    rand = run_niah(None, bpe, EvalConfig(task=task, lengths=(600, 700), depths=(0, 50, 100), seeds=(0, 1)),
                    logits_fn=random_logits_fn(bpe.vocab_size), progress=False)
    assert rand["summary"]["mean"] <= 0.05
    assert rand["summary"]["effective_length"] is None
    tokacc = np.mean([c["scores"]["token_accuracy"] for c in rand["cells"]])
    assert tokacc < 0.1  # about 1 / vocab


def test_oracle_with_wordpiece_and_multi_answers():
    tok = ModelTokenizer.load(wordpiece())
    cfg = EvalConfig(lengths=(512,), depths=(25, 75), seeds=(2,), scoring=("teacher_forced",))
    oracle = OracleModel(tok, tok.vocab_size)
    res = run_niah(None, tok, cfg, logits_fn=oracle.logits_fn, progress=False)
    assert res["summary"]["mean"] == 1.0


def test_logits_tail_and_padding(bpe):
    """Padding after the answer is segment 0; a logits_fn giving only the tail is understood."""
    seen = {}

    def fn(ids, pos, seg):
        seen["seg"], seen["pos"] = seg.copy(), pos.copy()
        return np.zeros((ids.shape[0], 4, bpe.vocab_size))  # too short a tail for a 7-digit answer

    cfg = EvalConfig(lengths=(300,), depths=(50,), seeds=(0,), length_multiple=64)
    from bookft.errors import EvalError

    with pytest.raises(EvalError, match="logits_tail"):
        run_niah(None, bpe, cfg, logits_fn=fn, progress=False)
    seg, pos = seen["seg"], seen["pos"]
    assert seg.shape == (1, 320)  # 300 rounded up to a multiple of 64
    n = int(seg[0].sum())
    assert n <= 300 and np.all(seg[0, n:] == 0) and np.array_equal(pos[0, :n], np.arange(n))


def test_logits_window_with_start(bpe):
    """A logits_fn may return (logits, start): a window ending at the real tokens, before padding."""
    from bookft.eval.haystack import build_haystack
    from bookft.eval.scoring import teacher_forced
    from bookft.needles import make_task
    from bookft.needles.placement import build_sample

    hay = build_haystack("essay", bpe, 0, 800)
    samples = [build_sample(make_task(EvalConfig(), 0, d), hay, bpe, 300, d) for d in (0.0, 100.0)]

    def window(ids, pos, seg):  # a "model" that predicts the true next token, from a 32-token window
        end = int(seg.sum(1).max())
        logits = np.zeros((ids.shape[0], 32, bpe.vocab_size))
        for t in range(32):
            nxt = ids[:, end - 32 + t + 1] if end - 32 + t + 1 < ids.shape[1] else 0
            logits[np.arange(ids.shape[0]), t, nxt] = 1.0
        return logits, end - 32

    scores = teacher_forced(window, samples, 1024)  # 700+ padding positions after the answers
    assert [r["exact"] for r in scores] == [1.0, 1.0]
    from bookft.errors import EvalError

    with pytest.raises(EvalError, match="logits cover positions 0..31"):
        teacher_forced(lambda i, p, s: (np.zeros((2, 32, bpe.vocab_size)), 0), samples, 1024)
