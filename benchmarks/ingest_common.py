"""What benchmarks/ingest.py and benchmarks/ingest_engines.py share: the generated mixed corpus and
the /proc probes of memory and CPU per build phase.

Design choices:
- A helper module (no `main`), imported as `benchmarks.ingest_common`.
- The corpus is generated, not fetched: ~20% PDF books, ~35% text files, ~15% a USLM zip, ~20% JSONL,
  ~10% a code repository, from the sample's words (benchmarks.common.filler_text), seeded.
- The probes read /proc (Linux only) on a thread every `every` seconds and follow build_corpus's
  progress protocol (`start(phase)`), so each peak is attributed to the phase it happened in.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import threading
import time
import zipfile
from pathlib import Path

from rich.console import Console

from benchmarks.common import filler_paragraph, filler_text
from bookft.ingest.sample import NAMES, uslm_title
from bookft.ingest.sample.pdfwriter import book_pdf


def generate(root: Path, total_chars: float, seed: int = 0) -> dict:
    """Mixed corpus: ~20% PDF books, ~35% text files, ~15% USLM zip, ~20% JSONL, ~10% code."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    plan = {"pdf": 0.20, "text": 0.35, "legal": 0.15, "jsonl": 0.20, "code": 0.10}
    made = {}
    books = root / "books"
    books.mkdir()
    n_books = 40
    per_book = int(total_chars * plan["pdf"] / n_books)
    for b in range(n_books):
        paras = filler_text(rng, per_book).split("\n\n")
        (books / f"book-{b:03d}.pdf").write_bytes(book_pdf(f"Volume {b}", "bench", paras))
    made["pdf_files"] = n_books
    texts = root / "texts"
    texts.mkdir()
    for k in range(200):
        (texts / f"chapter-{k:04d}.txt").write_text(filler_text(rng, int(total_chars * plan["text"] / 200)))
    with zipfile.ZipFile(root / "laws.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        size, t = 0, 1
        while size < total_chars * plan["legal"]:
            data = uslm_title(rng, t, 300)
            zf.writestr(f"usc/title{t:03d}.xml", data)
            size += len(data) * 0.6  # markup is not text
            t += 1
    with open(root / "opinions.jsonl", "w") as f:
        size = 0
        while size < total_chars * plan["jsonl"]:
            text = filler_text(rng, rng.randint(1000, 8000))
            f.write(json.dumps({"case_name": " v. ".join(rng.sample(NAMES, 2)), "text": text}) + "\n")
            size += len(text)
    repo = root / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "README.md").write_text("# bench repo\n\n" + filler_text(rng, 2000))
    for k in range(300):
        d = repo / f"pkg{k % 10}"
        d.mkdir(exist_ok=True)
        body = "\n\n".join(f"def f{j}(x):\n    \"\"\"{filler_paragraph(rng)}\"\"\"\n    return x + {j}\n"
                           for j in range(int(total_chars * plan["code"] / 300 / 500)))
        (d / f"mod{k}.py").write_text(body)
    return made


def fresh_sources(work: Path, chars: float, con: Console) -> tuple[Path, float]:
    """WORK/src regenerated: the mixed corpus of `chars` characters; (its folder, seconds taken)."""
    src = work / "src"
    if src.exists():
        shutil.rmtree(src)
    t = time.perf_counter()
    generate(src, chars)
    t_gen = time.perf_counter() - t
    con.print(f"generated sources in {t_gen:.1f} s under {src}")
    return src, t_gen


def rss_mib(pid: int | str = "self") -> tuple[float, float]:
    """(RSS, anonymous RSS) of a process in MiB from /proc (0 when it is gone)."""
    rss = anon = 0.0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) / 1024
                elif line.startswith("RssAnon:"):
                    anon = int(line.split()[1]) / 1024
    except OSError:
        pass
    return rss, anon


def descendants(root: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


class MemoryProbe:
    """Samples this process's RSS (total and anonymous) and its largest descendant's RSS every `every`
    seconds, per build phase (build_corpus's progress protocol sets the phase). /proc, Linux only."""

    def __init__(self, every: float = 0.1) -> None:
        self.every = every
        self.phase = "setup"
        self.peaks: dict[str, dict[str, float]] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        me = os.getpid()
        n = 0
        kids: list[int] = []
        while not self._stop.is_set():
            rss, anon = rss_mib()
            if n % 10 == 0:
                kids = descendants(me)
            n += 1
            worker = max((rss_mib(k)[0] for k in kids), default=0.0)
            p = self.peaks.setdefault(self.phase, {"main_rss": 0.0, "main_anon": 0.0, "worker_rss": 0.0})
            p["main_rss"] = max(p["main_rss"], rss)
            p["main_anon"] = max(p["main_anon"], anon)
            p["worker_rss"] = max(p["worker_rss"], worker)
            self._stop.wait(self.every)

    # build_corpus's progress protocol
    def start(self, phase: str, total=None, unit: str = "") -> None:
        self.phase = phase

    def advance(self, n: int = 1, **counters) -> None: ...

    def end(self) -> None: ...

    def stop(self) -> dict[str, dict[str, int]]:
        self._stop.set()
        self._t.join()
        return {k: {m: round(v) for m, v in p.items()} for k, p in self.peaks.items()}


def cpu_s(pid: int | str) -> float:
    """utime + stime of a process in seconds (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def pss_mib(pid: int | str) -> float:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class TreeProbe(MemoryProbe):
    """MemoryProbe plus the whole process tree (the driver and every descendant: pool workers, the
    forkserver, Ray's raylet, GCS and workers), sampled every `every` s per phase: the summed PSS
    (shared pages counted once), the largest descendant's RSS, and CPU seconds of the descendants
    (each process's last sample, so a short-lived worker can lose up to `every` s)."""

    def __init__(self, every: float = 0.25) -> None:
        self.tree: dict[str, dict[str, float]] = {}
        self.kid_cpu: dict[int, float] = {}
        self.kid_cpu_at_phase: dict[str, float] = {}
        super().__init__(every)

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            kids = descendants(me)
            pss = pss_mib(me) + sum(pss_mib(k) for k in kids)
            big = max((rss_mib(k)[0] for k in kids), default=0.0)
            for k in kids:
                c = cpu_s(k)
                if c:
                    self.kid_cpu[k] = c
            p = self.tree.setdefault(self.phase, {"tree_pss": 0.0, "largest_child_rss": 0.0, "children": 0})
            p["tree_pss"] = max(p["tree_pss"], pss)
            p["largest_child_rss"] = max(p["largest_child_rss"], big)
            p["children"] = max(p["children"], len(kids))
            self._stop.wait(self.every)

    def start(self, phase: str, total=None, unit: str = "") -> None:
        self.kid_cpu_at_phase[phase] = sum(self.kid_cpu.values())
        self.phase = phase

    def stop(self) -> dict:
        self._stop.set()
        self._t.join()
        out = {k: {m: round(v) for m, v in p.items()} for k, p in self.tree.items()}
        marks = [*self.kid_cpu_at_phase.items(), ("end", sum(self.kid_cpu.values()))]
        for (ph, c0), (_, c1) in zip(marks, marks[1:], strict=False):
            if ph in out:
                out[ph]["children_cpu_s"] = round(c1 - c0, 1)
        return out
