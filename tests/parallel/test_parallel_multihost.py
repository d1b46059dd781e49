"""Multi-host training with real processes (issue 18): `bookft train` as 2 processes x 4 simulated CPU
devices (gloo collectives, coordinator on 127.0.0.1 and a free port) with context parallelism across
the process boundary gives the losses of one process with 8 devices; each process reads only its
devices' rows and sequence slices; only process 0 reports; a kill -9 resume is exact; hosts that
disagree on the config or the corpus version are named. Every child has a timeout and is killed with
its group."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from typer.testing import CliRunner

from bookft.cli import app
from bookft.corpus import open_corpus
from bookft.parallel.launch import free_port, spawn, stop, wait_all
from bookft.train.config import load_run_config
from bookft.train.data import Batches, drop_cut_example, shift_targets
from bookft.train.rundir import losses_from_log
from bookft.train.trainer import train

CONFIG = """
name: mh
model: {vocab_size: 320, hidden_size: 32, intermediate_size: 64, num_layers: 1, num_heads: 2,
        num_kv_heads: 2, compute_dtype: float32, remat: none}
attention: {strategy: ring, kernel: xla, block_q: 8, block_kv: 8}
parallel: {mesh: MESH, cpu_devices: 8}
data: {corpus: CORPUS, batch_size: 2, seq_len: 128}
train: {steps: STEPS, loss_chunk: 32, optimizer: {lr: 3.0e-3, warmup_steps: 2}}
checkpoint: {every: 1, keep: 10, async_save: false}
"""
RING8 = "{data: 1, fsdp: 1, context: 8}"
DATA2_CP4 = "{data: 2, fsdp: 1, context: 4}"
STEPS2 = 10  # the data=2 x context=4 run's steps
TIMEOUT = 240  # seconds per multi-process job; a stuck job is killed whole




def config(tmp_path: Path, corpus: Path, mesh: str, steps: int = 4) -> Path:
    p = tmp_path / f"run-{re.sub(r'[^0-9a-z]', '', mesh)}-{steps}.yaml"
    p.write_text(CONFIG.replace("CORPUS", str(corpus)).replace("MESH", mesh).replace("STEPS", str(steps)))
    return p


def launch(args, logs: Path, processes: int = 2):
    """`bookft launch` (the command under test) with each process's output in LOGS/process-I.log."""
    cmd = [sys.executable, "-m", "bookft.cli", "launch", "--processes", str(processes), "--devices-per-process",
           "4", "--logs", str(logs), "--timeout", str(TIMEOUT), "--", *args]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=TIMEOUT + 60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        raise
    return p.returncode, out + "".join(f"\n--- {f.name}\n{f.read_text()}" for f in sorted(logs.glob("*.log")))


# gloo's connection lines and XLA's C++ warnings: not bookft's output. Gloo's threads write those lines
# concurrently, so one line's tail can land alone on the next line ("... ranks is : [Gloo] Rank 2 ... : 3"
# then a bare "3", seen in CI): a line of digits only is such a tail, never something bookft prints.
NATIVE_LOG = re.compile(r"\[Gloo\]|peer ranks|^[IWEF]\d{4} \d\d:\d\d:\d\d|^\s*\d+\s*$")


def spoken(log: Path) -> list[str]:
    """What a process printed, less the C++ libraries' own log lines."""
    return [ln for ln in log.read_text().splitlines() if ln.strip() and not NATIVE_LOG.search(ln)]


def reads(run: Path) -> dict[int, dict]:
    return {int(f.stem): json.loads(f.read_text()) for f in (run / "hosts").glob("*.json")}


def single_process_losses(cfg_path: Path, run: Path) -> tuple[dict[int, float], dict]:
    train(load_run_config(cfg_path), run_dir=run)  # this process: 8 simulated devices (conftest)
    return losses_from_log(run), reads(run)[0]["corpus_reads"]


def test_partial_reads_equal_whole_rows(words_corpus):
    """A device's block read alone (its stored columns: only their token ids and the next ones) equals
    the same block cut from the rows built from whole sequences (shift, cut, arrange, zig-zag)."""
    from bookft.attention.balance import arrange_documents, load_balance

    c = open_corpus(words_corpus)
    b = Batches(c, batch_size=2, seed=0, load_balance_cp=8, balance_block=8)
    whole = {f: [] for f in ("input_ids", "targets", "weights", "positions", "segment_ids")}
    for r in range(4):  # rows of 64 of step 1: two per corpus sequence
        k, part = divmod(r, 2)
        seq = shift_targets(c.sequence(b.sequence_index(2 + k, 64)))
        row = {f: v[part * 64:(part + 1) * 64] for f, v in seq.items()}
        row = drop_cut_example(row) if part else row
        order, ids = arrange_documents(row["segment_ids"], 8, block=8)
        for f in whole:
            whole[f].append(load_balance(ids if f == "segment_ids" else row[f][order], 8, axis=0))
    c.reads.tokens = 0
    for s in range(8):  # each context shard's 8 columns
        cols = slice(8 * s, 8 * s + 8)
        got = b.rows_for_step(1, 64, [0, 1, 2, 3], cols=cols)
        for f, v in whole.items():
            np.testing.assert_array_equal(got[f], np.stack(v)[:, cols], err_msg=f)
    assert 4 * 64 <= c.reads.tokens <= 4 * 64 * 2  # each shard: its tokens and their next ones


def _check_only_process_0_reports(run: Path, logs: Path, steps: int):
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, steps + 1))  # one writer: no row twice
    said0, said1 = spoken(logs / "process-0.log"), spoken(logs / "process-1.log")
    assert any(ln.startswith("done: step") for ln in said0) and any("train" in ln for ln in said0)
    assert said1 == [], said1  # quiet: no header, progress bar or summary


PROBE = ["--set", "train.probe_every=2", "--set", "train.probe.lengths=[512]", "--set", "train.probe.depths=[0,100]"]


@pytest.fixture(scope="module")
def ring8_run(tmp_path_factory, words_corpus):
    """Ring over 8, 4 steps with the needle probe every 2, as 2 processes by `bookft launch`."""
    root = tmp_path_factory.mktemp("mh_ring8")
    cfg = config(root, words_corpus, RING8)
    code, out = launch(["train", "-c", str(cfg), "--run-dir", str(root / "mp"), *PROBE], root / "logs")
    assert code == 0, out
    return cfg, root / "mp", root / "logs"


@pytest.mark.slow
def test_ring_over_8_across_2_processes_equals_1_process(tmp_path, ring8_run):
    """Ring over 8 devices, 4 on each side of the process boundary: the losses (and needle probe) of
    the single-process 8-device run step for step; both processes read every row but only half of
    each sequence."""
    cfg, run, logs = ring8_run
    from bookft.eval.probe import probe_hooks  # what `bookft train` attaches

    one = load_run_config(cfg, [x for x in PROBE if x != "--set"])
    train(one, run_dir=tmp_path / "sp", hooks=probe_hooks(one))  # this process: 8 simulated devices (conftest)
    ref, ref_reads = losses_from_log(tmp_path / "sp"), reads(tmp_path / "sp")[0]["corpus_reads"]
    got = losses_from_log(run)
    assert sorted(got) == sorted(ref) == [1, 2, 3, 4]
    diff = max(abs(got[s] - ref[s]) for s in ref)
    print(f"ring over 8, 2 processes vs 1: max |loss diff| {diff:.2e}")
    assert diff < 1e-5
    probes = [{k: v for k, v in json.loads(ln).items() if k.startswith("probe/")}
              for r in (run, tmp_path / "sp") for ln in (r / "metrics.jsonl").read_text().splitlines()]
    assert probes[:4] == probes[4:] and probes[1] and probes[3]  # steps 2 and 4 probed, the same scores
    hosts = reads(run)
    assert sorted(hosts) == [0, 1] and all(h["processes"] == 2 and len(h["devices"]) == 4 for h in hosts.values())
    whole = 4 * 2 * 128  # steps x rows x tokens
    for h in hosts.values():
        got_reads = h["corpus_reads"]
        print(f"process {h['process']} read {got_reads}; one process of 8 devices read {ref_reads}")
        assert got_reads["sequences"] == ref_reads["sequences"] == 8  # every row: context splits the sequence
        assert got_reads["tokens"] <= 0.6 * whole  # about half of each (its 8 of 16 zig-zag chunks + next ids)
    assert sum(h["corpus_reads"]["tokens"] for h in hosts.values()) == ref_reads["tokens"]
    _check_only_process_0_reports(run, logs, 4)
    ck = sorted(int(p.name) for p in (run / "checkpoints").iterdir() if p.name.isdigit())
    assert ck == [1, 2, 3, 4]  # one checkpoint per step, written once by the two together


@pytest.mark.slow
def test_eval_niah_in_2_processes_equals_1(tmp_path, ring8_run):
    """`bookft eval niah` of the run, ring over 8 across 2 processes, gives the cells (scores, greedy
    outputs) of the same eval in one process; process 0 alone writes the report."""
    _, run, _ = ring8_run
    args = ["eval", "niah", "--checkpoint", str(run), "--lengths", "512", "--depths", "0,100", "--seeds", "0",
            "--scoring", "teacher_forced,generate", "--no-progress"]
    code, out = launch([*args, "--out", str(tmp_path / "mp")], tmp_path / "logs")
    assert code == 0, out
    res = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "sp")])
    assert res.exit_code == 0, res.output
    a, b = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("mp", "sp"))
    assert a["cells"] == b["cells"] and a["summary"] == b["summary"]
    assert all(c["per_seed"][0]["output"] for c in a["cells"])  # decoded text, compared token for token
    assert spoken(tmp_path / "logs" / "process-1.log") == []
    assert any("wrote" in ln for ln in spoken(tmp_path / "logs" / "process-0.log"))


@pytest.fixture(scope="module")
def data2_run(tmp_path_factory, words_corpus):
    """data=2 x context=4, 10 steps, as 2 processes by `bookft launch`: (config, run dir, logs)."""
    root = tmp_path_factory.mktemp("mh_data2")
    cfg = config(root, words_corpus, DATA2_CP4, steps=STEPS2)
    code, out = launch(["train", "-c", str(cfg), "--run-dir", str(root / "mp")], root / "logs")
    assert code == 0, out
    return cfg, root / "mp", root / "logs"


@pytest.mark.slow
def test_data_2_x_context_4_across_2_processes_equals_1_process(tmp_path, data2_run):
    """data=2 x context=4: each process holds one data shard, so it reads only its own rows (the two
    processes' sequences add up to the single run's) and whole ones (all 4 context shards are local)."""
    cfg, run, logs = data2_run
    ref, ref_reads = single_process_losses(cfg, tmp_path / "sp")
    got = losses_from_log(run)
    diff = max(abs(got[s] - ref[s]) for s in ref)
    print(f"data 2 x context 4, 2 processes vs 1: max |loss diff| {diff:.2e}")
    assert sorted(got) == list(range(1, STEPS2 + 1)) and diff < 1e-5
    hosts = reads(run)
    for h in hosts.values():
        print(f"process {h['process']} read {h['corpus_reads']}; one process of 8 devices read {ref_reads}")
        assert h["corpus_reads"]["sequences"] == STEPS2  # its row of each step
        assert STEPS2 * 128 <= h["corpus_reads"]["tokens"] <= 0.6 * ref_reads["tokens"] + 1
    assert sum(h["corpus_reads"]["sequences"] for h in hosts.values()) == ref_reads["sequences"] == 2 * STEPS2
    _check_only_process_0_reports(run, logs, STEPS2)


def _wait_for_step(run: Path, step: int, procs, timeout: float = TIMEOUT):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if max(losses_from_log(run), default=0) >= step:
            return
        if any(p.poll() not in (None, 0) for p in procs):
            raise AssertionError(f"a process exited with {[p.poll() for p in procs]}")
        time.sleep(0.2)
    raise AssertionError(f"step {step} not reached in {timeout} s")


def _params(run: Path):
    """The run's newest parameters, loaded on this one process as `bookft eval` / `export` load them
    (a checkpoint the 2-process job wrote restores onto one host)."""
    from flax import nnx

    from bookft.train.checkpoint import load_params

    model, _ = load_params(run)
    return [np.asarray(x) for x in jax.tree.leaves(nnx.state(model, nnx.Param))]


def _newest(run: Path) -> int:
    return max(int(p.name) for p in (run / "checkpoints").iterdir() if p.name.isdigit())


@pytest.mark.slow
def test_preempt_kill9_and_resume_across_2_processes_is_exact(tmp_path, data2_run):
    """One run of the 2-process job, stopped twice: SIGTERM to process 1 alone stops both after the
    same step (both save and exit 143); then kill -9 of process 1 mid-run (process 0, stuck waiting
    for its peer in a collective, is killed too); then both restarted: the losses and final
    parameters equal a straight 2-process run's, bitwise. Last, a truncated newest checkpoint: both
    processes set it aside together and redo that step from the one before."""
    cfg, straight, _ = data2_run
    run = tmp_path / "run"
    args = ["train", "-c", str(cfg), "--run-dir", str(run)]

    def start_job(tag: str):
        (tmp_path / tag).mkdir()
        port = free_port()
        return [spawn(args, i, 2, port, 4, log=tmp_path / tag / f"process-{i}.log") for i in range(2)]

    procs = start_job("term")
    try:
        _wait_for_step(run, 2, procs)
        os.killpg(procs[1].pid, signal.SIGTERM)
        codes = [p.wait(TIMEOUT) for p in procs]
    finally:
        stop(procs, grace_s=1)
    stopped_at = max(losses_from_log(run))
    assert codes == [143, 143] and stopped_at < STEPS2 and _newest(run) == stopped_at, (codes, stopped_at)

    procs = start_job("kill")
    try:
        _wait_for_step(run, stopped_at + 1, procs)
        os.killpg(procs[1].pid, signal.SIGKILL)
        procs[1].wait(30)
        stop(procs, grace_s=5)
    finally:
        stop(procs, grace_s=1)
    killed_at = max(losses_from_log(run))
    assert stopped_at < killed_at < STEPS2

    code, out = launch(args, tmp_path / "resume")
    assert code == 0, out
    a, b = losses_from_log(straight), losses_from_log(run)
    assert sorted(a) == sorted(b) == list(range(1, STEPS2 + 1))
    assert a == b, (stopped_at, killed_at, a, b)
    assert _newest(run) == STEPS2
    for x, y in zip(_params(straight), _params(run), strict=True):
        np.testing.assert_array_equal(x, y)
    print(f"SIGTERM after step {stopped_at}, kill -9 after step {killed_at}; the resumed run equals the straight one")

    for f in (run / "checkpoints" / str(STEPS2)).rglob("*"):  # truncate the newest checkpoint's arrays
        if f.is_file() and f.stat().st_size > 0 and "metadata" not in f.name.lower():
            f.write_bytes(f.read_bytes()[: f.stat().st_size // 3])
    code, out = launch([*args, "--steps", str(STEPS2 + 1)], tmp_path / "fallback")
    assert code == 0, out
    assert (run / "checkpoints" / f"broken-{STEPS2}").is_dir()
    again = losses_from_log(run)
    assert sorted(again) == list(range(1, STEPS2 + 2)) and again[STEPS2] == a[STEPS2]


def test_hosts_that_disagree_are_named(tmp_path, words_corpus):
    """Process 1 runs another step count: both processes refuse before compiling, naming process 1,
    its host and the config key with both values."""
    cfg = config(tmp_path, words_corpus, RING8)
    port = free_port()
    procs = [spawn(["train", "-c", str(cfg), "--run-dir", str(tmp_path / "r"), "--steps", str(4 + i)],
                   i, 2, port, 4, log=tmp_path / f"p{i}.log") for i in range(2)]
    try:
        code = wait_all(procs, timeout_s=TIMEOUT, grace_s=5)
    finally:
        stop(procs, grace_s=1)
    assert code == 2
    said = (tmp_path / "p0.log").read_text().replace("\n", " ")
    assert "hosts disagree" in said and "process 1 (host" in said, said
    assert "config.train.steps: 5 on process 1, 4 on process 0" in " ".join(said.split()), said
    assert not (tmp_path / "r" / "checkpoints").exists() or not any((tmp_path / "r" / "checkpoints").iterdir())


@pytest.mark.slow
def test_hosts_that_see_different_corpora_are_named(tmp_path, words_corpus):
    """The same command and config on both processes, but `data.corpus: corpus` (relative) resolves in
    each process's working directory to a different copy: process 1's has one document changed (a
    host's stale local copy; same tokenizer, same version number). Both refuse before compiling,
    naming process 1, its host and the corpus's data hash with both values."""
    src = tmp_path / "src"
    shutil.copytree(words_corpus.parent / "src", src)
    (src / "doc3.txt").write_text((src / "doc3.txt").read_text().replace("\n\n", "\n\nA changed line.\n\n", 1))
    tok = words_corpus / "current" / "tokenizer" / "tokenizer.json"
    other = tmp_path / "other"
    res = CliRunner().invoke(app, ["ingest", str(src), "--out", str(other), "--seq-len", "128",
                                   "--tokenizer", str(tok), "--workers", "0"])
    assert res.exit_code == 0, res.output
    a, b = (open_corpus(c).manifest for c in (words_corpus, other))
    assert a["version"] == b["version"] and a["tokenizer"]["fingerprint"] == b["tokenizer"]["fingerprint"]
    assert a["data_hash"] != b["data_hash"]
    cfg = config(tmp_path, Path("corpus"), RING8)
    port = free_port()
    procs = []
    for i, corpus in enumerate((words_corpus, other)):
        (tmp_path / f"host{i}").mkdir()
        (tmp_path / f"host{i}" / "corpus").symlink_to(corpus)
        procs.append(spawn(["train", "-c", str(cfg), "--run-dir", str(tmp_path / "r")], i, 2, port, 4,
                           log=tmp_path / f"p{i}.log", cwd=tmp_path / f"host{i}"))
    try:
        code = wait_all(procs, timeout_s=TIMEOUT, grace_s=5)
    finally:
        stop(procs, grace_s=1)
    assert code == 2
    said = " ".join((tmp_path / "p0.log").read_text().split())
    assert "hosts disagree on the run config and corpus version" in said and "process 1 (host" in said, said
    assert f"corpus.data_hash: {b['data_hash']} on process 1, {a['data_hash']} on process 0" in said, said
    assert "config." not in said.split("differs from process 0")[1].split("every host must")[0], said  # configs agree
    assert not (tmp_path / "r" / "checkpoints").exists() or not any((tmp_path / "r" / "checkpoints").iterdir())


def test_launch_and_start_refuse_what_cannot_run():
    """No command to launch, or simulated devices that do not split over the job's processes."""
    from bookft.errors import ConfigError
    from bookft.parallel.config import ParallelConfig
    from bookft.parallel.distributed import start
    from bookft.parallel.launch import process_env

    res = CliRunner().invoke(app, ["launch", "--processes", "2"])
    assert res.exit_code != 0 and "give the command to run after `--`" in str(res.exception)
    with pytest.raises(ConfigError, match="cpu_devices=3 does not split over the job's 2 processes"):
        start(ParallelConfig(cpu_devices=3), env={"JAX_NUM_PROCESSES": "2"})
    env = process_env(1, 2, 1234, 4, base={"XLA_FLAGS": "--xla_force_host_platform_device_count=8 --foo"})
    assert env["JAX_COORDINATOR_ADDRESS"] == "127.0.0.1:1234" and env["JAX_PROCESS_ID"] == "1"
    assert env["XLA_FLAGS"] == "--foo --xla_force_host_platform_device_count=4"
