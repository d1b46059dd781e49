"""Write one corpus version's data: the documents and the packed sequences, as streamed Arrow datasets.

Design choices:
- Sequences store `input_ids` (exactly seq_len int32) plus per-piece `doc_lengths`, `doc_segments`
  (1-based segment number), `doc_index` (row in documents) and `doc_start` (token offset in that
  document): segment ids and positions are derived exactly from them by the reader.
- `loss_weights` (float32, seq_len) is written only when some document carries weights (the hook
  for synthesized retrieval examples).
- The data hash covers every document text and every sequence row, so two builds of the same
  sources can be compared without reading them again.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa

from bookft.corpus.packing import PackPlan, materialize, segment_numbers
from bookft.corpus.store import ArrowDatasetWriter

DOC_SCHEMA = pa.schema([("source", pa.string()), ("collection", pa.string()), ("kind", pa.string()),
                        ("title", pa.string()), ("text", pa.large_string()), ("n_chars", pa.int64()),
                        ("n_tokens", pa.int64()), ("hash", pa.string()), ("meta", pa.string())])


def seq_schema(with_weights: bool) -> pa.Schema:
    fields = [("input_ids", pa.list_(pa.int32())), ("doc_lengths", pa.list_(pa.int32())),
              ("doc_segments", pa.list_(pa.int32())), ("doc_index", pa.list_(pa.int64())),
              ("doc_start", pa.list_(pa.int64()))]
    if with_weights:
        fields.append(("loss_weights", pa.list_(pa.float32())))
    return pa.schema(fields)


def write_version(staged: Path, plan: PackPlan, tokens: np.ndarray, doc_off: np.ndarray, doc_coll: list[int],
                  docs, segments: str, pad_id: int, progress, weights=None, kind_of=None) -> dict:
    """Write staged/documents and staged/sequences; returns {chars, per_kind, data_hash}.

    docs: iterable of (source index, Document) in document order; weights(d, start, end) -> float32
    array or None gives per-token loss weights for document d. kind_of(document) -> the kind it is
    counted under in per_kind (default: its `kind` column).
    """
    h = hashlib.sha256()
    per_kind: dict[str, dict[str, int]] = defaultdict(lambda: {"documents": 0, "chars": 0, "tokens": 0})
    chars = 0
    w = ArrowDatasetWriter(staged / "documents", DOC_SCHEMA)
    buf: dict[str, list] = {f.name: [] for f in DOC_SCHEMA}
    size = 0
    for d, (_, doc) in enumerate(docs):
        n_tok = int(doc_off[d + 1] - doc_off[d])
        dh = doc.hash
        h.update(dh.encode())
        row = {"source": doc.source, "collection": doc.collection, "kind": doc.kind, "title": doc.title,
               "text": doc.text, "n_chars": len(doc.text), "n_tokens": n_tok, "hash": dh,
               "meta": json.dumps(doc.meta, sort_keys=True, default=str)}
        for k, v in row.items():
            buf[k].append(v)
        size += len(doc.text)
        chars += len(doc.text)
        pk = per_kind[doc.kind if kind_of is None else kind_of(doc)]
        pk["documents"] += 1
        pk["chars"] += len(doc.text)
        pk["tokens"] += n_tok
        if size > 16 << 20:
            w.write(buf)
            buf = {f.name: [] for f in DOC_SCHEMA}
            size = 0
    if buf["text"]:
        w.write(buf)
    w.close()

    def tok(d: int, s: int, e: int) -> np.ndarray:
        return tokens[doc_off[d] + s: doc_off[d] + e]

    with_weights = weights is not None
    schema = seq_schema(with_weights)
    sw = ArrowDatasetWriter(staged / "sequences", schema)
    rows_per_batch = max(1, (4 << 20) // plan.seq_len)  # ~16 MiB of input_ids per record batch
    buf = {f.name: [] for f in schema}
    for pieces in plan.sequences:
        ids, lw = materialize(pieces, plan.seq_len, tok, pad_id=pad_id, weights=weights)
        h.update(ids.tobytes())
        buf["input_ids"].append(ids)
        buf["doc_lengths"].append(np.array([p.length for p in pieces], np.int32))
        buf["doc_segments"].append(np.array(segment_numbers(pieces, doc_coll, segments), np.int32))
        buf["doc_index"].append(np.array([p.doc for p in pieces], np.int64))
        buf["doc_start"].append(np.array([p.start for p in pieces], np.int64))
        if with_weights:
            if lw is None:
                lw = np.zeros(plan.seq_len, np.float32)
                lw[:sum(p.length for p in pieces)] = 1.0
            buf["loss_weights"].append(lw)
        if len(buf["input_ids"]) >= rows_per_batch:
            sw.write(buf)
            buf = {f.name: [] for f in schema}
        progress.advance(1)
    if buf["input_ids"]:
        sw.write(buf)
    sw.close()
    return {"chars": chars, "per_kind": dict(per_kind), "data_hash": h.hexdigest()}
