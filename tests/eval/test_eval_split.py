"""Frozen dev/test splits: own seeds, own books, and haystacks of different seeds that share no sentence."""

from __future__ import annotations

import json
from itertools import combinations

import datasets
import pytest
from eval_helpers import OracleModel, byte_bpe

from bookft.errors import EvalError
from bookft.eval import EvalConfig, run_niah
from bookft.eval.protocol import grid_haystacks
from bookft.eval.split import split_documents, split_haystacks, split_seeds, split_sources
from bookft.needles.haystack import essay_sentences
from bookft.needles.tokenizer import ModelTokenizer

BOOKS = ["books/a.txt", "books/b.txt", "books/c.txt", "books/d.txt", "books/e.txt"]


@pytest.fixture(scope="module")
def bpe():
    return ModelTokenizer.load(byte_bpe())


def _docs() -> list[dict]:
    """Five books of unique sentences (each tagged with its book and index), one passage cut from book a
    (as the flow's `eval short` passages are) and a second document of book c."""
    gen = essay_sentences(4)
    docs = []
    for b in BOOKS:
        docs.append({"source": b, "text": "".join(f"{next(gen).strip()[:-1]}, Mark {b[6]} {i}. " for i in range(300))})
    docs.append({"source": "short-text/passage-00.txt", "text": docs[0]["text"][:2000]})
    docs.append({"source": "books/c.txt", "text": "".join(f"Part two of c, line {i}. " for i in range(200))})
    return docs


def test_split_seeds():
    assert split_seeds(None, (0, 1)) == [0, 1]
    assert split_seeds("dev", (0, 1, 49)) == [10_000, 10_001, 10_049]
    assert split_seeds("test", range(50)) == list(range(20_000, 20_050))
    assert not set(split_seeds("dev", range(50))) & set(split_seeds("test", range(50)))
    with pytest.raises(EvalError, match="seeds are in 0..9999"):
        split_seeds("test", (10_000,))


def test_split_books():
    assert split_sources(BOOKS, "test") == ["books/a.txt", "books/c.txt", "books/e.txt"]
    assert split_sources(BOOKS, "dev") == ["books/b.txt", "books/d.txt"]
    docs = _docs()
    test, dev = split_documents(docs, "test", {5}), split_documents(docs, "dev", {5})
    assert test == [0, 2, 4, 6] and dev == [1, 3] and not set(test) & set(dev)
    with pytest.raises(EvalError, match="at least two held-out source files"):
        split_sources(["one.txt"], "dev")


@pytest.mark.parametrize("split", ["dev", "test"])
def test_haystacks_of_seeds_do_not_overlap(bpe, split):
    docs = _docs()
    hays = split_haystacks(docs, split, 6, bpe, 600, held_out={5})
    assert all(h.total_tokens >= 600 for h in hays)
    sets = [set(h.chunks) for h in hays]
    assert all(not (a & b) for a, b in combinations(sets, 2))  # no sentence in two seeds' haystacks
    mine = {b[6] for b in split_sources(BOOKS, split)}
    marks = {c.split("Mark ")[1][0] for h in hays for c in h.chunks if "Mark " in c}
    assert marks <= mine  # only the split's books
    # the cut passage (document 5) is never haystack: its sentences appear once, in book a's block
    seen = [c for h in hays for c in h.chunks]
    assert len(seen) == len(set(seen))
    with pytest.raises(EvalError, match="seeds were asked"):
        split_haystacks(docs, split, 200, bpe, 600, held_out={5})


def test_unsplit_corpus_haystacks_overlap_and_split_ones_do_not(bpe, tmp_path):
    """The grid on a corpus directory: today's seeds s, s+1 start one document apart and share text;
    the split's seeds share none, and results name their split."""
    docs_dir = tmp_path / "v" / "documents"
    datasets.Dataset.from_list(_docs()).save_to_disk(str(docs_dir))
    (tmp_path / "v" / "manifest.json").write_text(json.dumps({"seq_len": 512, "mix": {"held_out": [5]}}))
    plain = EvalConfig(haystack="corpus", corpus=str(tmp_path / "v"), lengths=(500,), seeds=(0, 1, 2))
    hays = grid_haystacks(plain, bpe, [0, 1, 2], 3000)
    assert set(hays[0].chunks) & set(hays[1].chunks)  # the overlap the split removes
    split = EvalConfig(haystack="corpus", corpus=str(tmp_path / "v"), lengths=(500,), seeds=(0, 1, 2), split="test")
    seeds = split_seeds("test", (0, 1, 2))
    hays = grid_haystacks(split, bpe, seeds, 3000)
    assert all(not (set(hays[a].chunks) & set(hays[b].chunks)) for a, b in combinations(seeds, 2))
    cfg = EvalConfig(task="multikey", haystack="corpus", corpus=str(tmp_path / "v"), lengths=(500,), depths=(50,),
                     seeds=(0, 1), split="dev", scoring=("strict",))
    oracle = OracleModel(bpe, bpe.vocab_size)
    res = run_niah(None, bpe, cfg, generate_fn=oracle.generate_fn, progress=False)
    assert res["split"] == "dev" and res["seeds"] == [10_000, 10_001] and res["settings"]["split"] == "dev"
    assert res["stats"]["strict"]["score"] == 1.0
