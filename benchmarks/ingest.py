"""Ingest benchmark: a generated mixed corpus (>= 50 M characters) through `build_corpus`.

Reports PDF pages/s (PDF extraction alone, process pool), characters/s end to end, tokens/s of the
tokenize phase, packing time at several sequence lengths, fill, and peak RSS (this process and the
extraction workers): the kernel's high-water marks for the whole benchmark, and per build phase from
/proc samples every 0.1 s (`peak_rss_by_phase_mib`: RSS, its anonymous part, and the largest worker),
whose maximum over the build is `build_peak_rss_mib`. Prints a rich table and writes
benchmarks/results/ingest.json.

    python benchmarks/ingest.py [--chars 50e6] [--workers 2] [--seq-len 131072] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import tempfile
import threading
import time
import zipfile
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from bookft.config import from_dict
from bookft.corpus.packing import pack
from bookft.ingest import IngestConfig, build_corpus
from bookft.ingest.build import _pool_extract
from bookft.ingest.config import ExtractConfig, LimitsConfig
from bookft.ingest.pdfwriter import book_pdf
from bookft.ingest.sample import NAMES, WORDS, uslm_title
from bookft.ingest.sources import resolve_sources


def _para(rng: random.Random) -> str:
    n = rng.randint(3, 8)
    return " ".join(" ".join(rng.choices(WORDS, k=rng.randint(6, 18))).capitalize() + "." for _ in range(n))


def _text(rng: random.Random, chars: int) -> str:
    out, size = [], 0
    while size < chars:
        p = _para(rng)
        if rng.random() < 0.05:
            p += f" The code of {rng.choice(NAMES)} is {rng.randint(0, 99999):05d}."
        out.append(p)
        size += len(p) + 2
    return "\n\n".join(out)


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
        paras = _text(rng, per_book).split("\n\n")
        (books / f"book-{b:03d}.pdf").write_bytes(book_pdf(f"Volume {b}", "bench", paras))
    made["pdf_files"] = n_books
    texts = root / "texts"
    texts.mkdir()
    for k in range(200):
        (texts / f"chapter-{k:04d}.txt").write_text(_text(rng, int(total_chars * plan["text"] / 200)))
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
            text = _text(rng, rng.randint(1000, 8000))
            f.write(json.dumps({"case_name": " v. ".join(rng.sample(NAMES, 2)), "text": text}) + "\n")
            size += len(text)
    repo = root / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "README.md").write_text("# bench repo\n\n" + _text(rng, 2000))
    for k in range(300):
        d = repo / f"pkg{k % 10}"
        d.mkdir(exist_ok=True)
        body = "\n\n".join(f"def f{j}(x):\n    \"\"\"{_para(rng)}\"\"\"\n    return x + {j}\n"
                           for j in range(int(total_chars * plan["code"] / 300 / 500)))
        (d / f"mod{k}.py").write_text(body)
    return made


def _rss_mib(pid: int | str = "self") -> tuple[float, float]:
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


def _descendants(root: int) -> list[int]:
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
            rss, anon = _rss_mib()
            if n % 10 == 0:
                kids = _descendants(me)
            n += 1
            worker = max((_rss_mib(k)[0] for k in kids), default=0.0)
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


def scale_pack_write(n_tokens: float, seq_len: int, work: Path) -> dict:
    """Pack and write a synthetic corpus of `n_tokens` tokens (tokens on disk, memory-mapped) through the
    same streaming code as a build; peak RSS shows memory does not grow with the corpus."""
    from bookft.corpus.store import FlatFile, staging_dir
    from bookft.corpus.writer import write_version
    from bookft.ingest.build import NullProgress
    from bookft.ingest.documents import Document

    rng = np.random.default_rng(0)
    lengths = rng.integers(2_000, 400_000, size=int(n_tokens / 201_000) + 1)
    colls = np.arange(len(lengths)) // 3
    offs = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offs[1:])
    work.mkdir(parents=True, exist_ok=True)
    tok_file = work / "tokens.bin"
    with open(tok_file, "wb") as f:
        for n in lengths:
            f.write(rng.integers(2, 8000, size=int(n), dtype=np.int32).tobytes())
    tokens = FlatFile(tok_file, np.int32)  # as in build_corpus: read by slices, never resident
    t = time.perf_counter()
    plan = pack(lengths.tolist(), colls.tolist(), seq_len,
                boundaries=lambda d: np.arange(300, lengths[d], 300), slack=int(0.005 * seq_len))
    t_pack = time.perf_counter() - t
    docs = ((0, Document(f"doc{d}", f"c{colls[d]}", "text", f"document {d}")) for d in range(len(lengths)))
    staged = staging_dir(work)
    t = time.perf_counter()
    write_version(staged, plan, tokens, offs, colls.tolist(), docs, "document", 1, NullProgress())
    t_write = time.perf_counter() - t
    return {"tokens": int(offs[-1]), "seq_len": seq_len, "sequences": len(plan.sequences),
            "fill": round(plan.fill, 5), "pack_seconds": round(t_pack, 2), "write_seconds": round(t_write, 1),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale-tokens", type=float, default=0,
                    help="only pack + write a synthetic corpus of this many tokens; adds `scale` to the JSON")
    ap.add_argument("--chars", type=float, default=50e6)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=131072)
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--keep", default=None, help="work folder to keep (default: a temp folder, removed)")
    args = ap.parse_args()
    con = Console()
    work = Path(args.keep or tempfile.mkdtemp(prefix="bookft-bench-"))
    dst = Path(__file__).parent / "results" / "ingest.json"
    if args.scale_tokens:
        scale = scale_pack_write(args.scale_tokens, args.seq_len, work / "scale")
        con.print(scale)
        res = json.loads(dst.read_text()) if dst.is_file() else {}
        res["scale"] = scale
        dst.write_text(json.dumps(res, indent=1) + "\n")
        shutil.rmtree(work, ignore_errors=True)
        return
    probe = MemoryProbe()
    probe.phase = "generate sources"
    src = work / "src"
    if src.exists():
        shutil.rmtree(src)
    t = time.perf_counter()
    generate(src, args.chars)
    t_gen = time.perf_counter() - t
    con.print(f"generated sources in {t_gen:.1f} s under {src}")

    # 1) PDF extraction alone (process pool), pages/s
    jobs, _ = resolve_sources([(str(src / "books"), "auto", None)], ExtractConfig(), LimitsConfig())
    load_before = os.getloadavg()
    probe.phase = "pdf extract (benchmark pool)"
    t = time.perf_counter()
    pages = sum(r.stats.get("pages", 0) for _, r in _pool_extract(jobs, args.workers, None))
    t_pdf = time.perf_counter() - t

    # 1b) CPU cost per page, one process (independent of how loaded the shared machine is)
    from bookft.ingest.sources import extract as extract_one

    c0 = time.process_time()
    cpu_pages = sum(extract_one(j).stats.get("pages", 0) for j in jobs[:5])
    pdf_cpu_ms = 1000 * (time.process_time() - c0) / max(cpu_pages, 1)

    # 2) the full build
    out = work / "corpus"
    if out.exists():
        shutil.rmtree(out)
    cfg = from_dict(IngestConfig, {"out": str(out), "workers": args.workers,
                                   "tokenizer": {"vocab_size": args.vocab_size, "train_chars": 10_000_000},
                                   "packing": {"seq_len": args.seq_len}})
    probe.phase = "build: resolve + hash"
    t = time.perf_counter()
    m = build_corpus(cfg, probe, sources=[(str(src), "auto", None)])
    t_total = time.perf_counter() - t
    c = m["counts"]
    tim = m["timings"]

    # 3) packing alone at several sequence lengths (lengths + real paragraph boundaries)
    from bookft.corpus.reader import open_corpus

    probe.phase = "packing at several seq_len (benchmark)"

    docs = open_corpus(out).documents()
    lengths = np.array(docs["n_tokens"])
    colls = np.unique(np.array(docs["collection"]), return_inverse=True)[1]
    packing = {}
    for sl in (2048, 131072, 1_048_576, 4_194_304):
        t = time.perf_counter()
        plan = pack(lengths.tolist(), colls.tolist(), sl,
                    boundaries=[np.arange(200, n, 200) for n in lengths], slack=int(0.005 * sl))
        packing[sl] = {"seconds": round(time.perf_counter() - t, 3), "fill": round(plan.fill, 5),
                       "sequences": len(plan.sequences), "corpus_over_seq_len": round(int(lengths.sum()) / sl, 1)}

    phase_mem = probe.stop()
    build_phases = {k: v for k, v in phase_mem.items() if not k.endswith(")") and k != "generate sources"}
    rss_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rss_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    res = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
        "args": vars(args), "generate_seconds": round(t_gen, 1),
        "chars": c["chars"], "tokens": c["tokens"], "documents": c["documents"], "pdf_pages": pages,
        "pdf_pages_per_s": round(pages / t_pdf, 1), "pdf_extract_seconds": round(t_pdf, 2),
        "pdf_cpu_ms_per_page": round(pdf_cpu_ms, 2),
        "tokenize_tokens_per_cpu_s": round(c["tokens"] / max(m["cpu_seconds"]["tokenize"], 1e-9)),
        "loadavg_before_after": [round(x, 2) for x in load_before + os.getloadavg()],
        "end_to_end_seconds": round(t_total, 2), "chars_per_s_end_to_end": round(c["chars"] / t_total),
        "tokens_per_s_end_to_end": round(c["tokens"] / t_total),
        "tokenize_tokens_per_s": round(c["tokens"] / max(tim["tokenize"], 1e-9)),
        "phase_seconds": tim, "seq_len": args.seq_len, "fill": c["fill"], "sequences": c["sequences"],
        "packing": packing, "peak_rss_mib": round(rss_self), "peak_rss_worker_mib": round(rss_children),
        "build_peak_rss_mib": max(v["main_rss"] for v in build_phases.values()),
        "build_peak_rss_worker_mib": max(v["worker_rss"] for v in build_phases.values()),
        "peak_rss_by_phase_mib": phase_mem,
        "note": "peak_rss_worker_mib counts reaped children only (forkserver workers are not ours)",
    }
    tab = Table(title="bookft ingest benchmark")
    tab.add_column("metric")
    tab.add_column("value", justify="right")
    tab.add_column("target", justify="right")
    tab.add_row("characters / tokens", f"{c['chars']:,} / {c['tokens']:,}", ">= 50M chars")
    tab.add_row("PDF pages/s (extract, pool)", f"{res['pdf_pages_per_s']:,}", ">= 150")
    tab.add_row("PDF CPU ms per page (1 process)", f"{res['pdf_cpu_ms_per_page']}", "")
    tab.add_row("chars/s end to end", f"{res['chars_per_s_end_to_end']:,}", "")
    tab.add_row("tokens/s end to end", f"{res['tokens_per_s_end_to_end']:,}", "")
    tab.add_row("tokens/s tokenize phase", f"{res['tokenize_tokens_per_s']:,}", ">= 400k")
    tab.add_row("tokens per CPU-second (tokenize)", f"{res['tokenize_tokens_per_cpu_s']:,}", "")
    tab.add_row("load average (1/5/15 min) before, after", str(res["loadavg_before_after"]), "2 cores")
    for sl, p in packing.items():
        tab.add_row(f"pack seq_len {sl:,}", f"{p['seconds']} s, fill {p['fill']}", "fill >= 0.99 if >= 20x")
    tab.add_row("phases (s)", json.dumps(tim), "")
    tab.add_row("peak RSS main / worker MiB (whole benchmark)",
                f"{res['peak_rss_mib']} / {res['peak_rss_worker_mib']}", "")
    tab.add_row("peak RSS main / worker MiB (build_corpus)",
                f"{res['build_peak_rss_mib']} / {res['build_peak_rss_worker_mib']}", "< 2048")
    for ph, v in phase_mem.items():
        tab.add_row(f"  {ph}: RSS (anon) / worker MiB", f"{v['main_rss']} ({v['main_anon']}) / {v['worker_rss']}", "")
    con.print(tab)
    dst.parent.mkdir(parents=True, exist_ok=True)
    old = json.loads(dst.read_text()) if dst.is_file() else {}
    if "scale" in old:  # the --scale-tokens run's section stays
        res["scale"] = old["scale"]
    dst.write_text(json.dumps(res, indent=1) + "\n")
    con.print(f"wrote {dst}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
