"""The `bookft` entry point (`bookft.cli:main`, `python -m bookft.cli`): the typer app is bookft/app.py.

Light on purpose (the standard library only when imported): the extraction pool's workers run the
main module again before their first task (multiprocessing's spawn preparation imports it as
`__mp_main__`), so when the main module is this one, or the console script that imports it, a
worker pays for what it imports. Typer, rich and every command module stay in bookft/app.py, which
only `main()` imports. Measured with the two modules merged into one (`bookft ingest` of the
1,000-page book of benchmarks/pdf_book.py, --workers 2, 2-core host at load 1.2-2.2, interleaved
with the bare loop): 0.13 CPU-s more per worker, the wall +0.15 s and +0.22 s (median per round;
slower in 11 of 16 and 10 of 10 rounds), bare/bookft 0.560 against 0.583 (docs/configuration.md,
"The light entry point").
"""

from __future__ import annotations


def main() -> None:
    from bookft.app import run

    run()


def __getattr__(name: str):
    """`from bookft.cli import app` (tests drive the typer app through CliRunner): bookft/app.py's app."""
    if name == "app":
        from bookft.app import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    main()
