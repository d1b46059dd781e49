"""`bookft launch`: run one bookft command as N local processes of a multi-host JAX job (testing)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def launch_command(
    ctx: typer.Context,
    processes: Annotated[int, typer.Option("--processes", "-n", help="How many processes (the job's hosts).")] = 2,
    devices_per_process: Annotated[int, typer.Option(help="Simulated CPU devices per process when the run config sets no parallel.cpu_devices (which counts the whole job's; 0: the hardware's own).")] = 4,
    logs: Annotated[Path | None, typer.Option(help="Also write each process's output to LOGS/process-I.log.")] = None,
    timeout: Annotated[float | None, typer.Option(help="Kill the whole job after this many seconds (status 124).")] = None,
) -> None:
    """Start N local processes of `bookft ARGS...` (after `--`) with the coordinator set (127.0.0.1, a free port).

    Example: bookft launch --processes 2 -- train -c run.yaml. Process 0 reports; the others stay quiet.
    On a TPU pod slice run the command itself on every host instead (README, "Multi-host training").
    """
    from bookft.errors import ConfigError
    from bookft.parallel.launch import launch_local

    args = list(ctx.args)
    if not args:
        raise ConfigError("bookft launch: give the command to run after `--`, e.g. "
                          "bookft launch --processes 2 -- train -c run.yaml")
    if processes < 1:
        raise ConfigError(f"bookft launch: --processes must be at least 1, got {processes}")
    code = launch_local(args, processes, devices_per_process or None, logs=logs, timeout_s=timeout)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("launch", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(launch_command)
