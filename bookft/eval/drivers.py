"""Drive a bookft Decoder for eval: tail logits, greedy generation, attention by config.

Design choices:
- Both scorers run the forward pass training runs: the attend of `make_attention(strategy,
  kernel, mesh, ...)` from the run config's attention section, over the configured mesh, with
  inputs laid out by `SeqLayout` (bucketed length, zig-zag order, sharded along S over the
  context axes) and the parameters placed with their train shardings. A 1M-token prompt is
  prefilled on a slice exactly as a 1M-token training sequence is.
- `model_logits_fn` applies the LM head only to the `tail` positions before the end of the real
  tokens (padding after them can be a whole block per chunk), so memory stays O(S*D), never
  O(S*V) (128K vocab x 1M tokens would be 512 GB in fp32). It returns (logits, start): the
  window's first position; the window is a traced argument, so one compiled program serves every
  batch of a bucket.
- `model_generate_fn` prefills with the same layout and attend (bookft.model.generate's
  prefill_cache) and decodes over the cache where it lies, batched across prompt lengths.
- jax, the model and attention are imported inside the functions, so `import bookft.eval` (every
  CLI command registers itself) stays cheap.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bookft.errors import EvalError
from bookft.eval.layout import SeqLayout, context_degree
from bookft.host import to_host

__all__ = ["attention_and_layout", "check_model", "context_degree", "make_attend", "model_generate_fn",
           "model_logits_fn", "position_limit", "tail_logits_fn"]


def make_attend(attention_cfg: Any | None, mesh=None):
    """attend for eval: None (the model's dense reference) unless an attention section is given."""
    if attention_cfg is None:
        return None
    return _resolved(attention_cfg, mesh).attend()


def _resolved(attention_cfg, mesh):
    """The train rule (bookft.attention.resolve), always causal: eval scores a decoder."""
    import dataclasses

    from bookft.attention import resolve

    return resolve(dataclasses.replace(attention_cfg, causal=True), mesh)


def attention_and_layout(attention_cfg: Any | None, mesh=None, per_octave: int = 4):
    """(attend, SeqLayout) for a run config's attention section on `mesh` (None: one device)."""
    from bookft.eval.layout import length_rule

    if attention_cfg is None:
        return None, SeqLayout(rule=length_rule(None, None), per_octave=per_octave)
    att = _resolved(attention_cfg, mesh)
    return att.attend(), SeqLayout(mesh=att.mesh, balanced=att.load_balanced,
                                   rule=length_rule(attention_cfg, att.mesh), per_octave=per_octave)


def model_logits_fn(model, *, attend=None, tail: int = 512, layout: SeqLayout | None = None):
    """logits_fn(input_ids, positions, segment_ids) -> (logits [B, T, V] float32, start), T = min(tail, S):
    positions start..start+T-1, ending where the last real token (segment id > 0) of the batch ends.

    Inputs [B,S] come in natural order at a length `layout.length` accepts; the layout puts them
    in stored order on the mesh, the same forward as training runs (attend, rules, shardings).
    """
    from flax import nnx

    layout = layout or SeqLayout()
    graphdef, state = nnx.split(layout.place(model))
    fn = tail_logits_fn(graphdef, attend=attend, tail=tail, layout=layout)

    def logits_fn(ids: np.ndarray, pos: np.ndarray, seg: np.ndarray):
        return fn((state,), ids, pos, seg)

    logits_fn.jitted = fn.jitted  # for tests and benchmarks: one compiled program per bucket
    return logits_fn


def tail_logits_fn(graphdef, *, attend=None, tail: int = 512, layout: SeqLayout | None = None):
    """fn(states, input_ids, positions, segment_ids) -> (logits, start) as model_logits_fn's, for the
    model `nnx.merge(graphdef, *states)` given at each call: the train loop's needle probe scores the
    live, sharded parameters (params, frozen) with it, without copying or gathering them."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    layout = layout or SeqLayout()

    def forward(states, ids, pos, seg, window):
        m = nnx.merge(graphdef, *states)
        h = m(ids, pos, seg, attend=attend)  # [B,S,D], stored order
        # the window [T] (stored indices) as a one-hot contraction over S: local + all-reduce on a
        # sequence-sharded h, never a gather or reorder of [B,S,D]
        pick = (jnp.arange(h.shape[1])[None, :] == window[:, None]).astype(h.dtype)  # [T,S]
        return m.logits(jnp.einsum("ts,bse->bte", pick, h))  # [B,T,V]

    fwd = jax.jit(forward)

    def fn(states, ids: np.ndarray, pos: np.ndarray, seg: np.ndarray):
        b, s = ids.shape
        end = int((np.asarray(seg) > 0).sum(axis=1).max())  # padding comes after the real tokens
        t = min(tail, s)
        start = max(0, min(end, s) - t)
        window = layout.stored_index(s)[start:start + t]
        with layout.rules():
            out = fwd(tuple(states), *layout.arrange(ids, pos, seg), jnp.asarray(window))
        return to_host(out, np.float32)[:b], start

    fn.jitted = fwd
    return fn


def model_generate_fn(model, *, attend=None, eos_id: int | None = None, layout: SeqLayout | None = None,
                      capacity_multiple: int = 32):
    """generate_fn(prompts: list of 1-D id arrays, max_new_tokens) -> new ids [B,N] (greedy, KV cache).

    The prompts are right-padded to one bucketed length (`layout.length`, segment id 0 after each
    prompt), laid out like the teacher-forced forward (zig-zag, sharded over the context axes) and
    prefilled with the same attend; decoding then reads the sequence-sharded cache in place. The
    cache capacity is rounded up to `capacity_multiple` so answer lengths share one program.
    """
    from bookft.model.generate import decode_greedy, prefill_cache

    layout = layout or SeqLayout()
    model = layout.place(model)

    def generate_fn(prompts, max_new_tokens: int) -> np.ndarray:
        b = len(prompts)
        lens = np.array([len(p) for p in prompts], np.int32)
        s = layout.length(int(lens.max()))
        ids, pos, seg = (np.zeros((b, s), np.int32) for _ in range(3))
        for i, p in enumerate(prompts):
            ids[i, :lens[i]], pos[i, :lens[i]], seg[i, :lens[i]] = p, np.arange(lens[i]), 1
        last = layout.pad_rows(layout.stored_index(s)[lens - 1])
        capacity = -(-max(max_new_tokens, 1) // capacity_multiple) * capacity_multiple
        with layout.rules():
            logits, cache = prefill_cache(model, *layout.arrange(ids, pos, seg), last, attend,
                                          capacity=capacity, cache_blocks=layout.cp)
        new = decode_greedy(model, logits, cache, layout.pad_rows(lens, fill=1), max_new_tokens, eos_id)
        return new[:b]

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
