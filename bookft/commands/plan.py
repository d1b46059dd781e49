"""`bookft plan`: will this model and sequence length fit this TPU slice, and which strategy is best?"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from bookft.errors import PlanError


def plan_command(
    topology: Annotated[str, typer.Option("--topology", "-t", help="TPU slice: v5p:4x4x4 or v5p-128 (also v4, v5e, v6e, v7).")],
    config: Annotated[Path | None, typer.Option("--config", "-c", help="Run config YAML (default configs/tiny-cpu.yaml).")] = None,
    seq_len: Annotated[int | None, typer.Option(help="Tokens per sequence (default: the preset's data.seq_len, else 1,048,576).")] = None,
    strategy: Annotated[str, typer.Option(help="ring | usp | allgather | ulysses | local | auto | all")] = "",
    remat: Annotated[str, typer.Option(help="full | offload_input | offload | save_dots | none | all")] = "",
    max_seq_len: Annotated[bool, typer.Option("--max-seq-len", help="Search the longest sequence that fits, per strategy.")] = False,
    measure: Annotated[bool, typer.Option("--measure", help="On a TPU host: also run a few real steps and time them.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")] = False,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override a config key: a.b=value (repeatable).")] = None,
) -> None:
    """Compile the train step for a TPU topology on this host and report per-chip memory, fit and speed."""
    from rich.console import Console

    from bookft.plan.planner import REMATS, STRATEGIES, plan
    from bookft.plan.planner import max_seq_len as search
    from bookft.plan.report import plan_json, plan_table, print_best
    from bookft.plan.topology import parse_topology
    from bookft.train.config import load_run_config

    cfg = load_run_config(config, list(set_ or []))
    topo = parse_topology(topology)
    strategies = STRATEGIES if strategy == "all" else ((strategy,) if strategy else (cfg.attention.strategy,))
    remats = REMATS if remat == "all" else ((remat,) if remat else (cfg.model.remat,))
    n = seq_len or cfg.data.seq_len or 1_048_576
    console = Console(stderr=as_json)
    where = "--seq-len" if seq_len else ("data.seq_len of " + str(config or "the default config")
                                         if cfg.data.seq_len else "no data.seq_len in the config: the 1M default")
    console.print(f"planning {n:,} tokens per sequence ({where})")
    if "auto" in strategies:
        from bookft.attention.resolution import auto_strategy
        from bookft.parallel.mesh import resolve_axis_sizes

        sizes = resolve_axis_sizes(cfg.parallel.mesh, topo.n_devices)
        chosen, why = auto_strategy(sizes.get("context", 1) * sizes.get("context_ulysses", 1), cfg.model.num_heads,
                                    cfg.model.num_kv_heads, "splash")
        console.print(f"attention: {why}")
        strategies = tuple(chosen if s == "auto" else s for s in strategies)
    if max_seq_len:
        rows = {}
        for s in strategies:
            for r in remats:
                console.print(f"searching the longest sequence for {s}/{r} on {topo.libtpu_name} ...")
                best, tried = search(cfg, topo, strategy=s, remat=r, start=n,
                                     on_try=lambda x: console.print(f"  {x.seq_len:>12,} tokens: "
                                                                   f"{'fits' if x.fits else (x.error or 'does not fit')}"
                                                                   + (f" ({x.peak_bytes / 2**30:.1f} GiB)" if x.peak_bytes else "")))
                rows[f"{s}/{r}"] = {"max_seq_len": best, "tried": [t.as_dict() for t in tried]}
        if as_json:
            print(json.dumps({"topology": topo.libtpu_name, "max_seq_len": rows}, indent=1))
        else:
            for k, v in rows.items():
                console.print(f"[bold]{k}[/]: longest sequence that fits: "
                              f"{v['max_seq_len']:,}" if v["max_seq_len"] else f"[bold]{k}[/]: nothing fits")
        return
    results = plan(cfg, topo, seq_len=n, strategies=strategies, remats=remats,
                   on_result=None if as_json else lambda r: console.print(
                       f"compiled {r.strategy}/{r.remat}: " + ("fits" if r.fits else (r.error or "does not fit"))))
    measured = None
    if measure:
        from bookft.plan.measure import measure_steps

        measured = measure_steps(cfg, results[0])
    if as_json:
        print(json.dumps(plan_json(cfg, topo, n, results, measured), indent=1))
        return
    console.print(plan_table(topo, n, results))
    print_best(console, results, measured)
    if not any(r.fits for r in results):
        raise PlanError(f"nothing fits {topo.libtpu_name} at {n:,} tokens; try a larger slice, offload remat or a "
                        "shorter sequence (--max-seq-len finds the longest)")


def register(app: typer.Typer) -> None:
    app.command("plan")(plan_command)
