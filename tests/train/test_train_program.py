"""The train program and the attention resolution it is built on (issue 19).

- attention.resolve: local on one context shard, zig-zag only when not local, the sequence multiple;
  `usp` without a context_ulysses axis splits the context axis and says so; `auto` chooses and says why.
- make_attention names its layout: no default for load_balanced.
- Program.init_state: every parameter created directly in its sharding, with the values init_model
  draws eagerly, and without XLA's resharding warnings.
"""

import dataclasses

import jax
import numpy as np
import pytest
from flax import nnx

from bookft.attention import make_attention, resolve
from bookft.attention.config import AttentionConfig
from bookft.attention.resolution import auto_strategy, choose_axes
from bookft.errors import AttentionError, ConfigError
from bookft.parallel.config import ParallelConfig
from bookft.parallel.mesh import make_mesh
from bookft.train.config import load_run_config


def mesh_of(**axes):
    n = int(np.prod(list(axes.values())))
    return make_mesh(ParallelConfig(mesh=axes), jax.devices()[:n])


def test_resolve_demotes_balances_and_gives_the_multiple():
    ring = AttentionConfig(strategy="ring", load_balance=True)
    one = resolve(ring, mesh_of(data=1, fsdp=2, context=1))
    assert (one.strategy, one.balance, one.seq_multiple, one.mesh) == ("local", 1, 1, None)
    four = resolve(ring, mesh_of(data=1, fsdp=1, context=4))
    assert (four.strategy, four.cp, four.balance, four.seq_multiple) == ("ring", 4, 4, 8) and four.load_balanced
    plain = resolve(dataclasses.replace(ring, load_balance=False), mesh_of(data=1, fsdp=1, context=4))
    assert (plain.balance, plain.seq_multiple) == (1, 4)
    asked_local = resolve(dataclasses.replace(ring, strategy="local"), mesh_of(data=1, fsdp=1, context=4))
    assert (asked_local.strategy, asked_local.balance, asked_local.seq_multiple) == ("local", 1, 4)
    with pytest.raises(AttentionError, match="not divisible by 8 .*zig-zag"):
        four.check_seq_len(100)
    four.check_seq_len(128)
    assert four.attend().spec.load_balanced and not plain.attend().spec.load_balanced
    with pytest.raises(ConfigError, match="sliding-window layers need"):
        resolve(dataclasses.replace(ring, kernel="splash"), None, sliding_window=64, layer_windows=(64, 0))


def test_usp_without_an_ulysses_axis_splits_the_context_axis():
    usp = AttentionConfig(strategy="usp")
    c = choose_axes(usp, {"data": 1, "fsdp": 1, "context": 8}, num_heads=8, num_kv_heads=2)
    assert c.strategy == "usp" and c.sizes == {"data": 1, "fsdp": 1, "context": 4, "context_ulysses": 2}
    assert "ring 4 x ulysses 2" in c.why and "context_ulysses" in c.why
    given = {"data": 1, "context": 2, "context_ulysses": 2}
    assert choose_axes(usp, given, num_heads=8, num_kv_heads=2) == type(c)("usp", given, "")


def test_auto_chooses_from_heads_and_degree_and_says_why():
    assert auto_strategy(1, 8, 8, "xla")[0] == "local"
    assert auto_strategy(4, 8, 4, "xla")[0] == "ulysses"
    s, why = auto_strategy(8, 32, 2, "splash")
    assert s == "usp" and "ulysses over 2" in why and "ring over the other 4" in why
    assert auto_strategy(4, 9, 3, "xla")[0] == "ring"
    auto = AttentionConfig(strategy="auto")
    c = choose_axes(auto, {"data": 1, "context": 8}, num_heads=32, num_kv_heads=2)
    assert c.strategy == "usp" and c.sizes["context_ulysses"] == 2 and c.why.startswith("auto: usp")
    with pytest.raises(AttentionError, match="auto is chosen before the mesh"):
        resolve(auto, mesh_of(data=1, context=2))


def test_make_attention_requires_the_layout():
    with pytest.raises(AttentionError, match="load_balanced=True .* or False"):
        make_attention("ring", "xla", mesh_of(data=1, context=4))


def test_parameters_are_created_in_their_shardings(capfd):
    from bookft.model import init_model
    from bookft.train.program import build_program
    from bookft.train.step import state_shardings

    cfg = load_run_config("configs/tiny-cpu.yaml", ["model.num_layers=1", "parallel.cpu_devices=0"])
    mesh = mesh_of(data=1, fsdp=2, context=2)
    program = build_program(cfg, mesh)
    capfd.readouterr()
    state, frozen = program.init_state()
    jax.block_until_ready(state)
    err = capfd.readouterr().err
    assert "Involuntary full rematerialization" not in err
    want = nnx.state(init_model(cfg.model, seed=cfg.train.seed))  # eager, on one device
    shardings = state_shardings(state["params"], mesh)
    for (path, got), (_, ref), (_, sh) in zip(nnx.to_flat_state(state["params"]), nnx.to_flat_state(want),
                                              nnx.to_flat_state(shardings), strict=True):
        assert got.get_value().sharding == sh.get_value(), path
        np.testing.assert_array_equal(np.asarray(got.get_value()), np.asarray(ref.get_value()))
    opt = jax.tree.leaves(state["opt_state"])
    assert all(x.sharding.mesh == mesh for x in opt)


def test_presets_carry_their_sequence_length():
    assert load_run_config("configs/llama-3.1-8b-v5p-4m.yaml").data.seq_len == 4_194_304
    assert load_run_config("configs/llama-3.1-8b-v5p-1m.yaml").data.seq_len == 1_048_576


def test_hooks_run_every_n_steps_and_after_the_last():
    from bookft.train.trainer import Hook

    probe, ckpt = Hook(lambda t, s: None, every=3), Hook(lambda t, s: None, every=3, at_end=False)
    assert [s for s in range(1, 9) if probe.due(s, 8)] == [3, 6, 8]
    assert [s for s in range(1, 9) if ckpt.due(s, 8)] == [3, 6]
    assert [s for s in range(1, 9) if Hook(lambda t, s: None, every=0).due(s, 8)] == [8]
