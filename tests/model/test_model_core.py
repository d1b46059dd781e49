"""Decoder internals: presets, FLOPs formula, old rope keys, axes rules, scan/remat equivalence, LoRA mask."""

import dataclasses
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from bookft.config import from_dict, read_yaml
from bookft.errors import ConfigError
from bookft.model import (
    LoraConfig,
    ModelConfig,
    abstract_model,
    config_from_hf,
    config_to_hf,
    constrain,
    flops_per_token,
    init_model,
    load_hf,
    save_hf,
    trainable_filter,
    trainable_mask,
    use_rules,
)
from bookft.model.axes import LOGICAL_AXES

PRESETS = Path(__file__).resolve().parents[2] / "configs" / "models"
TINY = ModelConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_layers=3, num_heads=4,
                   num_kv_heads=2, compute_dtype="float32", remat="none", init_std=0.2)


@pytest.mark.parametrize("name,params_b", [("llama-3.1-8b", 8.03), ("llama-3.2-1b", 1.24), ("llama-3.2-3b", 3.21),
                                           ("qwen3-8b", 8.19), ("mistral-7b", 7.25), ("tiny", 0.000664)])
def test_presets_load_and_have_known_sizes(name, params_b):
    data = read_yaml(PRESETS / f"{name}.yaml")
    config = from_dict(ModelConfig, data["model"], "model")
    model = abstract_model(config)
    n = sum(int(np.prod(v.get_value().shape)) for _, v in nnx.state(model, nnx.Param).flat_state())
    assert abs(n / 1e9 - params_b) / params_b < 0.01, n


def test_flops_formula_by_hand():
    c = ModelConfig(vocab_size=10, hidden_size=8, intermediate_size=16, num_layers=2, num_heads=2,
                    num_kv_heads=1, head_dim=4)
    per_layer = 8 * 2 * 4 + 2 * 8 * 1 * 4 + 2 * 4 * 8 + 3 * 8 * 16
    n = 2 * per_layer + 10 * 8
    assert flops_per_token(c, 100) == 6 * n + 6 * 2 * 100 * 2 * 4
    # llama-3.1-8b at 8K: 6N dominates; attention adds 6*L*S*Hq*D
    big = from_dict(ModelConfig, read_yaml(PRESETS / "llama-3.1-8b.yaml")["model"])
    assert 6 * 7.5e9 < flops_per_token(big, 8192) - 6 * 32 * 8192 * 4096 < 6 * 8.1e9


def test_old_rope_keys_equal_new():
    base = dict(model_type="llama", vocab_size=8, hidden_size=8, intermediate_size=8, num_hidden_layers=1,
                num_attention_heads=2)
    old = config_from_hf({**base, "rope_theta": 5e5, "rope_scaling": {
        "type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024, "beta_fast": 16}})
    new = config_from_hf({**base, "rope_parameters": {
        "rope_type": "yarn", "rope_theta": 5e5, "factor": 4.0, "original_max_position_embeddings": 1024,
        "beta_fast": 16}})
    assert old == new and old.rope.type == "yarn" and old.rope.theta == 5e5 and old.rope.beta_fast == 16
    assert config_from_hf(config_to_hf(new)) == new
    # rope theta overridable from our config, and written out
    over = dataclasses.replace(new, rope_theta_override=8e6)
    assert over.rope_theta == 8e6 and config_to_hf(over)["rope_parameters"]["rope_theta"] == 8e6


def test_config_validation():
    with pytest.raises(ConfigError, match="multiple of model.num_kv_heads"):
        from_dict(ModelConfig, {"num_heads": 4, "num_kv_heads": 3})
    with pytest.raises(ConfigError, match="unknown target 'qkv'"):
        from_dict(ModelConfig, {"lora": {"rank": 4, "targets": ["qkv"]}})


def test_every_param_has_known_logical_axes():
    model = abstract_model(dataclasses.replace(TINY, qkv_bias=True, qk_norm=True, lora=LoraConfig(
        rank=2, targets=("q", "k", "v", "o", "gate", "up", "down"))))
    for path, var in nnx.state(model, nnx.Param).flat_state():
        axes = var.get_metadata()["out_sharding"]
        assert len(axes) == len(var.get_value().shape), path
        assert all(a is None or a in LOGICAL_AXES for a in axes), (path, axes)
        if path[0] == "layers":
            assert axes[0] == "layers"


def test_constrain_is_noop_without_rules_and_shards_with_them():
    x = jnp.ones((8, 4))
    assert constrain(x, ("batch", "embed")) is x
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("data", "context"))
    rules = {"batch": "data", "embed": None}
    out = jax.jit(lambda a: constrain(a * 2, ("batch", "embed")))
    with use_rules(mesh, rules):
        y = out(x)
        assert y.sharding.is_equivalent_to(
            jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data", None)), 2)
        # tuples (as bookft.parallel writes them; () = replicated) work too
        with use_rules(mesh, {"batch": ("data", "context"), "embed": ()}):
            fresh = jax.jit(lambda a: constrain(a * 2, ("batch", "embed")))  # rules are read at trace time
            assert fresh(x).sharding.is_equivalent_to(
                jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(("data", "context"))), 2)
        with pytest.raises(ConfigError, match="'seq' has no entry"):
            jax.jit(lambda a: constrain(a, ("seq", "embed")))(x)


def _loss_grad_fn(model, ids, pos, seg):
    graphdef, state = nnx.split(model)

    def loss(st):
        m = nnx.merge(graphdef, st)
        return jnp.mean(m.logits(m(ids, pos, seg)) ** 2)
    return jax.jit(jax.value_and_grad(loss)), state


def test_scan_unrolled_and_remat_policies_agree():
    rng = np.random.default_rng(0)
    ids = jnp.asarray(rng.integers(0, 64, (2, 16)), jnp.int32)
    pos = jnp.asarray(np.tile(np.arange(16), (2, 1)) + 3, jnp.int32)
    seg = jnp.asarray(np.repeat([[1] * 10 + [2] * 6], 2, 0), jnp.int32)  # two packed documents
    ref_model = init_model(TINY, seed=3)
    fn, state = _loss_grad_fn(ref_model, ids, pos, seg)
    ref_loss, ref_grads = fn(state)

    def variant(remat, scan):
        graphdef, _ = nnx.split(abstract_model(dataclasses.replace(TINY, remat=remat, scan_layers=scan)))
        return _loss_grad_fn(nnx.merge(graphdef, state), ids, pos, seg)[0]

    # compiling and running is slow on a shared 2-core CPU: one variant runs, the others are traced
    loss, grads = variant("full", False)(state)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), grads, ref_grads)
    # jax 0.10 prints the save_dots policy by its arguments, jax 0.12 by its name
    for remat, markers in (("save_dots", ("only_if_no_batch_dims=True", "dots_with_no_batch_dims_saveable")),
                           ("offload", ("offload_dot",))):
        jaxpr = str(jax.make_jaxpr(variant(remat, True))(state))
        assert any(m in jaxpr for m in markers), remat


def test_trainable_mask_and_filter():
    full = init_model(TINY)
    assert all(jax.tree.leaves(trainable_mask(full)))
    lora = dataclasses.replace(TINY, lora=LoraConfig(rank=2, targets=("q", "v"), train_norms=True))
    model = init_model(lora)
    mask = trainable_mask(model)
    assert mask["layers"]["lora_q_a"] and mask["layers"]["lora_v_b"] and mask["layers"]["attn_norm"]
    assert mask["final_norm"] and not mask["embed"] and not mask["layers"]["wq"]
    assert set(nnx.state(model, trainable_filter(lora)).to_pure_dict()["layers"]) == {
        "lora_q_a", "lora_q_b", "lora_v_a", "lora_v_b", "attn_norm", "mlp_norm"}


def test_load_hf_places_params_with_target_sharding(tmp_path):
    path = save_hf(init_model(TINY), TINY, tmp_path)
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("fsdp", "tensor"))
    rules = {"vocab": "tensor", "embed": "fsdp", "mlp": "tensor", "q_heads": "tensor", "kv_heads": "tensor",
             "head_dim": None, "layers": None, "lora_rank": None}
    model, _ = load_hf(path, mesh=mesh, shardings=rules)
    P = jax.sharding.PartitionSpec
    assert model.layers.w_gate[...].sharding.spec == P(None, "tensor", "fsdp")
    assert model.embed[...].sharding.spec == P("tensor", "fsdp")
    plain, _ = load_hf(path)
    np.testing.assert_array_equal(np.asarray(model.layers.wk[...]), np.asarray(plain.layers.wk[...]))


def test_bf16_compute_close_to_fp32():
    model = init_model(TINY, seed=1)
    ids = jnp.asarray(np.random.default_rng(2).integers(0, 64, (1, 12)), jnp.int32)
    pos = jnp.arange(12, dtype=jnp.int32)[None]
    graphdef, _ = nnx.split(abstract_model(dataclasses.replace(TINY, compute_dtype="bfloat16")))
    bf = nnx.merge(graphdef, nnx.state(model))

    @jax.jit
    def both(ids, pos):
        return model.logits(model(ids, pos)), bf.logits(bf(ids, pos))

    ref, out = both(ids, pos)
    assert out.dtype == jnp.float32
    assert float(jnp.max(jnp.abs(out - ref))) < 0.05 * float(jnp.max(jnp.abs(ref)))


def test_init_model_same_eager_and_under_jit_and_free_under_eval_shape():
    config = dataclasses.replace(TINY, lora=LoraConfig(rank=2))
    eager = nnx.state(init_model(config, seed=5)).flat_state()
    traced = jax.jit(lambda: nnx.state(init_model(config, seed=5)))().flat_state()
    for (p, x), (q, y) in zip(eager, traced, strict=True):
        assert p == q
        np.testing.assert_array_equal(np.asarray(x[...]), np.asarray(y[...]))
    big = from_dict(ModelConfig, read_yaml(PRESETS / "llama-3.1-8b.yaml")["model"])
    abstract = nnx.eval_shape(lambda: init_model(big))  # must not draw 8B numbers on the host
    assert abstract.embed.get_value().shape == (128256, 4096)


def test_the_sharded_lookup_never_builds_the_whole_table():
    """Under the training rules the table's embed columns are FSDP-sharded over the context axis: the
    lookup and its gradient stay in each device's columns ([V, E/n]; the rows move by all-to-all),
    never a whole [V, E] table with an all-reduce, and the gradient is the dense one."""
    from jax.sharding import NamedSharding, PartitionSpec

    from bookft.model.decoder import _lookup
    from bookft.train.step import model_rules

    mesh = jax.sharding.Mesh(np.array(jax.devices()[:8]).reshape(1, 1, 8), ("data", "fsdp", "context"))
    v, e, s = 64, 32, 64
    rng = np.random.default_rng(0)
    table = jnp.asarray(rng.normal(size=(v, e)), jnp.float32)
    ids = jnp.asarray(rng.integers(0, v, (1, s)), jnp.int32)
    w = jnp.asarray(rng.normal(size=(1, s, e)), jnp.float32)
    columns = NamedSharding(mesh, PartitionSpec(None, "context"))

    def loss(t):
        rows = _lookup(t.astype(jnp.bfloat16), ids)  # as Decoder.run: cast first, bf16 bytes move
        return jnp.sum(constrain(rows, ("batch", "seq", "embed")).astype(jnp.float32) * w)

    with use_rules(mesh, model_rules(mesh, e)):
        grad = jax.jit(jax.grad(loss), in_shardings=columns, out_shardings=columns)
        hlo = grad.lower(table).compile().as_text()
        got = grad(jax.device_put(table, columns))
        # the looked-up rows are pinned to the table's columns, so the backward's cotangent is too
        # (a sharding constraint transposes to itself): TPU's partitioner otherwise built the whole
        # [V, E] gradient with an all-reduce in the Llama-3.1-8B step (docs/log.md, 2026-12-06)
        eqns = jax.make_jaxpr(lambda t: _lookup(t, ids))(table).jaxpr.eqns
        pinned = [q for q in eqns if q.primitive.name == "sharding_constraint" and q.outvars[0].aval.shape == (1, s, e)]
        assert pinned and pinned[-1].params["sharding"].spec == PartitionSpec(None, None, "context")
    dense = jax.grad(lambda t: jnp.sum(jnp.take(t.astype(jnp.bfloat16), ids, axis=0).astype(jnp.float32) * w))(table)
    np.testing.assert_allclose(np.asarray(got), np.asarray(dense), rtol=1e-6, atol=1e-6)
    assert not re.search(rf"(f32|bf16)\[{v},{e}\]", hlo) and f"bf16[{v},{e // 8}]" in hlo
