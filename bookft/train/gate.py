"""Probe-gated curriculum stages (`until:` on a stage).

A fixed curriculum gives every run the same steps per stage, but the step at which a model trained
from scratch finds the copy varies with the seed and the data draw (step 300-450 of the default
recipe, or never within the stage; docs/configuration.md, "Why the defaults"). A gated stage ends
as soon as the needle probe says it has done its job: a fast draw moves on, a slow one gets the
steps it needs up to the stage's cap.

Design choices:
- The gate reads the probe row of the step (bookft/eval/probe.py): the accuracy at the longest
  probe length not above the stage's row length (the shortest probe length if none is), all
  depths and seeds together; the stage ends when it reaches `until`.
- The realised curriculum replaces the configured one: the ended stage's `steps` become what it
  took, later stages keep their caps and move earlier, and `train.steps` shrinks by the saving,
  so the schedule (stage lr scales, the wsd decay at the end) is rebuilt from it and the loop's
  total follows. Ending a stage early re-jits the step for the new schedule (same state layout).
- Resume: checkpoints record the realised stage lengths (`curriculum_steps` in their meta); a
  restored run rebuilds the same curriculum before its first step, so it continues exactly.
"""

from __future__ import annotations

import dataclasses

from bookft.train.config import RunConfig


def stage_index(cfg: RunConfig, step: int) -> int | None:
    """Index of the curriculum stage of `step` (0-based; past the end, the last), None without one."""
    if not cfg.train.curriculum:
        return None
    end = 0
    for i, stage in enumerate(cfg.train.curriculum):
        end += stage.steps
        if step < end:
            return i
    return len(cfg.train.curriculum) - 1


def stage_start(cfg: RunConfig, index: int) -> int:
    return sum(s.steps for s in cfg.train.curriculum[:index])


def with_stage_steps(cfg: RunConfig, steps: list[int]) -> RunConfig:
    """`cfg` with the curriculum's stage lengths replaced and train.steps reduced by what they saved."""
    old = cfg.train.curriculum
    if [s.steps for s in old] == list(steps):
        return cfg
    stages = tuple(dataclasses.replace(s, steps=int(n)) for s, n in zip(old, steps, strict=True))
    saved = sum(s.steps for s in old) - sum(steps)
    train = dataclasses.replace(cfg.train, curriculum=stages, steps=max(cfg.train.steps - saved, 0))
    return dataclasses.replace(cfg, train=train)


def with_total_steps(cfg: RunConfig, steps: int) -> RunConfig:
    """`cfg` running exactly `steps` steps in all: train.steps becomes `steps`, and a curriculum whose
    stages end before it has its last stage extended to reach it (the schedule follows)."""
    stages = cfg.train.curriculum
    end = sum(s.steps for s in stages)
    if stages and end < steps:
        stages = (*stages[:-1], dataclasses.replace(stages[-1], steps=stages[-1].steps + steps - end))
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=steps, curriculum=stages))


def gate_length(stage_len: int, metrics: dict) -> str | None:
    """The probe key a stage of `stage_len` tokens is gated on (None when the row has no probe)."""
    lengths = sorted(int(k[6:]) for k in metrics if k.startswith("probe/") and k[6:].isdigit())
    if not lengths:
        return None
    fit = [n for n in lengths if n <= stage_len]
    return f"probe/{fit[-1] if fit else lengths[0]}"


def passed(cfg: RunConfig, step: int, metrics: dict) -> bool:
    """After `step` steps (1-based count): does the probe in `metrics` end the current gated stage?"""
    i = stage_index(cfg, step - 1)
    if i is None:
        return False
    stage = cfg.train.curriculum[i]
    if not stage.until or step >= stage_start(cfg, i) + stage.steps:
        return False
    key = gate_length(stage.seq_len, metrics)
    return key is not None and metrics[key] >= stage.until


def end_stage(cfg: RunConfig, step: int) -> RunConfig:
    """The curriculum with the stage of step `step - 1` ending after `step` steps."""
    i = stage_index(cfg, step - 1)
    steps = [s.steps for s in cfg.train.curriculum]
    steps[i] = step - stage_start(cfg, i)
    return with_stage_steps(cfg, steps)
