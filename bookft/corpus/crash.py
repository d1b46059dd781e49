"""The crash hook of the tests: `BOOKFT_TEST_CRASH_AT=NAME` makes the process `os._exit(137)` (what a
kill -9 leaves behind) at the instant named NAME. The points live where the instants are (the build's
phases, the publish in corpus/store.py, the refresh's pruning); the list is in bookft/pipelines/runner.py.
"""

from __future__ import annotations

import os

CRASH_ENV = "BOOKFT_TEST_CRASH_AT"


def crash_point(name: str) -> None:
    if os.environ.get(CRASH_ENV) == name:
        os._exit(137)
