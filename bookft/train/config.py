"""Run configuration: the sections `bookft train` reads from configs/*.yaml.

One frozen keyword-only dataclass per concern; `RunConfig` composes them. Model, attention and
parallel sections live with their packages; data, optimizer, train and checkpoint live here. The
eval section's dataclass lives in bookft/needles/eval_config.py: this layer types it at load like
every other section (and the probe and the retrieval check read it), but may not import eval.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bookft.attention.config import AttentionConfig
from bookft.config import load, to_dict
from bookft.errors import ConfigError
from bookft.model.config import ModelConfig
from bookft.needles.eval_config import EvalConfig
from bookft.parallel.config import ParallelConfig


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    corpus: str = "data/sample"  # corpus dir (its `current` version is pinned at start) or version dir
    batch_size: int = 1  # sequences of `seq_len` tokens per optimizer step (global, all hosts)
    seq_len: int | None = None  # None = the corpus's seq_len; smaller values cut sequences into rows
    seed: int = 0  # shuffling seed; the order is a pure function of (seed, step)
    shuffle: bool = True
    # packed rows under context parallelism (bookft/attention/balance.py): document placement then
    # block swaps, placement only, or zig-zag alone. The same math either way; only the token order
    # (so the rounding) and the per-device work differ.
    arrange: Literal["swaps", "placement", "none"] = "swaps"


@dataclass(frozen=True, kw_only=True)
class Stage:
    """One stage of a length curriculum: `steps` optimizer steps at `seq_len` tokens per row."""

    seq_len: int
    steps: int
    lr_scale: float = 1.0  # multiplies the schedule's learning rate during this stage
    # > 0: a gated stage. It ends at the first needle probe (train.probe_every) whose accuracy at the
    # longest probe length <= seq_len reaches `until`; `steps` is then its cap. Later stages move
    # earlier and the schedule (lr scales, wsd decay) follows the realised lengths (bookft/train/gate.py)
    until: float = 0.0


@dataclass(frozen=True, kw_only=True)
class OptimizerConfig:
    lr: float = 3e-4
    schedule: Literal["cosine", "constant", "wsd"] = "cosine"  # wsd: warmup, stable, then linear decay
    warmup_steps: int = 10
    min_lr_ratio: float = 0.1  # cosine floor / wsd end as a fraction of lr
    decay_fraction: float = 0.2  # wsd: the last fraction of the steps decays linearly
    b1: float = 0.9
    b2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.1
    clip_norm: float = 1.0  # global-norm clipping; 0 disables

    def validate(self) -> None:
        if not 0.0 < self.decay_fraction <= 1.0:
            raise ConfigError(f"train.optimizer.decay_fraction is a fraction in (0, 1], got {self.decay_fraction}")


@dataclass(frozen=True, kw_only=True)
class ProbeConfig:
    """The needle probe's grid (bookft/eval/probe.py): teacher-forced NIAH on the live parameters."""

    lengths: tuple[int, ...] = ()  # () = the eval section's lengths
    depths: tuple[float, ...] = (0.0, 50.0, 100.0)  # percent
    seeds: tuple[int, ...] = (100, 101)  # not the eval's seeds: the probe predicts the grid, it is not it


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    steps: int = 100
    seed: int = 0  # parameter init + RNG
    grad_accum: int = 1  # micro-batches per step (batch_size must divide by it)
    loss_chunk: int = 2048  # tokens per device per cross-entropy chunk (logits never whole)
    z_loss: float = 0.0
    on_nan: Literal["stop", "skip"] = "stop"
    log_every: int = 1
    curriculum: tuple[Stage, ...] = ()  # empty = every step at data.seq_len
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    probe_every: int = 0  # steps between needle probes (and at the end); 0 = off
    probe: ProbeConfig = field(default_factory=ProbeConfig)


@dataclass(frozen=True, kw_only=True)
class CheckpointConfig:
    every: int = 50  # steps between checkpoints (and always at the end / on SIGTERM)
    keep: int = 3
    async_save: bool = True


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    name: str = "run"
    model: ModelConfig = field(default_factory=ModelConfig)
    attention: AttentionConfig = field(default_factory=AttentionConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)  # `bookft eval niah`'s grid (and the probe's lengths)

    def validate(self) -> None:
        t = self.train
        if t.steps < 0:
            raise ConfigError(f"train.steps must be >= 0, got {t.steps}")
        if self.data.batch_size % t.grad_accum:
            raise ConfigError(
                f"data.batch_size ({self.data.batch_size}) must be divisible by train.grad_accum "
                f"({t.grad_accum})")
        if t.probe_every < 0:
            raise ConfigError(f"train.probe_every: steps between probes, >= 0 (0 = off), got {t.probe_every}")
        if t.probe_every and (not t.probe.depths or not t.probe.seeds):
            raise ConfigError("train.probe: give at least one depth and one seed")
        for i, st in enumerate(t.curriculum):
            if not 0.0 <= st.until <= 1.0:
                raise ConfigError(f"train.curriculum[{i}].until: a probe accuracy in [0, 1], got {st.until}")
            if st.until and not t.probe_every:
                raise ConfigError(f"train.curriculum[{i}].until needs the needle probe: set train.probe_every")
        if t.curriculum and sum(s.steps for s in t.curriculum) <= 0:
            raise ConfigError("train.curriculum: stages must have steps > 0")


DEFAULT_CONFIG = Path("configs/tiny-cpu.yaml")


def load_run_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """Load a run config; with no path, the built-in default `configs/tiny-cpu.yaml`."""
    if path is None:
        path = DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else _packaged_default()
    return load(RunConfig, path, overrides)


def _packaged_default() -> Path:
    here = Path(__file__).resolve().parents[2] / "configs" / "tiny-cpu.yaml"
    if not here.is_file():
        raise ConfigError("no --config given and configs/tiny-cpu.yaml not found (run from the repo root)")
    return here


def run_config_dict(cfg: RunConfig) -> dict[str, Any]:
    return to_dict(cfg)
