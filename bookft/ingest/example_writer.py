"""Sequences of synthesized training examples (bookft.needles.examples) written to JSON Lines files
by a pool of worker processes, with the build's caches filled for each file.

Design choices:
- A sequence holds examples of one length filling seq_len tokens, drawn from (seed, sequence index)
  alone, so the files do not depend on the number of workers or on how many sequences go to a file.
- Each sequence's rows name their own collection (`retrieval-NNNNN`), so the packer places it
  alone at offset 0 and a curriculum row of the example length holds whole examples only.
- The workers fork (the corpus documents are shared, not pickled per task); each fills the
  extraction and token cache entries the build would make for its file (BuildCache), so the build
  that ingests the files reads them from its caches.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bookft.errors import IngestError
from bookft.ingest.config import ExtractConfig, LimitsConfig
from bookft.ingest.formats.text import COLLECTION_FIELD
from bookft.needles.examples import MARK, DocumentPool, build_example
from bookft.needles.retrieval_config import RetrievalConfig
from bookft.needles.task_examples import TASK_KINDS, generator_of, task_example
from bookft.needles.tokencount import TokenCounter
from bookft.needles.tokenizer import ModelTokenizer


@dataclass(frozen=True)
class BuildCache:
    """The caches of the build that will ingest the synthesized files (its corpus directory, extraction
    settings, tokenizer fingerprint, EOS appended or not). The synthesizer fills them for each file
    it writes, the same entries the build's extraction and tokenizer would make (same functions; the
    tokens from the encodings it measured with), so the build reads the examples from its caches."""

    root: str
    extract: ExtractConfig
    limits: LimitsConfig
    fingerprint: str
    eos_id: int | None


_WORKER: dict = {}


def _init_worker(docs, tok_json, cfg, seq_len, out_dir, n_sequences, per_file, cache, tokenizer_dir=None) -> None:
    from tokenizers import Tokenizer

    _WORKER.update(pool=DocumentPool(docs), tok=TokenCounter(Tokenizer.from_str(tok_json)), cfg=cfg, seq_len=seq_len,
                   out=Path(out_dir), n=n_sequences, per_file=per_file, cache=cache, model_tok=None, chat=False)
    if any(k in TASK_KINDS for k in cfg.kinds):  # the RULER kinds: the model's tokenizer and chat template
        if tokenizer_dir is None:
            raise IngestError(f"retrieval.kinds {list(cfg.kinds)}: the RULER kinds need the tokenizer's folder")
        model_tok = ModelTokenizer.load(tokenizer_dir)
        chat = bool(model_tok.chat_template) if cfg.chat_template is None else cfg.chat_template
        if chat and not model_tok.chat_template:
            raise IngestError(f"retrieval.chat_template is true, but the tokenizer ({tokenizer_dir}) has no chat "
                              "template; give the model's folder as tokenizer.path, or set it false")
        _WORKER.update(model_tok=model_tok, chat=chat)


def _example(rng, kind: str, room: int, seed: int, needles: int, more: tuple[str, ...] = ()):
    """One example of `kind` in `room` tokens (the RULER kinds as the eval asks them, then `more`
    follow-up questions), or None."""
    w = _WORKER
    if kind in TASK_KINDS:
        return task_example(w["tok"], w["model_tok"], rng, w["pool"], w["cfg"], kind, room, seed, w["chat"], more)
    return build_example(w["tok"], rng, w["pool"], w["cfg"], kind, room, seed, needles)


def _fill_cache(bc: BuildCache, path: Path, tok: TokenCounter) -> None:
    """Extraction and token cache entries for the synthesized file `path`, as build_corpus makes them."""
    from bookft.ingest.engine.cache import SourceCache, write_extract
    from bookft.ingest.sources import content_hash, extract, job_key, resolve_sources
    from bookft.ingest.tokenize import encode_source

    jobs, bad = resolve_sources([(str(path), "jsonl", path.stem)], bc.extract, bc.limits)
    if bad or len(jobs) != 1:
        return  # the build will report it
    h = content_hash(jobs[0])
    key = job_key(jobs[0], h)
    res = extract(jobs[0])
    res.hash = h
    cache = SourceCache(Path(bc.root))
    write_extract(cache.root, key, res)
    if res.documents:
        cache.save_tokens(bc.fingerprint, key + ("" if bc.eos_id is not None else "-noeos"),
                          *encode_source(tok, (d.text for d in res.documents), bc.eos_id))


def _follow_ups(rng, cfg: RetrievalConfig, kshare: np.ndarray, n: int) -> tuple[str, ...]:
    """The kinds of n follow-up questions, drawn by kind_shares among the RULER kinds of cfg.kinds."""
    idx = [k for k, kind in enumerate(cfg.kinds) if kind in TASK_KINDS]
    if n < 1 or not idx:
        return ()
    p = kshare[idx] / kshare[idx].sum()
    return tuple(str(cfg.kinds[idx[int(rng.choice(len(idx), p=p))]]) for _ in range(n))


def _sequence(i: int) -> tuple[list[dict], dict]:
    """Sequence i: examples of one length (drawn from (seed, i)) filling seq_len tokens, as JSON
    rows of one collection, and their counts."""
    cfg, seq_len = _WORKER["cfg"], _WORKER["seq_len"]
    lshare = np.asarray(cfg.length_shares or [1.0] * len(cfg.lengths), dtype=np.float64)
    kshare = np.asarray(cfg.kind_shares or [1.0] * len(cfg.kinds), dtype=np.float64)
    rng = np.random.default_rng([cfg.seed, 9, i])
    li = int(rng.choice(len(cfg.lengths), p=lshare / lshare.sum()))
    length, needles = int(cfg.lengths[li]), (int(cfg.needles[li]) if cfg.needles else 1)
    asks = int(cfg.asks[li]) if cfg.asks else 1
    rows, used, kinds, answer, follow = [], 0, [], 0, 0
    for j in range(seq_len // length):
        kind = str(cfg.kinds[int(rng.choice(len(cfg.kinds), p=kshare / kshare.sum()))])
        more = _follow_ups(rng, cfg, kshare, asks - 1) if kind in TASK_KINDS else ()
        ex = None
        for t in range(5):
            # the room up to the next multiple of `length`, so a short example never shifts the next one;
            # a retry draws another task (t << 44), as a task too long for the room stays too long
            ex = _example(rng, kind, (j + 1) * length - used,
                          100_000 + cfg.seed * 1_000_003 + i * 64 + j + (t << 44), needles, more)
            if ex is not None:
                break
        if ex is None:
            continue
        text, answers, n = ex
        used += n + 1
        kinds.append(kind)
        answer += sum(a1 - a0 for a0, a1 in answers)
        row = {"text": text, "title": f"retrieval {kind} {length}", MARK: json.dumps([n, answers]),
               "retrieval_kind": kind, "retrieval_length": length, COLLECTION_FIELD: f"retrieval-{i:05d}"}
        if cfg.generator != "eval":  # the default's rows stay as they were (the sample's data hash)
            row["retrieval_generator"] = generator_of(cfg, kind)
        if more:
            row["retrieval_follow_ups"] = ",".join(more)  # a document's meta keeps scalars
            follow += len(more)
        rows.append(row)
    return rows, {"length": length, "kinds": kinds, "answer_tokens": answer, "short_tokens": seq_len - used,
                  "follow_ups": follow}


def _write_file(f: int) -> list[dict]:
    """File f: the rows of sequences f * per_file, ... (each its own collection); their counts."""
    lo = f * _WORKER["per_file"]
    lines, out = [], []
    _WORKER["tok"].clear()  # the memo holds this file's encodings (for its token cache entry)
    for i in range(lo, min(lo + _WORKER["per_file"], _WORKER["n"])):
        rows, counts = _sequence(i)
        lines += [json.dumps(r) + "\n" for r in rows]
        out.append(counts)
    path = _WORKER["out"] / f"retrieval-{f:05d}.jsonl"
    path.write_text("".join(lines))
    if _WORKER["cache"] is not None:
        _fill_cache(_WORKER["cache"], path, _WORKER["tok"])
    return out


def synthesize(docs: list[dict], tok, cfg: RetrievalConfig, seq_len: int, n_sequences: int,
               out_dir: str | Path, progress=None, workers: int = 0, per_file: int = 1,
               cache: BuildCache | None = None, tokenizer_dir: str | Path | None = None) -> dict:
    """Write `n_sequences` sequences of seq_len tokens of examples into out_dir, `per_file` to a
    JSON Lines file (each sequence's rows name their own collection, `retrieval-NNNNN`), in
    `workers` processes (0 = here); return counts. The rows depend on (cfg.seed, i) only, not on
    workers or per_file. With `cache`, also fill that build's caches for every file. `tokenizer_dir`:
    the tokenizer's folder (tokenizer_config.json, chat template), which the RULER kinds need."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("retrieval-*.jsonl"):
        old.unlink()
    bad = [n for n in cfg.lengths if seq_len % n]
    if bad:
        raise IngestError(f"retrieval.lengths {bad} must divide packing.seq_len {seq_len}")
    if per_file < 1:
        raise IngestError(f"synthesize: per_file must be >= 1, got {per_file}")
    n_files = -(-n_sequences // per_file)
    counts = {"files": n_files, "sequences": 0, "examples": 0, "answer_tokens": 0, "short_tokens": 0, "follow_ups": 0,
              "per_length": {str(n): 0 for n in cfg.lengths}, "per_kind": {k: 0 for k in cfg.kinds},
              "per_generator": {}}
    init = (docs, tok.to_str(), cfg, seq_len, str(out), n_sequences, per_file, cache,
            None if tokenizer_dir is None else str(tokenizer_dir))

    def add(rs: list[dict]) -> None:
        for r in rs:
            if not r["kinds"]:
                continue  # no example fitted: the sequence wrote no rows, so the build holds none
            counts["sequences"] += 1
            counts["examples"] += len(r["kinds"])
            counts["answer_tokens"] += r["answer_tokens"]
            counts["short_tokens"] += r["short_tokens"]
            counts["follow_ups"] += r["follow_ups"]
            counts["per_length"][str(r["length"])] += 1
            for k in r["kinds"]:
                counts["per_kind"][k] += 1
                g = generator_of(cfg, k)
                counts["per_generator"][g] = counts["per_generator"].get(g, 0) + 1
        if progress is not None:
            progress.advance(len(rs), examples=sum(len(r["kinds"]) for r in rs))

    if workers <= 1 or n_files < 2:
        _init_worker(*init)
        for f in range(n_files):
            add(_write_file(f))
        return counts
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("fork")  # the documents are shared, not pickled per task
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                             initargs=init) as ex:
        for r in ex.map(_write_file, range(n_files), chunksize=max(1, 8 // per_file)):
            add(r)
    return counts
