"""A run trains on one corpus version: a resume keeps it after newer versions are published, moving on
is explicit (and in the metrics), a missing pinned version is a clear error, a live run's version
survives a refresh's retention (a real second process), and `--steps N` means N steps in all."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from bookft.cli import app
from bookft.corpus.lease import leased_versions
from bookft.errors import CorpusError, TrainError
from bookft.pipelines import EXIT_OK, run_pipeline
from bookft.train.config import load_run_config
from bookft.train.rundir import losses_from_log
from bookft.train.trainer import Trainer, train

CONFIG = """
name: v
model: {vocab_size: 320, hidden_size: 32, intermediate_size: 64, num_layers: 1, num_heads: 2,
        num_kv_heads: 2, compute_dtype: float32, remat: none}
attention: {strategy: ring, kernel: xla, block_q: 16, block_kv: 16}
parallel: {mesh: {data: 1, fsdp: 1, context: 2}, cpu_devices: 2}
data: {corpus: CORPUS, batch_size: 1}
train: {steps: 6, loss_chunk: 32, optimizer: {lr: 3.0e-3, warmup_steps: 2, schedule: wsd}}
checkpoint: {every: 2, keep: 5, async_save: false}
"""
GATED = """
train: {steps: 12, loss_chunk: 32, probe_every: 2, optimizer: {lr: 3.0e-3, warmup_steps: 2, schedule: wsd},
        curriculum: [{seq_len: 32, steps: 8, until: 0.9}, {seq_len: 64, steps: 4}]}
"""
WORDS = "the river carried old letters past the mill while a clerk counted salt".split()


def _ingest(src, out, seed, vocab=300, replace=False):
    src.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(4):
        (src / f"d{i}.txt").write_text("\n\n".join(" ".join(rng.choice(WORDS, 30)) for _ in range(6)))
    res = CliRunner().invoke(app, ["ingest", str(src), "--out", str(out), "--seq-len", "64",
                                   "--vocab-size", str(vocab), "--workers", "0", *(["--replace"] if replace else [])])
    assert res.exit_code == 0, res.output


def _config(tmp_path, corpus, extra=""):
    f = tmp_path / "v.yaml"
    f.write_text(CONFIG.replace("CORPUS", str(corpus)))
    if extra:
        raw = yaml.safe_load(f.read_text())
        raw.update(yaml.safe_load(extra))
        f.write_text(yaml.safe_dump(raw))
    return f


class StopAt:
    """A hook that sends this process SIGTERM after step `at` (the loop saves and stops there)."""

    every = 1

    def __init__(self, at):
        self.at = at

    def __call__(self, trainer, step):
        if step == self.at:
            os.kill(os.getpid(), signal.SIGTERM)


class FakeProbe:
    """Stands in for the needle probe: 1.0 at 32 tokens from step 4 on (the gated stage ends there)."""

    every = 2

    def __call__(self, trainer, step):
        return {"probe/32": 1.0 if step >= 4 else 0.0}


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """Version 1 of a corpus and a straight 6-step run on it."""
    tmp = tmp_path_factory.mktemp("pin")
    _ingest(tmp / "src", tmp / "c", seed=0)
    cfg = load_run_config(_config(tmp, tmp / "c"))
    res = train(cfg, run_dir=tmp / "straight")
    assert res.step == 6
    return tmp, losses_from_log(tmp / "straight")


def _stopped_run(tmp_path, corpus, at=4):
    cfg = load_run_config(_config(tmp_path, corpus))
    first = train(cfg, run_dir=tmp_path / "run", hooks=[StopAt(at)])
    assert first.interrupted and first.step == at
    return cfg


def test_resume_stays_on_its_version_after_newer_ones(straight, tmp_path):
    tmp, la = straight
    corpus = tmp_path / "c"
    _ingest(tmp_path / "src", corpus, seed=0)
    cfg = _stopped_run(tmp_path, corpus)
    pin = json.loads((tmp_path / "run" / "corpus.json").read_text())
    assert pin["version"] == 1 and pin["history"] == [{"step": 0, "version": 1}]
    _ingest(tmp_path / "other", corpus, seed=5, vocab=310, replace=True)  # another ingest --out, other settings
    assert os.readlink(corpus / "current") == "versions/0002"
    lines = []
    res = train(cfg, run_dir=tmp_path / "run", announce=lines.append)  # the same --corpus again
    assert res.step == 6
    assert "corpus: training on version 1; version 2 is newer (--corpus-version latest to move on)" in lines
    assert "steps: 4 -> 6, 2 to run" in lines
    lb = losses_from_log(tmp_path / "run")
    assert [lb[s] for s in range(1, 7)] == [la[s] for s in range(1, 7)]  # bit for bit
    assert json.loads((tmp_path / "run" / "corpus.json").read_text())["version"] == 1


def test_moving_on_is_explicit_and_in_the_metrics(straight, tmp_path):
    corpus = tmp_path / "c"
    _ingest(tmp_path / "src", corpus, seed=0)
    cfg = _stopped_run(tmp_path, corpus)
    _ingest(tmp_path / "other", corpus, seed=5, replace=True)
    lines = []
    res = train(cfg, run_dir=tmp_path / "run", corpus_version="latest", announce=lines.append)
    assert res.step == 6 and "corpus: moving on from version 1 to version 2" in lines
    rows = {r["step"]: r for r in map(json.loads, (tmp_path / "run" / "metrics.jsonl").read_text().splitlines())}
    assert rows[5]["corpus_version"] == 2 and rows[5]["corpus_version_from"] == 1
    assert "corpus_version" not in rows[6]
    pin = json.loads((tmp_path / "run" / "corpus.json").read_text())
    assert pin["version"] == 2 and pin["history"] == [{"step": 0, "version": 1}, {"step": 4, "version": 2}]
    # later resumes stay on version 2; asking for a version by number works too
    again = Trainer(cfg, run_dir=tmp_path / "run", corpus_version=1)
    assert again.pin.version == 1 and again.pin.moved_from == 2


def test_missing_pinned_version_is_an_error_naming_it(straight, tmp_path):
    corpus = tmp_path / "c"
    _ingest(tmp_path / "src", corpus, seed=0)
    cfg = _stopped_run(tmp_path, corpus)
    _ingest(tmp_path / "other", corpus, seed=5, replace=True)
    import shutil

    shutil.rmtree(corpus / "versions" / "0001")
    with pytest.raises(CorpusError, match=r"version 1 \(which this run trains on.*no longer exists.*"
                                          r"versions there: 2.*--corpus-version latest"):
        Trainer(cfg, run_dir=tmp_path / "run")
    with pytest.raises(CorpusError, match=r"no version 7 exists \(asked for with --corpus-version"):
        Trainer(cfg, run_dir=tmp_path / "run", corpus_version="7")
    assert Trainer(cfg, run_dir=tmp_path / "run", corpus_version="latest").pin.version == 2


def test_explicit_steps_mean_steps_in_all_on_a_gated_run(straight, tmp_path):
    tmp, _ = straight
    cfg = load_run_config(_config(tmp_path, tmp / "c", GATED))
    first = train(cfg, run_dir=tmp_path / "g", hooks=[FakeProbe()])
    assert first.step == 8 and first.curriculum_steps == [4, 4]  # the config's 12 is a cap the gate shortened
    lines = []
    more = train(cfg, run_dir=tmp_path / "g", hooks=[FakeProbe()], steps=11, announce=lines.append)
    assert more.step == 11 and more.curriculum_steps == [4, 7]  # the last stage extended
    assert "steps: 8 -> 11, 3 to run" in lines
    assert sorted(losses_from_log(tmp_path / "g")) == list(range(1, 12))
    resumed = Trainer(cfg, run_dir=tmp_path / "g")  # without --steps: the run's realised total
    assert resumed.start_step == 11 and resumed.cfg.train.steps == 11
    assert "nothing to train" in resumed.steps_line()
    with pytest.raises(TrainError, match=r"--steps 9: this run is at step 11 already"):
        Trainer(cfg, run_dir=tmp_path / "g", steps=9)
    fresh = train(cfg, run_dir=tmp_path / "f", hooks=[FakeProbe()], steps=10)  # a fresh run: 10 in all too
    assert fresh.step == 10 and fresh.curriculum_steps == [4, 6]


def test_cli_steps_continue_a_finished_gated_run(straight, tmp_path):
    tmp, _ = straight
    plain = GATED.replace("until: 0.9", "until: 0.0").replace("probe_every: 2", "probe_every: 0")
    f = _config(tmp_path, tmp / "c", plain)
    run = tmp_path / "cli"
    res = CliRunner().invoke(app, ["train", "-c", str(f), "--run-dir", str(run), "--steps", "5"])
    assert res.exit_code == 0, res.output
    assert "steps: 0 -> 5, 5 to run" in " ".join(res.output.split()) and "done: step 5" in res.output
    res = CliRunner().invoke(app, ["train", "-c", str(f), "--run-dir", str(run), "--steps", "5"])
    assert res.exit_code == 0 and "nothing trained: the run is at step 5 already" in " ".join(res.output.split())
    res = CliRunner().invoke(app, ["train", "-c", str(f), "--run-dir", str(run), "--steps", "3"])
    assert res.exit_code != 0 and "--steps 3: this run is at step 5 already" in str(res.exception)


def _start_training(tmp_path, corpus, run_name, until):
    """A real `bookft train` process on `corpus` (checkpoint every 2 steps), returned once `until()`."""
    f = _config(tmp_path, corpus, "train: {steps: 100000, loss_chunk: 32, optimizer: {lr: 1.0e-3}}")
    proc = subprocess.Popen([sys.executable, "-m", "bookft.cli", "train", "-c", str(f), "--run-dir",
                             str(tmp_path / run_name)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    try:
        while not until():
            assert proc.poll() is None and time.time() < deadline, "the training process did not start"
            time.sleep(0.5)
    except BaseException:
        proc.kill()
        raise
    return f, proc


def _refresh_pipeline(tmp_path, corpus, retention):
    src = tmp_path / "src"
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(yaml.safe_dump({"name": "p", "sources": [{"path": str(src)}], "out": str(corpus),
                                        "tokenizer": {"vocab_size": 300}, "seq_len": 64, "workers": 0,
                                        "retention": retention}))

    def newer(k):
        (src / f"new{k}.txt").write_text(" ".join(WORDS * (20 + k)))
        code, r = run_pipeline(pipeline)
        assert code == EXIT_OK and r["published"], r
        return r

    return newer


def test_retention_keeps_a_live_runs_version(straight, tmp_path):
    """A real `bookft train` process holds a lease on its version: a refresh with retention 1 publishes
    two newer versions and prunes neither it nor current; after kill -9 the run (its directory) still
    holds it, until `bookft corpus release --run`."""
    corpus = tmp_path / "c"
    _ingest(tmp_path / "src", corpus, seed=0)
    live = tmp_path / "live"
    _, proc = _start_training(tmp_path, corpus, "live", lambda: "0001" in leased_versions(corpus)
                              and (live / "metrics.jsonl").is_file())
    try:
        newer = _refresh_pipeline(tmp_path, corpus, retention=1)
        for k in range(2):  # retention + 1 newer versions
            newer(k)
        assert sorted(p.name for p in (corpus / "versions").iterdir()) == ["0001", "0003"]
        assert proc.poll() is None  # still training, on version 1
    finally:
        proc.kill()
        proc.wait()
    assert "0001" in leased_versions(corpus)  # kill -9: the run still holds its version
    assert "0001" not in newer(2)["pruned"]
    res = CliRunner().invoke(app, ["corpus", "leases", str(corpus)])
    assert res.exit_code == 0 and f"version 1: run {live.resolve()}" in res.output
    res = CliRunner().invoke(app, ["corpus", "release", str(corpus), "--run", str(live)])
    assert res.exit_code == 0 and "released leases/0001@run@" in res.output, res.output
    assert "0001" in newer(3)["pruned"]


def test_run_killed_after_its_first_checkpoint_resumes_on_its_version(straight, tmp_path):
    """kill -9 after the first checkpoint, four newer versions at retention 3: the resume still finds
    its version, trains on it, and lets it go when it finishes."""
    corpus = tmp_path / "c"
    _ingest(tmp_path / "src", corpus, seed=0)
    run = tmp_path / "killed"
    f, proc = _start_training(tmp_path, corpus, "killed", lambda: (run / "checkpoints" / "2").is_dir())
    proc.kill()
    proc.wait()
    newer = _refresh_pipeline(tmp_path, corpus, retention=3)
    pruned = [x for k in range(4) for x in newer(k)["pruned"]]
    assert pruned == ["0002"] and os.readlink(corpus / "current") == "versions/0005"
    res = CliRunner().invoke(app, ["pipeline", "status", str(tmp_path / "p.yaml"), "--json"])
    held = json.loads(res.stdout)["held"]
    assert [(h["version"], h["run_dir"]) for h in held] == [(1, str(run.resolve()))]
    lines = []
    last = max(int(p.name) for p in (run / "checkpoints").iterdir() if p.name.isdigit())  # 2 or later
    res = train(load_run_config(f), run_dir=run, steps=last + 2, announce=lines.append)
    assert res.step == last + 2 and sorted(res.losses) == [last + 1, last + 2]
    assert "corpus: training on version 1; version 5 is newer (--corpus-version latest to move on)" in lines
    assert json.loads((run / "corpus.json").read_text())["history"] == [{"step": 0, "version": 1}]
    assert "0001" not in leased_versions(corpus)  # finished: released
    assert "0001" in newer(4)["pruned"]
