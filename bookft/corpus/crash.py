"""The crash hook of the tests: `BOOKFT_TEST_CRASH_AT=NAME` sends the process SIGKILL at the instant
named NAME: a real kill -9, nothing flushed or cleaned up (os._exit(137) where there is no SIGKILL).
The points live where the instants are (the build's phases, the publish in corpus/store.py, the
refresh's pruning); the list is in bookft/pipelines/runner.py.
"""

from __future__ import annotations

import os
import signal

CRASH_ENV = "BOOKFT_TEST_CRASH_AT"


def crash_point(name: str) -> None:
    if os.environ.get(CRASH_ENV) == name:
        if hasattr(signal, "SIGKILL"):
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(137)
