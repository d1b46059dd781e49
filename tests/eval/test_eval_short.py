"""`bookft eval short`: loss and token accuracy of base and tuned on a corpus's held-out documents and a
generic text, equal to a direct forward + cross-entropy; written into the NIAH report's report.html."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from eval_helpers import OracleModel, byte_bpe
from typer.testing import CliRunner

model_mod = pytest.importorskip("bookft.model")

from bookft.cli import app  # noqa: E402
from bookft.config import from_dict  # noqa: E402
from bookft.corpus import open_corpus  # noqa: E402
from bookft.eval import EvalConfig, run_niah, write_report  # noqa: E402
from bookft.eval.short import generic_texts  # noqa: E402
from bookft.ingest import IngestConfig, build_corpus  # noqa: E402
from bookft.needles.tokenizer import ModelTokenizer  # noqa: E402

WORDS = "river stone lantern harbor meadow archive winter summer quiet ancient merchant sailor".split()
TINY = dict(vocab_size=512, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4, num_kv_heads=2,
            max_position_embeddings=512, compute_dtype="float32", remat="none")


def _reference(model, tok: ModelTokenizer, texts: list[str], max_tokens: int) -> tuple[float, float]:
    """Token-pooled mean cross-entropy and argmax accuracy: one unpadded forward per document, numpy CE."""
    ce, hit, n = 0.0, 0, 0
    for t in texts:
        ids = np.array(tok.prefix_ids + tok.encode(t).ids, np.int32)[:max_tokens]
        pos = np.arange(len(ids), dtype=np.int32)[None]
        logits = np.asarray(model.logits(model(ids[None], pos)), np.float64)[0, :-1]
        m = logits.max(-1, keepdims=True)
        lse = np.log(np.exp(logits - m).sum(-1)) + m[:, 0]
        ce += float((lse - logits[np.arange(len(ids) - 1), ids[1:]]).sum())
        hit += int((logits.argmax(-1) == ids[1:]).sum())
        n += len(ids) - 1
    return ce / n, hit / n


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("short")
    rng = np.random.default_rng(0)
    lines = [json.dumps({"text": " ".join(rng.choice(WORDS, size=int(n))).capitalize() + ".",
                         "bookft_collection": f"d{i}"}) for i, n in enumerate(rng.integers(20, 400, size=40))]
    (root / "docs.jsonl").write_text("\n".join(lines) + "\n")
    cfg = from_dict(IngestConfig, {"out": str(root / "corpus"), "workers": 0, "tokenizer": {"vocab_size": 400},
                                   "packing": {"seq_len": 256}, "sources": [{"path": str(root / "docs.jsonl")}],
                                   "mix": {"holdout_docs": 6, "holdout_max_tokens": 200}})
    build_corpus(cfg)
    tok_file = root / "corpus" / "current" / "tokenizer" / "tokenizer.json"
    dirs = {}
    for name, seed in (("base", 0), ("tuned", 1)):
        m = model_mod.init_model(model_mod.ModelConfig(**TINY), seed=seed)
        dirs[name] = root / name
        model_mod.save_hf(m, m.config, dirs[name])
        shutil.copy(tok_file, dirs[name] / "tokenizer.json")
    return root, dirs


def test_short_losses_equal_a_direct_forward(setup):
    root, dirs = setup
    out = root / "out"
    r = CliRunner().invoke(app, ["eval", "short", "--model", str(dirs["tuned"]), "--base", str(dirs["base"]),
                                 "--corpus", str(root / "corpus"), "--max-tokens", "96", "--out", str(out)])
    assert r.exit_code == 0, (r.output, r.exception)
    res = json.loads((out / "short.json").read_text())
    corpus = open_corpus(root / "corpus")
    docs = corpus.documents()
    held = corpus.manifest["mix"]["held_out"]
    assert len(held) == 6
    texts = {"corpus held-out": [docs[i]["text"] for i in held], "generic": generic_texts()}
    for who in ("base", "tuned"):
        model, _ = model_mod.load_hf(dirs[who])
        tok = ModelTokenizer.load(dirs[who])
        for name, t in texts.items():
            loss, acc = _reference(model, tok, t, 96)
            got = res["sets"][name][who]
            assert got["loss"] == pytest.approx(loss, rel=1e-5) and got["accuracy"] == pytest.approx(acc, abs=1e-9)
            assert got["documents"] == len(t) and 5.0 < got["loss"] < 7.0  # untrained: about ln(400..512)
    assert res["sets"]["corpus held-out"]["base"]["loss"] != res["sets"]["corpus held-out"]["tuned"]["loss"]
    page = (out / "report.html").read_text()
    assert "Short-context check" in page and f"{res['sets']['generic']['tuned']['loss']:.4f}" in page


def test_short_joins_the_niah_report(setup, tmp_path):
    root, dirs = setup
    tok = ModelTokenizer.load(byte_bpe())
    niah = run_niah(None, tok, EvalConfig(lengths=(300,), depths=(0, 100), seeds=(0,)),
                    logits_fn=OracleModel(tok, tok.vocab_size).logits_fn, progress=False)
    write_report(niah, tmp_path)
    assert "Short-context check" not in (tmp_path / "report.html").read_text()
    r = CliRunner().invoke(app, ["eval", "short", "--model", str(dirs["tuned"]), "--base", str(dirs["base"]),
                                 "--corpus", str(root / "corpus"), "--max-tokens", "64", "--out", str(tmp_path)])
    assert r.exit_code == 0, (r.output, r.exception)
    page = (tmp_path / "report.html").read_text()
    assert "Short-context check" in page and "Heatmap" in page and "short.png" in page
    write_report(niah, tmp_path)  # a later `eval niah` into the same folder keeps the section
    assert "Short-context check" in (tmp_path / "report.html").read_text()


def test_short_errors_name_the_problem(setup, tmp_path):
    root, dirs = setup
    run = lambda *a: CliRunner().invoke(app, ["eval", "short", "--model", str(dirs["tuned"]), *a,
                                              "--out", str(tmp_path)])
    assert "pass --base" in str(run("--corpus", str(root / "corpus")).exception)
    plain = tmp_path / "plain"
    (tmp_path / "d.txt").write_text("one two three " * 50)
    cfg = from_dict(IngestConfig, {"out": str(plain), "workers": 0, "tokenizer": {"vocab_size": 300},
                                   "packing": {"seq_len": 64}})
    build_corpus(cfg, sources=[(str(tmp_path / "d.txt"), "auto", None)])
    assert "holds no held-out documents" in str(run("--base", str(dirs["base"]), "--corpus", str(plain)).exception)
    assert "--text" in str(run("--base", str(dirs["base"]), "--corpus", str(root / "corpus"),
                               "--text", str(tmp_path / "missing.txt")).exception)


def test_a_checkpoint_brings_its_base_and_corpus(setup, tmp_path, monkeypatch):
    """--checkpoint: the base is the run's model.hf_path and the corpus its data.corpus."""
    from types import SimpleNamespace

    import bookft.eval.short_entry as S

    root, dirs = setup
    real = S.load_subject
    run_config = SimpleNamespace(model=SimpleNamespace(hf_path=str(dirs["base"])),
                                 data=SimpleNamespace(corpus=str(root / "corpus")))

    def fake(checkpoint, model_dir, tokenizer):
        if checkpoint is None:
            return real(checkpoint, model_dir, tokenizer)
        model, tok, cfg, _, _ = real(None, str(dirs["tuned"]), None)
        return model, tok, cfg, run_config, {"checkpoint": checkpoint}

    monkeypatch.setattr(S, "load_subject", fake)
    r = CliRunner().invoke(app, ["eval", "short", "--checkpoint", "runs/x", "--max-tokens", "32",
                                 "--out", str(tmp_path)])
    assert r.exit_code == 0, (r.output, r.exception)
    res = json.loads((tmp_path / "short.json").read_text())
    assert res["models"] == {"base": str(dirs["base"]), "tuned": "runs/x"} and res["corpus"] == str(root / "corpus")
