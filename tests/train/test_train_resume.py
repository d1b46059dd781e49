"""`bookft train` end to end on a small corpus: exact resume after kill -9, SIGTERM, bad configs."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from bookft.errors import AttentionError, ConfigError, TrainError
from bookft.train.checkpoint import Checkpointer, restore_params
from bookft.train.config import load_run_config
from bookft.train.rundir import losses_from_log
from bookft.train.trainer import train

CONFIG = """
name: t
model: {vocab_size: 320, hidden_size: 32, intermediate_size: 64, num_layers: 1, num_heads: 2,
        num_kv_heads: 2, compute_dtype: float32, remat: none}
attention: {strategy: ring, kernel: xla, block_q: 16, block_kv: 16}
parallel: {mesh: {data: 1, fsdp: 1, context: 2}, cpu_devices: 2}
data: {corpus: CORPUS, batch_size: 1, seq_len: 64}
train: {steps: 6, loss_chunk: 32, optimizer: {lr: 3.0e-3, warmup_steps: 2}}
checkpoint: {every: 1, keep: 10, async_save: false}
"""


@pytest.fixture()
def corpus(words_corpus):
    return words_corpus


@pytest.fixture()
def config_file(tmp_path, corpus):
    p = tmp_path / "t.yaml"
    p.write_text(CONFIG.replace("CORPUS", str(corpus)))
    return p


def cli(args, **kw):
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2 --xla_backend_optimization_level=0")
    return subprocess.Popen([sys.executable, "-m", "bookft.cli", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kw)


def wait_for_step(run_dir: Path, step: int, proc, timeout=300):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if max(losses_from_log(run_dir), default=0) >= step:
            return
        if proc.poll() is not None:
            raise AssertionError(proc.stdout.read())
        time.sleep(0.2)
    raise AssertionError("timed out")


def final_params(run_dir, cfg_path):
    from flax import nnx

    from bookft.model import abstract_model
    from bookft.model.lora import trainable_filter

    cfg = load_run_config(cfg_path)
    _, abs_params, _ = nnx.split(abstract_model(cfg.model), trainable_filter(cfg.model), ...)
    step, params = restore_params(run_dir, jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), abs_params))
    return step, [np.asarray(x) for x in jax.tree.leaves(params)]


def test_kill9_resume_is_exact_and_sigterm_saves(tmp_path, config_file):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    p = cli(["train", "-c", str(config_file), "--run-dir", str(straight)])
    assert p.wait(600) == 0, p.stdout.read()

    p = cli(["train", "-c", str(config_file), "--run-dir", str(killed)])
    wait_for_step(killed, 3, p)
    p.send_signal(signal.SIGKILL)
    p.wait()
    p = cli(["train", "-c", str(config_file), "--run-dir", str(killed)])
    assert p.wait(600) == 0, p.stdout.read()

    a, b = losses_from_log(straight), losses_from_log(killed)
    assert sorted(a) == sorted(b) == [1, 2, 3, 4, 5, 6]
    assert a == b  # bitwise-equal losses at every step
    sa, pa = final_params(straight, config_file)
    sb, pb = final_params(killed, config_file)
    assert sa == sb == 6
    for x, y in zip(pa, pb, strict=True):
        np.testing.assert_array_equal(x, y)

    # SIGTERM mid-run: a checkpoint for the step it was on, exit status 143
    term = tmp_path / "term"
    p = cli(["train", "-c", str(config_file), "--run-dir", str(term), "--steps", "1000",
             "--set", "checkpoint.every=1000"])
    wait_for_step(term, 2, p)
    p.send_signal(signal.SIGTERM)
    assert p.wait(300) == 143, p.stdout.read()
    last = max(losses_from_log(term))
    assert Checkpointer(term).steps()[-1] == last


def test_truncated_latest_checkpoint_falls_back(tmp_path, config_file, capsys):
    run = tmp_path / "run"
    cfg = load_run_config(config_file, ["train.steps=3"])
    train(cfg, run_dir=run)
    ck = Checkpointer(run)
    assert ck.steps() == [1, 2, 3]
    ck.close()
    # truncate every array file of the newest checkpoint
    for f in (run / "checkpoints" / "3" / "params").rglob("*"):
        if f.is_file() and f.stat().st_size > 0 and "metadata" not in f.name:
            f.write_bytes(f.read_bytes()[: f.stat().st_size // 3])
    res = train(load_run_config(config_file, ["train.steps=4"]), run_dir=run)
    assert "falling back" in capsys.readouterr().out
    assert res.step == 4 and sorted(res.losses) == [3, 4]  # resumed from step 2
    assert (run / "checkpoints" / "broken-3").is_dir()


def test_bad_configs_fail_before_compiling(tmp_path, config_file, corpus):
    with pytest.raises(ConfigError, match="unknown key train.stepz"):
        load_run_config(config_file, ["train.stepz=3"])
    with pytest.raises(ConfigError, match="parallel.mesh: data=1 x fsdp=1 x context=3 = 3 devices, but 2"):
        train(load_run_config(config_file, ["parallel.mesh.context=3"]), run_dir=tmp_path / "a")
    with pytest.raises(AttentionError, match="sequence length 50 is not divisible by 4"):
        train(load_run_config(config_file, ["data.seq_len=50"]),
              run_dir=tmp_path / "b")
    with pytest.raises(TrainError, match=r"tokenizer has \d+ tokens but the model.s vocabulary is 200"):
        train(load_run_config(config_file, ["model.vocab_size=200"]), run_dir=tmp_path / "c")
    shutil.rmtree(tmp_path / "a", ignore_errors=True)


def test_metrics_log_has_documented_fields(tmp_path, config_file):
    run = tmp_path / "m"
    train(load_run_config(config_file, ["train.steps=2"]), run_dir=run)
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for key in ("loss", "grad_norm", "lr", "tokens_per_s", "step_time_s", "mfu", "peak_memory_bytes"):
        assert key in rows[0]
    assert np.isfinite(rows[-1]["loss"])


def test_export_of_a_training_checkpoint_loads_in_transformers(tmp_path, config_file):
    torch = pytest.importorskip("torch")
    import transformers

    from bookft.model import forward_logits
    from bookft.train.checkpoint import load_params
    from bookft.train.export import export_checkpoint

    run = tmp_path / "e"
    train(load_run_config(config_file, ["train.steps=1"]), run_dir=run)
    assert (run / "tokenizer.json").is_file()
    out = export_checkpoint(run, tmp_path / "hf", tokenizer_dir=run)
    model, _ = load_params(run)
    ids = np.random.default_rng(0).integers(0, 300, (1, 24))
    ours = forward_logits(model, ids)
    # restored straight onto a mesh with the train shardings: same weights, no whole copy first
    import jax

    from bookft.parallel.config import ParallelConfig
    from bookft.parallel.mesh import make_mesh

    mesh = make_mesh(ParallelConfig(mesh={"data": 1, "fsdp": 2, "context": 2}), jax.devices()[:4])
    placed, _ = load_params(run, mesh=mesh)
    assert placed.embed[...].sharding.mesh.shape == mesh.shape
    assert not placed.embed[...].sharding.is_fully_replicated
    np.testing.assert_allclose(forward_logits(placed, ids), ours, rtol=1e-5, atol=1e-5)
    hf = transformers.AutoModelForCausalLM.from_pretrained(out).float().eval()
    with torch.no_grad():
        theirs = hf(torch.tensor(ids)).logits.numpy()
    np.testing.assert_allclose(ours, theirs, atol=1e-4, rtol=1e-4)


def test_lora_trains_only_adapters(tmp_path, config_file):
    from flax import nnx

    from bookft.model import init_model
    from bookft.model.decoder import LoraParam
    from bookft.train.checkpoint import load_params

    cfg = load_run_config(config_file, ["train.steps=2", "model.lora.rank=2", "model.lora.targets=[q, v, down]"])
    run = tmp_path / "lora"
    res = train(cfg, run_dir=run)
    assert res.step == 2
    tuned, _ = load_params(run)
    base = init_model(cfg.model, seed=cfg.train.seed)
    flat_t = dict(nnx.state(tuned, nnx.Param).flat_state())
    flat_b = dict(nnx.state(base, nnx.Param).flat_state())
    same = lambda a, b: np.array_equal(np.asarray(a[...]), np.asarray(b[...]))  # noqa: E731
    changed = {path for path, v in flat_t.items() if not same(v, flat_b[path])}
    lora = {path for path, v in flat_t.items() if isinstance(v, LoraParam)}
    assert changed and changed <= lora  # base weights frozen, adapters trained
    assert len(Checkpointer(run).steps()) >= 1
