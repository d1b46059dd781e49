"""`bookft quickstart --model DIR --docs ...`: the real-model flow (bookft/tune_flow.py) end to end on a
tiny random Llama with a chat template, generated documents, two held-out ones, short notes and held-out code."""

import json
from pathlib import Path

import pytest

from bookft.needles.haystack import essay_sentences
from bookft.needles.train import GENERATOR

TEMPLATE = ("{% for m in messages %}<s>{{ m['role'] }}\n{{ m['content'] }}</s>\n{% endfor %}"
            "{% if add_generation_prompt %}<s>assistant\n{% endif %}")
TASKS = ("multikey", "vartrack", "niah_fact", "hops")  # the headline tasks, then untrained families
MODELS = ("base", "fewshot", "tuned")


def _essay(seed: int, n: int) -> str:
    gen = essay_sentences(seed)
    return "".join(next(gen) for _ in range(n))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A 1-layer random Llama whose BPE knows the tasks' words, with a chat template."""
    from bookft.ingest.tokenize import train_bpe
    from bookft.model import init_model, save_hf
    from bookft.model.config import ModelConfig

    tmp = tmp_path_factory.mktemp("tune")
    tok_dir = tmp / "tok"
    tok_dir.mkdir()
    bpe = train_bpe([_essay(9, 3000), "VAR ABCDE = VAR FGHIJ. 0123456789 special magic number " * 50], 2000, 2)
    bpe.add_special_tokens(["<s>", "</s>"])
    bpe.save(str(tok_dir / "tokenizer.json"))
    (tok_dir / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>", "bos_token": "<s>",
                                                               "chat_template": TEMPLATE}))
    cfg = ModelConfig(vocab_size=bpe.get_vocab_size(), hidden_size=32, intermediate_size=64, num_layers=1,
                      num_heads=2, num_kv_heads=1, head_dim=16, max_position_embeddings=2048)
    save_hf(init_model(cfg), cfg, tmp / "model", tokenizer_dir=tok_dir)
    return tmp / "model"


def test_quickstart_with_a_model_reports_base_fewshot_and_tuned(model_dir, tmp_path, monkeypatch):
    from bookft.flows import tune as tune_flow

    docs = []
    for i in range(4):
        docs.append(tmp_path / f"book{i}.txt")
        docs[-1].write_text(_essay(i, 400))
    short = tmp_path / "short"
    short.mkdir()
    for i in range(6):
        (short / f"note{i}.txt").write_text(_essay(20 + i, 12))
    code = tmp_path / "module.py"
    code.write_text("".join(f"def f{i}(x):\n    return x * {i} + {i % 7}\n\n\n" for i in range(300)))
    # small, shrunk further: 2 steps, one length, one depth and seed, two families, ingest in this process
    small = tune_flow.SIZES["small"]
    monkeypatch.setitem(tune_flow.SIZES, "small", tune_flow.dataclasses.replace(
        small, lengths=(1024,), ppl_lengths=(512,), depths=(50.0,), seeds=(0,), family_seeds=(0,),
        families=("niah_fact", "hops"), steps=2, ppl_chars=8000, short_docs=3, short_chars=400,
        short_tokens=160, workers=0, example_lengths=(512, 1024)))
    from typer.testing import CliRunner

    from bookft.cli import app

    out = tmp_path / "out"
    args = ["quickstart", "--model", str(model_dir), "--size", "small", "--out", str(out), "--short", str(short),
            "--heldout-other", str(code), "--docs", *map(str, docs[:2]), "--heldout", *map(str, docs[2:])]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output + repr(res.exception)
    s = json.loads((out / "summary.json").read_text())
    assert (out / "report.html").is_file() and s["paths"]["report"] == str(out / "report.html")
    assert tuple(s["tasks"]) == TASKS
    for task in TASKS:
        assert (out / f"compare-{task}" / "compare.html").is_file()
        per = s["tasks"][task]["per_length"]
        assert set(per) == {"1024"}
        for cells in per.values():
            assert all(set(MODELS) == set(v) for v in cells.values())
        assert set(s["tasks"][task]["stats"]) == set(MODELS)
    # the headline: every task, model and scoring at the longest length, on the test split, with intervals
    assert s["train_seed"] == 0
    rows = s["headline"]
    assert {(r["task"], r["model"], r["scoring"]) for r in rows} == {
        (t, m, sc) for t in TASKS for m in MODELS for sc in ("strict", "ruler")}
    for r in rows:
        assert r["length"] == 1024 and r["split"] == "test" and r["draws"] == 1
        assert 0.0 <= r["ci"][0] <= r["score"] <= r["ci"][1] <= 1.0
    fewshot = json.loads((out / "eval-fewshot" / "multikey" / "results.json").read_text())
    assert fewshot["fewshot"] == 1 and fewshot["split"] == "test"
    assert len(list((out / "base-cache").rglob("fewshot/multikey/results.json"))) == 1  # cached beside base's
    assert set(s["ppl"]) == {"512"} and all({"base", "tuned"} <= set(v) for v in s["ppl"].values())
    assert set(s["ppl_other"]) == {"512"}  # the held-out code, scored apart from the books
    assert len(list((out / "base-cache").rglob("ppl-base-512-*.json"))) == 2  # books and the code, cached
    assert s["short"] and all("loss_delta" in v for v in s["short"].values())
    retrieval = s["corpus"]["retrieval"]
    assert set(retrieval["per_kind"]) == {"niah", "multikey", "multivalue", "vartrack"}
    assert set(retrieval["per_generator"]) == {GENERATOR}  # never the eval's wording or keys
    assert set(retrieval["per_length"]) == {"512", "1024"}  # example_lengths, not the eval's
    version = next((out / "corpus" / "versions").iterdir())
    mix = json.loads((version / "manifest.json").read_text())["mix"]
    assert mix["sources"]["short"]["realised_tokens"] > 0 and mix["short_sequences"] > 0  # the short share
    assert (out / "tuned-model" / "config.json").is_file() and s["train"]["steps"] == 2
    assert set(s["times"]) >= {"ingest_s", "eval_base_s", "eval_fewshot_s", "train_s", "export_s", "eval_tuned_s",
                               "total_s"}


def test_an_interrupted_flow_resumes_from_its_corpora_and_checkpoint(model_dir, tmp_path, monkeypatch):
    from rich.console import Console

    from bookft.errors import ConfigError, TrainError
    from bookft.flows import tune as tune_flow
    from bookft.train import trainer

    docs = []
    for i in range(2):
        docs.append(tmp_path / f"book{i}.txt")
        docs[-1].write_text(_essay(i, 300))
    held = [tmp_path / "held0.txt", tmp_path / "held1.txt"]  # the test split needs two held-out books
    for i, p in enumerate(held):
        p.write_text(_essay(5 + i, 300))
    changes = {"lengths": (512,), "ppl_lengths": (256,), "depths": (50.0,), "seeds": (0,), "steps": 2,
               "ppl_chars": 3000, "short_docs": 2, "short_chars": 300, "short_tokens": 128, "workers": 0,
               "tasks": ("multikey",), "families": (), "fewshot": 0, "example_lengths": (256,),
               "length_shares": ()}
    real = trainer.train

    def stopped_after_one(cfg, **kw):  # as a SIGTERM after step 1: the checkpoint saved, interrupted
        import dataclasses

        res = real(dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=1)), **kw)
        return dataclasses.replace(res, interrupted=True)

    out = tmp_path / "out"
    monkeypatch.setitem(tune_flow.SIZES, "small", tune_flow.dataclasses.replace(tune_flow.SIZES["small"], **changes))
    kw = {"size": "small", "overrides": ["checkpoint.every=1"], "console": Console(quiet=True), "progress": False}
    monkeypatch.setattr(trainer, "train", stopped_after_one)
    with pytest.raises(TrainError, match="stopped at step 1 of 2.*--resume"):
        tune_flow.run_tune_flow(model_dir, docs, held, out, **kw)
    manifest = (out / "corpus" / "versions" / "0001" / "manifest.json").read_text()
    from typer.testing import CliRunner

    from bookft.cli import app

    args = ["quickstart", "--model", str(model_dir), "--docs", str(docs[0]), "--docs", str(docs[1]), "--heldout",
            str(held[0]), str(held[1]), "--out", str(out), "--set", "checkpoint.every=1", "--resume"]
    res = CliRunner().invoke(app, [*args, "--seed", "1"])  # started with seed 0: refused, nothing touched
    assert res.exit_code != 0 and "other seed" in res.output + str(res.exception), res.output
    with pytest.raises(ConfigError, match="other seed"):
        tune_flow.run_tune_flow(model_dir, docs, held, out, seed=1, resume=True, **kw)
    monkeypatch.setattr(trainer, "train", real)
    s = tune_flow.run_tune_flow(model_dir, docs, held, out, resume=True, **kw)
    assert (out / "corpus" / "versions" / "0001" / "manifest.json").read_text() == manifest  # not rebuilt
    assert not (out / "corpus" / "versions" / "0002").exists()
    rows = [json.loads(x) for x in (out / "run" / "metrics.jsonl").read_text().splitlines() if x.strip()]
    assert [r["step"] for r in rows if "loss" in r] == [1, 2]  # step 2 only was trained on resume
    assert s["train"]["steps"] == 2 and s["times"]["train_steps_s"] > 0
    graded = []  # the tuned test grids come back from OUT/tuned-cache; the dev grids are new
    real_grid = tune_flow.ev.run_grid

    def grid(d, task, st, **k):
        graded.append((Path(d).name, task, st.split))
        return real_grid(d, task, st, **k)

    monkeypatch.setattr(tune_flow.ev, "run_grid", grid)
    again = tune_flow.run_tune_flow(model_dir, docs, held, out, resume=True, dev_grids=True, **kw)
    assert [g for g in graded if g[0] == "tuned-model"] == [("tuned-model", "multikey", "dev")]
    assert again["tasks"] == s["tasks"]
    dev_rows = [r for r in again["headline"] if r["split"] == "dev"]
    assert {(r["task"], r["model"], r["scoring"]) for r in dev_rows} == {("multikey", "tuned", "strict"),
                                                                        ("multikey", "tuned", "ruler")}
    assert [r for r in again["headline"] if r["split"] == "test"] == s["headline"]
    assert set(again["dev"]["tasks"]) == {"multikey"} and again["times"]["eval_dev_s"] > 0


def test_an_ablation_without_families_scores_none_and_keeps_the_base_cache_key(model_dir, tmp_path, monkeypatch):
    """families=False (real_flow --no-families): no model is scored on a family; the cache keys and
    flow.json hold the whole protocol, families included, so the base grids hit the full flow's cache
    and the flow goes on (--resume) with its families, keeping the tuned grid it finished."""
    from rich.console import Console

    from bookft.flows import tune as tune_flow

    docs, held = [tmp_path / "book0.txt"], [tmp_path / "held0.txt", tmp_path / "held1.txt"]
    for i, p in enumerate(docs + held):
        p.write_text(_essay(i, 300))
    changes = {"lengths": (512,), "ppl_lengths": (256,), "depths": (50.0,), "seeds": (0,), "family_seeds": (0,),
               "steps": 1, "ppl_chars": 3000, "short_docs": 2, "short_chars": 300, "short_tokens": 128,
               "workers": 0, "tasks": ("multikey",), "families": ("hops",), "fewshot": 0,
               "example_lengths": (256,), "length_shares": ()}
    monkeypatch.setitem(tune_flow.SIZES, "small", tune_flow.dataclasses.replace(tune_flow.SIZES["small"], **changes))
    keyed, graded = [], []
    real_key, real_grid = tune_flow.ev.cache_key, tune_flow.ev.run_grid

    def cache_key(model, settings, *a, **k):
        keyed.append((Path(model).name, tuple(settings["families"])))
        return real_key(model, settings, *a, **k)

    def grid(d, task, st, **k):
        graded.append((Path(d).name, task))
        return real_grid(d, task, st, **k)

    monkeypatch.setattr(tune_flow.ev, "cache_key", cache_key)
    monkeypatch.setattr(tune_flow.ev, "run_grid", grid)
    s = tune_flow.run_tune_flow(model_dir, docs, held, tmp_path / "out", size="small", families=False,
                                base_cache=tmp_path / "cache", console=Console(quiet=True), progress=False)
    assert graded == [("model", "multikey"), ("tuned-model", "multikey")]
    assert set(s["tasks"]) == {"multikey"} and not s["settings"]["families"]
    assert {r["task"] for r in s["headline"]} == {"multikey"}
    assert [k for k in keyed if k[0] == "model"] == [("model", ("hops",))] * 2  # base and few-shot keys
    assert json.loads((tmp_path / "out" / "flow.json").read_text())["settings"]["families"] == ["hops"]
    graded.clear()
    again = tune_flow.run_tune_flow(model_dir, docs, held, tmp_path / "out", size="small", resume=True,
                                    base_cache=tmp_path / "cache", console=Console(quiet=True), progress=False)
    assert graded == [("model", "hops"), ("tuned-model", "hops")]  # tuned multikey: from OUT/tuned-cache
    assert set(again["tasks"]) == {"multikey", "hops"} and again["tasks"]["multikey"] == s["tasks"]["multikey"]


def test_base_grids_come_from_the_cache_the_second_time(tmp_path, monkeypatch):
    from rich.console import Console

    from bookft.flows import tune_evals as ev
    from bookft.flows.tune import settings_for

    calls = []

    def fake_grid(model_dir, task, s, *, out, **kw):
        calls.append(task)
        per_seed = [{"seed": 0, "actual_length": 510, "actual_depth": 50.0, "answer": "1", "generate": 0.5,
                     "output": " 1"}]
        cell = {"length": 512, "depth": 50.0, "actual_depth": 50.0, "actual_depths": [50.0],
                "actual_lengths": [510], "seeds": [0], "scores": {"generate": 0.5}, "per_seed": per_seed}
        res = {"version": 1, "kind": "bookft-eval", "task": task, "settings": {"task": task}, "tokenizer": {},
               "lengths": [512],
               "depths": [50.0], "cells": [cell],
               "summary": {"score": "generate", "threshold": 0.85, "mean": 0.5, "per_length": {"512": 0.5},
                           "per_depth": {"50.0": 0.5}, "effective_length": None}}
        out.mkdir(parents=True)
        (out / "results.json").write_text(json.dumps(res))
        return res

    monkeypatch.setattr(ev, "run_grid", fake_grid)
    s = settings_for("small", {"tasks": ("niah", "vartrack"), "families": ()})
    kw = {"cache": tmp_path / "cache", "key": "k", "console": Console(quiet=True)}
    first = ev.grids(tmp_path / "m", s, tmp_path / "a", **kw)
    second = ev.grids(tmp_path / "m", s, tmp_path / "b", **kw)
    assert calls == ["niah", "vartrack"] and first == second
    assert sorted(p.name for p in (tmp_path / "cache" / "k" / "base" / "vartrack").iterdir()) == ["results.json"]
    assert {"results.json", "heatmap.png", "report.html"} <= {p.name for p in (tmp_path / "b" / "vartrack").iterdir()}


def test_the_base_cache_key_ignores_the_recipe_and_layout_not_the_scoring(tmp_path):
    from bookft.flows import tune_evals as ev
    from bookft.train.config import load_run_config

    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    held = tmp_path / "held.txt"
    held.write_text("a held-out book")
    key = lambda *o: ev.cache_key(model, {"lengths": [512]}, load_run_config(None, list(o)), [held])
    first = key()
    assert first == key("train.optimizer.lr=0.5", "train.steps=3", "data.seq_len=64", "checkpoint.every=1")
    assert first == key("model.lora.rank=4", "model.lora.targets=[q,v,gate]")
    assert first == key("attention.strategy=local", "parallel.mesh.context=1", "parallel.cpu_devices=1",
                        "attention.block_q=64", "attention.load_balance=false")  # the same function, laid out anew
    assert first == key("model.remat=none", "model.scan_layers=false", "model.mlp_chunk=256")
    assert key() != key("eval.max_new_tokens=3")
    assert key() != key("attention.causal=false")
    assert key() != key("model.compute_dtype=bfloat16")
    (model / "config.json").write_text('{"transformers_version": "9.9.9"}')  # the writer, not the model
    assert key() == first
    (model / "config.json").write_text('{"vocab_size": 7}')
    assert key() != first
    (model / "config.json").write_text("{}")
    held.write_text("another held-out book")
    assert key() != first


def test_the_fewshot_module_keys_only_the_fewshot_grids(tmp_path, monkeypatch):
    """A base prompt never passes through the few-shot module: rewording the shots keeps the base
    grids and keys new few-shot ones."""
    from bookft.flows.base_cache import prompt_fingerprint
    from bookft.needles import fewshot

    base, shots = prompt_fingerprint(), prompt_fingerprint(fewshot=True)
    assert base != shots
    other = tmp_path / "fewshot.py"
    other.write_text("# other shots\n")
    monkeypatch.setattr(fewshot, "__file__", str(other))
    assert prompt_fingerprint() == base and prompt_fingerprint(fewshot=True) != shots
