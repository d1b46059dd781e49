"""Exact token counts for synthesizing examples of a given length, without re-encoding whole texts.

The retrieval synthesizer (bookft.needles.examples) measures texts many times while it fits an
example to an exact length: the same text with a few more words, the same question again. Encoding
every candidate from scratch made it the slowest part of `bookft ingest`. This module gives the same
numbers as encoding from scratch, cheaper.

Design choices:
- `TokenCounter` counts as the ingest encodes (bookft.ingest.tokenize: a text is cut into paragraph
  units after each blank line, each unit is encoded on its own), so a text's count is the sum of its
  units' counts. Each unit's encoding is memoized, so a candidate that differs from the previous one
  in one paragraph costs the encoding of that paragraph only, and the final text's token spans come
  from the memo. Units are encoded one by one in this thread (`encode`, not the parallel batch
  encoder): the texts are small and the synthesizer already runs one process per core.
- `WordCounts`: tokens per word of a window of text, where the words are cut before a single space
  between two non-blank characters. Such a cut is always a pre-token boundary of the byte-level BPE
  (no pre-token of its regex contains a space followed by a non-blank, and digit splitting only adds
  boundaries), so a word's tokens are the tokens of the whole window that start inside it. The
  window is encoded in chunks that end at cuts, only as far as the counts are asked for (a window is
  drawn a few times longer than the example it becomes).
- The memo is bounded (cleared when it holds `max_units` units), so a long-running worker stays small.
"""

from __future__ import annotations

import re

import numpy as np

from bookft.needles.text import units


class TokenCounter:
    """Token ids, counts and character spans of texts as the ingest encodes them (paragraph units, no EOS)."""

    def __init__(self, tok, max_units: int = 1 << 15) -> None:
        self.tok = tok
        self.max_units = max_units
        self._memo: dict[str, tuple[object, int]] = {}  # unit -> (its Encoding, its token count)

    def _get(self, unit: str) -> tuple[object, int]:
        hit = self._memo.get(unit)
        if hit is None:
            if len(self._memo) >= self.max_units:
                self._memo.clear()
            e = self.tok.encode(unit, add_special_tokens=False)
            hit = self._memo[unit] = (e, len(e))
        return hit

    def _enc(self, unit: str):
        return self._get(unit)[0]

    def encode_batch_fast(self, batch: list[str], add_special_tokens: bool = False) -> list:
        """The tokenizer's batch encoder, from the memo (so encode_documents can run on a counter)."""
        if add_special_tokens:
            raise ValueError("TokenCounter encodes without special tokens")
        return [self._enc(u) for u in batch]

    def clear(self) -> None:
        self._memo.clear()

    def count(self, text: str) -> int:
        return sum(self._get(u)[1] for u in units(text))

    def spans(self, text: str) -> tuple[list[int], np.ndarray]:
        """Ids of `text` (no EOS) and their character spans [n, 2] (int64) in `text`."""
        ids: list[int] = []
        parts = [np.zeros((0, 2), np.int64)]
        base = 0
        for u in units(text):
            e = self._enc(u)
            ids += e.ids
            if e.ids:
                parts.append(np.asarray(e.offsets, np.int64).reshape(-1, 2) + base)
            base += len(u)
        return ids, np.concatenate(parts)


def counter(tok) -> TokenCounter:
    """`tok` itself when it is a TokenCounter, else a new one over the tokenizer `tok`."""
    return tok if isinstance(tok, TokenCounter) else TokenCounter(tok)


class Words:
    """The words of a window `src` and their token counts, both found lazily from the start.

    Word i is src[cut_i:cut_i+1]: cuts at 0, at every single space between two non-blank characters
    (the space starts the next word) and at len(src). Each is its own run of pre-tokens, so the
    tokens of the whole window that start inside a word are that word's tokens, the same as encoding
    the word alone. Only as much of the window is cut and encoded as the questions asked need.
    """

    CUT = re.compile(r"(?<=\S) (?=\S)")  # a single space between two words

    def __init__(self, tok, src: str, chunk_chars: int = 1024) -> None:
        self.tok, self.src = tok, src
        self.chunk_chars = chunk_chars
        self.cuts: list[int] = [0] if src else []
        self._scanned = 0  # cuts are complete for positions < _scanned
        self._parts: list[np.ndarray] = []
        self._counted = 0  # words with counts
        self._total = 0
        self._cum = np.zeros(0, np.int64)

    @property
    def complete(self) -> bool:
        return self._scanned >= len(self.src)

    def _scan(self, chars: int) -> None:
        """Find the cuts of the next `chars` characters (at least one more word when there is one)."""
        n = len(self.src)
        end = min(n, self._scanned + max(chars, 2))
        while True:
            if end >= n:  # the rest: every cut, then the end of the window
                self.cuts += [m.start() for m in self.CUT.finditer(self.src, max(self._scanned, 1))]
                if self.src:
                    self.cuts.append(n)
                self._scanned = n
                return
            # a cut p needs src[p + 1], so a search that ends at `end` finds every cut p <= end - 2
            new = [m.start() for m in self.CUT.finditer(self.src, max(self._scanned, 1), end)]
            self._scanned = end - 1
            if new:
                self.cuts += new
                return
            end = min(n, end + max(chars, 2))

    def n_words(self) -> int:
        """Words known so far (all of them when `complete`)."""
        return max(0, len(self.cuts) - 1)

    def _ensure(self, n: int) -> None:
        """At least n words known (or all)."""
        while self.n_words() < n and not self.complete:
            self._scan(self.chunk_chars)

    def word(self, i: int) -> str:
        if i + 1 >= len(self.cuts):
            self._ensure(i + 1)
        return self.src[self.cuts[i]:self.cuts[i + 1]]

    def words(self, i: int, j: int) -> list[str]:
        self._ensure(j)
        c = self.cuts
        return [self.src[c[a]:c[a + 1]] for a in range(i, min(j, self.n_words()))]

    def text(self, i: int, j: int) -> str:
        """Words i..j-1 joined (a slice of the window)."""
        self._ensure(j)
        j = min(j, self.n_words())
        return self.src[self.cuts[i]:self.cuts[j]] if j > i else ""

    def _count_more(self, chars: int) -> None:
        a = self._counted
        lo = self.cuts[a]
        self._ensure(a + 1)
        while not self.complete and self.cuts[-1] < lo + chars:
            self._scan(lo + chars - self.cuts[-1])
        b = len(self.cuts) - 1  # every word known so far (at least a + 1)
        hi = self.cuts[b]
        enc = self.tok.encode(self.src[lo:hi], add_special_tokens=False)
        starts = np.array(enc.offsets, np.int64).reshape(-1, 2)[:, 0] + lo
        per_word = np.diff(np.searchsorted(starts, np.asarray(self.cuts[a:b + 1], np.int64), side="left"))
        cum = np.cumsum(per_word) + self._total
        self._total = int(cum[-1])
        self._parts.append(cum)
        self._counted = b
        self._cum = np.concatenate(self._parts) if len(self._parts) > 1 else cum

    def counts_upto(self, target: int) -> np.ndarray:
        """Running token totals (int64) of words 0, 1, ...: at least every word whose total stays
        within `target`, and one more when there is one."""
        while self._total <= target:
            self._ensure(self._counted + 1)
            if self._counted >= self.n_words():
                break
            # chars for the tokens still wanted, at the rate seen so far (4 per token before any)
            rate = (self.cuts[self._counted] / self._total) if self._total else 4.0
            self._count_more(int((target - self._total + 1) * rate * 1.2) + 64)
        return self._cum
