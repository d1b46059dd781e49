"""The training loop: one jitted step per iteration; everything else is a hook.

Design choices:
- Everything that can be wrong is checked before anything compiles: config, mesh vs devices,
  attention strategy vs mesh and sequence length (bookft.attention.resolve), corpus vocabulary vs
  model vocabulary, rows per micro-batch vs the data axes, a corpus's synthesized retrieval examples
  vs the curriculum and the eval section (train/retrieval_check.py).
- The program (state layout, shardings, jitted step) is train/program.py, shared with plan and
  eval; this file only feeds it batches and runs hooks.
- Hooks in levanter's style: `trainer.add_hook(fn, every=N)`, `fn(trainer, step) -> metrics or
  None`, called after every N-th step and after the last; the metrics they return join that
  step's row (the needle probe, bookft/eval/probe.py, attached by the command layer). After them
  run the built-in hooks, in this order: the gated-stage check (gate.py), the metrics log, the
  progress callback, preemption, periodic checkpoints.
- Resume is automatic: a run directory with checkpoints continues from the newest readable one
  (data position = step), on the corpus version the run started on (train/corpus_pin.py), so a
  killed run rerun with the same arguments gives the same losses and parameters.
- `steps` (the command's `--steps N`) is the run's total: N steps in all, also on a gated run. A
  larger N continues a finished run, the last curriculum stage extended to reach it; the schedule
  is then rebuilt for N steps (gate.with_total_steps). Without it, the config's `train.steps` is a
  cap that gated stages shorten.
- SIGTERM (TPU preemption) and Ctrl-C set a flag; the preemption hook saves a checkpoint for the
  step just finished, waits for the write, and the loop exits with status 143/130. Across hosts the
  flag is agreed after every step (bookft.parallel.distributed.any_process), so a signal to one
  host stops them all at the same step and they save together.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import signal
import socket
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np

from bookft.corpus.lease import Lease
from bookft.errors import TrainError
from bookft.parallel.distributed import any_process, check_agreement
from bookft.parallel.hardware import chip_for_device, peak_memory_bytes
from bookft.train import corpus_pin, gate
from bookft.train.checkpoint import Checkpointer
from bookft.train.config import RunConfig
from bookft.train.curriculum import stage_len
from bookft.train.data import Batches
from bookft.train.metrics import MetricsLog, mfu
from bookft.train.program import build_program, check_rows, resolve_model_config, train_mesh
from bookft.train.retrieval_check import check_retrieval_agreement
from bookft.train.rundir import check_run_dir, config_digest, run_facts, write_config
from bookft.train.step import batch_sharding


@dataclass
class TrainResult:
    run_dir: Path
    step: int
    losses: dict[int, float]
    interrupted: bool = False
    tokens_per_s: float | None = None
    curriculum_steps: list[int] | None = None  # the realised stage lengths (gated stages end early)


class Preempted(Exception):
    def __init__(self, signum: int):
        self.signum = signum


@contextmanager
def signal_flag():
    """{"sig": None or the signal received}; a second signal stops at once (KeyboardInterrupt)."""
    flag = {"sig": None}

    def handler(signum, frame):
        if flag["sig"] is not None:  # second signal: stop now
            raise KeyboardInterrupt
        flag["sig"] = signum

    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        for s in old:
            signal.signal(s, handler)
    except ValueError:  # not the main thread
        old = {}
    try:
        yield flag
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@dataclass
class Hook:
    """fn(trainer, step) -> metrics or None, after every `every`-th step (and the last, if at_end)."""

    fn: Callable
    every: int
    at_end: bool = True

    def due(self, step: int, total: int) -> bool:
        return (self.every > 0 and step % self.every == 0) or (self.at_end and step == total)


def balance_block(cfg: RunConfig) -> int:
    """The attention kernel's block-skip granularity, which document arrangement aligns pieces to:
    the xla kernel skips KV blocks of block_kv; splash skips the engine's chunk pairs (max_chunk)."""
    from bookft.attention.api import pick_kernel

    if pick_kernel(cfg.attention.kernel, jax.default_backend()) == "splash":
        return cfg.attention.max_chunk
    return cfg.attention.block_kv


class Trainer:
    def __init__(self, cfg: RunConfig, run_dir: Path, model_path=None, *, steps: int | None = None,
                 corpus_version: str | int | None = None):
        self.run_dir = Path(run_dir)
        cfg, self.mesh, self.axes_choice = train_mesh(cfg)
        self.cfg = cfg
        from bookft.corpus import open_corpus

        self.pin = corpus_pin.choose(self.run_dir, cfg.data.corpus, corpus_version)
        self.corpus = open_corpus(self.pin.version_dir)
        asked = cfg if steps is None else dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=steps))
        check_agreement(run_facts(asked, self.corpus), what="the run config and corpus version")  # --steps too
        vocab = self.corpus.vocab_size
        if vocab > cfg.model.vocab_size:
            raise TrainError(f"{self.corpus.path}: the corpus tokenizer has {vocab} tokens but the model's "
                             f"vocabulary is {cfg.model.vocab_size}; use the model's tokenizer at "
                             "ingest (--tokenizer) or a model with a larger vocab_size")
        check_retrieval_agreement(cfg, self.corpus)  # examples in the eval's wording, whole in every stage
        self.program = build_program(cfg, self.mesh)
        att = self.program.attention
        self.attend, self.strategy, self.cp = self.program.attend, att.strategy, att.cp
        self.batches = Batches(self.corpus, batch_size=cfg.data.batch_size, seed=cfg.data.seed,
                               shuffle=cfg.data.shuffle, load_balance_cp=att.balance,
                               grad_accum=cfg.train.grad_accum, balance_block=balance_block(cfg),
                               # windows count tokens in row order: documents must stay contiguous
                               arrange_documents=cfg.data.arrange != "none" and not any(cfg.model.layer_windows),
                               block_swaps=cfg.data.arrange == "swaps")
        for n in sorted({stage_len(cfg, s, self.corpus.seq_len) for s in range(max(cfg.train.steps, 1))}):
            att.check_seq_len(n)
            plan = self.batches.plan(n)
            check_rows(cfg, self.program, plan.rows // plan.grad_accum)
        self.state, self.frozen = self.program.init_state(model_path)
        self.graphdef = self.program.graphdef
        self.ckpt = Checkpointer(self.run_dir, keep=cfg.checkpoint.keep, async_save=cfg.checkpoint.async_save)
        self.start_step = 0
        self.configured = cfg  # what the user asked for; self.cfg is the realised curriculum (gate.py)
        got = self.ckpt.restore_latest(*self.program.restore_targets())
        if got is not None:
            step, rparams, ropt, meta = got
            self.state = self.program.state_at(step, rparams, ropt)
            self.start_step = step
            if meta.get("curriculum_steps") and cfg.train.curriculum:
                self.cfg = gate.with_stage_steps(cfg, meta["curriculum_steps"])
        self.requested_steps = steps
        if steps is not None:
            if steps < self.start_step:
                raise TrainError(f"--steps {steps}: this run is at step {self.start_step} already ({self.run_dir}); "
                                 "steps only go forward: pass a larger --steps, or another --run-dir to start over")
            self.cfg = gate.with_total_steps(self.cfg, steps)
        self.program = self.program.with_config(self.cfg)
        self.bsh = batch_sharding(self.mesh)
        from bookft.model import flops_per_token

        self.flops_per_token = flops_per_token
        self.chip = chip_for_device(jax.devices()[0])
        self.hooks: list[Hook] = []

    # -- hooks ---------------------------------------------------------------------------------

    def add_hook(self, fn: Callable, every: int) -> Hook:
        """Call fn(trainer, step) after every `every`-th step and after the last; the metrics it
        returns join that step's row of metrics.jsonl."""
        hook = Hook(fn, every)
        self.hooks.append(hook)
        return hook

    def _core_hooks(self) -> list[Hook]:
        c = self.cfg.checkpoint
        return [Hook(self._end_gated_stage, 1), Hook(self._log, 1), Hook(self._progress, 1),
                Hook(self._preemption, 1), Hook(self._checkpoint, c.every, at_end=False)]

    def _end_gated_stage(self, _, step: int) -> None:
        if self.extra and gate.passed(self.cfg, step, self.extra):  # a gated stage has done its job
            self.row["stage_ended"] = gate.stage_index(self.cfg, step - 1)
            self.cfg = gate.end_stage(self.cfg, step)
            if self.requested_steps is not None:  # an explicit total stays the total
                self.cfg = gate.with_total_steps(self.cfg, self.requested_steps)
            self.total = self.cfg.train.steps
            self.program = self.program.with_config(self.cfg)

    def _log(self, _, step: int) -> None:
        if step % self.cfg.train.log_every == 0 or step == self.total or self.extra:
            self.log.write(step, self.row)

    def _progress(self, _, step: int) -> None:
        if self.progress is not None:
            self.progress(step, self.total, self.row)

    def _preemption(self, _, step: int) -> None:
        # multi-host: a signal to any host stops every host after the same step (they save together)
        sig = any_process(self.flag["sig"] or 0)
        if sig:
            self.flag["sig"] = sig
            self.save(step, force=True)
            self.ckpt.wait()
            raise Preempted(self.flag["sig"])

    def _checkpoint(self, _, step: int) -> None:
        if step < self.total:
            self.save(step)

    # -- state, metrics --------------------------------------------------------------------------

    @property
    def schedule(self):
        return self.program.schedule

    def _stages(self) -> list[int] | None:
        return [s.steps for s in self.cfg.train.curriculum] or None

    def meta(self, step: int) -> dict:
        return {"step": step, "data_position": step, "seed": self.cfg.train.seed,
                "data_seed": self.cfg.data.seed, "corpus": str(self.corpus.path),
                "tokenizer_fingerprint": getattr(self.corpus, "fingerprint", None),
                "config_digest": config_digest(self.configured), "time": time.time(),
                "curriculum_steps": [s.steps for s in self.cfg.train.curriculum]}

    def save(self, step: int, force: bool = False) -> None:
        self.ckpt.save(step, self.state["params"], self.state["opt_state"], self.meta(step), force=force)

    def metrics_row(self, step: int, m, loss: float, row_len: int, dt: float) -> dict:
        tps = self.batches.plan(row_len).rows * row_len / dt
        peak = self.chip.peak_bf16_flops if self.chip else None
        return {"loss": loss, "grad_norm": float(m["grad_norm"]), "lr": float(self.schedule(step - 1)),
                "tokens_per_s": tps, "step_time_s": dt, "seq_len": row_len, "skipped": int(m["skipped"]),
                "mfu": mfu(self.flops_per_token(self.cfg.model, row_len), tps, self.mesh.size, peak),
                "peak_memory_bytes": peak_memory_bytes(jax.devices()[0])}

    def report_reads(self, step: int) -> Path:
        """RUN_DIR/hosts/PROCESS.json: what this process read from the corpus (distinct sequences,
        token ids) in this invocation, with its devices: each host reads only its devices' share."""
        out = self.run_dir / "hosts" / f"{jax.process_index()}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({
            "process": jax.process_index(), "processes": jax.process_count(), "host": socket.gethostname(),
            "devices": [d.id for d in jax.local_devices()], "steps": [self.start_step, step],
            "corpus_reads": self.corpus.reads.as_dict()}) + "\n")
        return out

    # -- the loop --------------------------------------------------------------------------------

    def train_step(self, step: int) -> float:
        """Run optimizer step `step` + 1 (0-based `step` = data position); its row goes to self.row."""
        row_len = stage_len(self.cfg, step, self.corpus.seq_len)
        shard = {f: self.bsh for f in ("input_ids", "targets", "weights", "positions", "segment_ids")}
        t0 = time.perf_counter()
        batch = self.batches.global_batch(step, row_len, shard)
        self.state, m = self.program.step(self.state, self.frozen, batch)
        loss = float(m["loss"])
        dt = time.perf_counter() - t0
        if not np.isfinite(loss) and self.cfg.train.on_nan == "stop":
            raise TrainError(f"step {step + 1}: loss is {loss}; stopping without saving this "
                             "state (last checkpoint kept). Set train.on_nan=skip to skip "
                             "such batches.")
        self.row = self.metrics_row(step + 1, m, loss, row_len, dt)
        return loss

    def run(self, progress=None, log_metrics: bool = True, hooks=()) -> TrainResult:
        """Steps to train.steps. `hooks`: callables with an `every` attribute, added with add_hook."""
        for h in hooks:
            self.add_hook(h, h.every)
        self.total, self.progress = self.cfg.train.steps, progress
        self.log = MetricsLog(self.run_dir, enabled=log_metrics and jax.process_index() == 0)
        if self.log.enabled:
            self.log.truncate_after(self.start_step)
        losses: dict[int, float] = {}
        step, tps = self.start_step, None
        lease = self._lease()
        if jax.process_index() == 0:  # every host chose this version (the agreement check): one writer
            corpus_pin.record(self.run_dir, self.pin, self.start_step)
        try:
            with signal_flag() as self.flag:
                while step < self.total:
                    loss = self.train_step(step)
                    step += 1
                    tps = self.row["tokens_per_s"]
                    losses[step] = loss
                    self.extra = {}
                    for hook in self.hooks:  # metric hooks (probes) first: their figures join the row
                        if hook.due(step, self.total):
                            self.extra.update(hook.fn(self, step) or {})
                    if step == self.start_step + 1 and self.pin.marked:
                        self.extra.update(corpus_version=self.pin.version, corpus_version_from=self.pin.moved_from)
                    self.row.update(self.extra)
                    for hook in self._core_hooks():
                        if hook.due(step, self.total):
                            hook.fn(self, step)
                if step > 0:
                    self.save(step, force=True)
            self.ckpt.wait()
            self.report_reads(step)
            return TrainResult(self.run_dir, step, losses, tokens_per_s=tps, curriculum_steps=self._stages())
        except Preempted:
            self.report_reads(step)
            return TrainResult(self.run_dir, step, losses, interrupted=True, tokens_per_s=tps,
                               curriculum_steps=self._stages())
        finally:
            if lease is not None and step >= self.total:  # finished; a stopped or killed run keeps it
                lease.release()
            self.log.close()
            self.ckpt.close()

    def _lease(self) -> Lease | None:
        """The run's lease on the version it trains on (corpus/lease.py): a refresh's retention never
        prunes it until the run finishes, even after a kill -9; none for a bare version folder or a
        read-only corpus."""
        if self.pin.root is None or self.pin.version is None:
            return None
        lease = Lease(self.pin.root, version=self.pin.version, run_dir=self.run_dir)
        try:
            lease.__enter__()
        except OSError:
            return None
        return lease

    def steps_line(self) -> str:
        """What this invocation will train, for the banner."""
        total, start = self.cfg.train.steps, self.start_step
        if total <= start:
            return f"steps: already at step {start} of {total}; nothing to train (--steps N continues to N)"
        gated = self.requested_steps is None and any(
            s.until for i, s in enumerate(self.cfg.train.curriculum) if gate.stage_start(self.cfg, i + 1) > start)
        return (f"steps: {start} -> {total}, {total - start} to run"
                + (" (at most: gated stages end when the probe passes)" if gated else ""))


def train(cfg: RunConfig, *, run_dir: str | Path, model_path: str | Path | None = None,
          progress=None, log_metrics: bool = True, hooks=(), announce=None, steps: int | None = None,
          corpus_version: str | int | None = None) -> TrainResult:
    """Train according to `cfg` in `run_dir` (resuming if it holds checkpoints); `hooks`: Trainer.add_hook.
    `steps`: the run's total (see the module docstring); `corpus_version`: None (the version the run
    trains on), "latest" or N (train/corpus_pin.py). `announce(line)` hears what bookft chose for the
    attention (strategy auto, a usp axis split), the corpus version and the steps that will run."""
    cfg = resolve_model_config(cfg, model_path)
    run_dir = Path(run_dir)
    made = next((p for p in reversed([run_dir, *run_dir.parents]) if not p.exists()), None)
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        check_run_dir(run_dir, cfg)
        trainer = Trainer(cfg, run_dir=run_dir, model_path=model_path, steps=steps, corpus_version=corpus_version)
    except BaseException:
        if made is not None:  # refused before anything ran: leave no empty run directory behind
            shutil.rmtree(made, ignore_errors=True)
        raise
    if announce is not None:
        if trainer.axes_choice.why:
            announce(f"attention: {trainer.axes_choice.why}")
        pin = trainer.pin
        announce(f"corpus: {pin.note or f'version {pin.version} of {pin.root or pin.version_dir}'}")
        announce(trainer.steps_line())
    if jax.process_index() == 0:  # one writer for the run's files (a shared file system on a pod)
        write_config(run_dir, trainer.configured)
        # The run's tokenizer travels with it (eval, export), whatever happens to the corpus later.
        shutil.copyfile(trainer.corpus.tokenizer_path, run_dir / "tokenizer.json")
    return trainer.run(progress=progress, log_metrics=log_metrics, hooks=hooks)
