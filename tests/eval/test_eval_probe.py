"""The needle probe (train.probe_every): run on the live sharded parameters under ring attention over
4 devices, logged to metrics.jsonl, and equal to the single-device eval forward of the same weights."""

import json

import jax
import numpy as np
import pytest
from flax import nnx
from typer.testing import CliRunner

from bookft.cli import app
from bookft.eval.drivers import model_logits_fn
from bookft.eval.probe import NeedleProbe, probe_hooks, probe_rows
from bookft.train.config import load_run_config
from bookft.train.trainer import Trainer

CONFIG = """
name: p
model: {vocab_size: 320, hidden_size: 32, intermediate_size: 64, num_layers: 2, num_heads: 2,
        num_kv_heads: 2, compute_dtype: float32, remat: none, max_position_embeddings: 1024}
attention: {strategy: ring, kernel: xla, block_q: 16, block_kv: 16}
parallel: {mesh: {data: 1, fsdp: 1, context: 4}, cpu_devices: 4}
data: {corpus: CORPUS, batch_size: 1}
train: {steps: 5, loss_chunk: 64, probe_every: 2, probe: {lengths: [384, 512], depths: [0, 100], seeds: [100]},
        optimizer: {lr: 3.0e-3, warmup_steps: 2},
        curriculum: [{seq_len: 64, steps: 2}, {seq_len: 128, steps: 3}]}
checkpoint: {every: 100, keep: 1, async_save: false}
eval: {phrasing: short, lengths: [512], batch_size: 2}
"""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("probe_corpus")
    src = root / "src"
    src.mkdir()
    rng = np.random.default_rng(0)
    words = "the river carried old letters past the mill while a quiet clerk counted barrels".split()
    for i in range(4):
        (src / f"d{i}.txt").write_text("\n\n".join(" ".join(rng.choice(words, 40)) for _ in range(8)) + "\n")
    out = root / "corpus"
    res = CliRunner().invoke(app, ["ingest", str(src), "--out", str(out), "--seq-len", "128",
                                   "--vocab-size", "300", "--workers", "0"])
    assert res.exit_code == 0, res.output
    return out


def test_probe_on_live_sharded_params(tmp_path, corpus):
    cfg_file = tmp_path / "p.yaml"
    cfg_file.write_text(CONFIG.replace("CORPUS", str(corpus)))
    cfg = load_run_config(cfg_file)
    trainer = Trainer(cfg, run_dir=tmp_path / "run")
    hooks = probe_hooks(cfg)
    assert len(hooks) == 1 and hooks[0].every == 2
    result = trainer.run(hooks=hooks)
    assert result.step == 5

    rows = [json.loads(ln) for ln in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5]
    probed = probe_rows(tmp_path / "run")
    assert [r["step"] for r in probed] == [2, 4, 5]  # every 2 steps and at the end
    assert all(set(r) == {"step", "probe/384", "probe/512", "probe/min"} for r in probed)
    assert all(0.0 <= r["probe/min"] <= min(r["probe/384"], r["probe/512"]) for r in probed)

    # the probe's forward is the sharded ring program over the trainer's own parameter arrays ...
    probe = hooks[0]
    params = trainer.state["params"]
    leaf = jax.tree.leaves(params)[0]
    assert len(leaf.sharding.device_set) == 4
    grid = probe.grid(trainer)
    assert grid["lengths"] == [384, 512] and len(grid["cells"]) == 4
    # ... and gives the logits of the single-device eval forward (reference attention) of the same weights
    model = nnx.merge(trainer.graphdef, jax.device_get(params), jax.device_get(trainer.frozen))  # host copy
    ref = model_logits_fn(model, tail=probe.settings.logits_tail)
    ids = np.random.default_rng(1).integers(2, 300, size=(2, 256)).astype(np.int32)
    seg = np.zeros((2, 256), np.int32)
    seg[0, :250], seg[1, :230] = 1, 1  # right padding, as pack_batch makes it
    pos = np.where(seg > 0, np.arange(256)[None], 0).astype(np.int32)
    arr = (np.where(seg > 0, ids, 0), pos, seg)
    got, start = probe._fn((params, trainer.frozen), *arr)
    want, start_ref = ref(*arr)
    assert start == start_ref
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)


def test_probe_settings_take_the_eval_section(tmp_path, corpus):
    cfg_file = tmp_path / "p.yaml"
    cfg_file.write_text(CONFIG.replace("CORPUS", str(corpus)).replace("lengths: [384, 512], ", ""))
    p = NeedleProbe(load_run_config(cfg_file))
    s = p.settings
    assert s.lengths == (512,) and s.depths == (0.0, 100.0) and s.seeds == (100,)
    assert s.phrasing == "short" and s.scoring == ("teacher_forced",)
