"""Do a corpus's synthesized retrieval examples and the run that trains on them agree? Checked when
`bookft train` starts, before anything compiles.

A corpus definition's `retrieval:` section (bookft/needles/retrieval_config.py) is recorded in the
corpus version's manifest.json (`config.retrieval`; also retrieval.json's `settings`). Where the
run config must agree with it:
- Phrasing. Examples of a kind whose wording `phrasing` sets (magic_number, and the RULER tasks
  niah and multikey under retrieval.generator: eval) teach the eval's wording: retrieval.phrasing
  must equal eval.phrasing, or the model is scored on a wording it was never taught.
- Lengths. A row holds whole examples only of a length that divides it (rows are cut at multiples
  of their length; bookft/train/data.py, Batches.eligible), so every row length the run trains at
  (each curriculum stage's seq_len; without a curriculum data.seq_len, else the corpus's) needs
  one such retrieval length, at most the row's; else that stage trains on no example.

Design choices:
- A version has synthesized examples when it has retrieval.json (as Batches.eligible reads it);
  without it there is nothing to check.
- The section is read as plain JSON (kinds, lengths, phrasing; RetrievalConfig's defaults for
  what is missing), not strictly: a corpus built by an older bookft, with other keys, still trains.
- Every disagreement is listed in one ConfigError that names both files' keys and what to change.
  This is the train layer: it reads the corpus through the Corpus object and imports neither eval
  nor ingest; the eval section's type is bookft/needles/eval_config.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from bookft.errors import ConfigError
from bookft.needles.retrieval_config import RetrievalConfig
from bookft.train.config import RunConfig

PHRASED_KINDS = ("magic_number", "niah", "multikey")  # kinds whose wording retrieval.phrasing sets


def corpus_retrieval(corpus) -> RetrievalConfig | None:
    """The `retrieval:` section a corpus version was built with (kinds, lengths and phrasing read;
    the rest defaults), or None when the version has no synthesized examples."""
    path = Path(corpus.path)
    if not (path / "retrieval.json").is_file():
        return None
    section = (getattr(corpus, "manifest", None) or {}).get("config", {}).get("retrieval")
    if not isinstance(section, dict):
        try:
            section = json.loads((path / "retrieval.json").read_text()).get("settings")
        except (OSError, ValueError, AttributeError):
            section = None
    if not isinstance(section, dict):
        return None
    d = RetrievalConfig()
    return RetrievalConfig(kinds=tuple(section.get("kinds") or d.kinds),
                           lengths=tuple(int(n) for n in section.get("lengths") or d.lengths),
                           phrasing=section.get("phrasing") or d.phrasing,
                           generator=section.get("generator") or d.generator)


def row_lengths(cfg: RunConfig, corpus_seq_len: int) -> list[tuple[str, int]]:
    """(the run config key, row length) of every row length the run trains at."""
    stages = cfg.train.curriculum
    if stages:
        return [(f"train.curriculum[{i}].seq_len", s.seq_len) for i, s in enumerate(stages) if s.steps > 0]
    if cfg.data.seq_len:
        return [("data.seq_len", cfg.data.seq_len)]
    return [("data.seq_len (unset: the corpus's seq_len)", corpus_seq_len)]


def disagreements(cfg: RunConfig, retrieval: RetrievalConfig, corpus_seq_len: int) -> list[str]:
    """What in the run config `cfg` disagrees with a corpus built with `retrieval`, one line each."""
    out = []
    # under the training generator the RULER kinds have wording of their own (bookft/needles/train/)
    phrased = [k for k in retrieval.kinds
               if k in PHRASED_KINDS and (k == "magic_number" or retrieval.generator == "eval")]
    if phrased and retrieval.phrasing != cfg.eval.phrasing:
        p, e = retrieval.phrasing, cfg.eval.phrasing
        out.append(f"retrieval.phrasing is {p} in the corpus definition (its {', '.join(phrased)} examples teach "
                   f"that wording) but eval.phrasing is {e} in the run config: set eval.phrasing: {p} in the run "
                   f"config (--set eval.phrasing={p}), or retrieval.phrasing: {e} in the corpus definition and "
                   "rebuild the corpus")
    lengths = sorted(set(retrieval.lengths))
    for key, n in row_lengths(cfg, corpus_seq_len):
        if not any(m <= n and n % m == 0 for m in lengths):
            out.append(f"{key} is {n} in the run config, but no retrieval example fits rows of {n} tokens "
                       f"(retrieval.lengths is {lengths} in the corpus definition; a row holds whole examples of "
                       f"a length that divides it), so it would train on no example: make {key} a multiple of "
                       f"one of {lengths}, or add a length that divides {n} to retrieval.lengths and rebuild "
                       "the corpus")
    return out


def check_retrieval_agreement(cfg: RunConfig, corpus) -> None:
    """ConfigError when `corpus` has synthesized examples that the run config `cfg` disagrees with."""
    retrieval = corpus_retrieval(corpus)
    if retrieval is None:
        return
    problems = disagreements(cfg, retrieval, int(corpus.seq_len))
    if problems:
        where = Path(corpus.path) / "manifest.json"
        raise ConfigError(f"the run config ({cfg.name}) and the corpus's synthesized retrieval examples "
                          f"(the `retrieval:` section of its definition, recorded in {where} under "
                          "config.retrieval) disagree:\n- " + "\n- ".join(problems))
