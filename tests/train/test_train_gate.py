"""A probe-gated curriculum: the gate's rules (bookft/train/gate.py), and in the real trainer the stage
ends at the probe that passes, the schedule follows the realised lengths, and a run preempted after the
gate resumes exactly."""

import os
import signal

import numpy as np
import pytest
from typer.testing import CliRunner

from bookft.cli import app
from bookft.config import from_dict
from bookft.errors import ConfigError
from bookft.train.config import RunConfig, load_run_config
from bookft.train.curriculum import stage_len
from bookft.train.rundir import losses_from_log
from bookft.train.trainer import Trainer

CONFIG = """
name: g
model: {vocab_size: 320, hidden_size: 32, intermediate_size: 64, num_layers: 1, num_heads: 2,
        num_kv_heads: 2, compute_dtype: float32, remat: none}
attention: {strategy: ring, kernel: xla, block_q: 16, block_kv: 16}
parallel: {mesh: {data: 1, fsdp: 1, context: 2}, cpu_devices: 2}
data: {corpus: CORPUS, batch_size: 1}
train: {steps: 12, loss_chunk: 32, probe_every: 2, optimizer: {lr: 3.0e-3, warmup_steps: 2, schedule: wsd},
        curriculum: [{seq_len: 32, steps: 8, until: 0.9}, {seq_len: 64, steps: 4}]}
checkpoint: {every: 100, keep: 5, async_save: false}
"""


class FakeProbe:
    """Stands in for the needle probe: reports 1.0 at 32 tokens from step 4 on."""

    every = 2

    def __init__(self, preempt_at=None):
        self.preempt_at = preempt_at
        self.calls = []

    def __call__(self, trainer, step):
        self.calls.append(step)
        if step == self.preempt_at:
            os.kill(os.getpid(), signal.SIGTERM)  # the loop saves this step and stops
        return {"probe/32": 1.0 if step >= 4 else 0.0}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("gate_corpus")
    (root / "src").mkdir()
    rng = np.random.default_rng(0)
    words = "the river carried old letters past the mill while a clerk counted salt".split()
    for i in range(4):
        (root / "src" / f"d{i}.txt").write_text("\n\n".join(" ".join(rng.choice(words, 30)) for _ in range(6)))
    res = CliRunner().invoke(app, ["ingest", str(root / "src"), "--out", str(root / "c"), "--seq-len", "64",
                                   "--vocab-size", "300", "--workers", "0"])
    assert res.exit_code == 0, res.output
    return root / "c"


def test_gated_stage_ends_and_resumes_exactly(tmp_path, corpus):
    f = tmp_path / "g.yaml"
    f.write_text(CONFIG.replace("CORPUS", str(corpus)))
    cfg = load_run_config(f)

    probe = FakeProbe()
    straight = Trainer(cfg, run_dir=tmp_path / "a").run(hooks=[probe])
    assert straight.curriculum_steps == [4, 4] and straight.step == 8  # the gated stage ended at step 4
    assert probe.calls == [2, 4, 6, 8]
    la = losses_from_log(tmp_path / "a")
    assert sorted(la) == list(range(1, 9))

    first = Trainer(cfg, run_dir=tmp_path / "b").run(hooks=[FakeProbe(preempt_at=6)])
    assert first.interrupted and first.step == 6
    again = Trainer(cfg, run_dir=tmp_path / "b")
    assert again.start_step == 6 and [s.steps for s in again.cfg.train.curriculum] == [4, 4]
    rest = again.run(hooks=[FakeProbe()])
    assert rest.step == 8 and rest.curriculum_steps == [4, 4]
    lb = losses_from_log(tmp_path / "b")
    assert sorted(lb) == sorted(la)
    np.testing.assert_allclose([lb[k] for k in sorted(lb)], [la[k] for k in sorted(la)], rtol=1e-6)


def test_stage_len_and_config():
    cfg = from_dict(RunConfig, {"train": {"steps": 10, "curriculum": [
        {"seq_len": 64, "steps": 3}, {"seq_len": 128, "steps": 7}]}})
    assert [stage_len(cfg, s, 512) for s in (0, 3)] == [64, 128]
    with pytest.raises(ConfigError, match="probe_every"):
        from_dict(RunConfig, {"train": {"probe_every": -1}}).validate()


def test_gate_ends_a_stage_and_shifts_the_rest():
    from bookft.train import gate

    cfg = from_dict(RunConfig, {"train": {"steps": 100, "probe_every": 5, "curriculum": [
        {"seq_len": 64, "steps": 40, "until": 0.9}, {"seq_len": 128, "steps": 30, "until": 0.5},
        {"seq_len": 256, "steps": 30}]}})
    cfg.validate()
    assert gate.gate_length(64, {"probe/64": 1.0, "probe/256": 0.0}) == "probe/64"
    assert gate.gate_length(128, {"probe/64": 1.0, "probe/256": 0.0}) == "probe/64"
    assert gate.gate_length(32, {"probe/64": 1.0, "probe/256": 0.0}) == "probe/64"  # none fits: the shortest
    assert not gate.passed(cfg, 10, {"probe/64": 0.8})
    assert gate.passed(cfg, 10, {"probe/64": 0.9})
    cfg2 = gate.end_stage(cfg, 10)
    assert [s.steps for s in cfg2.train.curriculum] == [10, 30, 30] and cfg2.train.steps == 70
    assert stage_len(cfg2, 10, 512) == 128 and stage_len(cfg2, 9, 512) == 64
    assert not gate.passed(cfg2, 40, {"probe/128": 1.0})  # the stage's last step: nothing to end
    assert gate.passed(cfg2, 20, {"probe/128": 0.5})
    cfg3 = gate.end_stage(cfg2, 20)
    assert [s.steps for s in cfg3.train.curriculum] == [10, 10, 30] and cfg3.train.steps == 50
    assert not gate.passed(cfg3, 30, {"probe/256": 1.0})  # the last stage is not gated
    assert gate.with_stage_steps(cfg, [10, 10, 30]) == cfg3
    with pytest.raises(ConfigError, match="probe_every"):
        from_dict(RunConfig, {"train": {"curriculum": [{"seq_len": 64, "steps": 3, "until": 0.9}]}}).validate()
