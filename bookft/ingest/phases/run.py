"""`build_pass`: one pass of the build, its phases in order, then the atomic publish of the version.

The phases (each a function over one `Build`, state.py): resolve and extract (extract.py), dedup
(dedup.py), tokenizer and tokenize (tokens.py), pack and write (write.py); then the manifest
(manifest.py) and the publish: the new version is complete in a staging folder, `before_publish`
may veto it (or add files to it), its inventory is sealed into the manifest (corpus/integrity.py),
and it is renamed into place (corpus/store.py), so `current` never points at a half-written version.
What dead builds left (staging folders, broken versions) is removed by `build_corpus` first.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bookft.corpus.integrity import REUSE_TOKENIZER, seal
from bookft.corpus.store import FlatFile, check_corpus_dir, publish, write_json
from bookft.errors import IngestError
from bookft.ingest.config import IngestConfig
from bookft.ingest.engine.cache import SourceCache
from bookft.ingest.phases import dedup, extract, tokens, write
from bookft.ingest.phases.manifest import build_manifest
from bookft.ingest.phases.state import Build, LossWeightsFn, NullProgress


def build_pass(cfg: IngestConfig, progress=None, *, sources: list[tuple] | None = None,
               unmixed: list[tuple] | None = None, loss_weights: LossWeightsFn | None = None,
               tokenizer=None, before_publish: Callable[[Path, dict], bool] | None = None,
               previous: dict | None = None) -> dict:
    """One pass of the build: a new corpus version in `cfg.out`, published unless `before_publish` says
    no; returns its manifest. Raises IngestError if nothing could be ingested. `build_corpus`
    (ingest/corpus_build.py) is the whole build: this pass, plus the synthesis phase when the
    definition asks for training examples.

    sources: [(path, kind, collection)] or [(path, kind, collection, pdf_password)] besides cfg.sources.
    unmixed: sources like those, that a mix (ingest/mix.py) packs once each, whole, outside its shares
    (the synthesized retrieval examples, whose share is retrieval.rate); without a mix, plain sources.

    loss_weights(document, token_ids int32 [n]) -> float32 [n] or None (= all 1.0): the hook for
    synthesized retrieval examples; when given, sequences carry a `loss_weights` column.

    tokenizer: (tokenizers.Tokenizer, origin) to use as it is (the synthesis phase's second pass keeps
    the first pass's tokenizer), instead of the configured or trained one.

    before_publish(staged_dir, manifest) -> bool: called when the new version is complete in its staging
    folder, before the rename (refresh pipelines validate here). False discards it (the returned
    manifest then has `path` None); an exception discards it and propagates.

    previous: the current version's manifest, given by a non-strict refresh: a source that resolves to no
    file keeps that version's documents of it, marked stale (stale.py).
    """
    t0 = time.perf_counter()
    root = Path(cfg.out)
    check_corpus_dir(root)
    if cfg.engine == "ray":  # fail before any work when the extra is missing
        from bookft.ingest.engine.ray_engine import require_ray

        require_ray()
    root.mkdir(parents=True, exist_ok=True)
    b = Build(cfg=cfg, progress=progress or NullProgress(), root=root, cache=SourceCache(root),
               loss_weights=loss_weights, fixed_tokenizer=tokenizer, previous=previous)
    extract.resolve(b, sources, unmixed)
    with b.phase("extract"):
        extract.run(b)
    extract.collect_entries(b)
    with b.phase("dedup"):
        dedup.run(b)
    if b.n_docs == 0:
        reasons = "; ".join(f"{e['source']}: {e['reason']}" for e in b.entries if e["status"] != "ingested")[:2000]
        raise IngestError(f"nothing could be ingested from {len(b.specs)} source(s): {reasons or 'no documents'}")
    with b.phase("tokenizer"):
        tokens.tokenizer(b)
    with b.phase("tokenize"):
        tokens.tokenize(b)
    token_file = FlatFile(b.tok_file, np.int32)  # read by slices: the token file never becomes resident
    doc_off_a = np.array(b.doc_off, dtype=np.int64)
    with b.phase("pack"):
        write.pack(b, token_file, doc_off_a)
    with b.phase("write"):
        write.write(b, token_file, doc_off_a)
    return _publish(b, root, t0, before_publish)


def _publish(b: Build, root: Path, t0: float, before_publish: Callable[[Path, dict], bool] | None) -> dict:
    """The manifest into the staged version, `before_publish`'s veto, then the atomic rename; the
    extraction and token caches keep only what this version used."""
    manifest = build_manifest(b)
    n = max([int(x) for x in os.listdir(root / "versions") if x.isdigit()], default=0) + 1
    manifest["version"] = n
    manifest["timings"]["total"] = round(time.perf_counter() - t0, 3)
    staged = b.staged
    write_json(staged / "manifest.json", manifest)
    if before_publish is not None:
        try:
            keep_it = before_publish(staged, manifest)
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)
            raise
        if not keep_it:
            shutil.rmtree(staged, ignore_errors=True)
            manifest["path"] = None
            return manifest
    seal(staged, manifest)  # the inventory of everything before_publish added too, then the rename
    final = publish(root, staged, n)
    shutil.rmtree(root / "cache" / REUSE_TOKENIZER, ignore_errors=True)  # a removed version's, reused or not
    b.cache.prune(set(b.keys) | {k + "-noeos" for k in b.keys}, b.fp)
    manifest["path"] = str(final)
    return manifest
