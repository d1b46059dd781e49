"""AdamW with a warmup + cosine, constant or warmup-stable-decay schedule, clipping, curriculum lr scales.

Master weights stay in the parameter dtype (fp32 by default) and compute runs in the model's
compute dtype (bf16), so no separate master copy is needed. Gradient accumulation is done by the
train step (a scan over micro-batches summing exact loss numerators), not by optax.MultiSteps,
so one optimizer step is one step of the schedule.
"""

from __future__ import annotations

import jax.numpy as jnp
import optax

from bookft.train.config import OptimizerConfig, TrainConfig


def stage_lr_scale(train: TrainConfig, step):
    """Curriculum: the lr multiplier of the stage that `step` (0-based, traced ok) belongs to."""
    if not train.curriculum:
        return jnp.ones((), jnp.float32)
    scale = jnp.asarray(train.curriculum[-1].lr_scale, jnp.float32)
    end = sum(s.steps for s in train.curriculum)
    for stage in reversed(train.curriculum):
        start = end - stage.steps
        scale = jnp.where(step < end, stage.lr_scale, scale) if start >= 0 else scale
        end = start
    return scale


def make_schedule(opt: OptimizerConfig, train: TrainConfig):
    total = max(train.steps, 1)
    warm = min(opt.warmup_steps, total)
    if opt.schedule == "constant":
        base = optax.join_schedules(
            [optax.linear_schedule(0.0, opt.lr, max(warm, 1)), optax.constant_schedule(opt.lr)], [warm])
    elif opt.schedule == "wsd":  # warmup-stable-decay (Hu et al. 2024, MiniCPM): the end settles the run
        decay = max(1, round(total * opt.decay_fraction))
        start = max(warm, total - decay)
        base = optax.join_schedules(
            [optax.linear_schedule(0.0, opt.lr, max(warm, 1)), optax.constant_schedule(opt.lr),
             optax.linear_schedule(opt.lr, opt.lr * opt.min_lr_ratio, max(total - start, 1))], [warm, start])
    else:
        base = optax.warmup_cosine_decay_schedule(
            init_value=0.0, peak_value=opt.lr, warmup_steps=max(warm, 1), decay_steps=max(total, warm + 1),
            end_value=opt.lr * opt.min_lr_ratio)

    def schedule(step):
        return base(step) * stage_lr_scale(train, step)

    return schedule


def make_optimizer(train: TrainConfig, trainable_mask=None):
    """optax transformation; `trainable_mask` (pytree of bools like params) freezes the rest."""
    opt = train.optimizer
    schedule = make_schedule(opt, train)
    parts = []
    if opt.clip_norm > 0:
        parts.append(optax.clip_by_global_norm(opt.clip_norm))
    parts.append(optax.adamw(schedule, b1=opt.b1, b2=opt.b2, eps=opt.eps, weight_decay=opt.weight_decay))
    tx = optax.chain(*parts)
    if trainable_mask is not None:
        tx = optax.multi_transform({True: tx, False: optax.set_to_zero()}, trainable_mask)
    return tx, schedule
