"""Needle placement: decodes back exactly, sits within one sentence of the nominal depth, no specials."""

from __future__ import annotations

import re

import numpy as np
import pytest
from eval_helpers import byte_bpe, wordpiece

from bookft.eval.config import EvalConfig
from bookft.eval.grid import grid_depths, grid_lengths
from bookft.eval.haystack import build_haystack
from bookft.needles import make_task
from bookft.needles.haystack import split_sentences
from bookft.needles.placement import build_sample
from bookft.needles.tokenizer import ModelTokenizer


@pytest.fixture(scope="module", params=["byte_bpe", "wordpiece"])
def tok(request):
    return ModelTokenizer.load({"byte_bpe": byte_bpe, "wordpiece": wordpiece}[request.param]())


def _squash(s: str) -> str:
    return re.sub(r"\s+", "", s)


@pytest.mark.parametrize("task", ["niah", "multikey", "multivalue", "multiquery", "passkey", "vartrack"])
@pytest.mark.parametrize("kind", ["essay", "noise"])
def test_needles_decode_exactly_near_nominal_depth(tok, task, kind):
    hay = build_haystack(kind, tok, seed=3, min_tokens=1800)
    byte_level = tok.tok.decoder is not None and "ByteLevel" in str(tok.tok.decoder)
    for length in (600, 1500):
        for depth in (0.0, 10.0, 50.0, 90.0, 100.0):
            inst = make_task(EvalConfig(task=task), 3, depth)
            s = build_sample(inst, hay, tok, length, depth)
            text = "".join(hay.chunks)
            assert length - 8 <= s.actual_length <= length
            for needle, (a, b) in zip(inst.needles, s.needle_spans, strict=True):
                decoded = tok.decode(s.input_ids[a:b]).strip()
                if byte_level:
                    assert decoded == needle.text  # byte-level BPE round-trips exactly
                else:  # WordPiece does not keep spaces around punctuation; the characters must match
                    assert _squash(decoded) == _squash(needle.text)
                assert needle.text not in text  # it came from the needle, not the filler
            # the answer tokens are the answer
            a0, a1 = s.answer_span
            assert _squash(tok.decode(s.input_ids[a0:a1])) == _squash(inst.answer)
            assert a1 == s.actual_length
            # within one sentence of the nominal depth (in haystack tokens)
            c0, c1 = s.context_span
            hay_tokens = c1 - c0 - sum(b - a for a, b in s.needle_spans)
            err_tokens = abs(s.actual_depth - depth) / 100 * hay_tokens
            assert err_tokens <= max(hay.counts) + 2, (depth, s.actual_depth, err_tokens)
            # no special token inside the sequence except the tokenizer's own prefix (BOS)
            k = len(tok.prefix_ids)
            assert list(s.input_ids[:k]) == tok.prefix_ids
            assert not set(s.input_ids[k:].tolist()) & tok.special_ids


def test_depth_endpoints_and_ordering(tok):
    hay = build_haystack("essay", tok, seed=0, min_tokens=1500)
    inst0 = make_task(EvalConfig(), 0, 0.0)
    s0 = build_sample(inst0, hay, tok, 1024, 0.0)
    s100 = build_sample(make_task(EvalConfig(), 0, 100.0), hay, tok, 1024, 100.0)
    assert s0.actual_depth == 0.0 and s100.actual_depth == 100.0
    assert s0.needle_spans[0][0] == s0.context_span[0]
    # depth 100: only the question follows the needle
    assert s100.needle_spans[0][1] == s100.context_span[1]


def test_special_strings_in_haystack_are_scrubbed():
    tok = ModelTokenizer.load(byte_bpe())
    text = "A line with a trap <|endoftext|> inside. Another <s> sentence here. " * 60
    chunks = split_sentences(text)
    assert "".join(chunks) == text
    clean = [tok.sanitize(c) for c in chunks]
    assert not any("<|endoftext|>" in c or "<s>" in c for c in clean)
    ids = tok.encode("".join(clean)).ids
    assert not set(ids) & tok.special_ids


def test_split_sentences_round_trips():
    text = 'He said "stop." Then left!  Why? Because.\n\ndef f():\n    return 1\nend'
    chunks = split_sentences(text)
    assert "".join(chunks) == text
    assert chunks[0] == 'He said "stop." '
    assert len(chunks) == 7


def test_grid_spacing():
    cfg = EvalConfig(min_length=1024, max_length=8192, num_lengths=4, length_spacing="log")
    assert grid_lengths(cfg) == [1024, 2048, 4096, 8192]
    lin = EvalConfig(min_length=1000, max_length=4000, num_lengths=4, length_spacing="linear",
                     length_multiple=64)
    assert grid_lengths(lin) == [1024, 1984, 3008, 3968]
    assert grid_depths(EvalConfig(num_depths=5)) == [0.0, 25.0, 50.0, 75.0, 100.0]
    sig = grid_depths(EvalConfig(num_depths=7, depth_spacing="sigmoid"))
    assert sig[0] == 0.0 and sig[-1] == 100.0 and sig[3] == 50.0
    gaps = np.diff(sig)
    assert np.all(gaps > 0) and gaps[0] < gaps[1] < gaps[2]  # crowded near 0 % and 100 %
    assert sig[1] == pytest.approx(3.44, abs=0.01)  # 100 / (1 + exp(-0.1 * (16.67 - 50)))
    assert grid_lengths(EvalConfig(lengths=(4096, 1024, 1024))) == [1024, 4096]
