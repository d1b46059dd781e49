"""Orbax checkpoints in RUN_DIR/checkpoints: params, optimizer state and a JSON meta per step.

Design choices:
- Three items per step: `params` and `opt_state` (pure pytrees of arrays, saved sharded, each host
  writing its shards) and `meta` (JSON: step, data position, RNG seed, corpus version, config
  digest). Tools that only need weights (`bookft eval`, `bookft export`) restore `params` alone.
- Async saves (`checkpoint.async_save`), keep the last `checkpoint.keep`.
- Multi-host: every process calls save and restore (orbax writes each array's shards once, from
  the process that holds them, and the step's metadata from process 0); only process 0 moves a
  broken step aside, and the others wait for it at a barrier. A step that any host fails to read is
  skipped by all of them (they agree on it), so every host resumes from the same step.
- Restore walks the steps newest first: a latest checkpoint that is partial or corrupt (a run
  killed while writing it, a truncated file) is reported and the previous one is used.
- The data position is the step number, since batches are a pure function of (seed, step).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from bookft.errors import TrainError
from bookft.parallel.distributed import any_process

log = logging.getLogger("bookft.checkpoint")


def checkpoint_dir(run_dir: str | Path) -> Path:
    return Path(run_dir).resolve() / "checkpoints"


class Checkpointer:
    def __init__(self, run_dir: str | Path, *, keep: int = 3, async_save: bool = True):
        self.dir = checkpoint_dir(run_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        opts = ocp.CheckpointManagerOptions(max_to_keep=keep, enable_async_checkpointing=async_save,
                                            create=True)
        self.manager = ocp.CheckpointManager(self.dir, options=opts,
                                             item_names=("params", "opt_state", "meta"))

    def steps(self) -> list[int]:
        return sorted(self.manager.all_steps())

    def save(self, step: int, params, opt_state, meta: dict[str, Any], *, force: bool = False) -> bool:
        if step in self.manager.all_steps():
            return False
        args = ocp.args.Composite(
            params=ocp.args.StandardSave(params),
            opt_state=ocp.args.StandardSave(opt_state),
            meta=ocp.args.JsonSave(meta),
        )
        return bool(self.manager.save(step, args=args, force=force))

    def wait(self) -> None:
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.wait_until_finished()
        self.manager.close()

    def restore_latest(self, abstract_params, abstract_opt_state):
        """(step, params, opt_state, meta) of the newest readable checkpoint, or None if none.

        A checkpoint that fails to restore is moved aside to `checkpoints/broken-STEP` with a
        warning and the previous one is tried.
        """
        for step in reversed(self.steps()):
            try:
                got = self.manager.restore(step, args=ocp.args.Composite(
                    params=ocp.args.StandardRestore(abstract_params),
                    opt_state=ocp.args.StandardRestore(abstract_opt_state),
                    meta=ocp.args.JsonRestore(),
                ))
                why = None
            except Exception as e:  # partial / corrupt: fall back to the previous step
                why = f"{type(e).__name__}: {str(e)[:200]}"
            if not any_process(int(why is not None)):  # multi-host: a step any host cannot read, none uses
                return step, got["params"], got["opt_state"], dict(got["meta"])
            msg = f"checkpoint {self.dir / str(step)} cannot be restored ({why or 'on another host'}); " \
                  "falling back to the previous one"
            log.warning(msg)
            if jax.process_index() == 0 or why:
                print(f"warning: {msg}")
            self._set_aside(step)
        return None

    def _set_aside(self, step: int) -> None:
        if jax.process_index() == 0:
            src = self.dir / str(step)
            if src.exists():
                dst = self.dir / f"broken-{step}"
                if dst.exists():
                    shutil.rmtree(dst)
                src.rename(dst)
        if jax.process_count() > 1:  # every host sees the step set aside before it looks again
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices(f"bookft: checkpoint {step} set aside")
        self.manager.reload()


def read_meta(ckpt_step_dir: Path) -> dict[str, Any]:
    p = ckpt_step_dir / "meta" / "metadata"
    if not p.is_file():
        raise TrainError(f"{ckpt_step_dir}: no meta/metadata file; not a bookft checkpoint")
    return json.loads(p.read_text())


def restore_params(run_dir: str | Path, abstract_params, step: int | None = None):
    """Only the parameters of the newest (or given) readable checkpoint: (step, params)."""
    d = checkpoint_dir(run_dir)
    if not d.is_dir():
        raise TrainError(f"{run_dir}: no checkpoints/ folder; is this a `bookft train` run directory?")
    mngr = ocp.CheckpointManager(d, item_names=("params", "opt_state", "meta"))
    steps = [step] if step is not None else sorted(mngr.all_steps(), reverse=True)
    if not steps:
        raise TrainError(f"{d}: no checkpoints yet")
    errors = []
    for s in steps:
        try:
            got = mngr.restore(s, args=ocp.args.Composite(params=ocp.args.StandardRestore(abstract_params)))
            return s, got["params"]
        except Exception as e:
            errors.append(f"step {s}: {type(e).__name__}: {str(e)[:200]}")
    raise TrainError(f"{d}: no readable checkpoint ({'; '.join(errors)})")


def run_dir_of(path: str | Path) -> Path:
    """The run directory of a run (RUN) or of one of its checkpoints (RUN/checkpoints/STEP)."""
    path = Path(path)
    return path.parent.parent if path.parent.name == "checkpoints" and path.name.isdigit() else path


def run_config_of(path: str | Path):
    """The RunConfig a run (RUN or RUN/checkpoints/STEP) was trained with: RUN/config.yaml."""
    from bookft.train.config import load_run_config

    cfg_file = run_dir_of(path) / "config.yaml"
    if not Path(path).exists():
        raise TrainError(f"{path}: checkpoint/run directory not found")
    if not cfg_file.is_file():
        raise TrainError(f"{path}: no config.yaml; expected a `bookft train` run directory or "
                         "RUN_DIR/checkpoints/STEP")
    return load_run_config(cfg_file)


def load_params(path: str | Path, step: int | None = None, *, mesh=None):
    """(model, run_config) from a run directory (newest checkpoint) or RUN_DIR/checkpoints/STEP.

    Trainable parameters come from the checkpoint; frozen ones (base weights under LoRA) are
    rebuilt as training built them: from the run's HF folder, or the seeded initialisation.
    With a `mesh` the checkpoint is restored straight into the training shardings on it (no device
    ever holds a whole copy); without one, onto this host as uncommitted arrays.
    """
    from flax import nnx

    from bookft.model import abstract_model, init_model, load_hf
    from bookft.model.lora import trainable_filter

    path = Path(path)
    if path.parent.name == "checkpoints" and path.name.isdigit():
        step = int(path.name)
    run_dir = run_dir_of(path)
    cfg = run_config_of(path)
    from bookft.parallel.distributed import start  # a caller that then builds the run's mesh (eval) needs

    start(cfg.parallel)  # the devices and the multi-host runtime; no effect once jax's backend is up
    filt = trainable_filter(cfg.model)
    _, abs_params, _ = nnx.split(abstract_model(cfg.model), filt, ...)
    if mesh is not None:
        from bookft.train.step import state_shardings

        shardings = state_shardings(abs_params, mesh)
        abstract = jax.tree.map(lambda x, sh: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sh),
                                abs_params, shardings)
        got_step, params = restore_params(run_dir, abstract, step)
    else:
        one = jax.sharding.SingleDeviceSharding(jax.devices()[0])  # restore onto this host, any topology
        abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=one), abs_params)
        got_step, params = restore_params(run_dir, abstract, step)
        # uncommitted copies, so a jitted caller may place them on any mesh
        params = jax.tree.map(lambda x: jax.numpy.asarray(np.asarray(x)), params)
    if cfg.model.hf_path:
        model, _ = load_hf(cfg.model.hf_path, like=cfg.model)
    else:
        model = init_model(cfg.model, seed=cfg.train.seed)
    graphdef, _, frozen = nnx.split(model, filt, ...)
    model = nnx.merge(graphdef, params, frozen)
    return model, cfg
