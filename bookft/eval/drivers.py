"""Drive a bookft Decoder for eval: logits of the tail, greedy generation, attention by config.

Design choices:
- `model_logits_fn` runs the full forward pass (hidden [B,S,D]) but applies the LM head only to
  the `tail` positions before the end of the real tokens (padding after them can be a whole
  block per chunk), so memory stays O(S*D), never O(S*V) (128K vocab x 1M tokens would be 512 GB
  in fp32). It returns (logits, start): the window's first position, a traced scalar, so one
  compiled program serves every batch of a length.
- With a mesh whose context axes are larger than 1, the sequence is zig-zag load-balanced before
  the forward (tokens, positions, segment ids together, as the train data path does) and the
  hidden states are put back in order before the tail is taken; the attention function comes from
  `make_attention(strategy, kernel, mesh, ...)` with the run config's attention section.
- Everything model-specific is imported lazily so the eval package imports (and its tests run)
  without the model, attention or parallel packages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bookft.errors import EvalError

CONTEXT_AXES = ("context", "context_ulysses")


def context_degree(mesh) -> int:
    if mesh is None:
        return 1
    return int(np.prod([mesh.shape[a] for a in CONTEXT_AXES if a in mesh.shape]))


def make_attend(attention_cfg: Any | None, mesh=None):
    """attend for eval: None (the model's dense reference) unless an attention section is given."""
    if attention_cfg is None:
        return None
    try:
        from bookft.attention import make_attention
    except ImportError as e:
        raise EvalError(f"attention strategies are not available ({e}); "
                        "run without an attention section") from None
    strategy = attention_cfg.strategy if mesh is not None and context_degree(mesh) > 1 else "local"
    return make_attention(strategy, attention_cfg.kernel, mesh, causal=True,
                          load_balanced=bool(attention_cfg.load_balance) and strategy != "local",
                          block_q=attention_cfg.block_q, block_kv=attention_cfg.block_kv)


@dataclass(frozen=True)
class LengthRule:
    """Valid sequence lengths for a strategy/kernel: whole 2*cp chunks, and whole blocks per chunk
    once a chunk is longer than one block (kernels use a single block of min(block, chunk))."""

    chunks: int = 1
    block: int = 1

    def __call__(self, n: int) -> int:
        chunk = -(-n // self.chunks)
        if chunk > self.block:
            chunk = -(-chunk // self.block) * self.block
        return chunk * self.chunks


def length_rule(attention_cfg: Any | None, mesh=None) -> LengthRule:
    if attention_cfg is None:
        return LengthRule()
    block = 1 if attention_cfg.kernel == "reference" else max(attention_cfg.block_q, attention_cfg.block_kv)
    return LengthRule(chunks=2 * context_degree(mesh), block=block)  # local is cp=1: 2 chunks


def pad_attend(attend, rule: LengthRule):
    """Wrap a local attend so any length works: pad S up to `rule(S)` with segment id 0, cut back.

    Used for generation prefill, whose prompt length is whatever the tokenizer made it. Padding
    rows come last and sit in their own segment, so no real query attends to them.
    """
    if attend is None:
        return attend
    import jax.numpy as jnp

    def padded(q, k, v, segment_ids, positions):
        s = q.shape[1]
        pad = rule(s) - s
        if pad == 0:
            return attend(q, k, v, segment_ids, positions)
        p4, p2 = ((0, 0), (0, pad), (0, 0), (0, 0)), ((0, 0), (0, pad))
        out = attend(jnp.pad(q, p4), jnp.pad(k, p4), jnp.pad(v, p4), jnp.pad(segment_ids, p2),
                     jnp.pad(positions, p2))
        return out[:, :s]

    return padded


def model_logits_fn(model, *, attend=None, tail: int = 512, mesh=None, load_balanced: bool = False):
    """logits_fn(input_ids, positions, segment_ids) -> (logits [B, T, V] float32, start), T = min(tail, S):
    positions start..start+T-1, ending where the last real token (segment id > 0) of the batch ends."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    graphdef, state = nnx.split(model)
    cp = context_degree(mesh)
    balance = load_balanced and cp > 1
    if balance:
        from bookft.attention.balance import load_balance, unbalance

    def forward(state, ids, pos, seg, start):
        m = nnx.merge(graphdef, state)
        h = m(ids, pos, seg, attend=attend)  # [B,S,D]
        if balance:
            h = unbalance(h, cp, axis=1)
        window = jax.lax.dynamic_slice_in_dim(h, start, min(tail, h.shape[1]), axis=1)  # [B,T,D]
        return m.logits(window)  # [B,T,V]

    fwd = jax.jit(forward)

    def logits_fn(ids: np.ndarray, pos: np.ndarray, seg: np.ndarray):
        s = ids.shape[1]
        end = int((np.asarray(seg) > 0).sum(axis=1).max())  # padding comes after the real tokens
        start = max(0, min(end, s) - min(tail, s))
        if balance:
            ids, pos, seg = (load_balance(x, cp, axis=1) for x in (ids, pos, seg))
        if mesh is not None:
            from jax.sharding import NamedSharding, PartitionSpec

            axes = tuple(a for a in CONTEXT_AXES if a in mesh.shape) or None
            sharding = NamedSharding(mesh, PartitionSpec(None, axes))
            ids, pos, seg = (jax.device_put(x, sharding) for x in (ids, pos, seg))
        out = fwd(state, ids, pos, seg, jnp.int32(start))
        return np.asarray(out, dtype=np.float32), start

    return logits_fn


def model_generate_fn(model, *, attend=None, eos_id: int | None = None):
    """generate_fn(prompt_ids [B,P], max_new_tokens) -> new ids [B,N] via bookft.model.generate_greedy."""
    try:
        from bookft.model import generate_greedy
    except ImportError as e:
        raise EvalError(f"bookft.model.generate_greedy is not available yet ({e}); "
                        "use eval.scoring=[teacher_forced]") from None

    def generate_fn(ids: np.ndarray, max_new_tokens: int) -> np.ndarray:
        return np.asarray(generate_greedy(model, ids, max_new_tokens, attend=attend, eos_id=eos_id))

    return generate_fn


def position_limit(model_config) -> int | None:
    """Longest sequence the model's RoPE supports: max positions, or extended when rope scaling is on."""
    if model_config is None:
        return None
    limit = int(model_config.max_position_embeddings)
    rope = getattr(model_config, "rope", None)
    if rope is not None and rope.type != "default":
        base = rope.original_max_position_embeddings or limit
        limit = max(limit, int(base * rope.factor))
    return limit


def check_model(model_config, lengths: list[int], vocab_size: int) -> None:
    if model_config is None:
        return
    limit = position_limit(model_config)
    too_long = [n for n in lengths if limit is not None and n > limit]
    if too_long:
        rope = getattr(model_config, "rope", None)
        how = ("the model has no rope scaling; set model.rope (type yarn/llama3/linear with a factor) "
               "or use shorter eval.lengths") if rope is None or rope.type == "default" else \
              f"rope scaling ({rope.type}, factor {rope.factor}) reaches only {limit}"
        raise EvalError(
            f"eval length {max(too_long)} is larger than the model's max_position_embeddings "
            f"({model_config.max_position_embeddings}): {how}")
    if vocab_size > model_config.vocab_size:
        raise EvalError(
            f"tokenizer has {vocab_size} tokens but the model's vocab_size is {model_config.vocab_size}; "
            "use the tokenizer the model was trained with")
