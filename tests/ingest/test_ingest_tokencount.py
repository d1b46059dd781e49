"""Incremental token counts (bookft.needles.tokencount) against encoding from scratch, and the
synthesized-retrieval build that reads its examples from caches the synthesizer filled."""

import json
import re

import numpy as np
import pytest

from bookft.config import from_dict
from bookft.ingest import IngestConfig
from bookft.ingest import corpus_build as B
from bookft.ingest import example_writer as W
from bookft.ingest.formats.text import jsonl_documents
from bookft.ingest.tokenize import encode_documents, train_bpe, units
from bookft.needles import NIAH_INSTRUCTION
from bookft.needles import examples as R
from bookft.needles.haystack import essay_sentences
from bookft.needles.tokencount import TokenCounter, Words

CUT = re.compile(r"(?<=\S) (?=\S)")


@pytest.fixture(scope="module")
def tok():
    gen = essay_sentences(3)
    texts = ["".join(next(gen) for _ in range(60)) for _ in range(3)]
    return train_bpe(texts + ["def f(x):\n    return x  # 42\n\n\n" * 20], 400)


def _texts():
    gen = essay_sentences(7)
    prose = "\n\n".join("".join(next(gen) for _ in range(4)) for _ in range(12))
    return [prose, "Room 12.5, call 555-0199 at 10:30 now.\n\n\nNext  line\twith tabs \n\nend",
            "déjà vu — naïve café: ﬁne “quotes” 😀 x\n\ny", "a", "", "\n\n", "one\n\n\n\ntwo\n\n"]


def _reference_spans(tok, text):
    ids, spans, base = [], [], 0
    for u in units(text):
        e = tok.encode(u, add_special_tokens=False)
        ids += e.ids
        spans += [[base + a, base + b] for a, b in e.offsets]
        base += len(u)
    return ids, spans


def test_counter_matches_encoding_each_unit(tok):
    c = TokenCounter(tok, max_units=3)  # tiny memo: clears on the way, same numbers
    for text in _texts() * 2:
        ref = tok.encode_batch(units(text), add_special_tokens=False)
        assert c.count(text) == sum(len(e.ids) for e in ref)
        ids, spans = c.spans(text)
        rids, rspans = _reference_spans(tok, text)
        assert ids == rids and spans.tolist() == rspans and spans.shape == (len(ids), 2)
    docs = _texts()
    via_counter = list(encode_documents(c, docs, 0, batch_chars=50))
    via_tok = list(encode_documents(tok, docs, 0, batch_chars=50))
    assert all(np.array_equal(a, b) for x, y in zip(via_counter, via_tok, strict=True)
               for a, b in zip(x, y, strict=True))


@pytest.mark.parametrize("chunk", [1, 7, 100, 5000])
def test_words_match_encoding_each_word(tok, chunk):
    for src in _texts():
        src = src.strip()
        cuts = sorted({0, len(src), *(m.start() for m in CUT.finditer(src))})
        words = [src[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]
        ref = np.cumsum([len(e.ids) for e in tok.encode_batch(words, add_special_tokens=False)]).astype(np.int64)
        w = Words(tok, src, chunk_chars=chunk)
        got = w.counts_upto(10**9)
        assert np.array_equal(got, ref) and w.cuts == (cuts if src else [])
        assert w.words(0, len(words) + 5) == words and w.text(0, len(words)) == src
        for target in (0, 3, int(ref[-1]) // 2 if len(ref) else 0):
            part = Words(tok, src, chunk_chars=chunk).counts_upto(target)
            assert np.array_equal(part, ref[:len(part)])
            assert len(part) == len(ref) or part[-1] > target  # one word beyond the target, when there is one
        w2 = Words(tok, src, chunk_chars=chunk)
        for i, word in enumerate(words):
            assert w2.word(i) == word


def test_jsonl_line_names_its_collection():
    lines = [{"text": "first", "bookft_collection": "c1", "x": 1}, {"text": "second", "bookft_collection": "c2"},
             {"text": "third", "bookft_collection": 5}]
    docs, entry = jsonl_documents("\n".join(json.dumps(x) for x in lines).encode(), "f.jsonl", "file")
    assert [d.collection for d in docs] == ["c1", "c2", "file"] and entry.status == "ingested"
    assert docs[0].meta == {"x": 1, "line": 1}  # the collection field is not kept as meta


def _retrieval_cfg(tmp_path, out):
    src = tmp_path / "src"
    if not src.is_dir():  # essays, and the eval's phrasing (so the small BPE knows it)
        gen = essay_sentences(1)
        files = {f"essay{i}.txt": "".join(next(gen) for _ in range(120)) for i in range(3)}
        files["frame.txt"] = (NIAH_INSTRUCTION + "What is the special magic number for x?\n") * 20
        src.mkdir()
        for name, text in files.items():
            (src / name).write_text(text)
    return from_dict(IngestConfig, {
        "out": str(out), "workers": 0, "tokenizer": {"vocab_size": 600}, "packing": {"seq_len": 512},
        "sources": [{"path": str(src)}],
        "retrieval": {"rate": 0.6, "lengths": [256, 512], "questions": 3, "min_context": 0.25}})


def test_build_reads_synthesized_examples_from_filled_caches(tmp_path, monkeypatch):
    filled = B.build_corpus(_retrieval_cfg(tmp_path, tmp_path / "a"))
    again = B.build_corpus(_retrieval_cfg(tmp_path, tmp_path / "a"))  # rerun
    n_files = len(list((tmp_path / "a" / "retrieval-sources").glob("*.jsonl")))
    assert n_files >= 1 and filled["retrieval"]["synthesized_sequences"] >= 2
    # the synthesized files were extracted and tokenized by the synthesizer, not by the build
    assert filled["work"]["extracted"] == 0 and filled["work"]["tokenized"] == 0
    monkeypatch.setattr(W, "_fill_cache", lambda *a: None)
    cold = B.build_corpus(_retrieval_cfg(tmp_path, tmp_path / "b"))
    assert cold["work"]["extracted"] == n_files and cold["work"]["tokenized"] == n_files
    assert filled["data_hash"] == again["data_hash"] == cold["data_hash"]
    assert filled["counts"]["sequences"] == cold["counts"]["sequences"]


def test_examples_from_code_with_blank_line_runs_are_not_discarded(tok):
    from bookft.needles.retrieval_config import RetrievalConfig

    gen = essay_sentences(2)
    code = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" + next(gen).strip() + "\n\n\n" for i in range(80))
    pool = R.DocumentPool([{"text": code, "kind": "code"}])
    cfg = RetrievalConfig(rate=0.5, questions=4, min_context=0.25, ask_from=0.75, phrasing="short")
    for seed in range(6):  # before: an asking drawn at the very end, or a blank-line run, discarded it
        ex = R.build_example(tok, np.random.default_rng(seed), pool, cfg, "magic_number", 1024, seed)
        assert ex is not None and "\n\n\n" not in ex[0] and len(ex[1]) >= 2 and ex[2] <= 1023
