"""Whether a process is alive: the one test behind stale staging folders, leases and the pool's watchdog.

`kill(pid, 0)`: no such process is dead; a process of another user (PermissionError) is alive, so
nothing of a live process is ever taken for debris. A pid reused by an unrelated process reads as
alive: the cost is debris kept one run longer, never data removed.
"""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
