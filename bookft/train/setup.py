"""Build a Trainer: mesh, corpus, model, sharded state, attention, compiled steps; then run it."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from bookft.errors import AttentionError, ConfigError, TrainError
from bookft.parallel.distributed import maybe_initialize
from bookft.parallel.hardware import chip_for_device, peak_memory_bytes
from bookft.parallel.mesh import context_degree, ensure_cpu_devices, make_mesh
from bookft.train import gate
from bookft.train.checkpoint import Checkpointer
from bookft.train.config import RunConfig
from bookft.train.data import Batches
from bookft.train.loop import Preempted, TrainResult, _signal_flag, config_digest, stage_data, stage_len
from bookft.train.metrics import MetricsLog, mfu
from bookft.train.optimizer import make_optimizer
from bookft.train.step import (
    StepSettings,
    batch_sharding,
    jit_train_step,
    make_train_step,
    opt_state_shardings,
    shardings_by_path,
    state_shardings,
)


def make_attend(cfg: RunConfig, mesh):
    from bookft.attention import make_attention

    a = cfg.attention
    strategy = a.strategy
    if any(cfg.model.layer_windows) and a.kernel == "splash":
        raise ConfigError(f"model.sliding_window={cfg.model.sliding_window}: sliding-window layers need "
                          "attention.kernel: xla (the splash kernel here takes static masks only)")
    if strategy != "local" and context_degree(mesh) == 1:
        strategy = "local"  # nothing to split: the same kernel on the whole sequence
    return make_attention(strategy, a.kernel, mesh, causal=a.causal, load_balanced=a.load_balance,
                          block_q=a.block_q, block_kv=a.block_kv, max_chunk=a.max_chunk), strategy


def check_seq_len(cfg: RunConfig, mesh, row_len: int, strategy: str) -> None:
    cp = context_degree(mesh)
    need = cp * (2 if (cfg.attention.load_balance and strategy != "local" and cp > 1) else 1)
    if row_len % need:
        raise AttentionError(
            f"sequence length {row_len} is not divisible by {need} (strategy {strategy} over "
            f"{cp} context shards{' with zig-zag load balancing' if need > cp else ''}); "
            "choose a multiple of it")


def resolve_model_config(cfg: RunConfig, model_path) -> RunConfig:
    """With an HF folder (--model or model.hf_path) its config.json gives the model's shape; the run
    config keeps its knobs (dtypes, remat, LoRA, rope theta override)."""
    import dataclasses

    from bookft.model import config_from_hf, read_hf_config
    from bookft.model.config import KNOBS

    path = model_path or cfg.model.hf_path
    if path is None:
        return cfg
    knobs = {k: getattr(cfg.model, k) for k in KNOBS}
    knobs["hf_path"] = str(path)
    mc = config_from_hf(read_hf_config(path), f"{path}/config.json", **knobs)
    return dataclasses.replace(cfg, model=mc)


def init_params(cfg: RunConfig, mesh, model_path):
    """(graphdef, params, frozen, shardings...) with every array created directly sharded."""
    from bookft.model import init_model, load_hf
    from bookft.model.lora import trainable_filter

    model_path = model_path or cfg.model.hf_path

    mc = cfg.model
    abstract = nnx.eval_shape(lambda: init_model(mc, seed=cfg.train.seed))
    filt = trainable_filter(mc)
    graphdef, abs_params, abs_frozen = nnx.split(abstract, filt, ...)
    p_sh = state_shardings(abs_params, mesh)
    f_sh = state_shardings(abs_frozen, mesh)
    if model_path is not None:
        from bookft.parallel.rules import logical_to_spec

        # streamed tensor by tensor, each placed directly with its target sharding
        model, _ = load_hf(model_path, like=mc, mesh=mesh,
                           shardings=lambda names, shape: logical_to_spec(names, shape, mesh))
        _, params, frozen = nnx.split(model, filt, ...)
    else:
        def make():
            return nnx.split(init_model(mc, seed=cfg.train.seed), filt, ...)[1:]

        params, frozen = jax.jit(make, out_shardings=(p_sh, f_sh))()
    return graphdef, abs_params, abs_frozen, params, frozen, p_sh, f_sh


@dataclass
class TrainState:
    """The sharded train state and what builds and steps it (shared by train, plan --measure, benchmarks)."""

    graphdef: object
    tx: object
    schedule: object
    abs_params: object
    abs_opt: object
    state: dict
    state_sh: dict
    frozen: object
    frozen_sh: object


def init_state(cfg: RunConfig, mesh, model_path=None) -> TrainState:
    """Parameters (fresh or from an HF folder) and AdamW state, created directly with their shardings.

    Under LoRA `params` holds only the trainable variables (adapters, optionally embeddings and
    norms) and the base weights are `frozen`, so the optimizer state is adapter-sized.
    """
    graphdef, abs_params, _, params, frozen, p_sh, f_sh = init_params(cfg, mesh, model_path)
    tx, schedule = make_optimizer(cfg.train)
    abs_opt = jax.eval_shape(tx.init, abs_params)
    o_sh = opt_state_shardings(abs_opt, shardings_by_path(abs_params, p_sh), mesh)
    rep = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    state_sh = {"params": p_sh, "opt_state": o_sh, "step": rep}
    state = {"params": params, "opt_state": jax.jit(tx.init, out_shardings=o_sh)(params),
             "step": jax.device_put(jnp.zeros((), jnp.int32), rep)}
    return TrainState(graphdef, tx, schedule, abs_params, abs_opt, state, state_sh, frozen, f_sh)


class Trainer:
    def __init__(self, cfg: RunConfig, run_dir: Path, model_path=None):
        self.cfg, self.run_dir = cfg, run_dir
        if cfg.parallel.cpu_devices:  # before the backend starts; ignored on accelerators
            ensure_cpu_devices(cfg.parallel.cpu_devices)
        maybe_initialize(cfg.parallel.distributed)  # multi-host: before any device is touched
        self.mesh = make_mesh(cfg.parallel, jax.devices()[: _n_devices(cfg)])
        from bookft.corpus import open_corpus

        self.corpus = open_corpus(cfg.data.corpus)
        vocab = self.corpus.vocab_size
        if vocab > cfg.model.vocab_size:
            raise TrainError(f"{self.corpus.path}: the corpus tokenizer has {vocab} tokens but the model's "
                             f"vocabulary is {cfg.model.vocab_size}; use the model's tokenizer at "
                             "ingest (--tokenizer) or a model with a larger vocab_size")
        self.attend, self.strategy = make_attend(cfg, self.mesh)
        self.cp = context_degree(self.mesh)
        balance = self.cp if (cfg.attention.load_balance and self.strategy != "local" and self.cp > 1) else 1
        self.batches = Batches(self.corpus, batch_size=cfg.data.batch_size, seed=cfg.data.seed,
                               shuffle=cfg.data.shuffle, load_balance_cp=balance,
                               grad_accum=cfg.train.grad_accum, balance_block=balance_block(cfg),
                               # windows count tokens in row order: documents must stay contiguous
                               arrange_documents=cfg.data.arrange != "none" and not any(cfg.model.layer_windows),
                               block_swaps=cfg.data.arrange == "swaps")
        lens = {stage_len(cfg, s, self.corpus.seq_len) for s in range(max(cfg.train.steps, 1))}
        for n in sorted(lens):
            check_seq_len(cfg, self.mesh, n, self.strategy)
            plan = self.batches.plan(n)
            nb = math.prod(self.mesh.shape.get(a, 1) for a in ("data", "fsdp"))
            if (plan.rows // plan.grad_accum) % nb:
                raise ConfigError(f"{plan.rows // plan.grad_accum} rows per micro-batch cannot be split over "
                                  f"data x fsdp = {nb} devices; raise data.batch_size or shrink the mesh")
        ts = init_state(cfg, self.mesh, model_path)
        self.graphdef, self.frozen, self.f_sh = ts.graphdef, ts.frozen, ts.frozen_sh
        self.tx, self.schedule, self.state, self.state_sh = ts.tx, ts.schedule, ts.state, ts.state_sh
        abs_params, abs_opt = ts.abs_params, ts.abs_opt
        p_sh, o_sh, rep = ts.state_sh["params"], ts.state_sh["opt_state"], ts.state_sh["step"]
        self.ckpt = Checkpointer(run_dir, keep=cfg.checkpoint.keep, async_save=cfg.checkpoint.async_save)
        self.start_step = 0
        got = self.ckpt.restore_latest(_with_shardings(abs_params, p_sh), _with_shardings(abs_opt, o_sh))
        self.configured = cfg  # what the user asked for; self.cfg is the realised curriculum (gate.py)
        if got is not None:
            step, rparams, ropt, meta = got
            self.state = {"params": rparams, "opt_state": ropt, "step": jax.device_put(jnp.int32(step), rep)}
            self.start_step = step
            if meta.get("curriculum_steps") and cfg.train.curriculum:
                self.cfg = gate.with_stage_steps(cfg, meta["curriculum_steps"])
        self._build_step()
        self.bsh = batch_sharding(self.mesh)
        from bookft.model import flops_per_token

        self.flops_per_token = flops_per_token
        self.chip = chip_for_device(jax.devices()[0])

    def _stages(self) -> list[int] | None:
        return [s.steps for s in self.cfg.train.curriculum] or None

    def _build_step(self) -> None:
        """The optimizer (its schedule follows the realised curriculum) and the jitted step."""
        cfg = self.cfg
        self.tx, self.schedule = make_optimizer(cfg.train)
        settings = StepSettings(loss_chunk=cfg.train.loss_chunk, z_loss=cfg.train.z_loss,
                                on_nan=cfg.train.on_nan)
        step_fn = make_train_step(self.graphdef, self.tx, self.attend, self.mesh, settings)
        self.step_fn = jit_train_step(step_fn, self.state_sh, self.f_sh, self.mesh)

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

    def run(self, progress=None, log_metrics: bool = True, hooks=()) -> TrainResult:
        """Steps to train.steps. `hooks`: callables with an `every` attribute, called as
        hook(trainer, step) after every `every`-th step and after the last; the metrics they
        return join that step's row of metrics.jsonl (the needle probe, bookft/eval/probe.py)."""
        cfg, total = self.cfg, self.cfg.train.steps
        log = MetricsLog(self.run_dir, enabled=log_metrics and jax.process_index() == 0)
        log.truncate_after(self.start_step)
        losses: dict[int, float] = {}
        step = self.start_step
        tps = None
        shard = {f: self.bsh for f in ("input_ids", "targets", "weights", "positions", "segment_ids")}
        try:
            with _signal_flag() as flag:
                while step < total:
                    row_len = stage_len(cfg, step, self.corpus.seq_len)
                    t0 = time.perf_counter()
                    batch = self.batches.global_batch(step, row_len, shard, data=stage_data(cfg, step))
                    self.state, m = self.step_fn(self.state, self.frozen, batch)
                    loss = float(m["loss"])
                    dt = time.perf_counter() - t0
                    step += 1
                    if not np.isfinite(loss) and cfg.train.on_nan == "stop":
                        raise TrainError(f"step {step}: loss is {loss}; stopping without saving this "
                                         "state (last checkpoint kept). Set train.on_nan=skip to skip "
                                         "such batches.")
                    row = self.metrics_row(step, m, loss, row_len, dt)
                    tps = row["tokens_per_s"]
                    losses[step] = loss
                    extra = {}
                    for hook in hooks:
                        if step % hook.every == 0 or step == total:
                            extra.update(hook(self, step) or {})
                    row.update(extra)
                    if extra and gate.passed(cfg, step, extra):  # a gated stage has done its job
                        row["stage_ended"] = gate.stage_index(cfg, step - 1)
                        self.cfg = cfg = gate.end_stage(cfg, step)
                        total = cfg.train.steps
                        self._build_step()
                    if step % cfg.train.log_every == 0 or step == total or extra:
                        log.write(step, row)
                    if progress is not None:
                        progress(step, total, row)
                    if flag["sig"] is not None:
                        self.save(step, force=True)
                        self.ckpt.wait()
                        raise Preempted(flag["sig"])
                    if cfg.checkpoint.every and step % cfg.checkpoint.every == 0 and step < total:
                        self.save(step)
                if step > 0:
                    self.save(step, force=True)
            self.ckpt.wait()
            return TrainResult(self.run_dir, step, losses, tokens_per_s=tps, curriculum_steps=self._stages())
        except Preempted:
            return TrainResult(self.run_dir, step, losses, interrupted=True, tokens_per_s=tps,
                               curriculum_steps=self._stages())
        finally:
            log.close()
            self.ckpt.close()


def balance_block(cfg: RunConfig) -> int:
    """The attention kernel's block-skip granularity, which document arrangement aligns pieces to:
    the xla kernel skips KV blocks of block_kv; splash skips the engine's chunk pairs (max_chunk)."""
    if cfg.attention.kernel == "splash":
        return cfg.attention.max_chunk
    return cfg.attention.block_kv


def _with_shardings(abstract, shardings):
    return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), abstract, shardings)


def _n_devices(cfg: RunConfig) -> int:
    """All devices; on CPU with `parallel.cpu_devices` set, that many simulated ones."""
    n = len(jax.devices())
    if jax.default_backend() == "cpu" and 0 < cfg.parallel.cpu_devices <= n:
        return cfg.parallel.cpu_devices
    return n


def build_trainer(cfg: RunConfig, *, run_dir: Path, model_path=None) -> Trainer:
    return Trainer(cfg, Path(run_dir), model_path)
