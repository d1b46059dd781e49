"""The mix benchmark: a weighted, length-upsampled corpus with a short source, realised
against asked, counted from the written sequences (not from the manifest); then `bookft inspect
--html` on it, rendered by headless Chromium (where installed) and checked to be non-blank.

Sources are generated here: books (a JSONL line per book, 2 to 80 pages of the sample's prose), four
generated Python repositories (bookft.ingest.sample.code) and short texts (20 to 300 words). Prints a
rich table and writes a new benchmarks/results/mix_default_<hardware>_<date>.json.

    python -m benchmarks.mix [--seq-len 2048] [--books 40] [--short 3000]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

import datasets
from rich.console import Console
from rich.table import Table

from benchmarks.common import Record
from bookft.config import from_dict
from bookft.corpus import open_corpus
from bookft.corpus.html_report import write_html_report
from bookft.ingest import IngestConfig, build_corpus
from bookft.ingest.sample import WORDS, book
from bookft.ingest.sample.code import code_repository, write_repository

ASKED = {"books": 0.5, "code": 0.3, "short": 0.2}


def sources(root: Path, n_books: int, n_short: int) -> dict[str, Path]:
    rng = random.Random(0)
    with open(root / "books.jsonl", "w") as f:
        for i in range(n_books):
            paras, _ = book(rng, rng.choice([2, 4, 8, 20, 40, 80]), 0)
            f.write(json.dumps({"text": "\n\n".join(paras), "bookft_collection": f"book{i}"}) + "\n")
    for i in range(4):
        write_repository(root / "code" / f"repo{i}", code_repository(random.Random(i), 20 + 20 * i))
        (root / "code" / f"repo{i}" / ".git").mkdir(exist_ok=True)
    with open(root / "short.jsonl", "w") as f:
        for i in range(n_short):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 300))).capitalize() + "."
            f.write(json.dumps({"text": text, "bookft_collection": f"s{i}"}) + "\n")
    return {"books": root / "books.jsonl", "code": root / "code", "short": root / "short.jsonl"}


def realised(corpus_dir: Path) -> Counter:
    cur = corpus_dir / "current"
    docs = datasets.load_from_disk(str(cur / "documents"))
    name = lambda s: "books" if "books.jsonl" in s else "short" if "short.jsonl" in s else "code"
    names = [name(s) for s in docs["source"]]
    out: Counter = Counter()
    seqs = datasets.load_from_disk(str(cur / "sequences")).select_columns(["doc_index", "doc_lengths"])
    for idx, lens in zip(seqs["doc_index"], seqs["doc_lengths"], strict=True):
        for d, n in zip(idx, lens, strict=True):
            out[names[d]] += n
    return out


def screenshot(page: Path, shot: Path) -> dict:
    exe = shutil.which("chromium") or shutil.which("chromium-headless-shell")
    if exe is None:
        return {"skipped": "chromium not installed"}
    from matplotlib.image import imread

    t = time.perf_counter()
    subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1200,3000", page.as_uri()], check=True, capture_output=True, timeout=300)
    px = imread(str(shot))[..., :3]
    return {"browser": subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip(),
            "seconds": round(time.perf_counter() - t, 2), "size": list(px.shape[:2]),
            "ink_share": round(float((px.mean(-1) < 0.9).mean()), 4),
            "colour_share": round(float((px.max(-1) - px.min(-1) > 0.2).mean()), 4)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--books", type=int, default=40)
    ap.add_argument("--short", type=int, default=3000)
    args = ap.parse_args()
    record = Record("mix", "default")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        src = sources(root, args.books, args.short)
        cfg = from_dict(IngestConfig, {
            "out": str(root / "corpus"), "workers": 0, "tokenizer": {"vocab_size": 4000},
            "packing": {"seq_len": args.seq_len}, "mix": {"short_source": "short", "short_share": ASKED["short"]},
            "sources": [{"path": str(src["books"]), "name": "books", "weight": 5,
                         "upsample_long": {"min_tokens": 16384, "factor": 2}},
                        {"path": str(src["code"]), "name": "code", "weight": 3},
                        {"path": str(src["short"]), "name": "short"}]})
        t = time.perf_counter()
        m = build_corpus(cfg)
        build_s = time.perf_counter() - t
        got = realised(root / "corpus")
        total = sum(got.values())
        rows = {k: {"asked": a, "realised": round(got[k] / total, 6), "tokens": int(got[k]),
                    "relative_deviation": round(abs(got[k] / total - a) / a, 6),
                    "natural_tokens": m["mix"]["sources"][k]["natural_tokens"],
                    "realised_by_bucket": m["mix"]["sources"][k]["realised_by_bucket"]} for k, a in ASKED.items()}
        page = write_html_report(open_corpus(root / "corpus"), root / "page" / "corpus.html")
        out = {"seq_len": args.seq_len, "tokens": total, "tokens_over_seq_len": round(total / args.seq_len, 1),
               "sequences": m["counts"]["sequences"], "fill": m["counts"]["fill"], "build_s": round(build_s, 2),
               "sources": rows, "max_relative_deviation": max(r["relative_deviation"] for r in rows.values()),
               "html_kib": round(page.stat().st_size / 1024, 1),
               "browser": screenshot(page, root / "shot.png")}
    t = Table(title=f"mix: realised vs asked ({record.header['machine']['hardware']})")
    for col in ("source", "asked", "realised", "deviation", "tokens", "natural tokens"):
        t.add_column(col, justify="left" if col == "source" else "right")
    for k, r in rows.items():
        t.add_row(k, f"{r['asked']:.3f}", f"{r['realised']:.4f}", f"{r['relative_deviation']:.3%}",
                  f"{r['tokens']:,}", f"{r['natural_tokens']:,}")
    t.caption = (f"{total:,} tokens = {out['tokens_over_seq_len']} x seq_len {args.seq_len}; fill {out['fill']:.4f}; "
                 f"build {out['build_s']} s; page {out['html_kib']} KiB; browser {out['browser']}")
    Console().print(t)
    record.write(out)


if __name__ == "__main__":
    main()
