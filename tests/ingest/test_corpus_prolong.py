"""corpora/prolong-books.yaml (books packed to the target length, a short share, training-generator
examples as a measured minority) and its plain twin: both load and validate, differ only in their
examples, and build at a tiny scale with the numbers they ask for."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from bookft.config import from_dict, read_yaml
from bookft.ingest import IngestConfig, build_corpus
from bookft.ingest.tokenize import train_bpe
from bookft.needles.haystack import essay_sentences
from bookft.needles.train import GENERATOR

ROOT = Path(__file__).resolve().parents[2]
RECIPE, PLAIN = ROOT / "corpora" / "prolong-books.yaml", ROOT / "corpora" / "prolong-books-plain.yaml"


def test_recipe_and_twin_load_and_differ_only_in_examples():
    recipe, plain = read_yaml(RECIPE), read_yaml(PLAIN)
    for d in (recipe, plain):
        from_dict(IngestConfig, d).validate()
    assert recipe["retrieval"]["generator"] == "train" and 0 < recipe["retrieval"]["rate"] <= 0.2
    assert plain["retrieval"] == {"rate": 0.0}
    strip = lambda d: {k: v for k, v in d.items() if k not in ("name", "out", "retrieval")}
    assert strip(recipe) == strip(plain)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The two definitions on tiny material: 6 long essays as books, 60 short texts, a BPE of 600."""
    tmp = tmp_path_factory.mktemp("prolong")
    gen = essay_sentences(11)
    (tmp / "books").mkdir()
    for i in range(6):
        (tmp / "books" / f"book{i}.txt").write_text("".join(next(gen) for _ in range(900)))
    (tmp / "short").mkdir()
    for i in range(60):
        (tmp / "short" / f"s{i:02d}.txt").write_text("".join(next(gen) for _ in range(6)))
    folder = tmp / "tok"
    folder.mkdir()
    bpe = train_bpe(["".join(next(gen) for _ in range(3000)), "0123456789 - , : _ " * 40], 600, 2)
    bpe.add_special_tokens(["<s>", "</s>"])
    bpe.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>", "bos_token": "<s>"}))
    out = {}
    for name, path in (("recipe", RECIPE), ("plain", PLAIN)):
        d = copy.deepcopy(read_yaml(path))
        books, short = d["sources"]
        d.update(out=str(tmp / name), workers=0, tokenizer={"path": str(folder)}, packing={"seq_len": 512},
                 sources=[{**books, "path": str(tmp / "books")}, {**short, "path": str(tmp / "short")}])
        if d["retrieval"]["rate"]:
            d["retrieval"].update(lengths=[256, 512], length_shares=[1, 1])
        out[name] = build_corpus(from_dict(IngestConfig, d))
    return out


def test_tiny_builds(tiny):
    r = tiny["recipe"]["retrieval"]
    n_recipe, n_plain = tiny["recipe"]["counts"]["sequences"], tiny["plain"]["counts"]["sequences"]
    assert r["per_generator"] == {GENERATOR: r["examples"]} and r["examples"] > 0
    assert r["synthesized_sequences"] / n_recipe == pytest.approx(0.1, abs=0.02)  # the measured minority
    # the same natural text beside them (a half-filled sequence of examples may share a row with its tail)
    assert tiny["recipe"]["mix"]["realised_tokens"] == tiny["plain"]["mix"]["realised_tokens"]
    assert n_plain <= n_recipe <= n_plain + r["synthesized_sequences"]
    assert "retrieval" not in tiny["plain"] or not tiny["plain"]["retrieval"]
    for m in tiny.values():
        short = m["mix"]["sources"]["short"]
        assert short["asked_share"] == 0.2 and short["realised_share"] == pytest.approx(0.2, abs=0.02)
