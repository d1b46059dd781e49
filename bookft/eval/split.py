"""Frozen dev/test splits: each with its own eval seeds and its own held-out books.

Recipes are chosen on `dev` and reported on `test`; a split never reads the other's books or seeds.

Design choices:
- Seeds: a split's seed s is SEED_BASE[split] + s (dev 10,000 + s, test 20,000 + s), so the same
  `seeds: [0..49]` setting draws other keys and values on each split, and neither meets the
  unsplit grid's small seeds that recipes were tuned on before.
- Books: the held-out corpus's documents are grouped by source file; the sources, sorted by name,
  alternate test, dev, test, ... (test gets the extra one). Documents the corpus holds out for
  `eval short` (its manifest's mix.held_out: passages cut from the same books) are never haystack.
- Haystacks: one sentence stream per split (its books in order), and seed i of the split takes the
  next block of at least `min_tokens` tokens after seed i-1's: no two seeds' haystacks share a
  sentence. When the books run out, an EvalError says how many seeds fit.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from bookft.errors import EvalError
from bookft.needles.haystack import Haystack, split_sentences
from bookft.needles.tokenizer import ModelTokenizer

SPLITS = ("dev", "test")
SEED_BASE = {"dev": 10_000, "test": 20_000}
MAX_SEED = 10_000  # a split's seeds stay below the next split's base


def split_seeds(split: str | None, seeds) -> list[int]:
    """The seeds a grid draws with: as given without a split, else offset to the split's range."""
    if split is None:
        return list(seeds)
    if split not in SEED_BASE:
        raise EvalError(f"eval.split: choose dev or test, got {split!r}")
    bad = [s for s in seeds if not 0 <= s < MAX_SEED]
    if bad:
        raise EvalError(f"eval.seeds {bad}: with eval.split, seeds are in 0..{MAX_SEED - 1}")
    return [SEED_BASE[split] + int(s) for s in seeds]


def split_sources(sources: list[str], split: str) -> list[str]:
    """The split's share of `sources` (sorted: test, dev, test, ...)."""
    names = sorted(set(sources))
    if len(names) < 2:
        raise EvalError(f"eval.split needs at least two held-out source files (books), got {len(names)}: "
                        f"{names}; give the held-out corpus more books, or leave eval.split unset")
    return names[0::2] if split == "test" else names[1::2]


def split_documents(docs: list[dict], split: str, held_out: set[int] = frozenset()) -> list[int]:
    """Indices of the documents of `split`'s books, in corpus order (held-out passages excluded)."""
    by_source: dict[str, list[int]] = defaultdict(list)
    for i, d in enumerate(docs):
        if i not in held_out:
            by_source[str(d.get("source") or "")].append(i)
    mine = set(split_sources(list(by_source), split))
    return [i for i, d in enumerate(docs) if i not in held_out and str(d.get("source") or "") in mine]


def split_haystacks(docs: list[dict], split: str, n_seeds: int, tokenizer: ModelTokenizer, min_tokens: int,
                    held_out: set[int] = frozenset(), source: str = "") -> list[Haystack]:
    """n_seeds haystacks of at least min_tokens tokens each, consecutive non-overlapping blocks of
    the split's sentence stream."""
    def stream():
        for i in split_documents(docs, split, held_out):
            chunks = split_sentences(docs[i].get("text") or "")
            if chunks and not chunks[-1][-1].isspace():
                chunks[-1] += "\n\n"
            yield from chunks

    it = stream()
    pending: list[str] = []  # sentences counted for one seed but not needed: the next seed's
    out: list[Haystack] = []
    for k in range(n_seeds):
        chunks: list[str] = []
        counts: list[int] = []
        total = 0
        while total < min_tokens:
            batch = pending or [c for c in (tokenizer.sanitize(x) for x in _take(it, 64)) if c.strip()]
            pending = []
            if not batch:
                raise EvalError(
                    f"{source}: the {split} split's books hold {k} haystacks of {min_tokens} tokens, but "
                    f"{n_seeds} seeds were asked; use fewer eval.seeds, shorter lengths or more held-out books")
            for j, n in enumerate(tokenizer.count(batch)):
                if total >= min_tokens:
                    pending = batch[j:]
                    break
                chunks.append(batch[j])
                counts.append(n)
                total += n
        out.append(Haystack(kind="corpus", chunks=chunks, counts=counts,
                            source=f"{source} ({split} split, block {k})"))
    return out


def _take(it, n: int) -> list[str]:
    out = []
    for x in it:
        out.append(x)
        if len(out) == n:
            break
    return out


def corpus_split_haystacks(corpus: str | Path, split: str, seeds: list[int], tokenizer: ModelTokenizer,
                           min_tokens: int) -> dict[int, Haystack]:
    """{seed: haystack} for a corpus directory: its documents and its `eval short` hold-outs."""
    import datasets

    from bookft.eval.haystack import corpus_documents_dir

    docs_dir = corpus_documents_dir(corpus)
    manifest = docs_dir.parent / "manifest.json"
    held: set[int] = set()
    if manifest.is_file():
        import json

        held = set((json.loads(manifest.read_text()).get("mix") or {}).get("held_out", []))
    ds = datasets.load_from_disk(str(docs_dir))
    cols = [c for c in ("text", "source") if c in ds.column_names]
    docs = ds.select_columns(cols).to_list()
    hays = split_haystacks(docs, split, len(seeds), tokenizer, min_tokens, held, str(docs_dir))
    return dict(zip(seeds, hays, strict=True))
