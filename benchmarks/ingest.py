"""Ingest benchmark: a generated mixed corpus (>= 50 M characters) through `build_corpus`.

Reports PDF pages/s (PDF extraction alone, process pool), characters/s end to end, tokens/s of the
tokenize phase, packing time at several sequence lengths, fill, and peak RSS (this process and the
extraction workers): the kernel's high-water marks for the whole benchmark, and per build phase from
/proc samples every 0.1 s (`peak_rss_by_phase_mib`: RSS, its anonymous part, and the largest worker),
whose maximum over the build is `build_peak_rss_mib`. Prints a rich table and writes
a new benchmarks/results/ingest_<chars>-chars_<hardware>_<date>.json.

    python -m benchmarks.ingest [--chars 50e6] [--workers 2] [--seq-len 131072] [--keep DIR]
    python -m benchmarks.ingest --scale-tokens 1e9   # pack + write alone, a synthetic corpus

The extraction engines (local pool, Ray) are compared by benchmarks/ingest_engines.py.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from benchmarks.common import Record, latest
from benchmarks.ingest_common import MemoryProbe, fresh_sources
from bookft.config import from_dict
from bookft.corpus.packing import pack
from bookft.ingest import IngestConfig, build_corpus
from bookft.ingest.config import ExtractConfig, LimitsConfig
from bookft.ingest.phases.extract import pool_extract
from bookft.ingest.sources import extract, resolve_sources


def scale_pack_write(n_tokens: float, seq_len: int, work: Path) -> dict:
    """Pack and write a synthetic corpus of `n_tokens` tokens (tokens on disk, memory-mapped) through the
    same streaming code as a build; peak RSS shows memory does not grow with the corpus."""
    from bookft.corpus.store import FlatFile, staging_dir
    from bookft.corpus.writer import write_version
    from bookft.ingest.documents import Document
    from bookft.ingest.phases import NullProgress

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


def pdf_rates(src: Path, workers: int, probe: MemoryProbe) -> dict:
    """PDF extraction alone (process pool): pages/s; and CPU ms per page in one process (independent of
    how loaded the shared machine is)."""
    jobs, _ = resolve_sources([(str(src / "books"), "auto", None)], ExtractConfig(), LimitsConfig())
    probe.phase = "pdf extract (benchmark pool)"
    t = time.perf_counter()
    pages = sum(r.stats.get("pages", 0) for _, r in pool_extract(jobs, workers, None))
    t_pdf = time.perf_counter() - t
    c0 = time.process_time()
    cpu_pages = sum(extract(j).stats.get("pages", 0) for j in jobs[:5])
    return {"pdf_pages": pages, "pdf_pages_per_s": round(pages / t_pdf, 1), "pdf_extract_seconds": round(t_pdf, 2),
            "pdf_cpu_ms_per_page": round(1000 * (time.process_time() - c0) / max(cpu_pages, 1), 2)}


def packing_rates(out: Path, probe: MemoryProbe) -> dict:
    """Packing alone at several sequence lengths (the built corpus's lengths + real paragraph boundaries)."""
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
    return packing


def full_build(src: Path, out: Path, args, probe: MemoryProbe) -> dict:
    """The whole build_corpus of the generated sources: counts and rates end to end."""
    if out.exists():
        shutil.rmtree(out)
    cfg = from_dict(IngestConfig, {"out": str(out), "workers": args.workers,
                                   "tokenizer": {"vocab_size": args.vocab_size, "train_chars": 10_000_000},
                                   "packing": {"seq_len": args.seq_len}})
    probe.phase = "build: resolve + hash"
    t = time.perf_counter()
    m = build_corpus(cfg, probe, sources=[(str(src), "auto", None)])
    t_total = time.perf_counter() - t
    c, tim = m["counts"], m["timings"]
    return {"chars": c["chars"], "tokens": c["tokens"], "documents": c["documents"],
            "tokenize_tokens_per_cpu_s": round(c["tokens"] / max(m["cpu_seconds"]["tokenize"], 1e-9)),
            "end_to_end_seconds": round(t_total, 2), "chars_per_s_end_to_end": round(c["chars"] / t_total),
            "tokens_per_s_end_to_end": round(c["tokens"] / t_total),
            "tokenize_tokens_per_s": round(c["tokens"] / max(tim["tokenize"], 1e-9)),
            "phase_seconds": tim, "seq_len": args.seq_len, "fill": c["fill"], "sequences": c["sequences"]}


def print_table(res: dict, con: Console) -> None:
    tab = Table(title="bookft ingest benchmark")
    tab.add_column("metric")
    tab.add_column("value", justify="right")
    tab.add_column("target", justify="right")
    tab.add_row("characters / tokens", f"{res['chars']:,} / {res['tokens']:,}", ">= 50M chars")
    tab.add_row("PDF pages/s (extract, pool)", f"{res['pdf_pages_per_s']:,}", ">= 150")
    tab.add_row("PDF CPU ms per page (1 process)", f"{res['pdf_cpu_ms_per_page']}", "")
    tab.add_row("chars/s end to end", f"{res['chars_per_s_end_to_end']:,}", "")
    tab.add_row("tokens/s end to end", f"{res['tokens_per_s_end_to_end']:,}", "")
    tab.add_row("tokens/s tokenize phase", f"{res['tokenize_tokens_per_s']:,}", ">= 400k")
    tab.add_row("tokens per CPU-second (tokenize)", f"{res['tokenize_tokens_per_cpu_s']:,}", "")
    for sl, p in res["packing"].items():
        tab.add_row(f"pack seq_len {sl:,}", f"{p['seconds']} s, fill {p['fill']}", "fill >= 0.99 if >= 20x")
    tab.add_row("phases (s)", json.dumps(res["phase_seconds"]), "")
    tab.add_row("peak RSS main / worker MiB (whole benchmark)",
                f"{res['peak_rss_mib']} / {res['peak_rss_worker_mib']}", "")
    tab.add_row("peak RSS main / worker MiB (build_corpus)",
                f"{res['build_peak_rss_mib']} / {res['build_peak_rss_worker_mib']}", "< 2048")
    for ph, v in res["peak_rss_by_phase_mib"].items():
        tab.add_row(f"  {ph}: RSS (anon) / worker MiB", f"{v['main_rss']} ({v['main_anon']}) / {v['worker_rss']}", "")
    con.print(tab)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale-tokens", type=float, default=0,
                    help="only pack + write a synthetic corpus of this many tokens (`scale` in a new JSON that "
                         "keeps the newest ingest result's figures)")
    ap.add_argument("--chars", type=float, default=50e6)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=131072)
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--keep", default=None, help="work folder to keep (default: a temp folder, removed)")
    args = ap.parse_args()
    con = Console()
    prev = {k: v for k, v in (latest("ingest") or {}).items() if k not in ("machine", "commit", "command")}
    record = Record("ingest", f"{args.chars / 1e6:g}m-chars")
    work = Path(args.keep or tempfile.mkdtemp(prefix="bookft-bench-"))
    if args.scale_tokens:
        scale = scale_pack_write(args.scale_tokens, args.seq_len, work / "scale")
        con.print(scale)
        record.write({**prev, "scale": scale})
        shutil.rmtree(work, ignore_errors=True)
        return
    probe = MemoryProbe()
    probe.phase = "generate sources"
    src, t_gen = fresh_sources(work, args.chars, con)
    pdf = pdf_rates(src, args.workers, probe)
    build = full_build(src, work / "corpus", args, probe)
    packing = packing_rates(work / "corpus", probe)
    phase_mem = probe.stop()
    build_phases = {k: v for k, v in phase_mem.items() if not k.endswith(")") and k != "generate sources"}
    res = {"args": vars(args), "generate_seconds": round(t_gen, 1), **pdf, **build, "packing": packing,
           "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
           "peak_rss_worker_mib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024),
           "build_peak_rss_mib": max(v["main_rss"] for v in build_phases.values()),
           "build_peak_rss_worker_mib": max(v["worker_rss"] for v in build_phases.values()),
           "peak_rss_by_phase_mib": phase_mem,
           "note": "peak_rss_worker_mib counts reaped children only (forkserver workers are not ours)"}
    if "scale" in prev:  # the --scale-tokens run's section stays
        res["scale"] = prev["scale"]
    print_table(res, con)
    record.write(res)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
