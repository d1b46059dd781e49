"""The `bookft` entry point (`bookft.cli:main`, `python -m bookft.cli`): the typer app is bookft/app.py.

Light on purpose (the standard library only when imported): the extraction pool's workers run the
main module again before their first task (multiprocessing's spawn preparation imports it as
`__mp_main__`), so when the main module is this one, or the console script that imports it, a
worker pays for what it imports. Typer, rich and every command module stay in bookft/app.py, which
only `main()` imports; the forkserver preloads just the extraction jobs (bookft/ingest/engine/pool.py).

`main()` starts that forkserver first, before typer and the commands import and parse, when the raw
arguments of `bookft ingest` name a source big enough to use the pool (`argv_may_use_pool`): the
server's imports (pypdfium2, numpy, the extractors: ~0.2 s) take the core this process leaves idle.
"""

from __future__ import annotations

import sys


def main() -> None:
    args = sys.argv[1:]
    if len(args) > 1 and args[0] == "ingest":
        from bookft.ingest.engine.pool import argv_may_use_pool, prestart

        if argv_may_use_pool(args[1:]):
            prestart()
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
