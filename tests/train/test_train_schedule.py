"""The warmup-stable-decay schedule, times the curriculum's per-stage scale."""

import numpy as np

from bookft.train.config import OptimizerConfig, Stage, TrainConfig
from bookft.train.optimizer import make_schedule


def test_wsd_schedule_with_curriculum_scales():
    opt = OptimizerConfig(lr=1.0, schedule="wsd", warmup_steps=10, min_lr_ratio=0.1, decay_fraction=0.2)
    train = TrainConfig(steps=100, curriculum=(Stage(seq_len=8, steps=50), Stage(seq_len=16, steps=50, lr_scale=0.5)))
    lr = make_schedule(opt, train)
    got = [float(lr(s)) for s in (0, 5, 10, 49, 50, 79, 80, 90, 100)]
    want = [0.0, 0.5, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5 * 0.55, 0.05]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
