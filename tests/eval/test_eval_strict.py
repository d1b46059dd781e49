"""Strict scoring beside RULER's, the generation budget, Wilson intervals and the depth breakdown.

A stub that lists every number of the prompt scores 1.0 under RULER's string match on tasks
without distractors, and 0.0 strict; the oracle (the needle's value, nothing else) scores 1.0 on both."""

from __future__ import annotations

import re

import numpy as np
import pytest
from eval_helpers import OracleModel, byte_bpe
from scipy.stats import binomtest

from bookft.eval import EvalConfig, run_niah
from bookft.eval.protocol import generation_budget
from bookft.eval.stats import interval, wilson
from bookft.eval.strict import answer_line, strict_match
from bookft.needles.tokenizer import ModelTokenizer


@pytest.fixture(scope="module")
def bpe():
    return ModelTokenizer.load(byte_bpe())


def test_strict_match_numbers_and_names():
    assert strict_match(" 1234567.", ["1234567"]) == 1.0
    assert strict_match("\n\n1234567\nand also 7654321", ["1234567"]) == 1.0  # the first line is the answer
    assert strict_match("1234567, 7654321", ["1234567"]) == 0.0  # another number
    assert strict_match("\n\n1. 5. 2. 3. 4. 5.", ["1234567"]) == 0.0  # the base's list
    assert strict_match("12345678", ["1234567"]) == 0.0  # a longer number holding it
    assert strict_match("7654321, 1234567", ["1234567", "7654321"]) == 1.0
    assert strict_match("7654321", ["1234567", "7654321"]) == 0.0  # not every item
    vt = r"\b[A-Z]{5}\b"
    assert strict_match("ABCDE FGHIJ", ["ABCDE", "FGHIJ"], vt) == 1.0
    assert strict_match("ABCDE FGHIJ KLMNO", ["ABCDE", "FGHIJ"], vt) == 0.0
    towns = ("Ledbury", "Oundle", "Kirkwall")
    assert strict_match(" Ledbury.", ["Ledbury"], "", towns) == 1.0
    assert strict_match(" Ledbury or Oundle", ["Ledbury"], "", towns) == 0.0
    assert strict_match(" ledbury", ["Ledbury"], "", towns) == 1.0  # case-insensitive
    assert answer_line("  \n x y\nz") == "x y" and strict_match("", ["1"]) == 0.0 and strict_match("x", []) == 0.0


def test_wilson_matches_scipy():
    for k, n in [(9, 10), (0, 10), (10, 10), (5, 10), (37, 50), (1, 20)]:
        ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        assert wilson(k, n) == pytest.approx((ci.low, ci.high), abs=1e-9)
    lo, hi = wilson(9, 10)
    assert round(lo, 2) == 0.60 and round(hi, 2) == 0.98  # the "0.9 of 10 draws"
    assert interval([1, 1, 0, 1]) == {"draws": 4, "score": 0.75, "ci": [round(x, 4) for x in wilson(3, 4)]}


class ListerModel(OracleModel):
    """Answers with every number in the prompt's context (what scores 1.0 under substring match)."""

    def generate_fn(self, prompts, max_new):
        self.prompt_lengths.append([len(p) for p in prompts])
        self.budgets = getattr(self, "budgets", []) + [max_new]
        out = np.zeros((len(prompts), max_new), dtype=np.int32)
        for i, row in enumerate(prompts):
            text = self.tok.decode([int(t) for t in row])
            cont = self.tok.encode(" " + ", ".join(dict.fromkeys(re.findall(r"\d{5,}", text)))).ids[:max_new]
            out[i, :len(cont)] = cont
        return out


@pytest.mark.parametrize("task,lister_strict", [("multikey", 0.0), ("multiquery", 1.0), ("niah", 1.0)])
def test_strict_beside_ruler(bpe, task, lister_strict):
    """multikey: every number of the context holds the answer (ruler 1.0) and the distractors' values
    (strict 0.0); multiquery and niah: the context's numbers are exactly the answer (both 1.0)."""
    cfg = EvalConfig(task=task, lengths=(600,), depths=(10, 90), seeds=(0, 1, 2), scoring=("strict",),
                     batch_size=3, haystack="essay", max_new_tokens=80)
    res = {name: run_niah(None, bpe, cfg, generate_fn=m(bpe, bpe.vocab_size).generate_fn, progress=False)
           for name, m in (("oracle", OracleModel), ("lister", ListerModel))}
    assert res["oracle"]["stats"]["strict"]["score"] == 1.0 and res["oracle"]["stats"]["ruler"]["score"] == 1.0
    assert res["lister"]["stats"]["ruler"]["score"] == 1.0  # every number of the context: "right" by substring
    assert res["lister"]["stats"]["strict"]["score"] == lister_strict
    r = res["lister"]
    assert r["summary"]["score"] == "strict" and r["split"] == "none"
    assert r["stats"]["strict"]["draws"] == 6 and set(r["stats"]["strict"]["per_depth"]) == {"10.0", "90.0"}
    cell = r["cells"][0]
    assert set(cell["ci"]) == {"strict", "ruler"} and cell["per_seed"][0]["output"]
    assert r["stats"]["strict"]["per_depth"]["10.0"]["ci"] == [round(x, 4) for x in wilson(3 * lister_strict, 3)]


def test_one_budget_for_every_model(bpe):
    lister = ListerModel(bpe, bpe.vocab_size)
    for scoring, want in ((("strict",), [64]), (("generate",), None)):
        lister.budgets = []
        cfg = EvalConfig(task="niah", lengths=(400,), depths=(50,), seeds=(0,), scoring=scoring, haystack="essay")
        run_niah(None, bpe, cfg, generate_fn=lister.generate_fn, progress=False)
        answer = len(bpe.encode(" 1234567").ids)
        assert lister.budgets == (want or [answer + 8]), scoring  # generate alone: answer + 8 as before

    class S:  # a sample whose answer needs more than 64 tokens
        answer_span = (0, 100)

    assert generation_budget(EvalConfig(scoring=("strict",)), [S()]) == 108
    assert generation_budget(EvalConfig(scoring=("strict",), max_new_tokens=20), [S()]) == 20


def test_scoring_as_one_string():
    assert EvalConfig(scoring="strict").scoring == ("strict",)
    assert EvalConfig(scoring="strict,teacher_forced").scoring == ("strict", "teacher_forced")


def test_strict_results_report_and_reload(bpe, tmp_path):
    from bookft.eval.report import load_results, write_report

    cfg = EvalConfig(task="multikey", lengths=(500, 600), depths=(0, 100), seeds=(0, 1), scoring=("strict",),
                     haystack="essay", split="test")
    res = run_niah(None, bpe, cfg, generate_fn=ListerModel(bpe, bpe.vocab_size).generate_fn, progress=False)
    write_report(res, tmp_path)
    back = load_results(tmp_path)
    assert back["split"] == "test" and back["stats"] == res["stats"] and back["seeds"] == [20_000, 20_001]
    assert back["stats"]["strict"]["draws"] == 8 and set(back["stats"]["ruler"]["per_length"]) == {"500", "600"}
    assert (tmp_path / "report.html").is_file()


def test_headline_rows(bpe):
    from bookft.eval.stats import headline_rows

    cfg = EvalConfig(task="multikey", lengths=(500, 600), depths=(0, 50, 100), seeds=(0, 1, 2), scoring=("strict",),
                     haystack="essay", split="dev")
    res = run_niah(None, bpe, cfg, generate_fn=ListerModel(bpe, bpe.vocab_size).generate_fn, progress=False)
    rows = headline_rows(res, "base", lengths=(600,))
    assert rows == [
        {"task": "multikey", "length": 600, "model": "base", "scoring": "strict", "split": "dev", "draws": 9,
         "score": 0.0, "ci": [0.0, round(wilson(0, 9)[1], 4)]},
        {"task": "multikey", "length": 600, "model": "base", "scoring": "ruler", "split": "dev", "draws": 9,
         "score": 1.0, "ci": [round(wilson(9, 9)[0], 4), 1.0]}]
