"""`build_corpus(config)`: the whole build of a corpus definition, publishing exactly one version.

Design choices:
- One build for every caller (`bookft ingest`, `bookft quickstart`, `bookft pipeline run`), so the
  same definition and sources publish the same corpus whoever runs it.
- Without a `retrieval:` section (rate 0) the build is one pass (ingest/phases/, `build_pass`).
- With one, synthesizing training examples is a phase between two passes:
  1. the plain pass stages the definition's sources and is never published (its documents and
     tokenizer are the synthesis's material);
  2. the synthesis phase writes the examples to CORPUS_DIR/retrieval-sources/, filling the build's
     extraction and token caches as it goes (ingest/example_writer.py);
  3. the final pass builds the sources plus the examples with the plain pass's tokenizer, and is
     the one version published.
  `current` therefore never points at a version without the examples its definition asks for:
  retrieval.json is written into the staged version and sealed with it (corpus/integrity.py), and
  a kill -9 anywhere leaves `current` as it was or on the complete new version; a rerun reproduces
  the same files (they depend on retrieval.seed and the documents only) and reads its caches.
- The examples' files are not sources of the definition: the manifest's `source_hashes` leaves them
  out (a refresh compares the definition's sources), and `per_kind` counts them as `synthesized`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bookft.corpus.crash import crash_point
from bookft.corpus.integrity import recover
from bookft.corpus.store import check_corpus_dir, clean_stale, write_json
from bookft.errors import IngestError
from bookft.ingest.example_writer import BuildCache, synthesize
from bookft.ingest.phases import build_pass
from bookft.needles.examples import MARK
from bookft.needles.retrieval_config import RetrievalConfig

SYNTH_DIR = "retrieval-sources"


def loss_weights_fn(tok, cfg: RetrievalConfig):
    """build_pass's hook: weights for synthesized examples, corpus_weight for other documents."""

    def weights(document, ids: np.ndarray):
        mark = (document.meta or {}).get(MARK)
        if mark is None:
            return None if cfg.corpus_weight == 1.0 else np.full(len(ids), cfg.corpus_weight, np.float32)
        n, answers = json.loads(mark)  # n tokens (EOS not counted), answers [[a0, a1), ...]
        if len(ids) not in (n, n + 1):
            raise IngestError(f"{document.source}: {len(ids)} tokens, but the synthesized example was "
                              f"measured at {n}; was it ingested with another tokenizer?")
        w = np.full(len(ids), cfg.context_weight, np.float32)
        for a0, a1 in answers:
            w[a0:a1] = cfg.answer_weight
        if len(ids) == n + 1 and answers and answers[-1][1] == n:
            # the EOS after an answer that ends the example is the answer's end: the model learns to stop
            # there (an instruct tokenizer's EOS is its end of turn: <|im_end|>, <|eot_id|>)
            w[n] = cfg.answer_weight
        return w

    return weights


def prepare(root: Path) -> list[str]:
    """What every build and refresh does first: refuse a folder that is not a corpus, remove what dead
    runs left (staging folders, half-pruned versions) and broken versions (corpus/integrity.py).
    Returns one line per thing removed."""
    check_corpus_dir(root)
    root.mkdir(parents=True, exist_ok=True)
    return clean_stale(root) + recover(root)


def build_corpus(cfg, progress=None, *, sources: list[tuple] | None = None, before_publish=None,
                 prepared: bool = False, previous: dict | None = None) -> dict:
    """Build the definition `cfg` (plus `sources` named on the command line) and publish one version;
    returns its manifest (with a `retrieval` summary when examples were synthesized, and `cleaned`:
    what `prepare` removed; `prepared=True`: the caller ran it). `before_publish` is build_pass's: it
    sees the version that would be published, and may veto it; `previous` too (unreadable sources keep
    its documents, marked stale: ingest/phases/stale.py)."""
    cleaned = [] if prepared else prepare(Path(cfg.out))
    if cfg.retrieval.rate <= 0:
        return {**build_pass(cfg, progress, sources=sources, before_publish=before_publish, previous=previous),
                "cleaned": cleaned}
    sources = list(sources or [])
    material: dict = {}
    plain_work: dict = {}

    def synthesis_phase(staged: Path, plain: dict) -> bool:
        plain_work.update(plain["work"])
        material.update(_synthesize(cfg, progress, staged, plain))
        crash_point("after-synthesize")
        return False  # the plain pass is material, never a version of its own

    build_pass(cfg, progress, sources=sources, before_publish=synthesis_phase, previous=previous)
    tok = material.pop("tokenizer")
    files = material.pop("files")

    def complete(staged: Path, manifest: dict) -> bool:
        # the documents extracted by either pass (the final one reads the plain pass's cache)
        manifest["work"]["documents_extracted"] += plain_work.get("documents_extracted", 0)
        if before_publish is not None and not before_publish(staged, manifest):
            return False
        write_json(staged / "retrieval.json", material)  # part of the version before it is visible
        return True

    final = build_pass(cfg, progress, sources=sources, unmixed=[(str(f), "jsonl", f.stem) for f in files],
                       loss_weights=loss_weights_fn(tok, cfg.retrieval), tokenizer=(tok, material.pop("origin")),
                       before_publish=complete, previous=previous)
    final["retrieval"] = material
    final["cleaned"] = cleaned
    return final


def _synthesize(cfg, progress, staged: Path, plain: dict) -> dict:
    """The synthesis phase, on the plain pass's staged version: its documents (less those held out
    for `eval short`) are the material, n_plain * rate / (1 - rate) sequences of examples are written.
    Returns the summary (retrieval.json) plus the tokenizer, its origin and the files written."""
    import datasets

    from bookft.ingest.tokenize import load_tokenizer

    r = cfg.retrieval
    tok = load_tokenizer(staged / "tokenizer" / "tokenizer.json")
    docs = datasets.load_from_disk(str(staged / "documents")).select_columns(["text", "kind"]).to_list()
    held = set((plain.get("mix") or {}).get("held_out", []))  # held out for `eval short`: not material either
    docs = [d for i, d in enumerate(docs) if i not in held]
    n_plain = int(plain["counts"]["sequences"])
    n_synth = max(1, round(n_plain * r.rate / (1.0 - r.rate)))
    synth_dir = Path(cfg.out) / SYNTH_DIR
    if progress is not None:
        progress.start("synthesize", n_synth, "sequences")
    # a few files per worker, each holding many sequences (one collection each, named in its rows):
    # the build's work per source (extract job, caches, encoder call) is paid per file, not per sequence
    per_file = max(1, -(-n_synth // (16 * max(1, cfg.workers))))
    t = plain["tokenizer"]
    bc = BuildCache(root=str(cfg.out), extract=cfg.extract, limits=cfg.limits, fingerprint=t["fingerprint"],
                    eos_id=t["eos_id"] if t["eos_appended"] else None)
    counts = synthesize(docs, tok, r, cfg.packing.seq_len, n_synth, synth_dir, progress, cfg.workers, per_file, bc,
                        tokenizer_dir=staged / "tokenizer")
    if progress is not None:
        progress.end()
    # synthesized_sequences: those written (a sequence none of whose examples fitted has no rows)
    return {"plain_sequences": n_plain, "asked_sequences": n_synth, "synthesized_sequences": counts["sequences"],
            **counts,
            "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(r).items()},
            "tokenizer": tok, "origin": t["origin"], "files": sorted(synth_dir.glob("retrieval-*.jsonl"))}
