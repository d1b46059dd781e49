"""Synthetic copy rows: the induction warm-up stage of a curriculum (`data: copy`, issue 16).

Why: long-range needle retrieval in a model trained from scratch rests on one circuit, "find the
earlier place where the current context occurred and copy what followed it" (an induction head,
Olsson et al. 2022). On the corpus alone that circuit appears in a sudden phase change whose step
varies with the seed and the data draw: in the sessions 2-5 runs it came at step 300-450 or
never. Rows that are nothing but repeats of random token strings give every copy target a clean,
unambiguous signal, so the circuit forms in the first few dozen steps of every draw, before the
curriculum turns to text.

Design choices:
- A row of L tokens is packed with documents of 48..L tokens; each document is a random string A
  (6..24 tokens), a gap of random tokens, and A again, so the copy spans every distance up to
  the row. Only the second A carries loss (weight 1 from its second token on; its first token
  cannot be predicted), so the loss reads as "copy error".
- Token ids are drawn uniformly from the vocabulary minus the reserved (special) ids at the
  bottom, so no EOS or padding id appears inside a document.
- Deterministic per (seed, step, row): each host builds only its own rows, and a resumed run
  rebuilds exactly what it would have seen.
"""

from __future__ import annotations

import numpy as np

MIN_DOC = 48
STRING = (6, 24)  # tokens of the repeated string, inclusive


def copy_sequence(seed: int, step: int, row: int, length: int, vocab_size: int,
                  reserved: int = 2) -> dict[str, np.ndarray]:
    """One row in the corpus's sequence format: input_ids, positions, segment_ids, loss_weights [length]."""
    rng = np.random.default_rng([seed, step, row, 0xC0B7])
    ids = rng.integers(reserved, vocab_size, size=length).astype(np.int32)
    pos = np.zeros(length, np.int32)
    seg = np.zeros(length, np.int32)
    lw = np.zeros(length, np.float32)
    at, doc = 0, 0
    while length - at >= MIN_DOC:
        rest = length - at
        n = rest if rest < 2 * MIN_DOC else int(rng.integers(MIN_DOC, rest + 1))
        m = int(rng.integers(STRING[0], min(STRING[1], n // 2 - 1) + 1))
        gap = int(rng.integers(0, n - 2 * m + 1))  # the rest of the document follows the repeat
        doc += 1
        seg[at:at + n] = doc
        pos[at:at + n] = np.arange(n)
        a = at + int(rng.integers(0, n - 2 * m - gap + 1))  # where the first copy starts
        ids[a + m + gap:a + 2 * m + gap] = ids[a:a + m]
        lw[a + m + gap + 1:a + 2 * m + gap] = 1.0
        at += n
    return {"input_ids": ids, "positions": pos, "segment_ids": seg, "loss_weights": lw}
