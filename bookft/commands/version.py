"""`bookft version`: print the installed version."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def version() -> None:
        """Print the bookft version."""
        from bookft import __version__

        print(__version__)
