"""What more than one benchmark script needs: the result record and filler text.

Design choices:
- Scripts run as modules from the repository root (`python -m benchmarks.NAME`), so this module is
  imported as `benchmarks.common` without editing sys.path. Helper modules (this one and
  benchmarks/realdata.py) have no `main`; no script imports another script.
- `Record` is `bookft.benchrecord` in one object: the header taken at the start, the file name
  chosen once (`<bench>_<preset>_<hardware>_<date>.json`, a fresh name that no rerun overwrites) and
  written with the load at the end. A run may write its own file again (the figures so far, after
  each draw or phase); it never writes over a file it did not create.
- `latest` reads the newest result of a benchmark, for scripts that carry measured cells forward
  (plan.py, train.py, attention.py): each run writes a new file holding the old cells and the new.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path
from typing import Any

from bookft.benchrecord import RESULTS, ROOT, machine, record_header, result_path, write_result
from bookft.ingest.sample import NAMES, WORDS

CACHE = ROOT / "benchmarks" / "cache"


def _module_argv() -> list[str]:
    """sys.argv with a module's file path written back as the `python -m` that ran it."""
    argv = list(sys.argv)
    p = Path(argv[0]) if argv else Path()
    if p.suffix == ".py" and p.resolve().parent.name in ("benchmarks", "experiments"):
        argv[0:1] = ["python", "-m", f"{p.resolve().parent.name}.{p.stem}"]
    return argv


class Record:
    """One run's result file: `write(body)` as often as the run likes, always to the same new file.

    The header is taken when the record is made (the start); the file name when it is first written.
    A script that runs on jax's devices calls `use_devices(jax.devices())` before that, so the slug
    names the accelerator (`h200`), not the host's cores; without it the slug is `cpu<N>`. An
    ahead-of-time compile names its target instead (`hardware="v5p-aot"`)."""

    def __init__(self, bench: str, preset: str, *, path: Path | None = None, results: Path = RESULTS,
                 hardware: str | None = None) -> None:
        self.bench, self.preset, self.results, self.hardware = bench, preset, results, hardware
        self.header = record_header(_module_argv())
        self.path: Path | None = Path(path) if path else None
        self.devices: list | None = None
        self._written = False

    def use_devices(self, devices: list) -> None:
        self.devices = list(devices)

    def write(self, body: dict[str, Any]) -> Path:
        if not self._written:
            host = machine(self.devices, hardware=self.hardware)
            self.header = {**self.header, "machine": host}
            self.path = self.path or result_path(self.bench, self.preset, host["hardware"], results=self.results)
        else:
            self.path.unlink(missing_ok=True)  # this run's own file: the figures so far, replaced
        write_result(self.path, self.header, body)
        self._written = True
        print(f"wrote {self.path}")
        return self.path


def latest(bench: str, results: Path = RESULTS) -> dict[str, Any] | None:
    """The newest `<bench>_*.json` under results (by the date in its name, then its rerun suffix)."""
    # what follows the bench: <preset>_<hardware>_<date>[_<rerun>] (the bench may hold underscores,
    # the other fields never do, so real_flow's files are not real_flow_checks')
    tail = re.compile(r"^[^_]+_[^_]+_(\d{4}-\d{2}-\d{2})(?:_(\d+))?$")
    found = []
    for p in results.glob(f"{bench}_*.json"):
        m = tail.match(p.stem[len(bench) + 1:])
        if m:
            found.append(((m.group(1), int(m.group(2) or 1)), p))
    return json.loads(max(found)[1].read_text()) if found else None


def filler_paragraph(rng: random.Random) -> str:
    """3 to 8 sentences of 6 to 18 of the sample's words."""
    n = rng.randint(3, 8)
    return " ".join(" ".join(rng.choices(WORDS, k=rng.randint(6, 18))).capitalize() + "." for _ in range(n))


def filler_text(rng: random.Random, chars: int) -> str:
    """Paragraphs of the sample's words (about `chars` characters), a numbered code now and then."""
    out, size = [], 0
    while size < chars:
        p = filler_paragraph(rng)
        if rng.random() < 0.05:
            p += f" The code of {rng.choice(NAMES)} is {rng.randint(0, 99999):05d}."
        out.append(p)
        size += len(p) + 2
    return "\n\n".join(out)
