"""Which stage of the length curriculum a step is in, and its row length."""

from __future__ import annotations

from bookft.train.config import RunConfig
from bookft.train.gate import stage_index


def stage_at(cfg: RunConfig, step: int):
    """The curriculum stage of `step` (0-based; past the end, the last stage), or None without one."""
    i = stage_index(cfg, step)
    return None if i is None else cfg.train.curriculum[i]


def stage_len(cfg: RunConfig, step: int, corpus_len: int) -> int:
    """Row length of `step` (0-based) under the curriculum, else data.seq_len or the corpus's."""
    stage = stage_at(cfg, step)
    return stage.seq_len if stage is not None else (cfg.data.seq_len or corpus_len)
