"""Haystacks: sentence chunks of filler text with their token counts (shared by eval and synthesis).

Design choices:
- A haystack is a list of text chunks, each one sentence (or line) with its trailing whitespace,
  so `"".join(chunks)` is the original text and every chunk boundary is a place where a needle can
  go without splitting a word. Token counts per chunk come from the model's tokenizer
  (encode_batch); the final prompt is re-encoded whole, so these are only used to pick boundaries.
- Three sources: `corpus` (a corpus version's documents, read by bookft/eval/haystack.py; for
  the synthesizer, windows of the corpus being built), `essay` (a deterministic, seeded
  essay-like generator: no downloads, no digits, so no number in the filler can be mistaken for a
  needle value), `noise` (the classic passkey filler: the same five sentences repeated).
- Special-token strings are scrubbed from the text before counting (see ModelTokenizer.sanitize).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from bookft.needles.tokenizer import ModelTokenizer

# A sentence ends after . ! ? (plus closing quotes/brackets) followed by whitespace, or at a newline.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")

NOISE = ("The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ")

_SUBJECTS = ("the river", "a careful reader", "the old library", "every good argument", "the village",
             "a quiet afternoon", "the committee", "our best teacher", "the long winter", "a small garden",
             "the harbour", "the first chapter", "a patient gardener", "the northern road", "the archive")
_VERBS = ("remembers", "changes", "questions", "follows", "shapes", "reveals", "outlasts", "explains",
          "gathers", "protects", "measures", "forgets", "describes", "welcomes", "resists")
_OBJECTS = ("the slow passing of seasons", "what the founders intended", "a habit of attention",
            "the value of plain work", "an unexpected kindness", "the shape of the coastline",
            "every unanswered letter", "the price of certainty", "a map drawn from memory",
            "the patience of craftsmen", "the noise of the market", "an idea worth keeping")
_CLAUSES = ("although nobody planned it", "as the evening grows darker", "which surprised the visitors",
            "because habits outlive reasons", "long after the talk has ended", "when the light is right",
            "even in difficult years", "as most historians agree", "for reasons still debated")
_OPENERS = ("In the end,", "Perhaps", "Over time,", "Still,", "Most of all,", "At first,", "Later,",
            "In practice,", "For a while,", "Quietly,")


@dataclass
class Haystack:
    kind: str
    chunks: list[str]
    counts: list[int]  # tokens per chunk, counted alone
    source: str = ""

    @property
    def total_tokens(self) -> int:
        return int(sum(self.counts))


def split_sentences(text: str) -> list[str]:
    """Chunks that each end at a sentence boundary (keeping the whitespace), joining back to `text`."""
    chunks, start = [], 0
    for m in _BOUNDARY.finditer(text):
        if m.end() > start:
            chunks.append(text[start:m.end()])
            start = m.end()
    if start < len(text):
        chunks.append(text[start:])
    return [c for c in chunks if c.strip()]


def essay_sentences(seed: int):
    """Endless deterministic essay-like sentences (with paragraph breaks), seeded."""
    rng = np.random.default_rng([seed, 1729])
    pick = lambda xs: xs[int(rng.integers(len(xs)))]
    n = 0
    while True:
        n += 1
        form = int(rng.integers(4))
        if form == 0:
            s = f"{pick(_OPENERS)} {pick(_SUBJECTS)} {pick(_VERBS)} {pick(_OBJECTS)}."
        elif form == 1:
            s = f"{pick(_SUBJECTS).capitalize()} {pick(_VERBS)} {pick(_OBJECTS)}, {pick(_CLAUSES)}."
        elif form == 2:
            s = (f"{pick(_SUBJECTS).capitalize()} {pick(_VERBS)} {pick(_OBJECTS)}, and "
                 f"{pick(_SUBJECTS)} {pick(_VERBS)} {pick(_OBJECTS)}.")
        else:
            s = f"It is said that {pick(_SUBJECTS)} {pick(_VERBS)} {pick(_OBJECTS)} {pick(_CLAUSES)}."
        yield s + ("\n\n" if n % int(rng.integers(4, 9)) == 0 else " ")


def fill_haystack(kind: str, chunk_iter, tokenizer: ModelTokenizer, min_tokens: int, source: str) -> Haystack:
    """Sentence chunks from `chunk_iter` (special-token strings scrubbed) and their token counts, until
    at least `min_tokens` tokens (or the iterator ends)."""
    chunks: list[str] = []
    counts: list[int] = []
    total = 0
    batch: list[str] = []
    for chunk in chunk_iter:
        batch.append(chunk)
        if len(batch) >= 512:
            batch = [c for c in (tokenizer.sanitize(c) for c in batch) if c.strip()]
            n = tokenizer.count(batch)
            chunks += batch
            counts += n
            total += sum(n)
            batch = []
            if total >= min_tokens:
                break
    if batch:
        batch = [c for c in (tokenizer.sanitize(c) for c in batch) if c.strip()]
        n = tokenizer.count(batch)
        chunks += batch
        counts += n
    return Haystack(kind=kind, chunks=chunks, counts=counts, source=source)




def generated_haystack(kind: str, tokenizer: ModelTokenizer, seed: int, min_tokens: int) -> Haystack:
    """The generated fillers: `essay` (seeded) or `noise` (the passkey sentences)."""
    if kind == "essay":
        return fill_haystack(kind, essay_sentences(seed), tokenizer, min_tokens, "essay generator")

    def noise():
        while True:
            yield from split_sentences(NOISE)

    return fill_haystack(kind, noise(), tokenizer, min_tokens, "noise sentences")
