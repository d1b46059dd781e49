"""Synthesized retrieval examples: exact lengths, answer spans, weights, determinism, config errors."""

import json

import numpy as np
import pytest

from bookft.config import from_dict
from bookft.errors import ConfigError, IngestError
from bookft.ingest.corpus_build import loss_weights_fn
from bookft.ingest.documents import Document
from bookft.ingest.example_writer import synthesize
from bookft.ingest.tokenize import train_bpe
from bookft.needles import NIAH_INSTRUCTION
from bookft.needles.examples import (
    MARK,
    DocumentPool,
    build_example,
    count_tokens,
    token_char_spans,
)
from bookft.needles.haystack import essay_sentences
from bookft.needles.retrieval_config import RetrievalConfig


@pytest.fixture(scope="module")
def material():
    gen = essay_sentences(1)
    docs = [{"text": "".join(next(gen) for _ in range(150)) + " Section 12.5 of 1999.", "kind": "text"}
            for _ in range(4)]
    frame = (NIAH_INSTRUCTION + "What is the special magic number for x mentioned in the provided text?\n"
             "The special magic number for x mentioned in the provided text is ") * 20
    tok = train_bpe([d["text"] for d in docs] + [frame], 600)  # knows the eval's phrasing
    return docs, tok


def test_example_has_exact_length_and_answer_span(material):
    docs, tok = material
    cfg = RetrievalConfig(rate=0.5)
    for length in (256, 512):
        rng = np.random.default_rng(length)
        text, answers, n = build_example(tok, rng, DocumentPool(docs), cfg, "magic_number", length, 7)
        assert len(answers) == 1
        (a0, a1), = answers
        assert n == count_tokens(tok, text) and length - 4 <= n <= length - 1
        ids = token_char_spans(tok, text)[0]  # as the ingest encodes (paragraph units)
        answer = tok.decode(ids[a0:a1])
        assert answer.strip().isdigit() and len(answer.strip()) == 7 and text.endswith(answer.strip())
        assert "special magic numbers for" in text and text.count(answer.strip()) == 2  # needle + answer
        body = text.split("\n\n")[0]
        assert not any(ch.isdigit() for ch in body.replace(answer.strip(), ""))  # scrubbed haystack


def test_weights_on_answer_only(material):
    docs, tok = material
    cfg = RetrievalConfig(rate=0.5, context_weight=0.05, answer_weight=1.0, corpus_weight=0.5)
    text, answers, n = build_example(tok, np.random.default_rng(0), DocumentPool(docs), cfg, "magic_number", 256, 1)
    (a0, a1), = answers
    ids = np.asarray(token_char_spans(tok, text)[0] + [0], np.int32)  # + EOS
    w = loss_weights_fn(tok, cfg)(Document("x", "c", "jsonl", text, meta={MARK: json.dumps([n, answers])}), ids)
    assert w.shape == ids.shape and np.all(w[a0:a1] == 1.0)
    assert w[n] == 1.0  # the EOS after the answer that ends the example: where the model learns to stop
    assert w.sum() == pytest.approx(a1 - a0 + 1 + 0.05 * (n - (a1 - a0)))
    plain = loss_weights_fn(tok, cfg)(Document("y", "c", "text", "hello"), ids)
    assert np.all(plain == 0.5)
    with pytest.raises(IngestError, match="tokens"):
        loss_weights_fn(tok, cfg)(Document("x", "c", "jsonl", text, meta={MARK: json.dumps([n + 9, answers])}), ids)


def test_synthesize_is_deterministic_across_workers(material, tmp_path):
    docs, tok = material
    cfg = RetrievalConfig(rate=0.5, lengths=(256, 512))
    a = synthesize(docs, tok, cfg, 512, 8, tmp_path / "a", workers=0)
    b = synthesize(docs, tok, cfg, 512, 8, tmp_path / "b", workers=2)
    assert a == b and a["files"] == 8 and a["examples"] >= 8
    for f in sorted((tmp_path / "a").glob("*.jsonl")):
        assert f.read_text() == (tmp_path / "b" / f.name).read_text()
        rows = [json.loads(x) for x in f.read_text().splitlines()]
        assert sum(json.loads(r[MARK])[0] + 1 for r in rows) <= 512  # one sequence per file
    with pytest.raises(IngestError, match="divide"):
        synthesize(docs, tok, RetrievalConfig(rate=0.5, lengths=(384,)), 512, 1, tmp_path / "c")


def test_repeated_questions_are_all_weighted(material):
    docs, tok = material
    cfg = RetrievalConfig(rate=0.5, questions=3)
    text, answers, n = build_example(tok, np.random.default_rng(5), DocumentPool(docs), cfg, "magic_number", 1024, 2)
    assert len(answers) == 3 and answers[-1][1] == n
    ids = token_char_spans(tok, text)[0]
    values = {tok.decode(ids[a0:a1]).strip() for a0, a1 in answers}
    assert len(values) == 1 and text.count(values.pop()) == 4  # needle + three answers


def test_ask_from_keeps_the_first_asking_far_from_the_fact(material):
    import re

    docs, tok = material
    cfg = RetrievalConfig(rate=0.5, questions=4, min_context=0.25, ask_from=0.75)
    built = [build_example(tok, np.random.default_rng(seed), DocumentPool(docs), cfg, "magic_number", 1024, seed)
             for seed in range(8)]
    built = [b for b in built if b is not None]  # None: a draw whose text cleaning would change
    assert len(built) >= 4
    for seed, (text, answers, _n) in enumerate(built):
        ids = token_char_spans(tok, text)[0]
        value = tok.decode(ids[answers[-1][0]:answers[-1][1]]).strip()
        after = text[text.index(value) + len(value):]  # everything after the fact (needle)
        ask = re.compile(r"What is the special magic number for [\w-]+ mentioned in the provided text\?\n"
                         r"The special magic number for [\w-]+ mentioned in the provided text is \d+\.?")
        hits = list(ask.finditer(after))
        assert len(hits) == len(answers) >= 3  # earlier askings + the final question
        before_first = len(after[: hits[0].start()].split())
        context = len(ask.sub(" ", after).split())  # context words after the fact
        assert before_first >= 0.7 * context, (seed, before_first, context)


def test_several_needles_each_asked_once(material):
    """retrieval.needles: n facts with distinct keys, each asked once at the end, every answer weighted
    and the copy of its own needle's value; the one-needle example is unchanged by the option."""
    import re

    docs, tok = material
    cfg = RetrievalConfig(rate=0.5, questions=4, min_context=0.25, lengths=(256, 1024), needles=(1, 4))
    checked = 0
    for seed in range(4):
        built = build_example(tok, np.random.default_rng(seed), DocumentPool(docs), cfg, "magic_number", 1024, seed,
                              needles=4)
        if built is None:
            continue
        text, answers, n = built
        assert len(answers) == 4 and answers[-1][1] == n and length_ok(n, 1024)
        facts = dict(re.findall(r"One of the special magic numbers for ([\w-]+) is: (\d+)\.", text))
        asked = re.findall(r"What is the special magic number for ([\w-]+) mentioned in the provided text\?\n"
                           r"The special magic number for \1 mentioned in the provided text is (\d+)", text)
        assert len(facts) == 4 and sorted(k for k, _ in asked) == sorted(facts)  # distinct keys, each asked once
        ids = token_char_spans(tok, text)[0]
        got = [tok.decode(ids[a0:a1]).strip() for a0, a1 in answers]
        assert got == [v for _, v in asked] and all(facts[k] == v for k, v in asked)
        first_q = text.index("What is the special")
        assert all(text.index(f"for {k} is: {v}.") < first_q for k, v in facts.items())  # all facts before
        checked += 1
    assert checked >= 2
    one = build_example(tok, np.random.default_rng(3), DocumentPool(docs), cfg, "magic_number", 1024, 3, needles=1)
    ref = build_example(tok, np.random.default_rng(3), DocumentPool(docs), RetrievalConfig(rate=0.5, questions=4,
                        min_context=0.25), "magic_number", 1024, 3)
    assert one == ref


def length_ok(n, length):
    return length - 4 <= n <= length - 1


def test_edge_depth_puts_needles_at_the_edges(material):
    from bookft.needles.examples import _magic

    docs, _ = material
    depths = [_magic(np.random.default_rng(s), DocumentPool(docs), RetrievalConfig(rate=0.5, edge_depth=0.5), 1)[2]
              for s in range(200)]
    edges = sum(d in (0.0, 1.0) for d in depths)
    assert 70 <= edges <= 130 and 0.0 in depths and 1.0 in depths  # about half
    plain = [_magic(np.random.default_rng(s), DocumentPool(docs), RetrievalConfig(rate=0.5), 1)[2] for s in range(50)]
    assert not any(d in (0.0, 1.0) for d in plain)


def test_edge_from_keeps_short_examples_uniform(material, monkeypatch):
    import bookft.needles.examples as retrieval

    docs, tok = material
    seen = []

    def spy(rng, pool, cfg, seed):
        seen.append(cfg.edge_depth)
        return real(rng, pool, cfg, seed)

    real = retrieval.KINDS["magic_number"]
    monkeypatch.setitem(retrieval.KINDS, "magic_number", spy)
    cfg = RetrievalConfig(rate=0.5, edge_depth=1.0, edge_from=512)
    for length in (256, 1024):
        build_example(tok, np.random.default_rng(0), DocumentPool(docs), cfg, "magic_number", length, 0)
    assert seen == [0.0, 1.0]


@pytest.mark.parametrize("bad", [{"rate": 1.0}, {"lengths": [32]}, {"length_shares": [1.0]},
                                 {"kinds": []}, {"context_weight": -1.0},
                                 {"questions": 0}, {"ask_from": 1.0}, {"edge_depth": 1.5}, {"edge_from": -1},
                                 {"needles": [2]}, {"lengths": [256, 512], "needles": [1, 0]}])
def test_config_errors(bad):
    with pytest.raises(ConfigError):
        from_dict(RetrievalConfig, bad, "retrieval")
