"""Block swaps that finish the packed-row arrangement of bookft.attention.balance.

`arrange_documents` places each document in whole-block pieces; when a device holds only a few
skip blocks (cp 64 at a 1M-token row holds 16K tokens: 4 splash chunks of 4096) whole pieces split
a document's work too coarsely. `refine_blocks` then swaps single blocks between documents to even
out the per-device work; the caller refills each document's tokens into its slots in order, so
the arrangement stays exact. Measured figures: bookft/attention/balance.py's module docstring.
"""

from __future__ import annotations

import numpy as np


def refine_blocks(labels: np.ndarray, cp: int, block: int) -> np.ndarray | None:
    """Swap whole single-document (or all-padding) blocks between devices to lower the busiest
    device's work; returns the new per-token document labels, or None when nothing moved.

    Why it is exact: a document's tokens are refilled into its slots in their original order (the
    caller), so only which slots each document owns changes. Why it is needed: the constructive
    placement splits a document's work in whole blocks per device; with a few blocks per device
    (cp 64 at a 1M row holds 16K tokens: 4 splash chunks of 4096) that split is too coarse, while
    swapping single blocks between documents trades work in steps of one block.

    Work model (the masks' set semantics, which the id renumbering keeps close to the kernels' range
    tests): a q block costs the kv blocks at or before it that share a document with it. Mixed
    blocks (document edges) move to the front of the row first and then stay: a block holding
    pieces of k documents costs the blocks before it that hold any of them, which at the row's end
    is one block carrying several documents' tails (the busiest device at cp 64 before this); at
    the front it costs ~1 and each later block of those documents pays one more (same total). An
    all-padding block costs 1 (each padding token sees itself only). Swapping blocks x and y of
    documents A != B changes costs only between them, by one per block of A or B there.

    Search: steepest descent on the sum of squared device work (not the max alone: ties between
    equally busy devices holding the same document would block every move), over swaps of one of
    the busiest device's blocks with any other device's block, scored on the two devices plus
    the blocks between and checked exactly. Deterministic. Iterated local search (random swaps off
    the busiest device, then descent again) was tried and dropped: at cp 64 with 4 blocks per
    device it improved one row in eight, at 7x the time.
    """
    S = len(labels)
    nb = S // block
    toks = labels.reshape(nb, block).copy()
    pure = (toks == toks[:, :1]).all(1)
    mixed_at = np.flatnonzero(~pure)
    if len(mixed_at) > max(8, nb // 8):
        return None  # many short documents: the whole-document placement already spreads them
    front = np.arange(len(mixed_at))
    swap = front[~np.isin(front, mixed_at)], mixed_at[~np.isin(mixed_at, front)]
    toks[swap[0]], toks[swap[1]] = toks[swap[1]], toks[swap[0]].copy()
    first = toks[:, 0]
    pure = (toks == first[:, None]).all(1)
    big = np.unique(first[pure & (first != 0)])
    if len(big) < 2 and not (pure & (first == 0)).any() and not len(swap[0]):
        return None  # one document and no padding block: nothing to trade
    st = Swaps(toks, pure, big, cp, S // (2 * cp) // block)
    moved = st.descend() or bool(len(swap[0]))
    if not moved:
        return None
    inv = np.concatenate([big, [0]])
    toks[st.mv] = inv[st.lab[st.mv]][:, None]
    return toks.reshape(S)


class Swaps:
    """State of the block-swap search (see `refine_blocks`): labels, per-document prefix counts, costs."""

    def __init__(self, toks, pure, big, cp, per_chunk):
        nb = len(toks)
        first = toks[:, 0]
        col = {int(d): i for i, d in enumerate(big)}
        self.Db = Db = len(big)
        self.PAD = PAD = Db  # label column of all-padding blocks (cost 1, no rank)
        lab = np.full(nb, -1, np.int64)  # -1: mixed block (fixed)
        lab[pure & (first == 0)] = PAD
        for d, i in col.items():
            lab[pure & (first == d)] = i
        chunk = np.arange(nb) // per_chunk
        self.cp, self.lab = cp, lab
        self.dev = np.where(chunk < cp, chunk, 2 * cp - 1 - chunk)
        self.mixed = mixed = np.flatnonzero(lab < 0)
        # mixed blocks: the big documents they hold, and a constant cost part (blocks at or before
        # them that overlap them and are not pure blocks of big documents, which move)
        self.MM = np.zeros((len(mixed), Db + 1), np.int64)
        sets = []
        for i, m in enumerate(mixed):
            held = set(np.unique(toks[m]).tolist()) - {0}
            sets.append(held)
            self.MM[i, [col[d] for d in held if d in col]] = 1
        self.base = np.array([1 + sum(1 for j in range(i) if sets[i] & sets[j]) for i in range(len(mixed))])
        self.mix_pos = np.full(nb, -1)
        self.mix_pos[mixed] = np.arange(len(mixed))
        Mx = np.zeros((nb, Db + 1), np.int64)
        Mx[mixed] = self.MM
        self.Mx = np.cumsum(Mx, 0)  # mixed blocks at or before b holding each big document
        self.mv = mv = np.flatnonzero(lab >= 0)
        self.onehot = np.zeros((nb, Db + 1), np.int64)
        self.onehot[mv, lab[mv]] = 1
        self.onehot[:, PAD] = 0
        self.cnt = np.cumsum(self.onehot, 0)  # pure blocks at or before b, per big document
        self.cost = np.ones(nb)
        real = mv[lab[mv] != PAD]
        self.cost[real] = self.cnt[real, lab[real]] + self.Mx[real, lab[real]]
        for i, m in enumerate(mixed):
            self.cost[m] = self.base[i] + self.cnt[m] @ self.MM[i]
        self.work = np.bincount(self.dev, self.cost, minlength=cp)

    def new_costs(self, x, y, A, B):
        """Costs of A's block moved to y and B's to x (arrays broadcast); padding costs 1."""
        newA = np.where(A == self.PAD, 1, self.cnt[y, A] + self.Mx[y, A] + (y < x))
        newB = np.where(B == self.PAD, 1, self.cnt[x, B] + self.Mx[x, B] + (x < y))
        return newA, newB

    def delta(self, xi, yj):
        """Exact effect of swapping blocks xi and yj: (new work, cost changes between, cost at xi, at yj)."""
        a, b = int(self.lab[xi]), int(self.lab[yj])
        lo, hi = min(xi, yj), max(xi, yj)
        s = 1 if xi < yj else -1  # xi earlier: A's later blocks between see one fewer, B's one more
        part = self.lab[lo + 1 : hi]
        d = np.zeros(len(part))
        if a != self.PAD:
            d -= s * (part == a)
        if b != self.PAD:
            d += s * (part == b)
        m = self.mix_pos[lo + 1 : hi]
        k = m >= 0
        if k.any():
            d[k] += s * (self.MM[m[k], b] - self.MM[m[k], a])
        cy, cx = (float(c) for c in self.new_costs(xi, yj, a, b))
        work = self.work + np.bincount(self.dev[lo + 1 : hi], d, minlength=self.cp)
        work[self.dev[xi]] += cx - self.cost[xi]
        work[self.dev[yj]] += cy - self.cost[yj]
        return work, d, cx, cy

    def apply(self, xi, yj, work, d, cx, cy):
        a, b = int(self.lab[xi]), int(self.lab[yj])
        lo, hi = min(xi, yj), max(xi, yj)
        s = 1 if xi < yj else -1
        self.cost[lo + 1 : hi] += d
        self.cost[xi], self.cost[yj] = cx, cy
        for c, sg in ((a, -s), (b, s)):
            if c != self.PAD:
                self.cnt[lo:hi, c] += sg
        self.onehot[xi, a] = self.onehot[yj, b] = 0
        self.onehot[xi, b] = self.onehot[yj, a] = 1
        self.onehot[:, self.PAD] = 0
        self.lab[xi], self.lab[yj] = b, a
        self.work = work

    def descend(self, max_moves: int | None = None) -> bool:
        """Steepest descent (see `refine_blocks`); True if anything moved."""
        cp, dev, mv = self.cp, self.dev, self.mv
        moved = False
        stuck = np.zeros(cp, bool)
        best_max, since = self.work.max(), 0
        for _ in range(4 * len(self.lab) if max_moves is None else max_moves):
            work = self.work
            if work.max() <= work.mean() * 1.002 or since > 2 * cp:
                break  # balanced, or the busiest device has not got lighter for a while
            h = int(np.argmax(np.where(stuck, -np.inf, work)))
            if stuck[h]:
                break  # no device sheds work by one swap
            X, Y = mv[dev[mv] == h], mv[dev[mv] != h]
            if not len(X) or not len(Y):
                break
            A, B = self.lab[X][:, None], self.lab[Y][None, :]
            x, y = X[:, None], Y[None, :]
            newA, newB = self.new_costs(x, y, A, B)
            new_h = work[h] - self.cost[x] + newB
            new_g = work[dev[y]] - self.cost[y] + newA
            # sum of squares: the two devices, plus the pure blocks of A and B between x and y
            sw = np.cumsum(self.onehot * (2 * work[dev])[:, None], 0)
            lo, hi = np.minimum(x, y), np.maximum(x, y) - 1
            s = np.where(x < y, 1, -1)
            cnt = self.cnt
            side = (-s * (sw[hi, A] - sw[lo, A]) + cnt[hi, A] - cnt[lo, A]
                    + s * (sw[hi, B] - sw[lo, B]) + cnt[hi, B] - cnt[lo, B])
            cand = new_h**2 + new_g**2 - work[h] ** 2 - work[dev[y]] ** 2 + side
            cand = np.where((A != B) & (new_h < work[h]) & (cand < 0), cand, np.inf)
            accepted = False
            for flat in np.argsort(cand, axis=None)[:32]:
                if not np.isfinite(cand.flat[flat]):
                    break
                i, j = np.unravel_index(flat, cand.shape)
                xi, yj = int(X[i]), int(Y[j])
                change = self.delta(xi, yj)
                if (change[0] ** 2).sum() < (work**2).sum():
                    self.apply(xi, yj, *change)
                    moved = accepted = True
                    break
            stuck[h] = not accepted  # then try the next busiest device; any move frees them all
            if accepted:
                stuck[:] = False
            since = 0 if self.work.max() < best_max else since + 1
            best_max = min(best_max, self.work.max())
        return moved
