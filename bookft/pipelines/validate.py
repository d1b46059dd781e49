"""Checks a staged corpus version must pass before it is published (and what a reader relies on).

Checked, with the problem named: the manifest's counts against the data on disk (documents,
sequences, tokens), every sequence exactly seq_len tokens and none empty, no zero-length piece, the
tokenizer file's fingerprint against the manifest's, the tokenizer unchanged from `current`'s
unless allowed, the configured minimum documents / sequences, that no kind of data the current
version has (manifest per_kind: pdf, code, legal, synthesized, ...) is lost entirely unless
`validate.allow_lost_kinds` names it, and that no source the current version has documents of
(manifest document_sources) has none in the new one unless `validate.allow_lost_sources` allows it
(the synthesized examples' files, which a build writes anew, are not sources). The staged version
is then opened with the ordinary reader and its first and last sequences read. `bookft ingest -o`
onto an existing corpus runs the same checks (there `--replace` is the way past them).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from bookft.errors import PipelineError
from bookft.ingest.corpus_build import SYNTH_DIR
from bookft.pipelines.config import ValidateConfig


def _tables(folder: Path) -> list[pa.Table]:
    state = json.loads((folder / "state.json").read_text())
    return [pa.ipc.open_stream(pa.memory_map(str(folder / f["filename"]), "r")).read_all()
            for f in state["_data_files"]]


def _lost_kinds(manifest: dict, previous: dict | None, vc: ValidateConfig) -> list[str]:
    """Kinds the current version has documents of and the new one has none of (not allowed by config)."""
    if previous is None:
        return []
    had = {k: v["documents"] for k, v in (previous.get("per_kind") or {}).items() if v.get("documents")}
    now = {k for k, v in (manifest.get("per_kind") or {}).items() if v.get("documents")}
    lost = sorted(k for k in had if k not in now and k not in vc.allow_lost_kinds)
    if not lost:
        return []
    what = ", ".join(f"every {k} document ({had[k]:,} in version {previous.get('version')})" for k in lost)
    return [f"the new version would lose {what}; if intended, set validate.allow_lost_kinds: "
            f"[{', '.join(lost)}]"]


def source_documents(manifest: dict) -> dict[str, int]:
    """Documents per source name (manifest document_sources), the synthesized examples' files left out."""
    out: dict[str, int] = {}
    for name, n in manifest.get("document_sources") or []:
        if Path(name).parent.name != SYNTH_DIR:
            out[name] = out.get(name, 0) + int(n)
    return out


def _lost_sources(manifest: dict, previous: dict | None, vc: ValidateConfig) -> list[str]:
    if previous is None or vc.allow_lost_sources is True:
        return []
    allowed = set(vc.allow_lost_sources or ())
    had, now = source_documents(previous), source_documents(manifest)
    lost = sorted(s for s, n in had.items() if n and s not in now and s not in allowed)
    if not lost:
        return []
    shown = ", ".join(f"{s} ({had[s]:,} documents)" for s in lost[:10]) + (" ..." if len(lost) > 10 else "")
    return [f"the new version would lose every document of {len(lost)} source(s) of version "
            f"{previous.get('version')}: {shown}; if intended, set validate.allow_lost_sources: "
            f"[{', '.join(lost[:10])}] (or true)"]


def validate_version(staged: Path, manifest: dict, previous: dict | None, vc: ValidateConfig) -> dict:
    """Raise PipelineError listing every problem; return the figures checked."""
    from bookft.corpus import open_corpus
    from bookft.ingest.tokenize import fingerprint, load_tokenizer

    problems: list[str] = []
    c = manifest["counts"]
    seq_len = int(manifest["seq_len"])
    seqs = _tables(staged / "sequences")
    docs = _tables(staged / "documents")
    n_seq = sum(t.num_rows for t in seqs)
    n_doc = sum(t.num_rows for t in docs)
    tokens = empty = bad_len = zero_piece = 0
    for t in seqs:
        lens = pc.list_value_length(t.column("input_ids"))
        bad_len += int(pc.sum(pc.not_equal(lens, seq_len)).as_py() or 0)
        pieces = t.column("doc_lengths")
        empty += int(pc.sum(pc.equal(pc.list_value_length(pieces), 0)).as_py() or 0)
        flat = pc.list_flatten(pieces)
        tokens += int(pc.sum(flat).as_py() or 0)
        zero_piece += int(pc.sum(pc.less_equal(flat, 0)).as_py() or 0)
    if n_seq != c["sequences"]:
        problems.append(f"sequences: manifest says {c['sequences']}, data has {n_seq}")
    if n_doc != c["documents"]:
        problems.append(f"documents: manifest says {c['documents']}, data has {n_doc}")
    if tokens != c["tokens"]:
        problems.append(f"tokens: manifest says {c['tokens']}, sequences hold {tokens}")
    if bad_len:
        problems.append(f"{bad_len} sequence(s) not exactly seq_len={seq_len} tokens")
    if empty or zero_piece:
        problems.append(f"{empty} empty sequence(s), {zero_piece} zero-length piece(s)")
    if n_doc < vc.min_documents or n_seq < vc.min_sequences:
        problems.append(f"{n_doc} documents / {n_seq} sequences: below validate.min_documents="
                        f"{vc.min_documents} / min_sequences={vc.min_sequences}")
    fp = manifest["tokenizer"]["fingerprint"]
    if fingerprint(load_tokenizer(staged / "tokenizer" / "tokenizer.json")) != fp:
        problems.append("tokenizer/tokenizer.json does not match the manifest's fingerprint")
    if previous is not None and previous["tokenizer"]["fingerprint"] != fp and not vc.allow_tokenizer_change:
        problems.append(f"tokenizer fingerprint changed from current version {previous.get('version')} "
                        f"({previous['tokenizer']['fingerprint'][:12]} -> {fp[:12]}); checkpoints trained on "
                        "it would not match; set validate.allow_tokenizer_change: true if intended")
    problems += _lost_kinds(manifest, previous, vc)
    problems += _lost_sources(manifest, previous, vc)
    if not problems:
        corpus = open_corpus(staged)
        for i in {0, len(corpus) - 1}:
            corpus.sequence(i)
    if problems:
        raise PipelineError(f"validation of the new version failed: {'; '.join(problems)}")
    return {"sequences": n_seq, "documents": n_doc, "tokens": tokens, "fingerprint": fp}
