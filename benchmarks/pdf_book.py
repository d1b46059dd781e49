"""One big PDF book: `bookft ingest --tokenizer DIR` on a ~1,000-page book, whole process,
against a bare pypdfium2 text loop over the same file, also whole process.

Runs, interleaved A/B/C `--reps` times (the order rotates each round, so machine load falls on all
three alike), each a fresh interpreter timed by wall clock:
  bare     python -c: pdfium.PdfDocument, for each page get_textpage().get_text_range()
  split    bookft ingest BOOK -o FRESH --tokenizer DIR   (extract.pdf_pages_per_job default: split)
  split_1core  the same pinned to one core (--one-core), for a projection to more cores
  unsplit  the same with --set extract.pdf_pages_per_job=0 (one job for the file)
Reports medians, the ratio bare / bookft (the target: >= 0.7), bookft's phases from its
manifest (extract, tokenize, write, ...) and what is left of the wall time besides them (interpreter
start, imports, the command line, the summary), whether split and unsplit give the same data hash,
and a tokenizer strategy comparison on the book's text: the batch encoder's own threads in one call
(what bookft does), Python threads over paragraph batches, a process pool over paragraph batches.
Also the whole machine's busy CPU seconds during each run (/proc/stat: bookft's forkserver and workers
included) and the bound they set (no schedule on N cores ends before CPU seconds / N), and with
--one-core a projection to more cores from the 1- and N-core medians (Amdahl), stated as one.
Prints a rich table and writes a new benchmarks/results/pdf_book_<pages>-pages_<hardware>_<date>.json.

The tokenizer: --tokenizer DIR (a HF folder or tokenizer.json); default models/smollm2-135m of this
checkout or of /work/main when present, else a byte-level BPE that bookft trains on the book once,
before the timed runs (saved as a tokenizer folder, so every run loads it the same way).

    python -m benchmarks.pdf_book [--pages 1000] [--reps 5] [--tokenizer DIR] [--workers 2]
                                  [--pages-per-job N] [--one-core] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from benchmarks.common import Record, filler_text
from bookft.benchrecord import ROOT
from bookft.ingest.sample.pdfwriter import book_pdf

CHARS_PER_PAGE = 3570  # book_pdf's default layout (50 lines of <= 90 characters) with these paragraphs
BARE = """
import sys
import pypdfium2 as pdfium
pdf = pdfium.PdfDocument(sys.argv[1])
n = 0
for i in range(len(pdf)):
    page = pdf[i]
    tp = page.get_textpage()
    n += len(tp.get_text_range())
    tp.close()
    page.close()
print(n)
"""


def _default_tokenizer() -> Path | None:
    for base in (ROOT, Path("/work/main")):
        p = base / "models" / "smollm2-135m"
        if (p / "tokenizer.json").is_file():
            return p
    return None


def _trained_tokenizer(book: Path, dst: Path) -> Path:
    """Fallback: bookft's byte-level BPE trained on the book's text (once, untimed), as a tokenizer folder."""
    from bookft.ingest.formats.pdf import pdf_text
    from bookft.ingest.tokenize import train_bpe

    text, _ = pdf_text(book.read_bytes())
    dst.mkdir(parents=True, exist_ok=True)
    train_bpe([text], 8000).save(str(dst / "tokenizer.json"))
    return dst


CPU = {}  # run name -> CPU seconds (user + sys) of the process itself and the children it reaped
MACHINE_CPU = {}  # run name -> CPU seconds of the whole machine during the run (/proc/stat: every process)


def _machine_cpu() -> float | None:
    """Busy CPU seconds of the whole machine since boot (user, nice, system, irq, softirq), None off Linux."""
    try:
        f = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    return (int(f[0]) + int(f[1]) + int(f[2]) + int(f[5]) + int(f[6])) / os.sysconf("SC_CLK_TCK")


def _one_core() -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # the run and every process it starts: one core


def _wall(cmd: list[str], name: str = "", one_core: bool = False) -> float:
    import resource

    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    m0 = _machine_cpu()
    t = time.perf_counter()
    # stderr to a pipe: the wall then also waits for the pool's forkserver and resource tracker, which hold
    # a copy and exit ~0.08 s after the command (what `bookft ingest ... 2>&1 | tee log` waits for too)
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT,
                       preexec_fn=_one_core if one_core else None)
    wall = time.perf_counter() - t
    if r.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.decode()[-2000:]}")
    m1 = _machine_cpu()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.setdefault(name, []).append(round(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, 3))
    if m0 is not None and m1 is not None:
        MACHINE_CPU.setdefault(name, []).append(round(m1 - m0, 2))
    return wall


def _ingest(book: Path, out: Path, tokenizer: Path, workers: int, split: bool,
            pages_per_job: int | None = None, name: str = "", one_core: bool = False) -> tuple[float, dict]:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "bookft.cli", "ingest", str(book), "-o", str(out), "--tokenizer", str(tokenizer),
           "--workers", str(workers)]
    if not split:
        cmd += ["--set", "extract.pdf_pages_per_job=0"]
    elif pages_per_job:
        cmd += ["--set", f"extract.pdf_pages_per_job={pages_per_job}"]
    wall = _wall(cmd, name or ("split" if split else "unsplit"), one_core)
    m = json.loads((out / "current" / "manifest.json").read_text())
    shutil.rmtree(out, ignore_errors=True)
    return wall, m


def _encode_units(args):
    path, batch = args
    from bookft.ingest.tokenize import encode_batch, load_tokenizer

    return encode_batch(_worker_tok(path, load_tokenizer), batch)


_TOK = {}


def _worker_tok(path, load):
    if path not in _TOK:
        _TOK[path] = load(path)
    return _TOK[path]


def tokenizer_strategies(text: str, tokenizer: Path, workers: int, reps: int) -> dict:
    """Seconds (median) to encode the book's paragraphs: one batch call (the encoder's own threads, what
    bookft does), Python threads over paragraph batches, a process pool over paragraph batches (its
    start and tokenizer loading included: what a pool would pay per build). Same ids required."""
    from bookft.ingest.tokenize import encode_batch, load_tokenizer, units

    tok = load_tokenizer(tokenizer)
    us = units(text)
    k = max(2, workers) * 4
    cuts = [len(us) * i // k for i in range(k + 1)]
    batches = [us[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    ref = encode_batch(tok, us)[0]

    def one():
        return encode_batch(tok, us)[0]

    def threads():
        with ThreadPoolExecutor(max(2, workers)) as ex:
            return np.concatenate([ids for ids, _ in ex.map(lambda b: encode_batch(tok, b), batches)])

    def processes():
        import multiprocessing

        ctx = multiprocessing.get_context("forkserver")
        with ProcessPoolExecutor(max(2, workers), mp_context=ctx) as ex:
            return np.concatenate([ids for ids, _ in ex.map(_encode_units, [(str(tokenizer), b) for b in batches])])

    out = {}
    for name, fn in (("one_call_rust_threads", one), ("python_threads", threads), ("process_pool", processes)):
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            ids = fn()
            times.append(time.perf_counter() - t)
            assert np.array_equal(ids, ref), name
        out[name] = round(statistics.median(times), 3)
    out["tokens"] = len(ref)
    out["units"] = len(us)
    return out


def timed_rounds(args, book: Path, tokenizer: Path, work: Path, con) -> tuple[list[str], dict, dict]:
    """The runs, interleaved, the order rotated each round: (order, walls per run, manifests per run)."""
    order = (["bare", "split", "unsplit"] + (["split_alt"] if args.also_pages_per_job else [])
             + (["split_1core"] if args.one_core else []))
    runs = {k: [] for k in order}
    manifests = {k: [] for k in order if k != "bare"}
    per_job = {"split": args.pages_per_job, "split_alt": args.also_pages_per_job, "split_1core": args.pages_per_job}
    for rep in range(args.reps):
        for name in order[rep % len(order):] + order[:rep % len(order)]:
            if name == "bare":
                runs["bare"].append(_wall([sys.executable, "-c", BARE, str(book)], "bare"))
            else:
                wall, m = _ingest(book, work / f"corpus-{name}", tokenizer, args.workers, name != "unsplit",
                                  per_job.get(name), name, one_core=name == "split_1core")
                runs[name].append(wall)
                manifests[name].append(m)
        con.print(f"round {rep + 1}/{args.reps}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in runs.items()))
    return order, runs, manifests


def figures(runs: dict, manifests: dict) -> dict:
    """Medians, ratios against the bare loop, bookft's phases and what is left outside the build."""
    med = {k: round(statistics.median(v), 3) for k, v in runs.items()}
    phases = {}
    for name in manifests:
        tim = [m["timings"] for m in manifests[name]]
        phases[name] = {k: round(statistics.median(t[k] for t in tim), 3) for k in tim[0]}
        phases[name]["outside_build"] = round(statistics.median(w - t["total"] for w, t in zip(runs[name], tim,
                                                                                                 strict=True)), 3)
    hashes = {name: sorted({m["data_hash"] for m in manifests[name]}) for name in manifests}
    m0 = manifests["split"][0]
    return {
        "chars": m0["counts"]["chars"], "tokens": m0["counts"]["tokens"],
        "page_range_jobs": m0["work"]["pdf_page_ranges"],
        "pdf_pages_per_job": m0["config"]["extract"]["pdf_pages_per_job"],
        "seconds": runs, "median_seconds": med,
        "cpu_seconds": CPU, "cpu_seconds_median": {k: round(statistics.median(v), 3) for k, v in CPU.items()},
        "machine_cpu_seconds": MACHINE_CPU,
        "machine_cpu_seconds_median": {k: round(statistics.median(v), 2) for k, v in MACHINE_CPU.items()},
        "ratio_bare_over_bookft": round(med["bare"] / med["split"], 3),
        "ratio_bare_over_bookft_unsplit": round(med["bare"] / med["unsplit"], 3),
        # the host's speed drifts between rounds: the ratio within each round, then its median
        "ratio_per_round_median": {k: round(statistics.median(b / x for b, x in zip(runs["bare"], runs[k],
                                                                                       strict=True)), 3)
                                   for k in manifests},
        "target_ratio": 0.7,
        "phase_seconds_median": phases,
        "same_data_hash_split_unsplit": len({h for v in hashes.values() for h in v}) == 1,
        "data_hash": hashes["split"][0],
    }


def add_bounds(res: dict, one_core: bool) -> None:
    """The Amdahl projection (with --one-core) and the bound the machine's CPU seconds set."""
    med, cores = res["median_seconds"], len(os.sched_getaffinity(0))
    if one_core and cores > 1:
        # Amdahl from two measured points, T(n) = serial + parallel / n: a projection, not a measurement
        t1, tn = med["split_1core"], med["split"]
        par = (t1 - tn) * cores / (cores - 1)
        ser = t1 - par
        res["projection"] = {
            "serial_s": round(ser, 3), "parallel_s": round(par, 3),
            "wall_s": {n: round(ser + par / n, 3) for n in (1, 2, 4, 8, 16)},
            "ratio_bare_over_bookft": {n: round(med["bare"] / (ser + par / n), 3) for n in (1, 2, 4, 8, 16)},
        }
    mcpu = res["machine_cpu_seconds_median"]
    if "split" in mcpu and "bare" in mcpu and cores > 1:
        # no schedule on `cores` cores ends before its busy CPU seconds / cores; against the bare loop's own
        # CPU seconds (its wall drifts more between rounds than its CPU) that caps the ratio
        res["bound_on_this_machine"] = {
            "split_machine_cpu_s": mcpu["split"], "bare_machine_cpu_s": mcpu["bare"], "cores": cores,
            "wall_at_least_s": round(mcpu["split"] / cores, 3),
            "ratio_at_most": round(mcpu["bare"] / (mcpu["split"] / cores), 3)}


def print_table(res: dict, order: list[str], manifests: dict, con) -> None:
    med, phases, mcpu, tok_cmp = (res["median_seconds"], res["phase_seconds_median"],
                                  res["machine_cpu_seconds_median"], res["tokenize_strategies_seconds"])
    tab = Table(title=f"one PDF book, whole process ({res['pages']} pages, {res['chars']:,} chars, "
                      f"{res['tokens']:,} tokens)")
    for col, right in (("run", False), ("median s", True), ("bare / run", True), ("phases (median s)", False),
                       ("bare / run per round", True)):
        tab.add_column(col, justify="right" if right else "left")
    tab.add_row("bare pypdfium2 loop", f"{med['bare']:.2f}", "1.00", "")
    for name in manifests:
        label = (f"bookft ingest, {manifests[name][0]['work']['pdf_page_ranges']} page ranges" if name != "unsplit"
                 else "bookft ingest, one job") + (" (1 core)" if name == "split_1core" else "")
        tab.add_row(label, f"{med[name]:.2f}", f"{med['bare'] / med[name]:.2f}",
                    ", ".join(f"{k} {v}" for k, v in phases[name].items() if k != "total"),
                    f"{res['ratio_per_round_median'][name]:.2f}")
    cpu = res["cpu_seconds_median"]
    tab.add_row("CPU s (main process): " + " / ".join(order), "", "", " / ".join(str(cpu.get(k)) for k in order))
    if mcpu:
        tab.add_row("machine CPU s: " + " / ".join(order), "", "", " / ".join(str(mcpu.get(k)) for k in order))
    if "bound_on_this_machine" in res:
        bnd = res["bound_on_this_machine"]
        tab.add_row(f"bound on {bnd['cores']} cores (machine CPU s / cores)", f"{bnd['wall_at_least_s']:.2f}",
                    f"<= {bnd['ratio_at_most']:.2f}", "")
    if "projection" in res:
        pr = res["projection"]
        tab.add_row("projection (Amdahl, 1 and this many cores)", "", "",
                    ", ".join(f"{n} cores {w:.2f} s ({pr['ratio_bare_over_bookft'][n]:.2f})"
                              for n, w in pr["wall_s"].items()))
    tab.add_row("target", "", ">= 0.70", "")
    tab.add_row("split == unsplit data hash", str(res["same_data_hash_split_unsplit"]), "", res["data_hash"][:16])
    tab.add_row("tokenize: one call / threads / pool", "", "",
                f"{tok_cmp['one_call_rust_threads']} / {tok_cmp['python_threads']} / {tok_cmp['process_pool']} s")
    con.print(tab)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tokenizer", type=Path, default=None)
    ap.add_argument("--keep", type=Path, default=None, help="work folder to keep (default: a temporary one)")
    ap.add_argument("--pages-per-job", type=int, default=None,
                    help="extract.pdf_pages_per_job of the split runs (default: the config's)")
    ap.add_argument("--also-pages-per-job", type=int, default=None,
                    help="also time split runs at this extract.pdf_pages_per_job, interleaved (row 'split_alt')")
    ap.add_argument("--one-core", action="store_true",
                    help="also time the split run pinned to one core (row 'split_1core'), interleaved, and project "
                         "the wall time to more cores from the two (Amdahl: serial + parallel / cores)")
    ap.add_argument("--json", type=Path, default=None, help="default: a new file under benchmarks/results/")
    args = ap.parse_args()
    record, con = Record("pdf_book", f"{args.pages}-pages", path=args.json), Console()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bookft-pdfbook-"))
    work.mkdir(parents=True, exist_ok=True)
    book = work / "book.pdf"
    book.write_bytes(book_pdf("A Long Book", "bench",
                              filler_text(random.Random(0), args.pages * CHARS_PER_PAGE).split("\n\n")))
    import pypdfium2 as pdfium

    from bookft.ingest.formats.pdf import pdf_text

    n_pages = len(pdfium.PdfDocument(str(book)))
    tokenizer = args.tokenizer or _default_tokenizer()
    tok_origin = str(tokenizer) if tokenizer else "bookft BPE trained on the book (no HF folder found)"
    tokenizer = tokenizer or _trained_tokenizer(book, work / "tokenizer")
    con.print(f"{n_pages} pages, {book.stat().st_size:,} bytes; tokenizer {tok_origin}")
    order, runs, manifests = timed_rounds(args, book, tokenizer, work, con)
    text, _ = pdf_text(book.read_bytes())
    res = {"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
           "tokenizer": tok_origin, "pages": n_pages, "pdf_bytes": book.stat().st_size, **figures(runs, manifests),
           "tokenize_strategies_seconds": tokenizer_strategies(text, tokenizer, args.workers, reps=3)}
    add_bounds(res, args.one_core)
    print_table(res, order, manifests, con)
    record.write(res)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
