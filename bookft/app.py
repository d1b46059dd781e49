"""The `bookft` typer app: parse, load config, call one function per command.

Each command lives in its own module of bookft/commands/ (the command layer: it composes the
library layers below it, e.g. train with the eval probe), so this file stays a table. The entry
point, `bookft.cli:main`, imports it (bookft/cli.py says why it is a separate, light module).
"""

from __future__ import annotations

import importlib
import sys

import typer
from rich.console import Console
from rich.markup import escape

from bookft.errors import BookftError

app = typer.Typer(
    name="bookft",
    help="Fine-tune open language models on book-length material with context-parallel attention.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True)


# Help lists commands in this order; each module's register(app) adds its own.
COMMAND_MODULES = (
    "bookft.commands.version",
    "bookft.commands.ingest",
    "bookft.commands.corpus",
    "bookft.commands.train",
    "bookft.commands.eval",
    "bookft.commands.model",
    "bookft.commands.plan",
    "bookft.commands.pipelines",
    "bookft.commands.launch",
    "bookft.commands.quickstart",
)


def _register() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)


_register()


def run() -> None:
    """Run the app on sys.argv; a BookftError is one red line and exit status 2."""
    try:
        app()
    except BookftError as e:
        console.print(f"[bold red]error:[/] {escape(str(e))}")  # escaped: messages hold brackets (bookft[ray])
        sys.exit(2)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]")
        sys.exit(130)

