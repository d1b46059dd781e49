"""Near-duplicate removal (opt-in, `near_dedup.enabled`): MinHash signatures of word shingles + LSH banding.

Design choices:
- A document's shingles are its runs of `shingle_words` consecutive words (lower-cased, split on
  whitespace). Words are hashed with crc32 and shingles combined polynomially in wrapping uint64
  arithmetic, so signatures are the same in every process and run (Python's str hash is salted).
- MinHash with `num_perm` multiply-shift hash functions from a fixed seed: entry j of the signature
  is the minimum over shingles of the top 32 bits of (a_j * s + b_j) mod 2^64. The text is read in
  chunks of about CHUNK_CHARS (cut at whitespace; the last words carry over), so memory is bounded
  whatever the document's length.
- LSH: the signature is cut into b bands of r rows (b * r = num_perm); of the splits whose S-curve
  midpoint (1/b)^(1/r) is at or below the threshold, the highest is used (recall first: a pair at
  the threshold becomes a candidate with high probability). Documents sharing a band are candidates,
  and a candidate is a near duplicate when its estimated Jaccard similarity (share of equal signature
  entries) is at least `threshold`.
- First occurrence wins (source order), like the exact dedup; a document with fewer words than a
  shingle is one shingle of all its words.
- Memory: num_perm * 4 bytes per kept document plus one dict entry per band per kept document.
"""

from __future__ import annotations

import zlib

import numpy as np

from bookft.ingest.config import NearDedupConfig

CHUNK_CHARS = 1 << 20
_SHINGLE_BLOCK = 8192  # shingles per vectorized MinHash step: num_perm * 8192 uint64 temporaries
_P = np.uint64(0x100000001B3)  # FNV prime: the polynomial base that combines word hashes
_MIX = np.uint64(0x9E3779B97F4A7C15)


def lsh_bands(num_perm: int, threshold: float) -> tuple[int, int]:
    """(bands, rows) with bands * rows == num_perm and the highest S-curve midpoint <= threshold."""
    best = (num_perm, 1)
    for r in range(1, num_perm + 1):
        if num_perm % r == 0 and (1 / (num_perm // r)) ** (1 / r) <= threshold:
            best = (num_perm // r, r)
    return best


def _chunks(text: str):
    """The text in pieces of about CHUNK_CHARS characters, cut at whitespace (no word is split)."""
    start, n = 0, len(text)
    while start < n:
        end = min(n, start + CHUNK_CHARS)
        if end < n:
            cut = max(text.rfind(" ", start, end), text.rfind("\n", start, end))
            end = cut + 1 if cut > start else end
        yield text[start:end]
        start = end


class MinHasher:
    def __init__(self, num_perm: int = 128, shingle_words: int = 5, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.a = (rng.integers(0, 2**63, size=num_perm, dtype=np.uint64) << np.uint64(1)) | np.uint64(1)  # odd
        self.b = rng.integers(0, 2**63, size=num_perm, dtype=np.uint64)
        self.k = shingle_words
        self.powers = _P ** np.arange(shingle_words - 1, -1, -1, dtype=np.uint64)

    def _shingles(self, words: np.ndarray) -> np.ndarray:
        n = len(words) - self.k + 1
        out = np.zeros(n, np.uint64)
        for j in range(self.k):  # wrapping uint64 arithmetic is the point here
            out += words[j:j + n] * self.powers[j]
        return out * _MIX

    def signature(self, text: str) -> np.ndarray:
        """uint32 [num_perm]; all 0xFFFFFFFF for a text without words."""
        sig = np.full(len(self.a), np.iinfo(np.uint32).max, np.uint64)
        carry = np.zeros(0, np.uint64)
        total = 0
        with np.errstate(over="ignore"):
            for chunk in _chunks(text):
                w = np.fromiter((zlib.crc32(x.encode("utf-8", "surrogatepass")) for x in chunk.lower().split()),
                                dtype=np.uint64)
                total += len(w)
                words = np.concatenate([carry, w])
                if len(words) >= self.k:
                    self._update(sig, self._shingles(words))
                    carry = words[len(words) - self.k + 1:]
                else:
                    carry = words
            if 0 < total < self.k:  # shorter than one shingle: all its words are the one shingle
                self._update(sig, (carry * self.powers[self.k - len(carry):]).sum(keepdims=True) * _MIX)
        return sig.astype(np.uint32)

    def _update(self, sig: np.ndarray, sh: np.ndarray) -> None:
        for s in range(0, len(sh), _SHINGLE_BLOCK):
            block = sh[s:s + _SHINGLE_BLOCK]
            h = (self.a[:, None] * block[None, :] + self.b[:, None]) >> np.uint64(32)
            np.minimum(sig, h.min(axis=1), out=sig)


class NearDuplicates:
    """Feed documents in order with `check_add`; it answers which earlier document each one nearly repeats."""

    def __init__(self, cfg: NearDedupConfig) -> None:
        self.cfg = cfg
        self.hasher = MinHasher(cfg.num_perm, cfg.shingle_words, cfg.seed)
        self.bands, self.rows = lsh_bands(cfg.num_perm, cfg.threshold)
        self.buckets: list[dict[bytes, list[int]]] = [{} for _ in range(self.bands)]
        self.sigs: list[np.ndarray] = []
        self.names: list[str] = []

    def check_add(self, text: str, name: str) -> tuple[str, float] | None:
        """(name of the earlier document, estimated Jaccard) if `text` nearly duplicates one; else None and
        the document is remembered as kept."""
        sig = self.hasher.signature(text)
        keys = [sig[b * self.rows:(b + 1) * self.rows].tobytes() for b in range(self.bands)]
        seen: set[int] = set()
        best: tuple[float, int] | None = None
        for b, key in enumerate(keys):
            for d in self.buckets[b].get(key, ()):
                if d in seen:
                    continue
                seen.add(d)
                j = float(np.mean(self.sigs[d] == sig))
                if j >= self.cfg.threshold and (best is None or j > best[0]):
                    best = (j, d)
        if best is not None:
            return self.names[best[1]], best[0]
        d = len(self.sigs)
        self.sigs.append(sig)
        self.names.append(name)
        for b, key in enumerate(keys):
            self.buckets[b].setdefault(key, []).append(d)
        return None
