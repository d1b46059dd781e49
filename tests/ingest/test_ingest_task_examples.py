"""Training examples of the RULER tasks, synthesized from the corpus being built: in the tokenizer's chat
template when it has one, as the eval asks, with the loss on exactly the answer's tokens."""

import json
import re
from pathlib import Path

import pytest

from bookft.config import from_dict
from bookft.corpus import open_corpus
from bookft.errors import ConfigError
from bookft.ingest import IngestConfig, build_corpus
from bookft.ingest.tokenize import train_bpe
from bookft.needles import NeedleSpec, make_task
from bookft.needles.haystack import essay_sentences
from bookft.needles.placement import skeleton
from bookft.needles.retrieval_config import RetrievalConfig
from bookft.needles.tokenizer import ModelTokenizer
from bookft.needles.train import GENERATOR, TRAIN_KINDS

TEMPLATE = ("{% for m in messages %}<s>{{ m['role'] }}\n{{ m['content'] }}</s>\n{% endfor %}"
            "{% if add_generation_prompt %}<s>assistant\n{% endif %}")
KINDS = ["multikey", "multivalue", "multiquery", "vartrack"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tasks")
    folder = tmp / "tokenizer"
    folder.mkdir()
    gen = essay_sentences(9)
    bpe = train_bpe(["".join(next(gen) for _ in range(2000)), "VAR ABCDE = VAR FGHIJ. 0123456789 " * 50], 500, 2)
    bpe.add_special_tokens(["<s>", "</s>"])
    bpe.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>", "bos_token": "<s>",
                                                              "chat_template": TEMPLATE}))
    src = tmp / "src"
    src.mkdir()
    gen = essay_sentences(3)
    for i in range(3):
        (src / f"essay{i}.txt").write_text("".join(next(gen) for _ in range(300)))
    cfg = from_dict(IngestConfig, {
        "out": str(tmp / "c"), "workers": 0, "tokenizer": {"path": str(folder)}, "packing": {"seq_len": 512},
        "sources": [{"path": str(src)}],
        "retrieval": {"rate": 0.5, "lengths": [256, 512], "kinds": KINDS, "context_weight": 0.0,
                      "answer_weight": 1.0, "corpus_weight": 1.0}})
    m = build_corpus(cfg)
    return m, open_corpus(tmp / "c"), ModelTokenizer.load(folder)


def test_every_task_kind_is_synthesized_in_the_chat_format(built):
    m, corpus, tok = built
    per_kind = m["retrieval"]["per_kind"]
    assert set(per_kind) == set(KINDS) and all(n > 0 for n in per_kind.values()), per_kind
    docs = [d for d in corpus.documents() if "retrieval-" in d["source"]]
    assert len(docs) == sum(per_kind.values())
    for d in docs:
        meta = json.loads(d["meta"])
        kind = meta["retrieval_kind"]
        # the eval's own prompt skeleton for this task, chat-rendered: what the example is made of
        pre, post = skeleton(make_task(NeedleSpec(task=kind), 0, 50.0), tok, chat=True)
        assert d["text"].startswith(pre), kind
        assert "</s>\n<s>assistant\n" in d["text"]
        n, answers = json.loads(meta["bookft_retrieval"])
        assert d["n_tokens"] == n + 1  # the build's tokens: the synthesizer's count, plus the EOS
        assert answers[-1][1] == n  # the answer ends the example


def test_the_loss_is_on_the_answer_and_its_end_of_turn_only(built):
    _, corpus, tok = built
    synthesized = {i for i, d in enumerate(corpus.documents()) if "retrieval-" in d["source"]}
    seen = 0
    for i in range(len(corpus)):
        s = corpus.sequence(i)
        for p in corpus.pieces(i):
            if p["doc"] not in synthesized:
                assert (s["loss_weights"][s["segment_ids"] == p["segment"]] == 1.0).all()  # corpus_weight
                continue
            ids = s["input_ids"][s["segment_ids"] == p["segment"]]
            wp = s["loss_weights"][s["segment_ids"] == p["segment"]]
            answer = tok.decode(ids[:-1][wp[:-1] == 1.0])
            assert re.fullmatch(r"(\d+|[A-Z]{5})(,? (\d+|[A-Z]{5}))*", answer.strip()), answer  # values or names
            assert tok.decode(ids[:-1]).endswith(answer)
            assert ids[-1] == tok.eos_id and wp[-1] == 1.0  # and the EOS that ends the turn
            seen += 1
    assert seen == len(synthesized)


def test_training_generator_examples_and_manifest(built, tmp_path):
    """retrieval.generator: train: the task examples come from the training generator (no eval template,
    no eval key), each row and retrieval.json record it, and the loss is on the answer only."""
    _, corpus0, _ = built
    tmp = Path(corpus0.path).parents[2]  # the fixture's folder: <tmp>/c/versions/0001
    cfg = from_dict(IngestConfig, {
        "out": str(tmp_path / "t"), "workers": 0, "tokenizer": {"path": str(tmp / "tokenizer")},
        "packing": {"seq_len": 512}, "sources": [{"path": str(tmp / "src")}],
        "retrieval": {"rate": 0.5, "lengths": [256, 512], "kinds": list(TRAIN_KINDS), "generator": "train",
                      "context_weight": 0.0, "answer_weight": 1.0, "corpus_weight": 1.0}})
    m = build_corpus(cfg)
    r = m["retrieval"]
    assert r["per_generator"] == {GENERATOR: r["examples"]} and r["examples"] > 0
    assert r["settings"]["generator"] == "train" and set(r["per_kind"]) == set(TRAIN_KINDS)
    corpus = open_corpus(tmp_path / "t")
    docs = [d for d in corpus.documents() if "retrieval-" in d["source"]]
    assert len(docs) == r["examples"]
    for d in docs:
        meta = json.loads(d["meta"])
        assert meta["retrieval_generator"] == GENERATOR
        assert "special magic" not in d["text"] and "VAR " not in d["text"]
        assert "chain(s) of variable assignment" not in d["text"]
        n, answers = json.loads(meta["bookft_retrieval"])
        assert d["n_tokens"] == n + 1 and answers[-1][1] == n
    # the eval generator's rows (the default) carry no generator field: the sample's data is unchanged
    assert all("retrieval_generator" not in json.loads(d["meta"]) for d in corpus0.documents()
               if "retrieval-" in d["source"])


def test_follow_up_questions_share_one_context_and_each_answer_is_learned(built, tmp_path):
    """retrieval.asks: an example holds several tasks' needles and asks them in turns of the chat; the
    loss is on every answer (each earlier one through its end of turn), nowhere else."""
    _, corpus0, tok = built
    tmp = Path(corpus0.path).parents[2]
    cfg = from_dict(IngestConfig, {
        "out": str(tmp_path / "a"), "workers": 0, "tokenizer": {"path": str(tmp / "tokenizer")},
        "packing": {"seq_len": 1024}, "sources": [{"path": str(tmp / "src")}],
        "retrieval": {"rate": 0.6, "lengths": [512, 1024], "asks": [2, 3], "kinds": list(TRAIN_KINDS),
                      "generator": "train", "context_weight": 0.0, "answer_weight": 1.0, "corpus_weight": 1.0}})
    m = build_corpus(cfg)
    assert m["retrieval"]["follow_ups"] > 0
    corpus = open_corpus(tmp_path / "a")
    docs = {i: d for i, d in enumerate(corpus.documents()) if "retrieval-" in d["source"]}
    asked = 0
    for i in range(len(corpus)):
        s = corpus.sequence(i)
        for p in corpus.pieces(i):
            if p["doc"] not in docs:
                continue
            d = docs[p["doc"]]
            meta = json.loads(d["meta"])
            follow = meta["retrieval_follow_ups"].split(",")
            assert len(follow) == {512: 1, 1024: 2}[meta["retrieval_length"]] and set(follow) <= set(TRAIN_KINDS)
            turns = 1 + len(follow)
            asked += turns
            assert d["text"].count("<s>user\n") == turns and d["text"].count("<s>assistant\n") == turns
            ids = s["input_ids"][s["segment_ids"] == p["segment"]]
            w = s["loss_weights"][s["segment_ids"] == p["segment"]]
            runs = [r for r in "".join("1" if x == 1.0 else "0" for x in w).split("0") if r]
            assert len(runs) == turns and set(w.tolist()) <= {0.0, 1.0}
            edges = [j for j in range(1, len(w)) if w[j] != w[j - 1]] + [len(w)]
            for a0, a1 in zip(edges[::2], edges[1::2], strict=True):
                answer = tok.decode(ids[a0:a1])
                assert answer.endswith("</s>") and answer[:-4].strip() and "<s>" not in answer, answer
                assert tok.decode(ids[:a0]).rsplit("<s>", 1)[1].startswith("assistant\n")  # in an answer turn
    assert asked > len(docs)


def test_follow_ups_without_a_chat_template_are_plain_lines():
    from bookft.needles.task_examples import _asked_in_turns
    from bookft.needles.train import make_train_task

    tasks = [make_train_task(k, 3, 50.0) for k in ("multikey", "vartrack", "niah")]
    task, spans = _asked_in_turns(tasks, ("\n\n", "\n"))
    assert len(task.needles) == sum(len(t.needles) for t in tasks)
    got = [task.answer[len(task.answer) + a0:len(task.answer) + a1 or None] for a0, a1 in spans]
    assert got == [tasks[0].answer + "\n", tasks[1].answer + "\n", tasks[2].answer]
    assert f"{tasks[0].answer}\n\n{tasks[1].question}\n{tasks[1].answer_prefix}{tasks[1].answer}\n\n" in task.answer
    with pytest.raises(ConfigError, match="retrieval.asks"):
        RetrievalConfig(lengths=(256, 512), asks=(2,)).validate()
