"""Zig-zag causal load balancing and the chunk layout every strategy agrees on.

Design choices:
- The sequence is cut into 2*cp equal chunks (plain order: cp chunks, one per shard). Balanced
  ("zig-zag") order gives context rank r the chunks r and 2cp-1-r, so every rank owns one early and
  one late chunk and the causal work per rank is equal. The data path applies `load_balance` once
  (tokens, targets, positions, segment ids, loss weights); attention never reorders activations, it
  only needs to know which global chunk each local chunk is (`shard_chunk_ids`).
- Chunks may be cut further into `sub` sub-chunks (kernels that like bounded tiles, e.g. splash masks
  built per chunk pair, never for the global S x S); sub-chunk id = chunk id * sub + j keeps global
  order, which is all the causal mask needs.

Packed rows (`arrange_documents`): zig-zag balances causal work only for one document per row. A
packed row of book-length documents has a saw-tooth cost profile (a token's cost is its offset in
its document) and zig-zag alone leaves max/mean per-device work at 1.2-2.9. `arrange_documents`
permutes the tokens of a row so that zig-zag balances them again, without changing what any token
computes (a per-document zig-zag with a position-based mask would need splash to take a dynamic
mask; this keeps the index-based mask every kernel already has):
- The mask is `same segment & kv index <= q index`. Documents are independent, and inside a
  document only the order of its tokens matters, so any arrangement that keeps each document's
  tokens in their original relative order gives every token the same context. Positions (RoPE)
  travel with the tokens (they restart per document), as do targets and loss weights, so the model
  output per token and the loss are unchanged. A document need not stay contiguous.
- A long document is cut into 2m pieces placed in the chunks of m devices in zig-zag order: chunks
  r_1 < .. < r_m, then 2cp-1-r_m < .. < 2cp-1-r_1, so each device holds pieces k and 2m-1-k of it,
  i.e. about 1/m of the document's causal work (the single-document zig-zag argument, applied per
  document). m is as large as allowed (<= cp) with pieces of at least one `block`.
- Alignment: block skipping (kernel_xla's blocks; the engine's sub-chunks, where splash skips)
  tests [min, max] segment ranges per block, so a block holding two documents is visible to the
  blocks of both. Pieces are therefore whole multiples of `block` (set it to the kernel's skip
  granularity), except each document's first piece, which also takes the L mod block leftover
  tokens; inside a chunk the aligned pieces come first and the few unaligned ones last, so a row
  has about one straddling block per document instead of one per piece.
- Whole blocks cannot split a document's work exactly evenly; the extra blocks go to the devices
  with the least work so far. Documents are placed largest first; a document spread over m < cp
  devices takes the m least-loaded ones; short documents go whole into a chunk of the least-loaded
  device. Documents that fit nowhere, then padding, share the room left: each chunk's room is
  split in proportion to their lengths, so each is spread over all chunks in order, like a
  zig-zagged document of its own.
- Block swaps (bookft/attention/swaps.py): whole-block pieces cannot split a document's work finely when a
  device holds few blocks, so a local search then swaps single blocks between documents (each
  document's tokens refilled into its slots in order, so it stays exact) to even out the work.
- Measured (benchmarks/results/attention_default_cpu2_2026-12-01.json, 1M-token rows of 50K-500K books, worst of 8 rows,
  max/mean per-device non-empty kv blocks at cp 8 / 16 / 64): 512-token blocks 1.002 / 1.002 /
  1.003 (placement alone 1.004 / 1.010 / 1.049, zig-zag alone 2.7-2.9) with the same total work;
  log-normal-length packed books 1.002 / 1.003 / 1.008. Splash skips whole chunk pairs only
  (`attention.max_chunk`, default 4096): there 1.003 / 1.014 / 1.084 (at cp 64 a device holds 4
  chunks of 4096; mean over rows 1.055), with max_chunk 1024: 1.002 / 1.002 / 1.010. Arranging
  a 1M-token row takes 0.1-0.6 s on one core.
- Several rows on one device: kernel_xla and the engine skip a block only when no row needs it, so
  per-row balance is what matters only with one row per device (the long-context case).
- Segment ids are renumbered by first appearance in the arranged row, so ids rise along each chunk
  and [min, max] range tests stay tight. Padding tokens (id 0) each get an id of their own: they
  attend to themselves only (their loss weight is 0), so padding costs one diagonal block instead
  of a causal triangle. Only equality of ids matters to the mask.
- Chunk sizes are exact (S / 2cp tokens). The data path applies this per row before
  `load_balance` (bookft/train/data.py); evaluation and prefill keep natural order. Work is
  estimated in blocks (a piece of p blocks after P earlier blocks of its document costs
  p * (P + (p+1)/2)); benchmarks/attention.py measures non-empty kv blocks under the real skip rules.
"""

from __future__ import annotations

import numpy as np

from bookft.errors import AttentionError


def zigzag_order(cp: int) -> np.ndarray:
    """Chunk ids in stored order: [0, 2cp-1, 1, 2cp-2, ...] (rank r stores chunks r, 2cp-1-r)."""
    order = np.empty(2 * cp, dtype=np.int32)
    order[0::2] = np.arange(cp)
    order[1::2] = 2 * cp - 1 - np.arange(cp)
    return order


def _reorder(x, cp: int, axis: int, perm: np.ndarray):
    n = x.shape[axis]
    if n % (2 * cp):
        raise AttentionError(
            f"load balance: length {n} along axis {axis} is not divisible by 2*cp={2 * cp}; "
            "pad the sequence length (data.seq_len) to a multiple of 2*cp"
        )
    axis = axis % x.ndim
    shape = x.shape[:axis] + (2 * cp, n // (2 * cp)) + x.shape[axis + 1 :]
    chunks = x.reshape(shape)
    out = chunks[(slice(None),) * axis + (perm,)]  # fancy index works for numpy and jax arrays
    return out.reshape(x.shape)


def load_balance(x, cp: int, axis: int = 1):
    """Natural order -> zig-zag stored order along `axis` (numpy or jax array)."""
    if cp <= 1:
        return x
    return _reorder(x, cp, axis, zigzag_order(cp))


def unbalance(x, cp: int, axis: int = 1):
    """Zig-zag stored order -> natural order along `axis` (inverse of `load_balance`)."""
    if cp <= 1:
        return x
    return _reorder(x, cp, axis, np.argsort(zigzag_order(cp)).astype(np.int32))


def chunks_per_shard(balanced: bool) -> int:
    """Zig-zag needs 2 chunks per context shard; plain order needs 1 (S divisible by cp)."""
    return 2 if balanced else 1


def shard_chunk_ids(cp: int, balanced: bool, sub: int = 1) -> np.ndarray:
    """[cp, n*sub] global (sub-)chunk ids held by each context shard in stored order (n = 2 zig-zag, 1 plain)."""
    n = chunks_per_shard(balanced)
    order = zigzag_order(cp) if balanced else np.arange(cp, dtype=np.int32)
    per_shard = order.reshape(cp, n)
    ids = per_shard[:, :, None] * sub + np.arange(sub, dtype=np.int32)[None, None, :]
    return ids.reshape(cp, n * sub).astype(np.int32)


# ---------------------------------------------------------------------------------------------
# Packed rows: arrange documents so that zig-zag balances them too (see the module docstring).



def _device(chunk: int, cp: int) -> int:
    return chunk if chunk < cp else 2 * cp - 1 - chunk


def _cost(size: int, before: int, block: int) -> float:
    """Kv blocks visited by a piece of `size` tokens after `before` tokens of its document."""
    b = size / block
    return b * (before / block + (b + 1) / 2)


def arrange_documents(segment_ids, cp: int, *, block: int = 512, refine: bool = True):
    """One row's segment ids [S] (natural order, 0 = padding) -> (order [S] int64, new_ids [S] int32).

    `x[order]` is the arranged row for every per-token field and `new_ids` its segment ids; then
    `load_balance(., cp)` gives the stored order. The module docstring says why this is exact.
    """
    seg = np.asarray(segment_ids)
    if seg.ndim != 1:
        raise AttentionError(f"arrange_documents: expected one row of segment ids [S], got shape {seg.shape}")
    S = seg.shape[0]
    if cp <= 1:
        return np.arange(S, dtype=np.int64), seg.astype(np.int32)
    if S % (2 * cp):
        raise AttentionError(
            f"arrange_documents: row length {S} is not divisible by 2*cp={2 * cp}; "
            "pad the sequence length (data.seq_len) to a multiple of 2*cp"
        )
    if block < 1:
        raise AttentionError(f"arrange_documents: block must be positive, got {block}")
    C, n_chunks = S // (2 * cp), 2 * cp
    block = min(block, C)  # kernels use min(block, chunk) too
    by_id = np.argsort(seg, kind="stable")  # tokens grouped by id, original order inside a group
    ids, starts, counts = np.unique(seg[by_id], return_index=True, return_counts=True)
    tokens = {int(i): by_id[s : s + c] for i, s, c in zip(ids, starts, counts, strict=True)}
    padding = tokens.pop(0, np.zeros(0, np.int64))
    docs = sorted(tokens, key=lambda d: (-len(tokens[d]), int(tokens[d][0])))  # largest first
    free = np.full(n_chunks, C, np.int64)
    work = np.zeros(cp)
    pieces: dict[int, list[tuple[int, int]]] = {}  # doc -> [(chunk, size)] in document order
    stream = []
    for d in docs:
        L = len(tokens[d])
        if any(_spread(d, L, m, cp, block, free, work, pieces) for m in range(min(cp, L // block // 2), 0, -1)):
            continue  # spread over as many devices as have room (pieces of >= 1 block)
        fits = np.flatnonzero(free >= L)
        if len(fits):  # whole, in the chunk of the least-loaded device (then the emptiest chunk)
            j = int(min(fits, key=lambda j: (work[_device(j, cp)], -free[j], j)))
            pieces[d], free[j] = [(j, L)], free[j] - L
            work[_device(j, cp)] += _cost(L, 0, block)
        else:
            stream.append(d)
    # what fits nowhere (documents in original order, then padding) is spread over the room left
    stream.sort(key=lambda d: int(tokens[d][0]))
    if len(padding):
        stream.append(0)
    _fill(stream, [len(tokens[d]) if d else len(padding) for d in stream], free, block, pieces)
    # sizes add up: the documents and padding fill the S tokens exactly
    assert not free.any() and all(s > 0 for p in pieces.values() for _, s in p), free
    order = _assemble(seg, tokens, padding, pieces, n_chunks, docs, block)
    labels = seg[order]  # original document id per arranged token
    if refine and C % block == 0:
        from bookft.attention.swaps import refine_blocks

        swapped = refine_blocks(labels, cp, block)
        if swapped is not None:
            labels = swapped
            order = np.empty(S, np.int64)  # each label's tokens fill its slots in their own order
            order[np.argsort(labels, kind="stable")] = np.argsort(seg, kind="stable")
    return order, _renumber(labels)


def _spread(d, L, m, cp, block, free, work, pieces) -> bool:
    """Cut document d into 2m zig-zag pieces (whole blocks; the first piece also takes L mod block)
    over the m least-loaded devices with room; False if fewer than m devices have room."""
    q, head = divmod(L, block)
    base, extra = divmod(q, 2 * m)
    need = (base + (1 if extra else 0)) * block
    room = [r for r in range(cp) if min(free[r], free[2 * cp - 1 - r]) >= need]
    devs = sorted(sorted(room, key=lambda r: (work[r], r))[:m])
    if len(devs) < m or free[devs[0]] < need + head:  # the first piece also takes the head
        return False
    blocks = np.full(2 * m, base)
    # extra blocks in mirrored pairs to the least-loaded devices (piece k and 2m-1-k are one device's)
    by_load = sorted(range(m), key=lambda k: (work[devs[k]], devs[k]))
    for k in by_load[: extra // 2]:
        blocks[k] += 1
        blocks[2 * m - 1 - k] += 1
    if extra % 2:  # the late piece of the next least-loaded device (extra < 2m: one is left)
        blocks[2 * m - 1 - by_load[extra // 2]] += 1
    sizes = blocks * block
    sizes[0] += head
    chunks = devs + [2 * cp - 1 - r for r in reversed(devs)]
    pieces[d] = list(zip(chunks, sizes.tolist(), strict=True))
    before = 0
    for k, (j, s) in enumerate(pieces[d]):
        free[j] -= s
        work[devs[k] if k < m else devs[2 * m - 1 - k]] += _cost(s, before, block)
        before += s
    return True


def _fill(stream, lengths, free, block, pieces) -> None:
    """Share every chunk's room among the stream documents in proportion to their lengths, block by
    block to the document furthest behind its share (the last < block tokens likewise), so each is
    spread over all chunks in order like a zig-zagged document of its own."""
    total = int(free.sum())
    lengths = np.asarray(lengths, np.int64)
    got = np.zeros(len(stream), np.int64)
    seen = 0
    for j in np.flatnonzero(free):
        seen += int(free[j])
        target = lengths * (seen / total)  # cumulative share after this chunk
        take = np.zeros_like(got)
        rest = int(free[j])
        while rest > 0:  # terminates: the documents' tokens left always equal the room left
            avail = lengths - got - take
            lag = np.where(avail > 0, target - got - take, -np.inf)
            if rest >= block and (avail >= block).any():
                k = int(np.argmax(np.where(avail >= block, lag, -np.inf)))
                t = block
            else:
                k = int(np.argmax(lag))
                t = int(min(rest, avail[k]))
            take[k] += t
            rest -= t
        for k in np.flatnonzero(take):
            pieces.setdefault(stream[k], []).append((int(j), int(take[k])))
        got += take
        free[j] = 0


def _assemble(seg, tokens, padding, pieces, n_chunks, docs, block):
    """Lay the pieces out chunk by chunk (whole blocks first, then the unaligned pieces, padding
    last): the arranged row's token order."""
    S = seg.shape[0]
    rank = {d: i for i, d in enumerate(docs)}  # largest documents first inside each group
    per_chunk: list[list[tuple[int, int, int]]] = [[] for _ in range(n_chunks)]  # (doc, offset, size)
    for d, plist in pieces.items():
        off = 0
        for j, s in plist:
            per_chunk[j].append((d, off, s))
            off += s
    order = np.empty(S, np.int64)
    pos = 0
    for items in per_chunk:
        items.sort(key=lambda it: (it[0] == 0, it[2] % block != 0, rank.get(it[0], 0)))
        for d, off, s in items:
            order[pos : pos + s] = (padding if d == 0 else tokens[d])[off : off + s]
            pos += s
    return order


def _renumber(labels: np.ndarray) -> np.ndarray:
    """Segment ids by first appearance along the arranged row; each padding token (0) an id of its own."""
    ids = np.empty(len(labels), np.int32)
    assigned: dict[int, int] = {}
    next_id = 1
    change = np.flatnonzero(np.diff(labels)) + 1  # runs of equal labels
    for a, b in zip(np.r_[0, change].tolist(), np.r_[change, len(labels)].tolist(), strict=True):
        d = int(labels[a])
        if d == 0:
            ids[a:b] = np.arange(next_id, next_id + b - a)
            next_id += b - a
            continue
        if d not in assigned:
            assigned[d], next_id = next_id, next_id + 1
        ids[a:b] = assigned[d]
    return ids
