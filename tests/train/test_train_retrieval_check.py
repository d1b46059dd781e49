"""A corpus's synthesized retrieval examples and the run config agree where they must (train/retrieval_check.py):
the examples' phrasing is the eval's, and every curriculum stage holds whole examples. `bookft train` says
so before anything compiles, naming both keys; the shipped presets agree with their corpus definitions."""

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bookft.cli import app
from bookft.config import load, to_dict
from bookft.corpus import open_corpus
from bookft.errors import ConfigError
from bookft.ingest.config import IngestConfig
from bookft.needles.haystack import essay_sentences
from bookft.needles.retrieval_config import RetrievalConfig
from bookft.train.config import load_run_config
from bookft.train.retrieval_check import check_retrieval_agreement, corpus_retrieval, disagreements

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "tiny-cpu.yaml"

RUN = """
name: rc
model: {vocab_size: 640, hidden_size: 32, intermediate_size: 64, num_layers: 1, num_heads: 2,
        num_kv_heads: 2, compute_dtype: float32, remat: none, max_position_embeddings: 2048}
attention: {strategy: local, kernel: xla}
data: {corpus: CORPUS, batch_size: 1}
train: {steps: 4, curriculum: [{seq_len: 512, steps: 2}, {seq_len: 1024, steps: 2}]}
eval: {lengths: [1024]}
"""


class FakeCorpus:
    """A corpus version as the check reads it: its folder (retrieval.json or not), manifest and seq_len."""

    def __init__(self, path: Path, retrieval: dict | None, seq_len: int = 2048):
        self.path, self.seq_len = path, seq_len
        self.manifest = {"seq_len": seq_len, "config": {"retrieval": retrieval} if retrieval else {}}
        if retrieval is not None:
            (path / "retrieval.json").write_text(json.dumps({"examples": 1, "settings": retrieval}))


def test_a_phrasing_mismatch_is_refused(tmp_path):
    r = RetrievalConfig(rate=0.5, phrasing="ruler")
    cfg = load_run_config(TINY)  # eval.phrasing: short
    (msg,) = disagreements(cfg, r, 2048)
    assert "retrieval.phrasing is ruler" in msg and "eval.phrasing is short" in msg
    assert "--set eval.phrasing=ruler" in msg and "retrieval.phrasing: short" in msg
    corpus = FakeCorpus(tmp_path, to_dict(r))
    with pytest.raises(ConfigError, match=r"(?s)manifest\.json.*disagree.*eval\.phrasing is short"):
        check_retrieval_agreement(cfg, corpus)
    # only kinds whose wording the phrasing sets must agree
    assert disagreements(cfg, RetrievalConfig(kinds=("passage", "signature"), phrasing="ruler"), 2048) == []
    # the training generator's niah/multikey examples have wording of their own; magic_number stays the eval's
    train = RetrievalConfig(kinds=("niah", "multikey"), phrasing="ruler", generator="train")
    assert disagreements(cfg, train, 2048) == []
    (msg,) = disagreements(cfg, dataclasses.replace(train, kinds=("magic_number", "multikey")), 2048)
    assert "its magic_number examples" in msg
    (tmp_path / "t").mkdir()
    assert corpus_retrieval(FakeCorpus(tmp_path / "t", to_dict(train))).generator == "train"


def test_a_stage_shorter_than_every_retrieval_length_is_refused(tmp_path):
    r = RetrievalConfig(rate=0.5, lengths=(512, 1024), phrasing="short")
    cfg = load_run_config(TINY)  # stages 256, 512, 1024, 2048
    (msg,) = disagreements(cfg, r, 2048)
    assert msg.startswith("train.curriculum[0].seq_len is 256") and "retrieval.lengths is [512, 1024]" in msg
    with pytest.raises(ConfigError, match=r"train\.curriculum\[0\]\.seq_len is 256"):
        check_retrieval_agreement(cfg, FakeCorpus(tmp_path, to_dict(r)))
    # a row holds whole examples only of a length that divides it; without a curriculum, data.seq_len
    assert disagreements(cfg, RetrievalConfig(lengths=(768,), phrasing="short"), 3072)[0].startswith(
        "train.curriculum[0].seq_len is 256")
    flat = load_run_config(TINY, ["train.curriculum=[]", "data.seq_len=256"])
    assert "data.seq_len is 256" in disagreements(flat, r, 2048)[0]
    assert disagreements(load_run_config(TINY, ["train.curriculum=[]"]), r, 2048) == []


def test_a_corpus_without_synthesized_examples_is_not_checked(tmp_path):
    corpus = FakeCorpus(tmp_path, None)
    assert corpus_retrieval(corpus) is None
    check_retrieval_agreement(load_run_config(TINY, ["eval.phrasing=ruler"]), corpus)


def test_the_shipped_presets_agree_with_their_corpus_definitions():
    tiny, sample = load_run_config(TINY), load(IngestConfig, ROOT / "corpora" / "sample.yaml")
    assert sample.retrieval.rate > 0 and disagreements(tiny, sample.retrieval, sample.packing.seq_len) == []
    smol = load_run_config(ROOT / "configs" / "smollm2-135m-cpu.yaml")
    smol_corpus = load(IngestConfig, ROOT / "corpora" / "sample-smollm2.yaml")
    assert smol_corpus.retrieval.rate == 0  # no examples: nothing to check; and were they switched on, they agree
    assert disagreements(smol, smol_corpus.retrieval, smol_corpus.packing.seq_len) == []


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("retrieval_check")
    src = root / "src"
    src.mkdir()
    sentences = essay_sentences(0)
    for i in range(4):
        (src / f"d{i}.txt").write_text("".join(next(sentences) for _ in range(40)) + "\n")
    out = root / "corpus"
    res = CliRunner().invoke(app, ["ingest", str(src), "--out", str(out), "--seq-len", "1024", "--vocab-size", "600",
                                   "--workers", "0", "--synthesize-retrieval", "0.5",
                                   "--set", "retrieval.lengths=[512,1024]"])
    assert res.exit_code == 0, res.output
    return out


def test_train_refuses_before_anything_compiles(tmp_path, corpus, monkeypatch):
    """`bookft train` on a built corpus: the manifest's retrieval section read through the Corpus object, the
    disagreements raised by the Trainer before the program is built."""
    import bookft.train.trainer as trainer_mod

    cfg_file = tmp_path / "rc.yaml"
    cfg_file.write_text(RUN.replace("CORPUS", str(corpus)))
    good = load_run_config(cfg_file)
    r = corpus_retrieval(open_corpus(corpus))
    assert r is not None and r.lengths == (512, 1024) and r.phrasing == "ruler"
    check_retrieval_agreement(good, open_corpus(corpus))

    def compiled(*a, **k):
        raise AssertionError("the program was built before the check")

    monkeypatch.setattr(trainer_mod, "build_program", compiled)
    bad = load_run_config(cfg_file, ["eval.phrasing=short", "train.curriculum=[{seq_len: 256, steps: 2}]"])
    with pytest.raises(ConfigError) as e:
        trainer_mod.Trainer(bad, run_dir=tmp_path / "run")
    assert "eval.phrasing is short" in str(e.value) and "train.curriculum[0].seq_len is 256" in str(e.value)
    res = CliRunner().invoke(app, ["train", "-c", str(cfg_file), "--run-dir", str(tmp_path / "run2"),
                                   "--set", "eval.phrasing=short"])
    assert isinstance(res.exception, ConfigError) and "eval.phrasing is short" in str(res.exception), res.output
