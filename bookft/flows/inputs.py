"""The tune flow's documents (bookft/flows/tune.py): checked before anything is ingested, then cut
into the texts its phases read.

Design choices:
- check_inputs runs before the first phase: the model folder (config.json), its tokenizer, every
  document, the short documents, every held-out text and every held-out text of another kind (plain
  text, long enough for the perplexity text and the short-context passages after it), each failure a
  ConfigError naming the path and the problem.
- Held-out documents are plain text (.txt, .md): the flow cuts them by characters. Documents to
  train on may be any format ingest reads (PDF, EPUB, folders, ...).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from bookft.flows.tune_settings import FlowSettings

TEXT_SUFFIXES = (".txt", ".md")
OTHER_MIN_CHARS = 2_000  # a held-out text of another kind (--heldout-other): scored by perplexity only


def cut_text(text: str, start: int, n: int) -> str:
    """About n characters of text from `start`, ended at a space."""
    piece = text[start:start + n]
    return piece.rsplit(" ", 1)[0] if len(piece) == n and " " in piece else piece


def read_text(p: Path) -> str:
    """A plain-text file: UTF-8, else Windows-1252 (older e-texts)."""
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return p.read_text(encoding="cp1252", errors="replace")


def prepare_texts(docs: list[Path], heldout: list[Path], out: Path, s: FlowSettings,
                  other: list[Path] = ()) -> dict[str, Any]:
    """OUT/docs (cut documents, small), OUT/ppl-text, OUT/ppl-other (the held-out texts of other
    kinds, cut like the books) and OUT/short-text; the paths."""
    for d in ("docs", "ppl-text", "ppl-other", "short-text"):
        shutil.rmtree(out / d, ignore_errors=True)
        (out / d).mkdir(parents=True)
    if s.doc_chars:  # plain-text files cut to their first characters; folders and other formats as they are
        cut = []
        for i, p in enumerate(docs):
            if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES:
                p, text = out / "docs" / f"{i:02d}-{p.stem}.txt", cut_text(read_text(p), 0, s.doc_chars)
                p.write_text(text, encoding="utf-8")
            cut.append(p)
        docs = cut
    texts = [read_text(p) for p in heldout]
    ppl = []
    for i, (p, t) in enumerate(zip(heldout, texts, strict=True)):
        ppl.append(out / "ppl-text" / f"{i:02d}-{p.stem}.txt")
        ppl[-1].write_text(cut_text(t, 0, s.ppl_chars), encoding="utf-8")
    others = []
    for i, p in enumerate(other):
        others.append(out / "ppl-other" / f"{i:02d}-{p.stem}.txt")
        others[-1].write_text(cut_text(read_text(p), 0, s.ppl_chars), encoding="utf-8")
    short = 0
    for i in range(s.short_docs):
        t = texts[i % len(texts)]
        start = s.ppl_chars + (i // len(texts)) * s.short_chars
        piece = cut_text(t, start, s.short_chars) if start < len(t) else ""
        if piece.strip():
            (out / "short-text" / f"passage-{i:02d}.txt").write_text(piece, encoding="utf-8")
            short += 1
    return {"docs": docs, "ppl": ppl, "other": others, "short": short}


def check_inputs(model_dir: Path, docs: list[Path], heldout: list[Path], s: FlowSettings, *,
                 short: Path | None = None, other: list[Path] = ()) -> None:
    """The model folder, its tokenizer, every document, the short documents and every held-out
    text, checked before the first phase (module doc); a ConfigError names the first path that fails."""
    from bookft.errors import BookftError, ConfigError

    if not (model_dir / "config.json").is_file():
        what = "does not exist" if not model_dir.exists() else "is not an HF model folder (no config.json)"
        raise ConfigError(f"--model {model_dir}: {what}")
    try:
        from bookft.needles.tokenizer import ModelTokenizer

        ModelTokenizer.load(model_dir)
    except BookftError as e:
        raise ConfigError(f"--model {model_dir}: its tokenizer: {e}") from None
    if not docs:
        raise ConfigError("--model needs --docs PATH... (the documents to tune on)")
    for p in docs:
        if not p.exists():
            raise ConfigError(f"--docs {p}: no such file or folder")
    if short is not None and not short.exists():
        raise ConfigError(f"--short {short}: no such file or folder")
    for p in heldout:
        check_heldout(p, s.ppl_chars)
    for p in other:
        check_heldout(p, OTHER_MIN_CHARS, "--heldout-other")


def check_heldout(p: Path, ppl_chars: int, flag: str = "--heldout") -> None:
    """A held-out text: a plain-text file with more than `ppl_chars` characters (for --heldout: the
    perplexity text, then the short-context passages)."""
    from bookft.errors import ConfigError

    if not p.is_file():
        raise ConfigError(f"{flag} {p}: " + ("is a folder; give its plain-text files" if p.is_dir()
                                                else "no such file"))
    # held-out texts of other kinds may be code (.py, .c, ...): any suffix, but text
    if (flag == "--heldout" and p.suffix.lower() not in TEXT_SUFFIXES) or b"\0" in p.read_bytes()[:1 << 16]:
        raise ConfigError(f"{flag} {p}: not a plain-text file ({', '.join(TEXT_SUFFIXES)}); held-out "
                          "documents are cut by characters (convert a PDF or EPUB to text first)")
    n = len(read_text(p))
    if n <= ppl_chars:
        why = ("the first are scored by perplexity, the rest give the short-context passages" if flag == "--heldout"
               else "it is scored by perplexity")
        raise ConfigError(f"{flag} {p}: {n:,} characters; a held-out text needs more than {ppl_chars:,} ({why})")
