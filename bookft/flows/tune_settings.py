"""The tune flow's settings (bookft/flows/tune.py): its two sizes and what the base evals' cache key holds.

Design choices:
- Sizes: `full` is the preset (2,048/4,096 tokens, 5 seeds, ppl at 1K/2K/4K: hours on 2 CPU
  cores); `small` (minutes) trains a few steps at 256/512 with local attention on one device, one
  seed, documents cut to their first characters. FlowSettings fields can be changed on top of either
  (`run_tune_flow(..., changes={...})`; the tests shrink `small` further).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_PRESET = Path("configs/smollm2-135m-books.yaml")
SMALL_ATTENTION = ("attention.strategy=local", "parallel.mesh.context=1", "parallel.cpu_devices=1")
# the small size's eight steps tune LoRA adapters, the recipe its documented figures were measured
# with, and hold only adapters' optimizer state: a user's own larger model fits where it loads
SMALL_LORA = ("model.lora.rank=16", "model.lora.alpha=32", "model.lora.targets=[q,k,v,o,gate,up,down]",
              "train.optimizer.lr=1e-3")


@dataclass(frozen=True, kw_only=True)
class FlowSettings:
    size: str
    lengths: tuple[int, ...]  # eval grid lengths; retrieval example lengths; the longest is data.seq_len
    seeds: tuple[int, ...]  # eval seeds per cell
    ppl_lengths: tuple[int, ...]
    depths: tuple[float, ...] = (10.0, 50.0, 90.0)
    tasks: tuple[str, ...] = ("niah", "multikey", "vartrack", "multiquery")
    transfer: tuple[str, ...] = ("niah", "multiquery")  # tasks no training example asks
    train_kinds: tuple[str, ...] = ("multikey", "multivalue", "vartrack")
    kind_shares: tuple[float, ...] = ()  # relative share of examples per train kind; () = equal
    rate: float = 0.5  # share of the training sequences that are synthesized examples
    task_distractors: int = 3  # keyed distractors per multikey training example (the eval's grid has 3)
    # example lengths (each dividing the longest eval length; () = the eval lengths) and the share of
    # synthesized sequences per length: a sequence of 4,096 tokens holds four examples of 1,024
    example_lengths: tuple[int, ...] = ()
    length_shares: tuple[float, ...] = ()
    ppl_chars: int = 40_000  # first characters of each held-out document scored by perplexity
    short_docs: int = 12  # held-out passages for `bookft eval short`
    short_chars: int = 1_500
    short_tokens: int = 512
    doc_chars: int | None = None  # documents cut to their first N characters (None: whole)
    steps: int | None = None  # None: the preset's train.steps
    overrides: tuple[str, ...] = ()  # run-config overrides (train and evals)
    workers: int = 2  # ingest processes


SIZES = {
    "full": FlowSettings(size="full", lengths=(2048, 4096), seeds=(0, 1, 2, 3, 4), ppl_lengths=(1024, 2048, 4096),
                         rate=0.8, kind_shares=(0.45, 0.1, 0.45), task_distractors=7,
                         example_lengths=(1024, 2048, 4096),
                         length_shares=(0.2, 0.3, 0.5)),
    "small": FlowSettings(size="small", lengths=(256, 512), seeds=(0,), ppl_lengths=(256, 512), ppl_chars=6_000,
                          short_docs=6, short_chars=1_000, short_tokens=256, doc_chars=120_000, steps=8,
                          overrides=SMALL_ATTENTION + SMALL_LORA),
}


def settings_for(size: str, changes: dict | None = None) -> FlowSettings:
    if size not in SIZES:
        from bookft.errors import ConfigError

        raise ConfigError(f"--size: small or full, got {size!r}")
    return dataclasses.replace(SIZES[size], **(changes or {}))


def base_key_settings(s: FlowSettings) -> dict[str, Any]:
    """The flow settings that the base evals' cache key holds (base_cache.cache_key)."""
    return {k: v for k, v in dataclasses.asdict(s).items() if k in ("lengths", "depths", "seeds", "tasks", "ppl_chars")}
