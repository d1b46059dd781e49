"""The `bookft` command line: parse, load config, call one function per command.

Each concern registers its commands from its own `commands.py`, so this file stays a table.
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from bookft import __version__
from bookft.errors import BookftError

app = typer.Typer(
    name="bookft",
    help="Fine-tune open language models on book-length material with context-parallel attention.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True)


@app.command()
def version() -> None:
    """Print the bookft version."""
    print(__version__)


def _register() -> None:
    # One line per concern; each module's register(app) adds its commands.
    from bookft.eval.commands import register as register_eval; register_eval(app)  # noqa: E702, I001
    from bookft.ingest.commands import register as register_ingest; register_ingest(app)  # noqa: E702, I001
    from bookft.corpus.commands import register as register_corpus; register_corpus(app)  # noqa: E702, I001
    from bookft.train.commands import register as register_train; register_train(app)  # noqa: E702, I001
    from bookft.plan.commands import register as register_plan; register_plan(app)  # noqa: E702, I001
    from bookft.pipelines.commands import register as register_pipeline; register_pipeline(app)  # noqa: E702, I001
    from bookft.model.commands import register as register_model; register_model(app)  # noqa: E702, I001


_register()


def main() -> None:
    try:
        app()
    except BookftError as e:
        console.print(f"[bold red]error:[/] {e}")
        sys.exit(2)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]")
        sys.exit(130)


if __name__ == "__main__":
    main()
