"""The training data path: corpus sequences -> shifted, load-balanced, sharded global batches.

Design choices:
- The order is a pure function of (seed, step): step s consumes corpus sequences
  [s*batch_size, (s+1)*batch_size) of an endless stream that is a fresh seeded permutation per
  epoch. Resuming at any step needs only the step number; no iterator state is saved.
- Targets are shifted on the whole corpus sequence before anything is cut or sharded:
  target[t] = input_ids[t+1] when t and t+1 belong to the same document, else masked. The weight of
  a target is the corpus's loss weight of the predicted token (synthesized retrieval examples put
  weight on answers), 0 for padding and document ends.
- A curriculum stage of length L cuts each corpus sequence into rows of L tokens, so the tokens
  per step stay the same while the rows get shorter; positions and segment ids stay exact.
- The zig-zag load-balance order (bookft.attention.load_balance) is applied here once, to every
  array together, when the attention strategy is causal and sequence-parallel.
- Each host builds only the rows its devices hold (jax.make_array_from_callback asks per device).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bookft.errors import TrainError

FIELDS = ("input_ids", "targets", "weights", "positions", "segment_ids")


def shift_targets(seq: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Add `targets` and `weights` to one corpus sequence (global shift, document ends masked)."""
    ids, seg = seq["input_ids"], seq["segment_ids"]
    lw = seq.get("loss_weights")
    if lw is None:
        lw = (seg != 0).astype(np.float32)
    targets = np.zeros_like(ids)
    targets[:-1] = ids[1:]
    same = np.zeros(ids.shape, dtype=bool)
    same[:-1] = (seg[1:] == seg[:-1]) & (seg[:-1] != 0)
    weights = np.zeros(ids.shape, dtype=np.float32)
    weights[:-1] = lw[1:]
    weights = np.where(same, weights, 0.0).astype(np.float32)
    return {
        "input_ids": ids.astype(np.int32),
        "targets": np.where(same, targets, 0).astype(np.int32),
        "weights": weights,
        "positions": seq["positions"].astype(np.int32),
        "segment_ids": seg.astype(np.int32),
    }


@dataclass
class BatchPlan:
    rows: int  # rows per step (all micro-batches)
    row_len: int
    grad_accum: int


class Batches:
    """Deterministic global batches from a corpus (see module docstring)."""

    def __init__(self, corpus, *, batch_size: int, seed: int, shuffle: bool = True,
                 load_balance_cp: int = 1, grad_accum: int = 1):
        if len(corpus) == 0:
            raise TrainError(f"{corpus.path}: the corpus has no sequences")
        self.corpus = corpus
        self.batch_size = batch_size
        self.seed = seed
        self.shuffle = shuffle
        self.cp = load_balance_cp
        self.grad_accum = grad_accum
        self._perm_cache: dict[int, np.ndarray] = {}

    def sequence_index(self, stream_index: int) -> int:
        n = len(self.corpus)
        epoch, j = divmod(stream_index, n)
        if not self.shuffle:
            return j
        perm = self._perm_cache.get(epoch)
        if perm is None:
            perm = np.random.default_rng([self.seed, epoch]).permutation(n)
            self._perm_cache = {epoch: perm}
        return int(perm[j])

    def plan(self, row_len: int) -> BatchPlan:
        s0 = self.corpus.seq_len
        if row_len > s0 or s0 % row_len:
            raise TrainError(
                f"sequence length {row_len} must divide the corpus's seq_len {s0} "
                f"({self.corpus.path}); re-ingest with a larger --seq-len or pick a divisor")
        rows = self.batch_size * (s0 // row_len)
        if rows % self.grad_accum:
            raise TrainError(f"{rows} rows of {row_len} tokens per step do not split into "
                             f"train.grad_accum={self.grad_accum} micro-batches")
        return BatchPlan(rows=rows, row_len=row_len, grad_accum=self.grad_accum)

    def rows_for_step(self, step: int, row_len: int, row_ids=None) -> dict[str, np.ndarray]:
        """Numpy rows [n, row_len] of step `step` (all rows, or just `row_ids`)."""
        from bookft.attention.balance import load_balance

        per_seq = self.corpus.seq_len // row_len
        rows = range(self.batch_size * per_seq) if row_ids is None else row_ids
        out = {k: [] for k in FIELDS}
        cache: dict[int, dict[str, np.ndarray]] = {}
        for r in rows:
            k, part = divmod(r, per_seq)
            if k not in cache:
                idx = self.sequence_index(step * self.batch_size + k)
                cache[k] = shift_targets(self.corpus.sequence(idx))
            seq = cache[k]
            for f in FIELDS:
                x = seq[f][part * row_len:(part + 1) * row_len]
                out[f].append(load_balance(x, self.cp, axis=0) if self.cp > 1 else x)
        return {f: np.stack(v) for f, v in out.items()}

    def global_batch(self, step: int, row_len: int, shardings=None):
        """The step's batch as arrays [grad_accum, rows/grad_accum, row_len].

        With `shardings` (a NamedSharding per field for that shape) the arrays are assembled per
        device, each host building only the rows its devices hold.
        """
        plan = self.plan(row_len)
        shape = (plan.grad_accum, plan.rows // plan.grad_accum, row_len)
        if shardings is None:
            rows = self.rows_for_step(step, row_len)
            return {f: v.reshape(shape) for f, v in rows.items()}
        import jax

        cache: dict[tuple, dict[str, np.ndarray]] = {}

        def rows_of(index):
            a = range(shape[0])[index[0]]
            b = range(shape[1])[index[1]]
            key = (a.start, a.stop, a.step, b.start, b.stop, b.step)
            if key not in cache:
                ids = [i * shape[1] + j for i in a for j in b]
                got = self.rows_for_step(step, row_len, ids)
                cache[key] = {f: v.reshape(len(a), len(b), row_len) for f, v in got.items()}
            return cache[key]

        def piece(f):
            return lambda idx: rows_of(idx)[f][:, :, idx[2]]

        return {f: jax.make_array_from_callback(shape, shardings[f], piece(f)) for f in FIELDS}
