"""`bookft eval niah --model` end to end on a real bookft Decoder: a run config's attention and
parallel sections select ring attention over 4 simulated devices for both scorers (see
test_eval_cp.py for the equality with the single-device results)."""

from __future__ import annotations

import json

import pytest
from eval_helpers import byte_bpe
from typer.testing import CliRunner

model_mod = pytest.importorskip("bookft.model")

from bookft.cli import app  # noqa: E402
from bookft.needles.tokenizer import ModelTokenizer  # noqa: E402

TINY = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
            max_position_embeddings=1024, compute_dtype="float32", remat="none")


@pytest.fixture(scope="module")
def setup():
    tok = ModelTokenizer.load(byte_bpe())
    return tok, model_mod.init_model(model_mod.ModelConfig(**TINY), seed=0)


def test_cli_niah_on_hf_folder_with_ring_config(setup, tmp_path):
    tok, model = setup
    hf = tmp_path / "hf"
    model_mod.save_hf(model, model.config, hf)
    tok.tok.save(str(hf / "tokenizer.json"))
    run_yaml = tmp_path / "run.yaml"
    run_yaml.write_text(
        "model: {vocab_size: 512}\n"
        "attention: {strategy: ring, kernel: xla, block_q: 32, block_kv: 32}\n"
        "parallel: {mesh: {data: 1, fsdp: 1, context: 4}, cpu_devices: 4}\n"
        "eval: {threshold: 0.5}\n")
    out = tmp_path / "out"
    args = ["eval", "niah", "--model", str(hf), "--config", str(run_yaml), "--lengths", "250",
            "--depths", "0,100", "--seeds", "0", "--scoring", "teacher_forced,generate", "--out", str(out),
            "--no-progress"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, (r.output, r.exception)
    res = json.loads((out / "results.json").read_text())
    assert res["model"]["attention"] == {"strategy": "ring", "kernel": "xla", "context_degree": 4,
                                         "load_balanced": True, "length_rule": {"chunks": 8, "block": 32},
                                         "buckets_per_octave": 4,
                                         "mesh": {"data": 1, "fsdp": 1, "context": 4}}
    assert len(res["cells"]) == 2 and res["summary"]["mean"] <= 0.05  # untrained: retrieves nothing
    assert res["settings"]["threshold"] == 0.5 and res["cells"][0]["actual_lengths"][0] <= 250
    assert (out / "report.html").is_file()
    r = CliRunner().invoke(app, [*args[:7], "2048", "--out", str(tmp_path / "o2")])
    assert "max_position_embeddings (1024)" in str(r.exception)

    # --checkpoint: the run's own config.yaml selects ring over 4 devices; load_params' host arrays
    # are placed on the mesh with the train shardings; same weights -> the same cells
    import jax.numpy as jnp
    import yaml
    from flax import nnx

    from bookft.model.lora import trainable_filter
    from bookft.train.checkpoint import Checkpointer

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({
        "name": "ring-run", "model": TINY,
        "attention": {"strategy": "ring", "kernel": "xla", "block_q": 32, "block_kv": 32},
        "parallel": {"mesh": {"data": 1, "fsdp": 1, "context": 4}, "cpu_devices": 4}}))
    _, params, _ = nnx.split(model, trainable_filter(model.config), ...)
    ckpt = Checkpointer(run, async_save=False)
    ckpt.save(1, params, {"count": jnp.zeros(())}, {"step": 1}, force=True)
    ckpt.close()
    r = CliRunner().invoke(app, ["eval", "niah", "--checkpoint", str(run), "--tokenizer", str(hf / "tokenizer.json"),
                                 *args[6:-3], "--out", str(tmp_path / "o3"), "--no-progress"])
    assert r.exit_code == 0, (r.output, r.exception)
    res_ck = json.loads((tmp_path / "o3" / "results.json").read_text())
    assert res_ck["model"]["attention"] == res["model"]["attention"] and res_ck["model"]["run"] == "ring-run"
    assert [c["per_seed"] for c in res_ck["cells"]] == [c["per_seed"] for c in res["cells"]]
