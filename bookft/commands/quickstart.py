"""`bookft quickstart`: the default loop (bookft/flows/default.py), or with --model the tune flow on
your model and documents (bookft/flows/tune.py).

Design choices:
- `--docs A B C`, `--heldout A B` and `--heldout-other A B` take several paths after one flag, as README writes them (and
  `--docs A --docs B` still works): ManyPaths spreads the words after such a flag into one flag
  each before click parses them, so no path is dropped and every one is checked.
- Nothing is ingested before the inputs are checked: with --model, the flow checks the model
  folder, its tokenizer, every document and every held-out text first (flows/inputs.py); the
  tune-only flags without --model are an error, not ignored.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from typer.core import TyperCommand

from bookft.errors import ConfigError

MANY = ("--docs", "--heldout", "--heldout-other")
# the run configs' defaults, as the help names them (train.config.DEFAULT_CONFIG and
# flows.tune_settings.DEFAULT_PRESET, which tests/test_quickstart_cli.py holds these to; not imported,
# so `bookft --help` does not load the config layer)
DEFAULT_CONFIG, DEFAULT_PRESET = "configs/tiny-cpu.yaml", "configs/smollm2-135m-books.yaml"


def spread(args: list[str], flags: tuple[str, ...] = MANY) -> list[str]:
    """`--docs a b --out o` -> `--docs a --docs b --out o`: every word after one of `flags` up to the
    next option is a value of that flag."""
    out: list[str] = []
    current = None
    for i, a in enumerate(args):
        if a == "--":
            return out + args[i:]
        if a.startswith("-"):
            current = a if a in flags else None
        elif current is not None and out[-1] != current:
            out.append(current)
        out.append(a)
    return out


class ManyPaths(TyperCommand):
    def parse_args(self, ctx, args: list[str]) -> list[str]:
        return super().parse_args(ctx, spread(list(args)))


def register(app: typer.Typer) -> None:
    @app.command(cls=ManyPaths)
    def quickstart(
        definition: Path = typer.Option(None, "--definition", "-d", help="Corpus definition YAML (default "
                                        "corpora/sample.yaml)."),
        config: Path = typer.Option(None, "--config", help=f"Run config YAML (default {DEFAULT_CONFIG}; with --model "
                                    f"{DEFAULT_PRESET})."),
        run_dir: Path = typer.Option(None, "--run-dir", help="Run directory (default runs/<name>; replaced)."),
        out: Path = typer.Option(Path("quickstart-out"), "--out", help="Where the reports go."),
        set_: list[str] = typer.Option([], "--set", help="Run config override a.b=value (repeatable)."),
        model: Path = typer.Option(None, "--model", help="Your pretrained HF folder: tune it on --docs and "
                                   "report base vs tuned (bookft/flows/tune.py) instead of the tiny default."),
        docs: list[Path] = typer.Option([], "--docs", help="With --model: documents or folders (--docs A B C)."),
        heldout: list[Path] = typer.Option([], "--heldout", help="With --model: held-out plain-text documents "
                                           "(the haystacks and perplexity text; default: the last --docs file)."),
        short: Path = typer.Option(None, "--short", help="With --model: a folder of short documents of other "
                                   "kinds (code, articles) for the training mix (ProLong's short share)."),
        other: list[Path] = typer.Option([], "--heldout-other", help="With --model: held-out texts of other kinds "
                                         "than the documents (code, legal), scored by perplexity."),
        size: str = typer.Option("small", "--size", help="With --model: small (minutes) or full (hours)."),
        seed: int = typer.Option(0, "--seed", help="With --model: the examples', data order's and init seed."),
        resume: bool = typer.Option(False, "--resume", help="With --model: go on with an interrupted flow in "
                                    "--out (its corpora and its run's last checkpoint), started the same way."),
    ) -> None:
        """ingest + eval (base) + train + eval (tuned) on the defaults; prints where the report is.
        With --model: the same on your model and documents (RULER tasks, perplexity, short check)."""
        if model is None:
            given = [f for f, v in (("--docs", docs), ("--heldout", heldout), ("--short", short),
                                    ("--heldout-other", other), ("--size", size != "small"),
                                    ("--seed", seed), ("--resume", resume)) if v]
            if given:
                raise ConfigError(f"{', '.join(given)}: only with --model DIR (the tune flow); the default loop "
                                  "runs on corpora/sample.yaml")
            from bookft.flows.default import run_quickstart

            run_quickstart(corpus_yaml=definition, config=config, run_dir=run_dir, out=out, overrides=list(set_))
            return
        tune(model, list(docs), list(heldout), size=size, out=out, config=config, seed=seed, overrides=list(set_),
             resume=resume, short=short, other=list(other))


def tune(model: Path, docs: list[Path], heldout: list[Path], *, size: str, out: Path, config: Path | None,
         seed: int, overrides: list[str], resume: bool, short: Path | None = None, other: list[Path] = (),
         console: Console | None = None) -> dict:
    """`bookft quickstart --model`: the held-out default (the last --docs file), then the flow."""
    from bookft.flows.tune import run_tune_flow

    console = console or Console()
    if not docs:
        raise ConfigError("--model needs --docs PATH... (the documents to tune on)")
    for p in docs:  # before the last one may become the held-out text
        if not p.exists():
            raise ConfigError(f"--docs {p}: no such file or folder")
    if not heldout:
        if len(docs) < 2:
            raise ConfigError("give --heldout PATH, or at least two --docs (the last one is held out)")
        heldout = [docs.pop()]
        console.print(f"holding out the last --docs file, {heldout[0]} (--heldout to choose)")
    return run_tune_flow(model, docs, heldout, out, config=config, size=size, seed=seed, short=short, other=other,
                         base_cache=out / "base-cache", overrides=overrides, console=console, resume=resume)
