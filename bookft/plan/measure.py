"""`bookft plan --measure`: on a real TPU host, run a few steps of the planned configuration."""

from __future__ import annotations

import dataclasses
import time

from bookft.errors import PlanError


def measure_steps(cfg, result, steps: int = 5) -> dict:
    """Time `steps` real train steps (random tokens, fresh weights) with the plan's settings."""
    import jax
    import numpy as np

    if jax.default_backend() != "tpu":
        raise PlanError("--measure runs real steps and needs the TPU host itself; this host's backend is "
                        f"{jax.default_backend()} (plan without --measure compiles ahead of time here)")
    from bookft.model import flops_per_token
    from bookft.parallel.hardware import chip_for_device
    from bookft.parallel.mesh import make_mesh
    from bookft.train.program import build_program
    from bookft.train.step import BATCH_FIELDS, batch_sharding

    cfg = dataclasses.replace(
        cfg, model=dataclasses.replace(cfg.model, remat=result.remat),
        attention=dataclasses.replace(cfg.attention, strategy=result.strategy, kernel="splash"),
        parallel=dataclasses.replace(cfg.parallel, mesh=result.mesh))
    mesh = make_mesh(cfg.parallel)
    program = build_program(cfg, mesh, on_nan="skip")
    state, frozen = program.init_state()
    step = program.step
    a = cfg.train.grad_accum
    shape = (a, max(cfg.data.batch_size // a, 1), result.seq_len)
    rng = np.random.default_rng(0)
    host = {"input_ids": rng.integers(0, cfg.model.vocab_size, shape).astype(np.int32),
            "positions": np.broadcast_to(np.arange(shape[2], dtype=np.int32), shape).copy(),
            "segment_ids": np.ones(shape, np.int32), "weights": np.ones(shape, np.float32)}
    host["targets"] = np.roll(host["input_ids"], -1, axis=-1)
    bsh = batch_sharding(mesh)
    batch = {f: jax.device_put(host[f], bsh) for f in BATCH_FIELDS}
    state, m = step(state, frozen, batch)  # compile + warm up
    jax.block_until_ready(m["loss"])
    t0 = time.perf_counter()
    for _ in range(steps):
        state, m = step(state, frozen, batch)
    jax.block_until_ready(m["loss"])
    dt = (time.perf_counter() - t0) / steps
    tokens = shape[0] * shape[1] * shape[2]
    chip = chip_for_device(jax.devices()[0])
    flops = flops_per_token(cfg.model, result.seq_len) * tokens
    mfu = flops / dt / (chip.peak_bf16_flops * mesh.size) if chip else None
    return {"step_time_s": dt, "tokens_per_s": tokens / dt, "mfu": mfu, "steps": steps}
