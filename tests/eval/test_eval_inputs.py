"""Bad inputs give clear EvalErrors; corpus haystacks, HF tokenizer folders and chat templates work."""

from __future__ import annotations

import json

import pytest
from eval_helpers import OracleModel, byte_bpe

from bookft.commands.eval import load_settings, split_overrides
from bookft.config import from_dict
from bookft.errors import ConfigError, EvalError
from bookft.eval import EvalConfig, run_niah
from bookft.eval.haystack import build_haystack
from bookft.model.config import ModelConfig, RopeConfig
from bookft.needles import make_task
from bookft.needles.placement import build_sample
from bookft.needles.tokenizer import ModelTokenizer


@pytest.fixture(scope="module")
def bpe():
    return ModelTokenizer.load(byte_bpe())


def _zeros(ids, pos, seg):
    import numpy as np

    return np.zeros((ids.shape[0], 16, 400))


def test_length_beyond_max_positions(bpe):
    cfg = EvalConfig(lengths=(512, 4096), depths=(50,), seeds=(0,))
    small = ModelConfig(max_position_embeddings=2048)
    with pytest.raises(EvalError, match=r"4096 is larger than the model's max_position_embeddings \(2048\).*rope"):
        run_niah(None, bpe, cfg, logits_fn=_zeros, model_config=small, progress=False)
    scaled = ModelConfig(max_position_embeddings=2048,
                         rope=RopeConfig(type="yarn", factor=4.0, original_max_position_embeddings=2048))
    res = run_niah(None, bpe, cfg, logits_fn=_zeros, model_config=scaled, progress=False)
    assert res["lengths"] == [512, 4096]
    with pytest.raises(EvalError, match="vocab_size"):
        run_niah(None, bpe, cfg, logits_fn=_zeros, model_config=ModelConfig(vocab_size=100), progress=False)


def _make_corpus(root, texts):
    import datasets

    version = root / "versions" / "0001"
    datasets.Dataset.from_dict({"text": texts, "source": [f"doc{i}" for i in range(len(texts))]}).save_to_disk(
        str(version / "documents"))
    (root / "current").symlink_to("versions/0001")
    return root


def test_corpus_haystack(tmp_path, bpe):
    book = " ".join(f"Chapter sentence number {w} tells of the river and the road." for w in "abcdefgh" * 40)
    corpus = _make_corpus(tmp_path / "corpus", [book, "A short note. " * 30])
    hay = build_haystack("corpus", bpe, seed=0, min_tokens=1500, corpus=str(corpus))
    assert hay.total_tokens >= 1500 and hay.chunks[0].startswith("Chapter sentence")
    cfg = EvalConfig(haystack="corpus", corpus=str(corpus), lengths=(1024,), depths=(0, 100), seeds=(0,))
    res = run_niah(None, bpe, cfg, logits_fn=OracleModel(bpe, bpe.vocab_size).logits_fn, progress=False)
    assert res["summary"]["mean"] == 1.0
    small = _make_corpus(tmp_path / "small", ["Only a few words here. And a second sentence."])
    with pytest.raises(EvalError, match=r"holds only \d+ tokens .* needs about 4096"):
        run_niah(None, bpe, EvalConfig(haystack="corpus", corpus=str(small), lengths=(4096,), seeds=(0,)),
                 logits_fn=_zeros, progress=False)
    with pytest.raises(EvalError, match="not a bookft corpus"):
        build_haystack("corpus", bpe, 0, 100, corpus=str(tmp_path))


def test_too_short_length_and_bad_config(bpe):
    hay = build_haystack("essay", bpe, 0, 200)
    with pytest.raises(EvalError, match="too short for task multivalue"):
        build_sample(make_task(EvalConfig(task="multivalue"), 0, 50), hay, bpe, 40, 50)
    with pytest.raises(ConfigError, match="unknown key eval.lenghts"):
        from_dict(EvalConfig, {"lenghts": [1]}, "eval")
    with pytest.raises(ConfigError, match="eval.depths"):
        from_dict(EvalConfig, {"depths": [150]}, "eval")
    with pytest.raises(ConfigError, match="eval.corpus"):
        from_dict(EvalConfig, {"haystack": "corpus"}, "eval")
    with pytest.raises(ConfigError, match="eval.task"):
        from_dict(EvalConfig, {"task": "needle"}, "eval")


def test_settings_layering(tmp_path):
    cfg_file = tmp_path / "run.yaml"
    cfg_file.write_text("model: {num_layers: 2}\neval: {lengths: [512, 1024], threshold: 0.5}\n")
    ev, run = split_overrides(["eval.seeds=[3]", "attention.strategy=ring", "eval.num_depths=3"])
    assert ev == ["seeds=[3]", "num_depths=3"] and run == ["attention.strategy=ring"]
    s = load_settings(cfg_file, ["eval.seeds=[3]", "attention.strategy=ring"], {"lengths": [2048]},
                      base=EvalConfig(task="passkey"))
    assert s.lengths == (2048,) and s.seeds == (3,) and s.threshold == 0.5 and s.task == "passkey"


def test_hf_folder_tokenizer_with_chat_template(tmp_path, bpe):
    bpe.tok.save(str(tmp_path / "tokenizer.json"))
    template = ("{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}</s>{% endfor %}"
                "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<s>", "eos_token": "</s>", "chat_template": template}))
    tok = ModelTokenizer.load(tmp_path)
    assert tok.eos_id == bpe.tok.token_to_id("</s>") and tok.chat_template == template
    hay = build_haystack("essay", tok, 0, 1200)
    inst = make_task(EvalConfig(), 0, 50)
    s = build_sample(inst, hay, tok, 1000, 50, chat=True)
    assert s.input_ids[0] == tok.tok.token_to_id("<s>")  # the template's BOS, exactly once
    assert list(s.input_ids).count(tok.tok.token_to_id("<s>")) == 1
    a, b = s.needle_spans[0]
    assert tok.decode(s.input_ids[a:b]).strip() == inst.needles[0].text
    assert "<|assistant|>" in tok.decode(s.input_ids[: s.answer_span[0]])
    res = run_niah(None, tok, EvalConfig(lengths=(800,), depths=(50,), seeds=(0,), chat_template=True),
                   logits_fn=OracleModel(tok, tok.vocab_size).logits_fn, progress=False)
    assert res["summary"]["mean"] == 1.0
    no_template = ModelTokenizer.load(bpe.tok)
    with pytest.raises(EvalError, match="chat_template"):
        build_sample(inst, hay, no_template, 1000, 50, chat=True)


def test_checkpoint_subject_against_the_train_contract(tmp_path, monkeypatch, bpe):
    """--checkpoint: load_params(run_dir) -> (model, run_config); tokenizer from the run or its corpus."""
    import bookft.train.checkpoint as ckpt
    from bookft.eval.entry import load_subject
    from bookft.train.config import RunConfig

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    corpus = tmp_path / "corpus"
    (corpus / "versions" / "0001" / "tokenizer").mkdir(parents=True)
    (corpus / "current").symlink_to("versions/0001")
    bpe.tok.save(str(corpus / "versions" / "0001" / "tokenizer" / "tokenizer.json"))
    cfg = from_dict(RunConfig, {"name": "r1", "data": {"corpus": str(corpus)}})
    monkeypatch.setattr(ckpt, "load_params", lambda d, **kw: ("MODEL", cfg), raising=False)
    model, tok, model_config, run_config, info = load_subject(str(run_dir), None, None)
    assert model == "MODEL" and run_config is cfg and model_config is cfg.model
    assert tok.fingerprint == bpe.fingerprint and info == {"checkpoint": str(run_dir), "run": "r1"}
    with pytest.raises(EvalError, match="exactly one of"):
        load_subject(str(run_dir), "hf", None)
    with pytest.raises(EvalError, match="not found"):
        load_subject(str(tmp_path / "missing"), None, None)
