"""LoRA: which parameters train, and merging adapters into the base weights.

Design choices:
- Adapters live next to the stacked layer weights as `LoraParam`s (A [L, r, in...] random,
  B [L, out..., r] zero, delta = alpha/r * B . A), created when `lora.rank > 0`.
- The optimizer selects trainable parameters with an nnx filter: `trainable_filter(config)` for
  `nnx.Optimizer(model, tx, wrt=...)` / `nnx.DiffState`, or `trainable_mask(model)`, a pure dict
  of bools shaped like `nnx.state(model, nnx.Param).to_pure_dict()` for `optax.masked`.
- LongLoRA: `train_embeddings` adds the embedding and untied lm_head (EmbedParam), `train_norms`
  the RMSNorm weights (NormParam).
- Export merges (save_hf does it per layer); `merge_lora(model)` returns a rank-0 model.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from flax import nnx

from bookft.model.config import LoraConfig, ModelConfig
from bookft.model.decoder import Decoder, EmbedParam, LoraParam, NormParam, abstract_model
from bookft.model.layers import LORA_BASE


def trainable_filter(config: ModelConfig):
    """nnx filter of the parameters to train: all params without LoRA; adapters (+options) with."""
    if not config.lora.rank:
        return nnx.Param
    kinds = [LoraParam]
    if config.lora.train_embeddings:
        kinds.append(EmbedParam)
    if config.lora.train_norms:
        kinds.append(NormParam)
    return nnx.Any(*kinds)


def trainable_mask(model: Decoder) -> dict:
    """{param path...: bool} as a pure nested dict matching nnx.state(model, nnx.Param)."""
    selected = nnx.state(model, trainable_filter(model.config))
    keys = {path for path, _ in selected.flat_state()}
    state = nnx.state(model, nnx.Param)
    flat = {path: path in keys for path, _ in state.flat_state()}
    return nnx.State.from_flat_path(flat).to_pure_dict()


def merge_lora(model: Decoder) -> Decoder:
    """A new Decoder (lora.rank = 0) whose base weights include the adapters' deltas."""
    config = model.config
    if not config.lora.rank:
        return model
    merged_cfg = dataclasses.replace(config, lora=LoraConfig())
    graphdef, state = nnx.split(abstract_model(merged_cfg))
    old = {path: var[...] for path, var in nnx.state(model, nnx.Param).flat_state()}
    merged = _merge(old, config.lora.targets, config.lora.scale)
    for path, var in state.flat_state():
        var.set_value(merged[path])
    return nnx.merge(graphdef, state)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _merge(params: dict, targets: tuple[str, ...], scale: float) -> dict:
    out = {path: value for path, value in params.items() if not isinstance(path[-1], str)
           or not path[-1].startswith("lora_")}
    for target in targets:
        base = ("layers", LORA_BASE[target][0])
        a = params[("layers", f"lora_{target}_a")].astype(jnp.float32)
        b = params[("layers", f"lora_{target}_b")].astype(jnp.float32)
        delta = jax.vmap(lambda b_, a_: jnp.tensordot(b_, a_, axes=([-1], [0])))(b, a)
        out[base] = (out[base].astype(jnp.float32) + scale * delta).astype(out[base].dtype)
    return out
