"""`bookft eval ppl`: perplexity by window length equals a plain transformers (torch) computation on the
same windows, non-overlapping and sliding; several models nest by label; the section joins report.html;
ring attention over 4 devices gives the single-device figures."""

from __future__ import annotations

import json
import math
from itertools import islice

import numpy as np
import pytest
from eval_helpers import OracleModel, byte_bpe
from typer.testing import CliRunner

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from bookft.cli import app  # noqa: E402
from bookft.errors import EvalError  # noqa: E402
from bookft.eval import EvalConfig, run_niah, write_report  # noqa: E402
from bookft.eval.ppl import position_edges  # noqa: E402
from bookft.needles.haystack import essay_sentences  # noqa: E402
from bookft.needles.tokenizer import ModelTokenizer  # noqa: E402

LENGTHS = (64, 128)


def _hf_llama(folder, seed: int):
    """A random tiny Llama (vocab 400, 128 native positions) saved with the byte BPE as its tokenizer."""
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(vocab_size=400, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                   rms_norm_eps=1e-6, tie_word_embeddings=False)
    model = transformers.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # larger weights than the 0.02 init, so the loss is far from uniform
        for p in model.parameters():
            p.mul_(4.0 if p.dim() > 1 else 1.0)
    model.save_pretrained(folder)
    byte_bpe().save(str(folder / "tokenizer.json"))
    return model


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("ppl")
    models = {name: _hf_llama(root / name, seed) for name, seed in (("base", 0), ("tuned", 1))}
    files = []
    for k, n in enumerate((120, 70)):  # about 700 and 400 tokens: tails dropped, windows of 2 documents
        files.append(root / f"doc{k}.txt")
        files[-1].write_text(" ".join(islice(essay_sentences(k), n)), encoding="utf-8")
    return root, models, files


def _reference(model, files, length: int, stride: int | None) -> dict:
    """Token NLL sums of a direct transformers forward per window: every full window from 0 by
    `stride` (default L); the first scores positions 1..L-1, later ones max(1, L-S)..L-1."""
    tok = ModelTokenizer.load(byte_bpe())
    s = min(stride or length, length)
    edges = position_edges(length)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny forwards: more threads only contend on a shared host
    try:
        return _windows_nll(model, tok, files, length, s, edges)
    finally:
        torch.set_num_threads(threads)


def _windows_nll(model, tok, files, length: int, s: int, edges: list[int]) -> dict:
    nll, count = 0.0, 0
    buckets = np.zeros((2, len(edges) - 1))
    for f in files:
        ids = np.asarray(tok.encode(f.read_text(encoding="utf-8")).ids)  # no special tokens
        starts = range(0, len(ids) - length + 1, s)
        with torch.no_grad():  # every window of the document as one batch, positions 0..L-1 each
            logits = model(input_ids=torch.tensor(np.stack([ids[a:a + length] for a in starts]))).logits
        logp = torch.log_softmax(logits.double(), -1).numpy()
        for k, start in enumerate(starts):
            p = np.arange(1 if k == 0 else max(1, length - s), length)  # scored in-window positions
            v = -logp[k, p - 1, ids[start + p]]
            nll, count = nll + float(v.sum()), count + len(p)
            b = np.searchsorted(edges, p, side="right") - 1
            np.add.at(buckets[0], b, v)
            np.add.at(buckets[1], b, 1)
    return {"ppl": math.exp(nll / count), "tokens": count, "bucket_loss": buckets[0] / np.maximum(buckets[1], 1),
            "bucket_tokens": buckets[1]}


def _run(*args):
    r = CliRunner().invoke(app, ["eval", "ppl", *args, "--no-progress"])
    assert r.exit_code == 0, (r.output, r.exception)
    return r


@pytest.mark.parametrize("stride", [None, 48])
def test_ppl_equals_transformers_on_the_same_windows(setup, stride):
    root, models, files = setup
    out = root / f"out-{stride}"
    _run("--model", str(root / "base"), *[a for f in files for a in ("--text", str(f))], "--lengths", "64,128",
         *(["--stride", str(stride)] if stride else []), "--out", str(out))
    res = json.loads((out / "results.json").read_text())
    assert set(res["ppl"]) == {"64", "128"} and res["stride"] == stride and list(res["models"]) == ["base"]
    for n in LENGTHS:
        ref = _reference(models["base"], files, n, stride)
        assert res["ppl"][str(n)] == pytest.approx(ref["ppl"], rel=1e-3), (n, res["ppl"], ref["ppl"])
        assert res["tokens"][str(n)] == ref["tokens"]
        pos = res["loss_by_position"][str(n)]
        assert pos["start"] == position_edges(n)[:-1] and pos["end"] == position_edges(n)[1:]
        assert pos["tokens"] == [int(t) for t in ref["bucket_tokens"]] and sum(pos["tokens"]) == ref["tokens"]
        np.testing.assert_allclose([v or 0.0 for v in pos["loss"]], ref["bucket_loss"], rtol=1e-3)
    assert abs(math.log(res["ppl"]["128"] / 400)) > 0.05  # not uniform over the 400 tokens
    if stride:  # later windows score only the last 48 (at 64) and all but 1 of each 128-window's new tokens
        assert res["windows"]["64"] > res["windows"]["128"] > len(files)


def test_several_models_nest_by_label_and_join_the_niah_report(setup, tmp_path):
    root, models, files = setup
    tok = ModelTokenizer.load(byte_bpe())
    niah = run_niah(None, tok, EvalConfig(lengths=(300,), depths=(0, 100), seeds=(0,)),
                    logits_fn=OracleModel(tok, tok.vocab_size).logits_fn, progress=False)
    write_report(niah, tmp_path)
    r = _run("--model", str(root / "base"), "--model", str(root / "tuned"), "--names", "base,tuned",
             *[a for f in files for a in ("--text", str(f))], "--lengths", "64,128", "--out", str(tmp_path))
    assert "longer windows" in r.output or "RISES" in r.output
    res = json.loads((tmp_path / "ppl.json").read_text())
    assert set(res["ppl"]) == {"base", "tuned"} and set(res["ppl"]["tuned"]) == {"64", "128"}
    assert set(res["loss_by_position"]["base"]["128"]) == {"start", "end", "loss", "tokens"}
    assert set(res["tokens"]["tuned"]) == {"64", "128"} and set(res["models"]) == {"base", "tuned"}
    m = res["models"]["tuned"]
    assert m["native_length"] == 128 and m["within_native"]["lengths"] == [64, 128]
    assert m["attention"]["strategy"] == "local"
    for n in LENGTHS:
        assert res["ppl"]["tuned"][str(n)] == pytest.approx(_reference(models["tuned"], files, n, None)["ppl"],
                                                            rel=1e-3)
    grid = json.loads((tmp_path / "results.json").read_text())  # the NIAH grid keeps its cells, gains the ppl
    assert grid["kind"] == "bookft-eval" and grid["cells"] and grid["ppl"] == res["ppl"]
    page = (tmp_path / "report.html").read_text()
    assert "Heatmap" in page and "Perplexity by window length" in page and "ppl.png" in page
    assert f"{res['ppl']['tuned']['128']:.3f}" in page and "native length (128)" in page
    write_report(grid, tmp_path)  # a later `eval niah` into the same folder keeps the section
    assert "Perplexity by window length" in (tmp_path / "report.html").read_text()


def test_ring_over_four_devices_gives_the_single_device_ppl(setup, tmp_path):
    root, _, files = setup
    run_yaml = tmp_path / "run.yaml"
    run_yaml.write_text("attention: {strategy: ring, kernel: xla, block_q: 32, block_kv: 32}\n"
                        "parallel: {mesh: {data: 1, fsdp: 1, context: 4}, cpu_devices: 4}\n")
    args = ["--model", str(root / "base"), "--text", str(files[0]), "--lengths", "128"]
    _run(*args, "--out", str(tmp_path / "one"))
    _run(*args, "--config", str(run_yaml), "--out", str(tmp_path / "ring"))
    one, ring = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("one", "ring"))
    assert ring["models"]["base"]["attention"]["strategy"] == "ring"
    assert ring["models"]["base"]["attention"]["context_degree"] == 4
    assert ring["ppl"]["128"] == pytest.approx(one["ppl"]["128"], rel=1e-5)
    assert ring["loss_by_position"]["128"]["tokens"] == one["loss_by_position"]["128"]["tokens"]


def test_ppl_errors_name_the_problem(setup, tmp_path):
    root, _, files = setup
    run = lambda *a: CliRunner().invoke(app, ["eval", "ppl", "--model", str(root / "base"), *a, "--no-progress",
                                              "--out", str(tmp_path)])
    assert "no document has 4096 tokens" in str(run("--text", str(files[1]), "--lengths", "4K").exception)
    assert "--names: 2 labels for 1 models" in str(run("--text", str(files[1]), "--names", "a,b").exception)
    assert "--stride: must be >= 1" in str(run("--text", str(files[1]), "--lengths", "64", "--stride", "0").exception)
    assert "give --text FILE" in str(run().exception)


def test_a_corpus_without_held_out_documents_gives_all_of_them(setup, words_corpus, tmp_path):
    root, _, _ = setup
    _run("--model", str(root / "base"), "--corpus", str(words_corpus), "--lengths", "64", "--max-documents", "4",
         "--out", str(tmp_path))
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["documents"]["count"] == 4 and res["documents"]["source"].startswith("all documents of")
    assert res["windows"]["64"] >= 4 and "trained on" in (tmp_path / "report.html").read_text()


def test_a_reused_subject_is_not_scored_again_and_reports_the_same(setup, tmp_path, monkeypatch):
    """The tune flow's cached base perplexity (tune_flow_evals.base_ppl, then run_ppl(base=)): scored
    alone and stored once, reused after, and the report equals one that scored both models."""
    from rich.console import Console

    from bookft.eval import ppl_entry
    from bookft.eval.entry import Subject
    from bookft.flows import tune_evals as ev

    root, _, files = setup
    loaded = []
    real = ppl_entry.load_on_mesh

    def spy(ck, md, *a):
        loaded.append(md)
        return real(ck, md, *a)

    monkeypatch.setattr(ppl_entry, "load_on_mesh", spy)
    kw = {"run_config": None, "console": Console(quiet=True), "progress": False}
    both = ev.run_ppl(root / "base", root / "tuned", files, (128, 64), out=tmp_path / "both", **kw)
    assert loaded == [str(root / "base"), str(root / "tuned")]
    cache = {"cache": tmp_path / "cache", "key": "k"}
    base = ev.base_ppl(root / "base", files, (128, 64), out=tmp_path / "a", **kw, **cache)
    stored = list((tmp_path / "cache" / "k").glob("ppl-base-64-128-*.json"))
    assert len(stored) == 1 and loaded[2:] == [str(root / "base")]
    assert ev.base_ppl(root / "base", files, (64, 128), out=tmp_path / "a2", **kw, **cache) == json.loads(
        stored[0].read_text())
    assert loaded[3:] == []  # the second call read the cache
    again = ev.run_ppl(root / "base", root / "tuned", files, (64, 128), out=tmp_path / "b", base=base, **kw)
    assert loaded[3:] == [str(root / "tuned")]  # base came from the record
    for key in ("ppl", "loss", "tokens", "windows", "loss_by_position"):
        assert again[key] == json.loads(json.dumps(both[key])), key
    assert again["models"]["base"] == json.loads(stored[0].read_text())["info"]  # the stored record
    assert "Perplexity by window length" in (tmp_path / "b" / "report.html").read_text()
    ev.base_ppl(root / "base", files[:1], (64, 128), out=tmp_path / "c", **kw, **cache)
    assert loaded[4:] == [str(root / "base")]  # other texts: scored anew
    with pytest.raises(EvalError, match="reused scores are at lengths"):
        ppl_entry.evaluate_ppl(None, ppl_entry.PplConfig(lengths=(64,), texts=(str(files[0]),)),
                               [Subject(model_dir=str(root / "base"), label="base")], out=tmp_path / "d",
                               reuse={"base": json.loads(stored[0].read_text())}, console=Console(quiet=True))
