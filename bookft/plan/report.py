"""Tables and JSON for `bookft plan`.

JSON keys (documented in README): topology, topology_user_name, n_devices, seq_len, chip {name,
hbm_gib, peak_bf16_tflops}, results [ {strategy, remat, mesh, fits, peak_gib, capacity_gib,
params_gib, opt_state_gib, temp_gib, model_flops_per_step, step_time_s, compute_s, comm_s,
mfu_at_estimate, compile_s, splash_in_hlo, error, overrides} ] best first, best (the first
fitting result or null), assumptions, measured (null unless --measure).
"""

from __future__ import annotations

from rich.table import Table

from bookft.plan.build import GiB, PlanResult
from bookft.plan.topology import Topology

KEYS = ("strategy", "remat", "mesh", "fits", "peak_gib", "capacity_gib", "params_gib", "opt_state_gib", "temp_gib",
        "model_flops_per_step", "step_time_s", "compute_s", "comm_s", "mfu_at_estimate", "compile_s",
        "splash_in_hlo", "error", "overrides")


def result_json(r: PlanResult) -> dict:
    d = r.as_dict()
    d.setdefault("peak_gib", None)
    d["capacity_gib"] = r.capacity_bytes / GiB
    return {k: d.get(k) for k in KEYS}


def plan_json(cfg, topo: Topology, seq_len: int, results: list[PlanResult], measured=None) -> dict:
    best = next((r for r in results if r.fits), None)
    return {
        "topology": topo.libtpu_name, "topology_user_name": topo.user_name, "n_devices": topo.n_devices,
        "seq_len": seq_len, "model": cfg.name,
        "chip": {"name": topo.gen.chip.name, "hbm_gib": topo.hbm_per_device / GiB,
                 "peak_bf16_tflops": topo.flops_per_device / 1e12},
        "results": [result_json(r) for r in results],
        "best": result_json(best) if best else None,
        "assumptions": next((r.assumptions for r in results if r.assumptions), ""),
        "measured": measured,
    }


def _gib(x) -> str:
    return "-" if x is None else f"{x / GiB:.2f}"


def plan_table(topo: Topology, seq_len: int, results: list[PlanResult]) -> Table:
    t = Table(title=f"{topo.libtpu_name} ({topo.user_name}, {topo.n_devices} devices, "
                    f"{topo.hbm_per_device / GiB:.1f} GiB each), {seq_len:,} tokens per sequence")
    for c in ("strategy", "remat", "fits", "peak GiB", "params", "optimizer", "temporaries", "TFLOP/step",
              "est. step s", "est. MFU", "compile s"):
        t.add_column(c, justify="right" if c not in ("strategy", "remat") else "left")
    for r in results:
        fits = "[green]yes[/]" if r.fits else f"[red]no[/] {r.error or ''}"[:80]
        t.add_row(r.strategy, r.remat, fits, _gib(r.peak_bytes), _gib(r.params_bytes), _gib(r.opt_state_bytes),
                  _gib(r.temp_bytes),
                  "-" if r.model_flops_per_step is None else f"{r.model_flops_per_step / 1e12:,.1f}",
                  "-" if r.step_time_s is None else f"{r.step_time_s:.3g}",
                  "-" if r.mfu_at_estimate is None else f"{r.mfu_at_estimate:.0%}",
                  "-" if r.compile_s is None else f"{r.compile_s:.0f}")
    return t


def print_best(console, results: list[PlanResult], measured=None) -> None:
    best = next((r for r in results if r.fits), None)
    if best is None:
        console.print("[red]nothing fits[/]")
        return
    console.print(f"[bold green]best:[/] {best.strategy} with remat {best.remat}: peak {_gib(best.peak_bytes)} GiB "
                  f"of {best.capacity_bytes / GiB:.1f} GiB per chip; estimated {best.step_time_s:.3g} s/step")
    console.print("use: " + " ".join(f"--set {o}" for o in best.overrides))
    if best.assumptions:
        console.print(f"[dim]{best.assumptions}[/]")
    if measured:
        console.print(f"measured on this TPU: {measured['step_time_s']:.3g} s/step, MFU {measured['mfu']:.1%}")
