"""Per-device memory of the compiled fwd+bwd falls as the context axis grows (fixed sequence)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from attention_helpers import FAST, mesh

from bookft.attention import make_attention


def temp_bytes(strategy, cp, S=2048, H=4, D=16):
    m = mesh((1, cp), ("data", "context"))
    attend = make_attention(strategy, "xla", m, block_q=512, block_kv=512, load_balanced=True)  # one block per pair

    def loss(q, k, v, seg):
        return jnp.sum(attend(q, k, v, seg, None).astype(jnp.float32) ** 2)

    x = jax.ShapeDtypeStruct((1, S, H, D), jnp.float32)
    seg = jax.ShapeDtypeStruct((1, S), jnp.int32)
    compiled = jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(x, x, x, seg).compile(compiler_options=FAST)
    mem = compiled.memory_analysis()
    return mem.temp_size_in_bytes + mem.argument_size_in_bytes + mem.output_size_in_bytes


def test_ring_memory_falls_with_cp():
    small, large = temp_bytes("ring", 8), temp_bytes("ring", 2)
    # O(S/cp) activations: 4x the devices should give well under half the per-device bytes
    assert small < 0.5 * large, (small, large)
