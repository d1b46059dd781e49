"""Compile the real train step ahead of time for a TPU topology and read its per-chip memory.

The step is the one `bookft train` runs (bookft.train.step: model, attention strategy with the
splash kernel, chunked loss, optax AdamW, FSDP shardings from bookft.parallel.rules), lowered with
abstract inputs (ShapeDtypeStructs: no weights, no data) on the topology's devices, which libtpu
describes on a CPU-only host. XLA's `memory_analysis()` gives the per-device sizes; peak HBM is
arguments + outputs - aliased (donated state) + temporaries + generated code.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from dataclasses import dataclass, field

import jax
import numpy as np

from bookft.attention.resolution import ulysses_degree
from bookft.errors import AttentionError, ConfigError, PlanError
from bookft.parallel.mesh import context_degree, make_mesh, resolve_axis_sizes
from bookft.plan.estimate import estimate
from bookft.plan.topology import Topology
from bookft.train.config import RunConfig

GiB = 2**30


@dataclass
class PlanResult:
    strategy: str
    remat: str
    seq_len: int
    topology: str
    n_devices: int
    mesh: dict[str, int]
    fits: bool
    capacity_bytes: float
    peak_bytes: float | None = None
    params_bytes: float | None = None
    opt_state_bytes: float | None = None
    temp_bytes: float | None = None
    argument_bytes: float | None = None
    output_bytes: float | None = None
    alias_bytes: float | None = None
    code_bytes: float | None = None
    model_flops_per_step: float | None = None
    step_time_s: float | None = None
    compute_s: float | None = None
    comm_s: float | None = None
    mfu_at_estimate: float | None = None
    compile_s: float | None = None
    splash_in_hlo: bool | None = None
    error: str | None = None
    assumptions: str = ""
    overrides: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        for k in list(d):
            if k.endswith("_bytes") and d[k] is not None:
                d[k.replace("_bytes", "_gib")] = d[k] / GiB
        return d


def mesh_for(cfg: RunConfig, strategy: str, n_devices: int) -> dict[str, int]:
    """The configured mesh adapted to `strategy`: the context devices become one ring/gather/
    all-to-all axis, or for usp an all-to-all axis of gcd(context, KV heads) inside a ring."""
    sizes = resolve_axis_sizes(cfg.parallel.mesh, n_devices)
    ctx = sizes.pop("context", 1) * sizes.pop("context_ulysses", 1)
    if strategy == "local":
        sizes["fsdp"] = sizes.get("fsdp", 1) * ctx
        return sizes
    if strategy == "usp":
        u = ulysses_degree(ctx, cfg.model.num_kv_heads, cfg.parallel.mesh.get("context_ulysses"))
        return {**sizes, "context": ctx // u, "context_ulysses": u}
    return {**sizes, "context": ctx}


def per_device_bytes(abstract, shardings) -> float:
    total = 0.0
    for x, sh in zip(jax.tree.leaves(abstract), jax.tree.leaves(shardings), strict=True):
        total += math.prod(sh.shard_shape(x.shape)) * np.dtype(x.dtype).itemsize
    return total


def _oom(text: str) -> str | None:
    if "vmem" in text.lower():
        return ("not applicable: the attention kernel's blocks do not fit the chip's VMEM "
                f"({text.strip().splitlines()[0][:120]}); lower attention.block_q / attention.block_kv")
    if "UNIMPLEMENTED" in text:  # e.g. remat offload + MLP chunks: "Async slice only supports slicing in 1 dim"
        first = text.strip().splitlines()[0]
        why = first[first.find("UNIMPLEMENTED"):][:160]
        return f"not applicable: XLA:TPU cannot compile this combination ({why}); use another remat policy"
    if "RESOURCE_EXHAUSTED" not in text and "out of memory" not in text.lower():
        return None
    m = re.search(r"Used ([\d.]+[KMGT]?) of ([\d.]+[KMGT]?) host", text)
    if m:
        return (f"does not fit: offloaded activations need {m.group(1)}B of host memory per host, "
                f"{m.group(2)}B available (use remat full or save_dots, or more chips)")
    m = re.search(r"Used ([\d.]+[KMGT]?) of ([\d.]+[KMGT]?) hbm", text)
    if m:
        return f"does not fit: the compiler needs {m.group(1)}B of HBM per chip, {m.group(2)}B available"
    m = re.search(r"required for HLO temporaries \(([\d.]+[KMGT]?)\) exceeds available HBM \(([\d.]+[KMGT]?)\)", text)
    if m:
        return (f"does not fit: the compiler needs {m.group(1)}B of temporaries per chip, "
                f"{m.group(2)}B of HBM available")
    m = re.search(r"[Ee]xceeded hbm capacity by ([\d.]+[KMGT]?)", text)
    if m:
        return f"does not fit: exceeds HBM per chip by {m.group(1)}B"
    return "does not fit: " + text.strip().splitlines()[0][:200]


def planned_config(cfg: RunConfig, strategy: str, remat: str, n_devices: int) -> tuple[RunConfig, dict[str, int]]:
    """The run config as plan compiles it: `strategy` and `remat`, the splash kernel, the mesh for the strategy."""
    sizes = mesh_for(cfg, strategy, n_devices)
    cfg = dataclasses.replace(
        cfg, model=dataclasses.replace(cfg.model, remat=remat),
        attention=dataclasses.replace(cfg.attention, strategy=strategy, kernel="splash"),
        parallel=dataclasses.replace(cfg.parallel, mesh=sizes, cpu_devices=0))
    return cfg, sizes


def lower_step(cfg: RunConfig, devices, *, seq_len: int, strategy: str, remat: str):
    """The train step `plan_one` compiles, lowered (jax.stages.Lowered) for `devices` (benchmarks/step_hash.py)."""
    from bookft.train.program import build_program

    cfg, _ = planned_config(cfg, strategy, remat, len(devices))
    program = build_program(cfg, make_mesh(cfg.parallel, devices))
    program.attention.check_seq_len(seq_len)
    return program.step.lower(*program.abstract_inputs(seq_len))


def plan_one(cfg: RunConfig, topo: Topology, devices, *, seq_len: int, strategy: str, remat: str) -> PlanResult:
    from bookft.train.program import build_program

    cfg, sizes = planned_config(cfg, strategy, remat, len(devices))
    res = PlanResult(strategy=strategy, remat=remat, seq_len=seq_len, topology=topo.libtpu_name,
                     n_devices=len(devices), mesh=sizes, fits=False, capacity_bytes=topo.hbm_per_device,
                     overrides=[f"attention.strategy={strategy}", f"model.remat={remat}",
                                "parallel.mesh={" + ", ".join(f"{k}: {v}" for k, v in sizes.items()) + "}"])
    mesh = make_mesh(cfg.parallel, devices)
    try:
        program = build_program(cfg, mesh)
        program.attention.check_seq_len(seq_len)
    except (AttentionError, ConfigError) as e:
        res.error = f"not applicable: {e}"
        return res
    abs_params, abs_frozen, abs_opt = program.abs_params, program.abs_frozen, program.abs_opt
    p_sh, o_sh, f_sh = program.state_sh["params"], program.state_sh["opt_state"], program.frozen_sh
    shape = program.batch_shape(seq_len)
    nb = math.prod(mesh.shape.get(x, 1) for x in ("data", "fsdp"))
    if shape[1] % nb:
        res.error = (f"not applicable: {shape[1]} sequence(s) per micro-batch cannot be split over data x fsdp = "
                     f"{nb} devices (raise data.batch_size or put those devices on the context axis)")
        return res
    res.params_bytes = per_device_bytes(abs_params, p_sh) + per_device_bytes(abs_frozen, f_sh)
    res.opt_state_bytes = per_device_bytes(abs_opt, o_sh)
    t0 = time.perf_counter()
    try:
        lowered = program.step.lower(*program.abstract_inputs(seq_len))
        compiled = lowered.compile()
    except (AttentionError, ConfigError) as e:  # found while tracing (e.g. ulysses degree > head count)
        res.compile_s = time.perf_counter() - t0
        res.error = f"not applicable: {e}"
        return res
    except Exception as e:  # XLA's own OOM -> a readable answer; anything else is a real error
        res.compile_s = time.perf_counter() - t0
        msg = _oom(str(e))
        if msg is None:
            raise PlanError(f"compiling the {strategy} step for {topo.libtpu_name} failed: "
                            f"{str(e).splitlines()[0][:300]}") from e
        res.error = msg
        _fill_estimate(res, cfg, mesh, topo, seq_len, shape, abs_params)
        return res
    res.compile_s = time.perf_counter() - t0
    m = compiled.memory_analysis()
    res.temp_bytes = float(m.temp_size_in_bytes)
    res.argument_bytes = float(m.argument_size_in_bytes)
    res.output_bytes = float(m.output_size_in_bytes)
    res.alias_bytes = float(m.alias_size_in_bytes)
    res.code_bytes = float(m.generated_code_size_in_bytes)
    res.peak_bytes = res.argument_bytes + res.output_bytes - res.alias_bytes + res.temp_bytes + res.code_bytes
    res.fits = res.peak_bytes <= topo.hbm_per_device
    try:
        hlo = compiled.as_text()
        res.splash_in_hlo = "tpu_custom_call" in hlo
    except Exception:
        res.splash_in_hlo = None
    _fill_estimate(res, cfg, mesh, topo, seq_len, shape, abs_params)
    return res


def _fill_estimate(res: PlanResult, cfg: RunConfig, mesh, topo: Topology, seq_len: int, shape, abs_params) -> None:
    total_param_bytes = sum(math.prod(x.shape) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(abs_params))
    shard = math.prod(mesh.shape.get(a, 1) for a in ("fsdp", "context", "context_ulysses", "data"))
    est = estimate(cfg.model, strategy=res.strategy, remat=res.remat, seq_len=seq_len,
                   tokens_per_step=shape[0] * shape[1] * seq_len, n_devices=mesh.size, cp=context_degree(mesh),
                   shard_degree=shard, param_bytes_total=total_param_bytes,
                   flops_per_device=topo.flops_per_device, ici_bandwidth=topo.gen.chip.ici_bandwidth)
    res.model_flops_per_step = est.model_flops
    res.step_time_s, res.compute_s, res.comm_s = est.step_s, est.compute_s, est.comm_s
    res.mfu_at_estimate = est.mfu_at_estimate
    res.assumptions = est.assumptions
