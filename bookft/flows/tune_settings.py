"""The tune flow's settings (bookft/flows/tune.py): its two sizes and what the base evals' cache key holds.

Design choices:
- Sizes: `full` runs the protocol of docs/benchmarks.md at 4,096 tokens (50 draws per headline
  task, 20 per untrained family, on the test split; ppl at 1K/2K/4K: hours on 2 CPU cores); `small`
  (minutes) trains a few steps at 1,024 with LoRA and local attention on one device, with a few
  draws, documents cut to their first characters. FlowSettings fields can be changed on top of either
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
    lengths: tuple[int, ...]  # eval lengths; the longest is data.seq_len and the headline's
    # seeds per depth: a task's draws per length are len(depths) x len(seeds)
    seeds: tuple[int, ...]  # of the headline tasks (`tasks`)
    family_seeds: tuple[int, ...]  # of the untrained families
    ppl_lengths: tuple[int, ...]
    depths: tuple[float, ...] = (10.0, 30.0, 50.0, 70.0, 90.0)
    tasks: tuple[str, ...] = ("multikey", "vartrack")  # the headline: kinds the training examples ask
    families: tuple[str, ...] = ("cwe", "niah_fact", "multikey_uuid", "hops")  # no training example asks
    split: str = "test"  # the frozen split the flow reports on (bookft/eval/split.py)
    scoring: tuple[str, ...] = ("strict", "ruler")
    fewshot: int = 3  # solved examples in the few-shot base's prompt; 0 = no few-shot baseline
    fewshot_tokens: int = 512
    # the training mix (ProLong): the documents packed to the longest length, a share of short
    # documents of other kinds (--short; short_share of the tokens) and a minority of examples
    # synthesized by the training generator (rate: their share of the published sequences)
    generator: str = "train"
    train_kinds: tuple[str, ...] = ("niah", "multikey", "multivalue", "vartrack")
    kind_shares: tuple[float, ...] = (0.1, 0.4, 0.1, 0.4)  # relative share of examples per train kind
    rate: float = 0.4
    short_share: float = 0.2
    task_distractors: int = 7  # keyed distractors per multikey training example
    # example lengths (each dividing the longest eval length; () = the eval lengths) and the share of
    # synthesized sequences per length: a sequence of 4,096 tokens holds four examples of 1,024
    example_lengths: tuple[int, ...] = ()
    length_shares: tuple[float, ...] = ()
    # questions asked of one example's context, one count per example length (() = 1 each): the later
    # ones follow-up turns after the first answer (retrieval.asks), more far retrievals per sequence
    example_asks: tuple[int, ...] = ()
    ppl_chars: int = 40_000  # first characters of each held-out document scored by perplexity
    short_docs: int = 12  # held-out passages for `bookft eval short`
    short_chars: int = 1_500
    short_tokens: int = 512
    doc_chars: int | None = None  # documents cut to their first N characters (None: whole)
    steps: int | None = None  # None: the preset's train.steps
    overrides: tuple[str, ...] = ()  # run-config overrides (train and evals)
    workers: int = 2  # ingest processes

    def seeds_of(self, task: str) -> tuple[int, ...]:
        return self.seeds if task in self.tasks else self.family_seeds

    @property
    def models(self) -> tuple[str, ...]:
        """The models the flow scores, in the report's order."""
        return ("base", "fewshot", "tuned") if self.fewshot else ("base", "tuned")


SIZES = {
    # 50 draws per headline task (5 depths x 10 seeds), 20 per family, at 4,096 tokens
    "full": FlowSettings(size="full", lengths=(4096,), seeds=tuple(range(10)), family_seeds=tuple(range(4)),
                         ppl_lengths=(1024, 2048, 4096), example_lengths=(1024, 2048, 4096),
                         length_shares=(0.3, 0.3, 0.4)),
    # one solved example: three do not fit beside a task at 1,024 tokens
    "small": FlowSettings(size="small", lengths=(1024,), seeds=(0, 1), family_seeds=(0,), depths=(10.0, 50.0, 90.0),
                          ppl_lengths=(512, 1024), ppl_chars=8_000, short_docs=6, short_chars=1_000,
                          short_tokens=256, doc_chars=120_000, steps=8, example_lengths=(512, 1024),
                          length_shares=(0.5, 0.5), task_distractors=3, fewshot=1,
                          overrides=SMALL_ATTENTION + SMALL_LORA),
}


def settings_for(size: str, changes: dict | None = None) -> FlowSettings:
    if size not in SIZES:
        from bookft.errors import ConfigError

        raise ConfigError(f"--size: small or full, got {size!r}")
    return dataclasses.replace(SIZES[size], **(changes or {}))


DEV_SEEDS = 8  # seeds per depth on the dev split: what its one book holds at 4K without overlap


def dev_settings(s: FlowSettings) -> FlowSettings:
    """The tuned model's dev grids beside a flow (run_tune_flow's dev_grids): the headline tasks on the
    dev split (bookft/eval/split.py: its own seeds and book), at most DEV_SEEDS seeds per depth, no
    families."""
    return dataclasses.replace(s, split="dev", seeds=s.seeds[:DEV_SEEDS], families=())


def base_key_settings(s: FlowSettings) -> dict[str, Any]:
    """The flow settings that the base evals' cache key holds (base_cache.cache_key)."""
    keep = ("lengths", "depths", "seeds", "family_seeds", "tasks", "families", "split", "scoring", "fewshot",
            "fewshot_tokens", "ppl_chars")
    return {k: v for k, v in dataclasses.asdict(s).items() if k in keep}
