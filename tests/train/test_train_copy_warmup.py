"""The induction warm-up stage (`data: copy`): synthetic repeated strings, exact targets and weights,
deterministic per (seed, step, row), laid out like corpus rows under context parallelism."""

import numpy as np
import pytest

from bookft.attention.balance import unbalance
from bookft.config import from_dict
from bookft.errors import ConfigError
from bookft.train.config import RunConfig
from bookft.train.curriculum import stage_data, stage_len
from bookft.train.data import Batches, shift_targets
from bookft.train.synthetic import MIN_DOC, copy_sequence


@pytest.mark.parametrize("length", [64, 256, 1024])
def test_copy_rows_repeat_a_string_and_weigh_only_the_copy(length):
    for row in range(20):
        s = copy_sequence(3, 7, row, length, vocab_size=1000, reserved=2)
        ids, seg, pos, lw = s["input_ids"], s["segment_ids"], s["positions"], s["loss_weights"]
        assert ids.shape == seg.shape == pos.shape == lw.shape == (length,)
        assert ids.min() >= 2 and ids.max() < 1000  # no special id
        assert (seg > 0).sum() > length - MIN_DOC  # the row is filled
        for d in np.unique(seg[seg > 0]):
            at = np.flatnonzero(seg == d)
            assert np.array_equal(pos[at], np.arange(len(at)))
            w = np.flatnonzero(lw[at] > 0)  # the copy, from its 2nd token on
            assert 5 <= len(w) <= 23 and np.all(np.diff(w) == 1)
            m = len(w) + 1
            c0 = w[0] - 1  # the copy's first token
            src = np.flatnonzero([np.array_equal(ids[at][j:j + m], ids[at][c0:c0 + m]) for j in range(c0)])
            assert src.size >= 1  # the string occurred earlier in the same document
        assert np.all(lw[seg == 0] == 0)
    a = copy_sequence(3, 7, 1, 256, 1000)
    b = copy_sequence(3, 7, 1, 256, 1000)
    c = copy_sequence(3, 8, 1, 256, 1000)
    assert all(np.array_equal(a[k], b[k]) for k in a) and not np.array_equal(a["input_ids"], c["input_ids"])


class _Corpus:
    path = "mem"
    seq_len = 512
    vocab_size = 300
    manifest = {"tokenizer": {"eos_id": 0, "pad_id": 1}}

    def __len__(self):
        return 4


def test_batches_copy_stage_shifts_and_balances():
    b = Batches(_Corpus(), batch_size=1, seed=5, load_balance_cp=4, balance_block=16)
    got = b.rows_for_step(2, 128, data="copy")  # 4 rows of 128 in zig-zag stored order
    assert got["input_ids"].shape == (4, 128) and b.reserved_ids == 2
    for r in range(4):
        nat = {k: unbalance(v[r][None], 4, axis=1)[0] for k, v in got.items()}
        seq = shift_targets(copy_sequence(5, 2, r, 128, 300, reserved=2))
        # a permutation of the natural row's (position, token, target, weight): documents are only
        # moved and renumbered (padding becomes singleton segments), never changed
        key = lambda d: sorted(zip(d["positions"].tolist(), d["input_ids"].tolist(), d["targets"].tolist(),
                                   d["weights"].tolist(), strict=True))
        assert key(nat) == key(seq)
        assert np.isclose(nat["weights"].sum(), seq["weights"].sum()) and seq["weights"].sum() >= 5


def test_stage_data_and_config():
    cfg = from_dict(RunConfig, {"train": {"steps": 10, "curriculum": [
        {"seq_len": 64, "steps": 3, "data": "copy"}, {"seq_len": 128, "steps": 7}]}})
    assert [stage_data(cfg, s) for s in (0, 2, 3, 9, 20)] == ["copy", "copy", "corpus", "corpus", "corpus"]
    assert [stage_len(cfg, s, 512) for s in (0, 3)] == [64, 128]
    with pytest.raises(ConfigError, match="data"):
        from_dict(RunConfig, {"train": {"curriculum": [{"seq_len": 64, "steps": 3, "data": "random"}]}})
    with pytest.raises(ConfigError, match="probe_every"):
        from_dict(RunConfig, {"train": {"probe_every": -1}}).validate()


def test_gate_ends_a_stage_and_shifts_the_rest():
    from bookft.train import gate

    cfg = from_dict(RunConfig, {"train": {"steps": 100, "probe_every": 5, "curriculum": [
        {"seq_len": 64, "steps": 40, "data": "copy", "until": 0.9}, {"seq_len": 128, "steps": 30, "until": 0.5},
        {"seq_len": 256, "steps": 30}]}})
    cfg.validate()
    assert gate.gate_length(64, {"probe/64": 1.0, "probe/256": 0.0}) == "probe/64"
    assert gate.gate_length(128, {"probe/64": 1.0, "probe/256": 0.0}) == "probe/64"
    assert gate.gate_length(32, {"probe/64": 1.0, "probe/256": 0.0}) == "probe/64"  # none fits: the shortest
    assert not gate.passed(cfg, 10, {"probe/64": 0.8})
    assert gate.passed(cfg, 10, {"probe/64": 0.9})
    cfg2 = gate.end_stage(cfg, 10)
    assert [s.steps for s in cfg2.train.curriculum] == [10, 30, 30] and cfg2.train.steps == 70
    assert stage_len(cfg2, 10, 512) == 128 and stage_data(cfg2, 9) == "copy"
    assert not gate.passed(cfg2, 40, {"probe/128": 1.0})  # the stage's last step: nothing to end
    assert gate.passed(cfg2, 20, {"probe/128": 0.5})
    cfg3 = gate.end_stage(cfg2, 20)
    assert [s.steps for s in cfg3.train.curriculum] == [10, 10, 30] and cfg3.train.steps == 50
    assert not gate.passed(cfg3, 30, {"probe/256": 1.0})  # the last stage is not gated
    assert gate.with_stage_steps(cfg, [10, 10, 30]) == cfg3
    with pytest.raises(ConfigError, match="probe_every"):
        from_dict(RunConfig, {"train": {"curriculum": [{"seq_len": 64, "steps": 3, "until": 0.9}]}}).validate()
