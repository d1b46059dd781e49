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
  per step stay the same while the rows get shorter; positions and segment ids stay exact. A
  synthesized example cut by a row keeps no loss in that row (`drop_cut_example`): its answers
  could ask about a fact the row does not hold; and a stage draws only the sequences whose
  examples fit its rows (`Batches.eligible`), so its steps are not spent on such rows.
- The zig-zag load-balance order (bookft.attention.load_balance) is applied here once, to every
  array together, when the attention strategy is causal and sequence-parallel. Before it, each row's
  documents are arranged (bookft.attention.balance.arrange_documents: a token permutation that keeps
  every document's token order, plus renumbered segment ids) so that zig-zag balances packed rows
  too; each token's output and the loss are unchanged. Evaluation and prefill do not use this path.
  `data.arrange` picks the arrangement: `swaps` (placement, then block swaps; the default),
  `placement` (no swaps) or `none` (zig-zag alone).
- Each host builds only the rows its devices hold (jax.make_array_from_callback asks per device),
  and of those only the stored columns they hold: a row is planned from the corpus sequence's
  layout (segment ids, positions, loss weights), and only the token ids of the columns held (plus
  each one's next token, for the target) are read (`Corpus.tokens(i, at)`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

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


def _uneven(w: np.ndarray) -> bool:
    """A document's weights mark targeted supervision (a synthesized example's answers) when its
    nonzero weights differ."""
    live = w[w > 0]
    return bool(live.size and live.max() > live.min())


def drop_cut_example(row: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A row cut from a longer corpus sequence may start inside a document. When that document's
    targets carry uneven loss weights (a synthesized retrieval example: weight on its answers),
    its answers can ask about text before the row, so its loss is dropped (weights 0). Ordinary
    text cut the same way keeps its weights: predicting the next token needs no earlier evidence."""
    seg, pos = row["segment_ids"], row["positions"]
    if seg[0] == 0 or pos[0] == 0:
        return row
    end = int(np.argmax(seg != seg[0])) if (seg != seg[0]).any() else len(seg)
    if _uneven(row["weights"][:end]):
        row = dict(row)
        row["weights"] = row["weights"].copy()
        row["weights"][:end] = 0.0
    return row


def fitting_row_len(seq: dict[str, np.ndarray]) -> int:
    """The shortest row length (a divisor of the sequence length) whose rows each hold whole every
    document of the sequence with uneven loss weights (a synthesized retrieval example); 0 when the
    sequence has none, so any row length will do."""
    seg, w = seq["segment_ids"], seq.get("loss_weights")
    if w is None:
        return 0
    n = len(seg)
    spans = []
    for d in np.unique(seg[seg > 0]):
        at = np.flatnonzero(seg == d)
        if _uneven(w[at]):
            spans.append((int(at[0]), int(at[-1])))
    if not spans:
        return 0
    divisors = sorted({d for i in range(1, math.isqrt(n) + 1) if n % i == 0 for d in (i, n // i)})
    for size in divisors:
        if all(a // size == b // size for a, b in spans):
            return size
    return n


@dataclass
class BatchPlan:
    rows: int  # rows per step (all micro-batches)
    row_len: int
    grad_accum: int


class Batches:
    """Deterministic global batches from a corpus (see module docstring)."""

    def __init__(self, corpus, *, batch_size: int, seed: int, shuffle: bool = True,
                 load_balance_cp: int = 1, grad_accum: int = 1, arrange_documents: bool = True,
                 balance_block: int = 512, block_swaps: bool = True):
        if len(corpus) == 0:
            raise TrainError(f"{corpus.path}: the corpus has no sequences")
        self.corpus = corpus
        self.batch_size = batch_size
        self.seed = seed
        self.shuffle = shuffle
        self.cp = load_balance_cp
        self.arrange = arrange_documents  # only when cp > 1; see the module docstring
        self.balance_block = balance_block  # the attention kernel's skip granularity (xla: block_kv)
        self.block_swaps = block_swaps  # arrange_documents(refine=...): block swaps after the placement
        self.grad_accum = grad_accum
        self._perm_cache: dict[tuple[int, int], np.ndarray] = {}
        self._targeted: np.ndarray | None = None
        self._layouts: dict[int, dict[str, np.ndarray]] = {}  # per sequence, and per row (_row_plan)
        self._plans: dict[tuple[int, int, int], tuple[dict[str, np.ndarray], np.ndarray]] = {}

    def eligible(self, row_len: int) -> np.ndarray | None:
        """Corpus sequences a stage of `row_len` draws from (None = all): in a corpus with
        synthesized retrieval examples (retrieval.json in the version), a sequence whose examples
        are longer than the row would only be cut into rows that ask about facts they do not hold,
        so a curriculum stage reads ordinary sequences and those whose examples fit."""
        if not (Path(self.corpus.path) / "retrieval.json").is_file():
            return None
        if self._targeted is None:
            read = getattr(self.corpus, "layout", self.corpus.sequence)
            self._targeted = np.array([fitting_row_len(read(i)) for i in range(len(self.corpus))])
        ok = np.flatnonzero((self._targeted <= row_len) & (row_len % np.maximum(self._targeted, 1) == 0))
        if ok.size == 0:
            raise TrainError(f"{self.corpus.path}: no sequence fits rows of {row_len} tokens (each holds "
                             f"a retrieval example that rows of {row_len} would cut)")
        return None if ok.size == len(self.corpus) else ok

    def sequence_index(self, stream_index: int, row_len: int | None = None) -> int:
        pool = self.eligible(row_len) if row_len is not None else None
        n = len(self.corpus) if pool is None else len(pool)
        epoch, j = divmod(stream_index, n)
        if self.shuffle:
            key = (epoch, n)
            perm = self._perm_cache.get(key)
            if perm is None:
                perm = np.random.default_rng([self.seed, epoch]).permutation(n)
                self._perm_cache = {key: perm}
            j = int(perm[j])
        return int(j if pool is None else pool[j])

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

    def rows_for_step(self, step: int, row_len: int, row_ids=None,
                      cols: slice = slice(None)) -> dict[str, np.ndarray]:
        """Numpy rows [n, row_len] of step `step` (all rows, or just `row_ids`), in stored order, or
        only the stored columns `cols` of them.

        A corpus row is planned from the sequence's layout (segment ids, positions, loss weights:
        no tokens): which corpus position each stored column holds (`src`). Only the token ids at
        the stored columns asked for (and the next position of each, for the target) are read, so a
        host reads only the sequence slices its devices hold."""
        per_seq = self.corpus.seq_len // row_len
        rows = range(self.batch_size * per_seq) if row_ids is None else row_ids
        out = {k: [] for k in FIELDS}
        for r in rows:
            row = self._corpus_row(step, row_len, r, cols)
            for f in FIELDS:
                out[f].append(row[f])
        return {f: np.stack(v) for f, v in out.items()}

    def _stored_order(self, row: dict[str, np.ndarray], src: np.ndarray):
        """A natural-order row (and its source positions) -> stored order: documents arranged for
        the load balance (bookft.attention.balance), then zig-zag."""
        from bookft.attention.balance import arrange_documents, load_balance

        if self.cp > 1 and self.arrange:
            order, new_ids = arrange_documents(row["segment_ids"], self.cp, block=self.balance_block,
                                               refine=self.block_swaps)
            row = {f: new_ids if f == "segment_ids" else x[order] for f, x in row.items()}
            src = src[order]
        if self.cp > 1:
            row = {f: load_balance(x, self.cp, axis=0) for f, x in row.items()}
            src = load_balance(src, self.cp, axis=0)
        return row, src

    def _layout(self, idx: int) -> dict[str, np.ndarray]:
        """Corpus sequence idx's layout with its shifted weights and same-document mask (cached: the
        devices of one step ask for the same sequences)."""
        got = self._layouts.get(idx)
        if got is None:
            reader = getattr(self.corpus, "layout", None)  # a corpus-like object with only sequence(i) reads whole
            lay = dict(reader(idx) if reader else self.corpus.sequence(idx))
            seg = lay["segment_ids"]
            lw = lay.get("loss_weights")
            if lw is None:
                lw = (seg != 0).astype(np.float32)
            same = np.zeros(seg.shape, dtype=bool)
            same[:-1] = (seg[1:] == seg[:-1]) & (seg[:-1] != 0)
            weights = np.zeros(seg.shape, dtype=np.float32)
            weights[:-1] = lw[1:]
            got = {"segment_ids": seg.astype(np.int32), "positions": lay["positions"].astype(np.int32),
                   "weights": np.where(same, weights, 0.0).astype(np.float32), "same": same}
            if "input_ids" in lay:
                got["input_ids"] = lay["input_ids"]
            if len(self._layouts) > 4 * self.batch_size:
                self._layouts.clear()
            self._layouts[idx] = got
        return got

    def _row_plan(self, idx: int, part: int, row_len: int):
        """(stored-order segment ids, positions, weights and same-document mask; the corpus position
        of each stored column) of row `part` of sequence idx, planned once for all its devices."""
        key = (idx, part, row_len)
        got = self._plans.get(key)
        if got is None:
            lay = self._layout(idx)
            at = np.arange(part * row_len, (part + 1) * row_len)
            row = {f: lay[f][at] for f in ("segment_ids", "positions", "weights")}
            if part:
                row = drop_cut_example(row)
            row["same"] = lay["same"][at]
            got = self._stored_order(row, at)
            if len(self._plans) > 4 * self.batch_size * (self.corpus.seq_len // row_len):
                self._plans.clear()
            self._plans[key] = got
        return got

    def _corpus_row(self, step: int, row_len: int, r: int, cols: slice) -> dict[str, np.ndarray]:
        k, part = divmod(r, self.corpus.seq_len // row_len)
        idx = self.sequence_index(step * self.batch_size + k, row_len)
        lay = self._layout(idx)
        row, src = self._row_plan(idx, part, row_len)
        row = {f: x[cols] for f, x in row.items()}
        src = src[cols]
        nxt = np.minimum(src + 1, self.corpus.seq_len - 1)
        need = np.union1d(src, nxt)  # token ids read: the columns held and each one's next token
        if "input_ids" in lay:
            ids = lay["input_ids"][need]
        else:
            ids = self.corpus.tokens(idx, need)
        row["input_ids"] = ids[np.searchsorted(need, src)].astype(np.int32)
        row["targets"] = np.where(row.pop("same"), ids[np.searchsorted(need, nxt)], 0).astype(np.int32)
        return row

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
            a, b, c = (range(n)[i] for n, i in zip(shape, index, strict=True))
            key = tuple((x.start, x.stop, x.step) for x in (a, b, c))
            if key not in cache:  # the fields of one device's block, read once
                ids = [i * shape[1] + j for i in a for j in b]
                got = self.rows_for_step(step, row_len, ids, cols=index[2])
                cache[key] = {f: v.reshape(len(a), len(b), len(c)) for f, v in got.items()}
            return cache[key]

        def piece(f):
            return lambda idx: rows_of(idx)[f]

        return {f: jax.make_array_from_callback(shape, shardings[f], piece(f)) for f in FIELDS}
