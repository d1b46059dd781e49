"""`bookft pipeline run|status|list`: thin CLI over bookft.pipelines.

Exit codes of `run` (see bookft/pipelines/runner.py): 0 ok or no change, 1 failed, 2 config error,
3 locked, 4 partial (failed/missing sources, non-strict), 5 published but a post-step failed.
`status` exits 1 when the pipeline has never run, 0 otherwise.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from bookft.errors import ConfigError

console = Console(stderr=True)


def _definition(name: str, folder: str) -> Path:
    p = Path(name)
    if p.suffix in (".yaml", ".yml") or p.is_file():
        return p
    cand = Path(folder) / f"{name}.yaml"
    if not cand.is_file():
        known = ", ".join(sorted(f.stem for f in Path(folder).glob("*.yaml"))) or "none"
        raise ConfigError(f"pipeline {name!r}: {cand} not found (pipelines in {folder}/: {known})")
    return cand


def _next_run(schedule: str | None) -> str:
    if not schedule:
        return "-"
    from bookft.pipelines.cron import parse_cron

    nxt = parse_cron(schedule).next_run(datetime.now())
    return nxt.strftime("%Y-%m-%d %H:%M") if nxt else "never"


def status_table(name: str, r: dict) -> Table:
    c = r.get("counts", {})
    t = Table(title=f"pipeline {name}: last run {r.get('started', '?')}")
    t.add_column("field")
    t.add_column("value", overflow="fold")
    for k, v in (("result", r.get("result")), ("exit code", r.get("exit_code")),
                 ("duration", f"{r.get('duration_s', 0):.1f} s"), ("version", r.get("version")),
                 ("published", r.get("published")), ("added", c.get("added")), ("changed", c.get("changed")),
                 ("removed", c.get("removed")), ("unchanged", c.get("unchanged")), ("missing", c.get("missing")),
                 ("failed sources", c.get("failed_sources")), ("documents extracted", c.get("documents_extracted")),
                 ("error", r.get("error")), ("detail", r.get("detail"))):
        if v is not None:
            t.add_row(k, str(v))
    return t


def run_command(
    definition: Path = typer.Argument(..., help="pipelines/NAME.yaml"),
    wait: bool = typer.Option(False, "--wait", help="Wait for a running refresh of the same corpus instead of exiting 3."),
    wait_timeout: float = typer.Option(None, "--wait-timeout", help="Give up waiting after this many seconds (exit 3)."),
    set_: list[str] = typer.Option([], "--set", help="Pipeline override key=value (repeatable)."),
    engine: str = typer.Option(None, "--engine", help="local|ray: where the changed sources are extracted "
                               "(default: the pipeline's `engine`, else local; ray needs "
                               "pip install 'bookft[ray]')."),
    ray_address: str = typer.Option(None, "--ray-address", help="--engine ray: the Ray cluster to join "
                                    "(default: start a local Ray instance)."),
    as_json: bool = typer.Option(False, "--json", help="Print the run record as JSON on stdout."),
) -> None:
    """Refresh a corpus: extract only what changed, validate, publish atomically, prune, post-steps.

    Exit codes: 0 ok/no change, 1 failed, 2 config error, 3 locked, 4 partial, 5 post-step failed."""
    from bookft.ingest.progress import RichProgress
    from bookft.pipelines.runner import run_pipeline

    overrides = list(set_)
    for key, val in (("engine", engine), ("ray_address", ray_address)):
        if val is not None:
            overrides.append(f"{key}={val}")
    progress = None if as_json else RichProgress(console)
    try:
        code, record = run_pipeline(definition, wait=wait, wait_timeout=wait_timeout, overrides=overrides,
                                    progress=progress)
    finally:
        if progress is not None:
            progress.stop()
    if as_json:
        print(json.dumps(record, indent=1, default=str))
    else:
        colour = "green" if code == 0 else "yellow" if code in (3, 4, 5) else "red"
        console.print(status_table(record.get("pipeline", str(definition)), record))
        console.print(f"[{colour}]{record.get('result')}[/] (exit {code})")
    raise typer.Exit(code)

def status_command(
    name: str = typer.Argument(..., help="Pipeline name (pipelines/NAME.yaml) or its YAML path."),
    folder: str = typer.Option("pipelines", "--dir", help="Folder of pipeline definitions."),
    as_json: bool = typer.Option(False, "--json", help="Print the last run record as JSON."),
) -> None:
    """The last run of a pipeline: result, duration, version, sources added/changed/removed/unchanged."""
    from bookft.pipelines.config import load_pipeline
    from bookft.pipelines.runlog import read_records

    p, icfg = load_pipeline(_definition(name, folder))
    records = read_records(icfg.out, p.name)
    if not records:
        if as_json:
            print(json.dumps({"pipeline": p.name, "corpus": icfg.out, "last_run": None}))
        else:
            console.print(f"pipeline {p.name}: never run (corpus {icfg.out})")
        raise typer.Exit(1)
    from bookft.commands.corpus import held_lines
    from bookft.corpus.lease import holders

    last = records[-1]
    ok = [r for r in records if r.get("result") in ("ok", "partial", "post_failed", "unchanged")]
    out = {"pipeline": p.name, "corpus": icfg.out, "schedule": p.schedule, "next_run": _next_run(p.schedule),
           "runs": len(records), "last_run": last, "last_success": ok[-1]["started"] if ok else None,
           "held": [h for h in holders(icfg.out) if h["live"]]}  # versions retention keeps for runs
    if as_json:
        print(json.dumps(out, indent=1, default=str))
        return
    console.print(status_table(p.name, last))
    held = held_lines(icfg.out)
    console.print("versions held (kept by retention): " + ("; ".join(held) if held else "none"))
    console.print(f"schedule {p.schedule or '-'} (next {out['next_run']}); {len(records)} runs logged in "
                  f"{icfg.out}/runs/log.jsonl; last success {out['last_success']}")

def list_command(folder: str = typer.Option("pipelines", "--dir", help="Folder of pipeline definitions.")) -> None:
    """Every pipeline in pipelines/: schedule, next run, corpus, last result and version."""
    from bookft.pipelines.config import load_pipeline
    from bookft.pipelines.runlog import read_records

    t = Table(title=f"pipelines in {folder}/")
    for col in ("name", "schedule", "next run", "corpus", "last run", "result", "version"):
        t.add_column(col, overflow="fold")
    for f in sorted(Path(folder).glob("*.yaml")):
        try:
            p, icfg = load_pipeline(f)
        except ConfigError as e:
            t.add_row(f.stem, "-", "-", "-", "-", f"[red]invalid: {e}", "-")
            continue
        recs = read_records(icfg.out, p.name)
        last = recs[-1] if recs else {}
        t.add_row(p.name, p.schedule or "-", _next_run(p.schedule), icfg.out, last.get("started", "never"),
                  str(last.get("result", "-")), str(last.get("version", "-")))
    Console().print(t)


def register(app: typer.Typer) -> None:
    pipeline = typer.Typer(help="Scheduled, incremental corpus refreshes (definitions in pipelines/*.yaml).",
                           no_args_is_help=True)
    app.add_typer(pipeline, name="pipeline")
    pipeline.command("run")(run_command)
    pipeline.command("status")(status_command)
    pipeline.command("list")(list_command)
