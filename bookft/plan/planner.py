"""`bookft plan`: strategies x remat policies for one topology, best first; longest sequence that fits.

A cheap analytic lower bound (parameters + optimizer state + the per-layer inputs that any remat
policy keeps) answers "does not fit" without compiling when even that exceeds the chip; every
other answer comes from XLA compiling the real step for the topology.
"""

from __future__ import annotations

import dataclasses
import math

from bookft.plan.build import GiB, PlanResult, mesh_for, plan_one
from bookft.plan.topology import Topology, topology_devices
from bookft.train.config import RunConfig

STRATEGIES = ("ring", "usp", "allgather", "ulysses")
REMATS = ("full", "offload_input", "offload", "save_dots", "none")
# pinned host memory the TPU compiler lets one device's program use for offloaded activations
# (libtpu's own limit: "Ran out of memory in memory space host. Used 152.00G of 128.00G host")
HOST_OFFLOAD_BYTES = 128 * GiB


def lower_bound_bytes(cfg: RunConfig, topo: Topology, seq_len: int, strategy: str) -> tuple[float, str]:
    """Bytes per device that any plan needs, and how they add up."""
    mc = cfg.model
    n = topo.n_devices
    e, f, d = mc.hidden_size, mc.intermediate_size, mc.dim_per_head
    params = mc.num_layers * (e * d * (mc.num_heads * 2 + mc.num_kv_heads * 2) + 3 * e * f) + 2 * mc.vocab_size * e
    pbytes = 4 if mc.param_dtype == "float32" else 2
    state = params * (pbytes + 8) / n  # params + AdamW mu, nu (fp32), fully sharded at best
    saved = 0.0 if mc.remat in ("offload", "offload_input") else layer_inputs_bytes(cfg, topo, seq_len, strategy)
    total = state + saved
    why = f"parameters+optimizer {state / GiB:.1f} GiB, saved layer inputs {saved / GiB:.1f} GiB"
    return total, why


def layer_inputs_bytes(cfg: RunConfig, topo: Topology, seq_len: int, strategy: str) -> float:
    """Bytes per device of every layer's input (what full remat saves; offloading remat moves to host)."""
    mc = cfg.model
    sizes = mesh_for(cfg, strategy, topo.n_devices)
    cp = sizes.get("context", 1) * sizes.get("context_ulysses", 1)
    rows = max(cfg.data.batch_size // cfg.train.grad_accum, 1)
    return mc.num_layers * rows * seq_len / cp * mc.hidden_size * (2 if mc.compute_dtype == "bfloat16" else 4)


def plan(cfg: RunConfig, topo: Topology, *, seq_len: int, strategies=STRATEGIES, remats=REMATS,
         devices=None, on_result=None) -> list[PlanResult]:
    devices = devices or topology_devices(topo)
    out = []
    for strategy in strategies:
        for remat in remats:
            res = plan_fast(cfg, topo, devices, seq_len=seq_len, strategy=strategy, remat=remat)
            out.append(res)
            if on_result:
                on_result(res)
    return rank(out)


def plan_fast(cfg, topo, devices, *, seq_len, strategy, remat) -> PlanResult:
    c = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, remat=remat))
    bound, why = lower_bound_bytes(c, topo, seq_len, strategy)
    host = layer_inputs_bytes(c, topo, seq_len, strategy) if remat in ("offload", "offload_input") else 0.0
    refusal = None
    if host >= HOST_OFFLOAD_BYTES:
        refusal = (f"does not fit: the offloaded layer inputs alone need {host / GiB:.0f} GiB of host memory per "
                   f"chip, the compiler allows {HOST_OFFLOAD_BYTES / GiB:.0f} GiB (analytic lower bound, not compiled)")
    elif bound > topo.hbm_per_device:
        refusal = (f"does not fit: at least {bound / GiB:.1f} GiB per chip ({why}) > "
                   f"{topo.hbm_per_device / GiB:.1f} GiB (analytic lower bound, not compiled)")
    if refusal is None:
        return plan_one(cfg, topo, devices, seq_len=seq_len, strategy=strategy, remat=remat)
    return PlanResult(strategy=strategy, remat=remat, seq_len=seq_len, topology=topo.libtpu_name,
                      n_devices=topo.n_devices, mesh=mesh_for(cfg, strategy, topo.n_devices), fits=False,
                      capacity_bytes=topo.hbm_per_device, peak_bytes=None, error=refusal)


def rank(results: list[PlanResult]) -> list[PlanResult]:
    """Fitting plans first, fastest estimated step first, then smallest peak."""
    return sorted(results, key=lambda r: (not r.fits, r.step_time_s or math.inf, r.peak_bytes or math.inf))


def max_seq_len(cfg: RunConfig, topo: Topology, *, strategy: str, remat: str, start: int = 8192,
                limit: int = 1 << 26, devices=None, on_try=None, known=None,
                evaluate=None) -> tuple[int | None, list[PlanResult]]:
    """Largest sequence that fits: doubling from `start`, then bisection down to 1/8 of the last step.

    Lengths are kept multiples of what the strategy needs (2 x context x block). `known` maps
    lengths already planned (same program) to whether they fit, so a resumed search compiles only
    new lengths; `evaluate(n) -> PlanResult` replaces `plan_fast` (a benchmark that times and
    records each compile). A length whose attention tiles overflow VMEM counts as too long (the
    compiler's own limit at that length); any other "not applicable" ends the search with None."""
    devices = devices or topology_devices(topo)
    sizes = mesh_for(cfg, strategy, len(devices))
    cp = sizes.get("context", 1) * sizes.get("context_ulysses", 1)
    unit = 2 * cp * max(cfg.attention.block_q, cfg.attention.block_kv)
    tried: list[PlanResult] = []

    def fits(n: int) -> bool:
        if known and n in known:
            return known[n]
        r = (evaluate(n) if evaluate else
             plan_fast(cfg, topo, devices, seq_len=n, strategy=strategy, remat=remat))
        tried.append(r)
        if on_try:
            on_try(r)
        if r.error and r.error.startswith("not applicable"):
            if "VMEM" in r.error:  # the kernel's per-call tiles outgrow VMEM at this length: too long
                return False
            raise ValueError(r.error)  # the combination never compiles, whatever the length
        return r.fits

    n = max(unit, (start // unit) * unit)
    try:
        if not fits(n):
            return None, tried
        lo = n
        while lo * 2 <= limit and fits(lo * 2):
            lo *= 2
        hi = lo * 2
        step = max(unit, lo // 8)
        while hi - lo > step:
            mid = (lo + hi) // 2 // unit * unit
            if mid <= lo:
                break
            if fits(mid):
                lo = mid
            else:
                hi = mid
    except ValueError:
        return None, tried
    return lo, tried
