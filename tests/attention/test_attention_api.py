"""make_attention's contract: registries, clear AttentionErrors, zig-zag order, meshes people build."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from attention_helpers import FAST, inputs, max_rel_err, mesh, oracle, packed_segments

from bookft.attention import KERNELS, STRATEGIES, load_balance, make_attention, unbalance
from bookft.attention.balance import shard_chunk_ids
from bookft.errors import AttentionError, ConfigError


def test_registries_are_dicts_with_all_names():
    assert set(STRATEGIES) == {"local", "allgather", "ulysses", "ring", "usp"}
    assert set(KERNELS) == {"splash", "xla", "reference"}


def test_load_balance_is_zigzag_and_inverts():
    x = np.arange(2 * 4 * 3).reshape(1, 24)  # cp=4: 8 chunks of 3
    y = load_balance(x, 4)
    chunks = y.reshape(8, 3)[:, 0] // 3
    assert chunks.tolist() == [0, 7, 1, 6, 2, 5, 3, 4]  # rank r holds chunks r and 2cp-1-r
    np.testing.assert_array_equal(unbalance(y, 4), x)
    z = jnp.arange(48.0).reshape(2, 24)
    np.testing.assert_array_equal(unbalance(load_balance(z, 2, axis=1), 2, axis=1), z)
    assert shard_chunk_ids(4, True).tolist() == [[0, 7], [1, 6], [2, 5], [3, 4]]
    assert shard_chunk_ids(2, False, sub=2).tolist() == [[0, 1], [2, 3]]  # plain: one chunk per shard
    with pytest.raises(AttentionError, match="not divisible by 2\\*cp=8"):
        load_balance(np.zeros((1, 20)), 4)


def _abstract_call(attend, B=2, S=64, hq=4, hkv=2, D=8):
    q = jax.ShapeDtypeStruct((B, S, hq, D), jnp.float32)
    k = jax.ShapeDtypeStruct((B, S, hkv, D), jnp.float32)
    seg = jax.ShapeDtypeStruct((B, S), jnp.int32)
    return jax.eval_shape(attend, q, k, k, seg, seg)


def test_errors_are_clear():
    from bookft.attention.kernel_splash import splash_available

    m = mesh((1, 4), ("data", "context"))
    with pytest.raises(AttentionError, match="unknown attention strategy 'zigzag'.*allgather"):
        make_attention("zigzag", "xla", m, load_balanced=True)
    with pytest.raises(AttentionError, match="unknown attention kernel 'flash'"):
        make_attention("ring", "flash", m, load_balanced=True)
    with pytest.raises(AttentionError, match="needs a mesh"):
        make_attention("ring", "xla", None, load_balanced=True)
    with pytest.raises(AttentionError, match="lack \\['context_ulysses'\\]"):
        make_attention("usp", "xla", m, load_balanced=True)
    with pytest.raises(AttentionError, match="lack \\['context'\\]"):
        make_attention("ring", "xla", mesh((4,), ("data",)), load_balanced=True)
    with pytest.raises(AttentionError, match="sequence length 60 is not divisible by 2 \\* context"):
        _abstract_call(make_attention("ring", "xla", m, block_q=2, block_kv=2, load_balanced=True), S=60)
    with pytest.raises(AttentionError, match="6 q heads are not divisible by the ulysses degree 4"):
        _abstract_call(make_attention("ulysses", "xla", m, block_q=8, block_kv=8, load_balanced=True), hq=6, hkv=2)
    if splash_available():
        with pytest.raises(AttentionError, match="multiple of 128"):
            _abstract_call(make_attention("ring", "splash", m, load_balanced=True), S=256)  # 32-token chunks
    else:  # Python 3.11: the kernel says what it needs, at make time
        with pytest.raises(AttentionError, match="needs Tokamax.*Python 3.12 or newer.*bookft\\[tpu\\]"):
            make_attention("ring", "splash", m, load_balanced=True)
    with pytest.raises(AttentionError, match="length 60 is not divisible by context parallelism 8"):
        _abstract_call(make_attention("ring", "xla", mesh((1, 8), ("data", "context")), load_balanced=False), S=60)
    assert _abstract_call(make_attention("ring", "xla", m, load_balanced=False, block_q=5, block_kv=5),
                          S=60).shape[1] == 60  # plain order needs only S % cp == 0
    with pytest.raises(AttentionError, match="not divisible by block_q"):
        _abstract_call(make_attention("ring", "xla", m, block_q=3, block_kv=3, load_balanced=True), S=64)
    assert issubclass(AttentionError, ConfigError)  # the CLI prints it without a traceback


def test_shapes_pass_through_abstract_tracing():
    m = mesh((2, 2, 2), ("data", "context", "context_ulysses"))
    for strategy in STRATEGIES:
        attend = make_attention(strategy, "xla", None if strategy == "local" else m, block_q=8, block_kv=8,
                                load_balanced=True)
        assert _abstract_call(attend).shape == (2, 64, 4, 8)


def test_explicit_mesh_batch_sharded_matches_dense():
    """jax.make_mesh (Explicit axes), batch over `data`, ring over `context`, inputs pre-sharded."""
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    m = jax.make_mesh((2, 4), ("data", "context"), axis_types=(AxisType.Explicit,) * 2)
    B, S = 2, 64
    q, k, v, do = inputs(3, B, S, 4, 2, 8)
    seg = packed_segments(B, S, seed=5)
    attend = make_attention("ring", "xla", m, block_q=8, block_kv=8, load_balanced=True)

    def fn(q, k, v, seg, do):
        o, pull = jax.vjp(lambda q, k, v: attend(q, k, v, seg, None), q, k, v)
        return (o, *pull(do))

    cp = 4
    x_sh, s_sh = NamedSharding(m, P("data", "context")), NamedSharding(m, P("data", "context"))
    args = [jax.device_put(load_balance(x, cp), x_sh) for x in (q, k, v)]
    args += [jax.device_put(load_balance(seg, cp), s_sh), jax.device_put(load_balance(do, cp), x_sh)]
    exe = jax.jit(fn).lower(*args).compile(compiler_options=FAST)
    got = [unbalance(np.asarray(x), cp) for x in exe(*args)]
    want = oracle(q, k, v, seg, do)
    errs = [max_rel_err(g, w) for g, w in zip(got, want, strict=True)]
    assert max(errs) < 1e-5, errs


def test_non_causal_packed_ulysses_matches_dense():
    """causal=False: every pair is a full pair; documents still never see each other."""
    from attention_helpers import compiled_vjp

    B, S, cp = 2, 64, 4
    q, k, v, do = inputs(7, B, S, 4, 4, 8)
    seg = packed_segments(B, S, seed=9)
    attend = make_attention("ulysses", "xla", mesh((1, cp), ("data", "context")), causal=False,
                            block_q=8, block_kv=8, load_balanced=True)
    shapes = [(q.shape, np.float32)] * 3 + [((B, S), np.int32), (q.shape, np.float32)]
    got = compiled_vjp(attend, cp, True, shapes)(q, k, v, seg, do)
    want = oracle(q, k, v, seg, do, causal=False)
    errs = [max_rel_err(g, w) for g, w in zip(got, want, strict=True)]
    assert max(errs) < 1e-5, errs


def test_sub_chunks_match_dense():
    """Long sequences cut each zig-zag chunk into sub-chunks of at most max_chunk; same numbers."""
    from attention_helpers import compiled_vjp

    B, S, cp = 2, 128, 2  # 4 chunks of 32 -> 4 sub-chunks of 8 each
    q, k, v, do = inputs(11, B, S, 4, 2, 8)
    seg = packed_segments(B, S, seed=13)
    attend = make_attention("ring", "xla", mesh((1, cp), ("data", "context")), block_q=8, block_kv=8, max_chunk=8,
                            load_balanced=True)
    shapes = [(q.shape, np.float32)] + [(k.shape, np.float32)] * 2 + [((B, S), np.int32), (q.shape, np.float32)]
    got = compiled_vjp(attend, cp, True, shapes)(q, k, v, seg, do)
    errs = [max_rel_err(g, w) for g, w in zip(got, oracle(q, k, v, seg, do), strict=True)]
    assert max(errs) < 1e-5, errs


def test_max_chunk_below_block_is_an_error():
    with pytest.raises(AttentionError, match="max_chunk"):
        make_attention("ring", "xla", mesh((1, 2), ("data", "context")), block_q=64, block_kv=64, max_chunk=32,
                       load_balanced=True)


def test_auto_kernel_picks_by_platform():
    from bookft.attention.api import pick_kernel
    from bookft.attention.kernel_splash import splash_available

    assert pick_kernel("auto", "cpu") == "xla" and pick_kernel("auto", "gpu") == "xla"
    assert pick_kernel("auto", "tpu") == ("splash" if splash_available() else "xla")
    assert pick_kernel("xla", "tpu") == "xla"
    assert make_attention("local", "auto", None, load_balanced=False).spec.kernel.name == "xla"  # CPU here
