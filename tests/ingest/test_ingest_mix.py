"""The mix (issue 20): per-source weights, length upsampling, a short source, overflow policies, held-out
documents; the realised mix is counted from the written sequences, independently of the manifest."""

import json
from collections import Counter, defaultdict

import datasets
import numpy as np
import pytest

from bookft.config import from_dict
from bookft.errors import ConfigError
from bookft.ingest import IngestConfig, build_corpus

WORDS = "river stone lantern harbor meadow archive winter summer quiet ancient merchant sailor".split()
SEQ = 256


def _jsonl(path, seed, sizes):
    rng = np.random.default_rng(seed)
    lines = []
    for i, n in enumerate(sizes):
        text = " ".join(rng.choice(WORDS, size=n)).capitalize() + "."
        lines.append(json.dumps({"text": text, "bookft_collection": f"{path.stem}-{i}"}))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("mixsrc")
    return {"books": _jsonl(d / "books.jsonl", 0, [40, 900, 60, 1500, 80, 700, 50, 1200] * 3),
            "code": _jsonl(d / "code.jsonl", 1, [30, 400, 20, 600, 90, 25] * 4),
            "short": _jsonl(d / "short.jsonl", 2, [15, 30, 45, 20, 35] * 16)}


def _build(tmp_path, sources, entries, mix=None, name="c"):
    cfg = from_dict(IngestConfig, {"out": str(tmp_path / name), "workers": 0, "tokenizer": {"vocab_size": 320},
                                   "packing": {"seq_len": SEQ}, "mix": mix or {},
                                   "sources": [{"path": sources[k], "name": k, **v} for k, v in entries.items()]})
    m = build_corpus(cfg)
    cur = tmp_path / name / "current"
    return m, datasets.load_from_disk(str(cur / "documents")), datasets.load_from_disk(str(cur / "sequences"))


def _realised(docs, seqs):
    """Tokens per source name and per document, from the sequences' pieces."""
    names = [s.split("/")[-1].split(".jsonl")[0] for s in docs["source"]]
    per_source, per_doc = Counter(), Counter()
    for idx, lens in zip(seqs["doc_index"], seqs["doc_lengths"], strict=True):
        for d, n in zip(idx, lens, strict=True):
            per_source[names[d]] += n
            per_doc[d] += n
    return per_source, per_doc, names


def test_weights_and_short_share_are_realised(tmp_path, sources):
    m, docs, seqs = _build(tmp_path, sources, {"books": {"weight": 3}, "code": {"weight": 1}, "short": {}},
                           mix={"short_source": "short", "short_share": 0.2})
    per_source, _, names = _realised(docs, seqs)
    total = sum(per_source.values())
    assert total >= 20 * SEQ
    asked = {"books": 0.6, "code": 0.2, "short": 0.2}
    dev = {k: abs(per_source[k] / total - v) / v for k, v in asked.items()}
    assert max(dev.values()) <= 0.02, dev
    rec = m["mix"]["sources"]
    assert {k: rec[k]["realised_tokens"] for k in asked} == dict(per_source)  # the manifest tells the truth
    assert m["mix"]["max_relative_deviation"] <= 0.02
    assert sum(rec["books"]["realised_by_bucket"].values()) == per_source["books"]
    # short sequences hold only short-source documents, and there are about short_share of them
    short_only = [all(names[d] == "short" for d in idx) for idx in seqs["doc_index"]]
    assert sum(short_only) == m["mix"]["short_sequences"]
    assert abs(sum(short_only) / len(seqs) - 0.2) < 0.05
    # the scarcest source (code: 2/3 as many tokens as its share asks of books) is used once, not repeated
    assert rec["code"]["realised_tokens"] <= rec["code"]["natural_tokens"]
    assert m["counts"]["packed_tokens"] == total


def test_upsample_long_draws_long_documents_more_often(tmp_path, sources):
    m, docs, seqs = _build(tmp_path, sources, {"books": {"upsample_long": {"min_tokens": 150, "factor": 4}},
                                               "code": {}}, mix={"tokens": 40 * SEQ})
    _, per_doc, names = _realised(docs, seqs)
    copies = defaultdict(list)
    for d, (name, n) in enumerate(zip(names, docs["n_tokens"], strict=True)):
        if name == "books":
            copies[n >= 150].append(per_doc[d] / n)
    ratio = np.mean(copies[True]) / np.mean(copies[False])
    assert 3.2 <= ratio <= 4.8, ratio
    # the domain mix is kept: each source's share is its natural one
    rec = m["mix"]["sources"]
    nat = rec["books"]["natural_tokens"] / (rec["books"]["natural_tokens"] + rec["code"]["natural_tokens"])
    assert abs(rec["books"]["realised_share"] - nat) / nat <= 0.02


@pytest.mark.parametrize("policy", ["split", "truncate", "drop"])
def test_overflow_policies(tmp_path, sources, policy):
    m, docs, seqs = _build(tmp_path, sources, {"books": {"policy": policy}, "code": {}})
    n_tok = docs["n_tokens"]
    names = [s.split("/")[-1].split(".jsonl")[0] for s in docs["source"]]
    pieces = defaultdict(list)
    for idx, lens, starts in zip(seqs["doc_index"], seqs["doc_lengths"], seqs["doc_start"], strict=True):
        for d, n, s in zip(idx, lens, starts, strict=True):
            pieces[d].append((s, s + n))
    long_books = [d for d in range(len(n_tok)) if names[d] == "books" and n_tok[d] > SEQ]
    assert long_books
    for d in range(len(n_tok)):
        covered = sorted(pieces[d])
        if d in long_books and policy == "drop":
            assert covered == []
        elif d in long_books and policy == "truncate":
            assert covered == [(0, SEQ)]
        else:  # whole, once (split over sequences when longer than one)
            assert covered[0][0] == 0 and covered[-1][1] == n_tok[d]
            assert all(a[1] == b[0] for a, b in zip(covered, covered[1:], strict=False))
    if policy == "split":  # the default: no mix phase at all
        assert m["mix"] is None
        return
    rec = m["mix"]["sources"]["books"]
    assert rec["policy"] == policy
    assert rec["dropped"] == (len(long_books) if policy == "drop" else 0)
    assert rec["truncated"] == (len(long_books) if policy == "truncate" else 0)
    assert rec["tokens_cut"] == sum(n_tok[d] - (SEQ if policy == "truncate" else 0) for d in long_books)


def test_holdout_keeps_short_documents_out_of_the_sequences(tmp_path, sources):
    m, docs, seqs = _build(tmp_path, sources, {"books": {}, "short": {}},
                           mix={"holdout_docs": 5, "holdout_max_tokens": 40})
    held = m["mix"]["held_out"]
    _, per_doc, _ = _realised(docs, seqs)
    assert len(held) == 5 and all(per_doc[d] == 0 and 0 < docs[d]["n_tokens"] <= 40 for d in held)
    assert sum(per_doc.values()) == sum(docs["n_tokens"]) - sum(docs[d]["n_tokens"] for d in held)


def test_no_mix_settings_is_todays_packing(tmp_path, sources):
    """A YAML whose sources carry no mix settings packs exactly as command-line sources do (no mix phase)."""
    m, _, _ = _build(tmp_path, sources, {"books": {"policy": "split"}, "code": {}}, name="yaml")
    cfg = from_dict(IngestConfig, {"out": str(tmp_path / "cli"), "workers": 0, "tokenizer": {"vocab_size": 320},
                                   "packing": {"seq_len": SEQ}})
    cli = build_corpus(cfg, sources=[(sources["books"], "auto", None), (sources["code"], "auto", None)])
    assert m["mix"] is None and m["data_hash"] == cli["data_hash"]


@pytest.mark.parametrize("sources_, mix, match", [
    ([{"path": "a", "weight": 1}, {"path": "b"}], {}, "source b: has no weight"),
    ([{"path": "a"}], {"short_source": "s", "short_share": 0.1}, "no source is named 's'"),
    ([{"path": "a", "weight": 1}, {"path": "s", "weight": 1}], {"short_source": "s", "short_share": 0.1},
     "takes mix.short_share"),
    ([{"path": "a", "policy": "squash"}], {}, "policy"),
    ([{"path": "a", "weight": 0}], {}, "weight must be > 0"),
    ([{"path": "a"}, {"path": "a"}], {}, "share the name"),
    ([{"path": "a"}], {"short_share": 0.2}, "needs mix.short_source"),
])
def test_mix_config_errors(sources_, mix, match):
    with pytest.raises(ConfigError, match=match):
        from_dict(IngestConfig, {"sources": sources_, "mix": mix})


def test_a_source_with_nothing_to_draw_is_named_and_the_rest_renormalised(tmp_path, sources):
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"not a pdf")
    entries = {"books": {"weight": 1}, "code": {"weight": 1}, "broken": {"weight": 2}}
    m, docs, seqs = _build(tmp_path, {**sources, "broken": str(bad)}, entries)
    assert [x["source"] for x in m["mix"]["missing"]] == ["broken"]
    per_source, _, _ = _realised(docs, seqs)
    total = sum(per_source.values())
    assert abs(per_source["books"] / total - 0.5) <= 0.01 and abs(per_source["code"] / total - 0.5) <= 0.01
    assert any(e["status"] == "failed" and e["source"] == str(bad) for e in m["sources"])


def test_a_larger_total_repeats_every_document_evenly(tmp_path, sources):
    cfg0 = _build(tmp_path, sources, {"books": {"policy": "truncate"}, "code": {}}, name="once")[0]
    natural = sum(v["natural_tokens"] for v in cfg0["mix"]["sources"].values())
    m, docs, seqs = _build(tmp_path, sources, {"books": {"policy": "truncate"}, "code": {}},
                           mix={"tokens": 3 * natural}, name="thrice")
    _, per_doc, names = _realised(docs, seqs)
    for d, n in enumerate(docs["n_tokens"]):  # three whole copies of each document (books' truncated)
        assert per_doc[d] == 3 * (min(n, SEQ) if names[d] == "books" else n)
    assert m["mix"]["max_relative_deviation"] == 0.0


def test_synthesized_retrieval_examples_stay_outside_the_mix(tmp_path, monkeypatch):
    from bookft.ingest import corpus_build as example_build
    from bookft.needles import NIAH_INSTRUCTION
    from bookft.needles.haystack import essay_sentences

    material = []
    real = example_build.synthesize
    monkeypatch.setattr(example_build, "synthesize", lambda docs, *a, **k: material.extend(docs) or real(docs, *a, **k))

    gen = essay_sentences(1)
    (tmp_path / "essays.txt").write_text("".join(next(gen) for _ in range(400)))
    (tmp_path / "frame.txt").write_text((NIAH_INSTRUCTION + "What is the special magic number for x?\n") * 30)
    cfg = from_dict(IngestConfig, {
        "out": str(tmp_path / "c"), "workers": 0, "tokenizer": {"vocab_size": 600}, "packing": {"seq_len": 512},
        "sources": [{"path": str(tmp_path / "essays.txt"), "name": "essays", "weight": 1},
                    {"path": str(tmp_path / "frame.txt"), "name": "frame", "weight": 1},
                    {"path": _jsonl(tmp_path / "notes.jsonl", 3, [30, 40, 50] * 10), "name": "notes"}],
        "retrieval": {"rate": 0.5, "lengths": [256, 512]},
        "mix": {"short_source": "notes", "short_share": 0.1, "holdout_docs": 1}})
    m = example_build.build_corpus(cfg)
    mix = m["mix"]
    assert mix["unmixed"] and all("retrieval-" in x for x in mix["unmixed"])
    assert {k: round(v["realised_share"], 3) for k, v in mix["sources"].items()} == {
        "essays": 0.45, "frame": 0.45, "notes": 0.1}
    assert mix["max_relative_deviation"] <= 0.02
    cur = tmp_path / "c" / "current"
    docs = datasets.load_from_disk(str(cur / "documents"))
    seqs = datasets.load_from_disk(str(cur / "sequences"))
    _, per_doc, _ = _realised(docs, seqs)
    synth = [d for d, s in enumerate(docs["source"]) if "retrieval-" in s]
    assert synth and all(per_doc[d] == docs[d]["n_tokens"] for d in synth)  # each example once, whole
    assert sum(docs[d]["n_tokens"] for d in synth) == sum(mix["unmixed"].values())
    # the held-out document is not material for the synthesized examples either
    (held,) = mix["held_out"]
    assert "retrieval-" not in docs[held]["source"] and per_doc[held] == 0
    texts = [d["text"] for d in material]
    assert len(texts) == len(docs) - len(synth) - 1 and docs[held]["text"] not in texts


def test_the_documented_mix_example_is_a_valid_corpus_definition():
    import re
    from pathlib import Path

    import yaml

    page = (Path(__file__).resolve().parents[2] / "docs" / "ingest.md").read_text()
    block = re.search(r"^## The mix.*?```yaml\n(.*?)```", page, re.S | re.M).group(1)
    cfg = from_dict(IngestConfig, yaml.safe_load(block))
    assert [s.label for s in cfg.sources] == ["books", "code", "short", "papers"]
    assert cfg.mix.short_source == "short" and cfg.sources[0].upsample_long.factor == 2
