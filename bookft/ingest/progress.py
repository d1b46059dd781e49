"""build_corpus's progress protocol (start, advance, end) shown as rich progress bars with rates."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class RichProgress:
    """Adapter from build_corpus's progress protocol to a rich Progress with rates."""

    def __init__(self, console: Console) -> None:
        self.p = Progress(TextColumn("[bold]{task.description:<15}"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), console=console, transient=False)
        self.task = None
        self.t0 = 0.0
        self.counters: dict[str, int] = {}

    def start(self, phase: str, total: int | None = None, unit: str = "") -> None:
        if self.task is None:
            self.p.start()
        self.task = self.p.add_task(phase, total=total, rate="")
        self.t0 = time.perf_counter()
        self.counters = {}

    def advance(self, n: int = 1, **counters) -> None:
        for k, v in counters.items():
            self.counters[k] = self.counters.get(k, 0) + int(v)
        dt = max(time.perf_counter() - self.t0, 1e-6)
        rate = "  ".join(f"{v / dt:,.0f} {k}/s" for k, v in self.counters.items() if v)
        self.p.update(self.task, advance=n, rate=rate)

    def end(self) -> None:
        if self.task is not None:
            t = self.p.tasks[-1]
            if t.total is None:
                self.p.update(self.task, total=1, completed=1)

    def stop(self) -> None:
        self.p.stop()
