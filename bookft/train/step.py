"""The pure train step and the sharded train state it runs on.

`train_step(state, batch) -> (state, metrics)`:
- batch arrays are [grad_accum, rows, L] (rows sharded over data/fsdp, L over the context axes);
- a `lax.scan` over micro-batches sums the *numerators* of the loss and its gradients, then divides
  by the global count of weighted targets once, so the loss is exactly the mean over all real
  targets of the global batch whatever the accumulation and sharding;
- optax applies clipping + AdamW; on a non-finite loss with `on_nan="skip"` the update is dropped
  (`skipped` metric = 1); with "stop" the loop stops and names the step.

The state is a dict {params, opt_state, step} of pytrees. The frozen (non-trainable) variables
(base weights under LoRA) are a separate explicit input, so nothing large is baked into the
compiled program as a constant; `graphdef` is static.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from bookft.model.axes import use_rules
from bookft.parallel.mesh import batch_axes, context_degree
from bookft.parallel.rules import activation_rules, logical_to_spec
from bookft.train.loss import chunked_cross_entropy, vocab_parallel_axes, vocab_parallel_cross_entropy

BATCH_FIELDS = ("input_ids", "targets", "weights", "positions", "segment_ids")


def model_rules(mesh, hidden_size: int | None = None) -> dict[str, Any]:
    """Activation rules for `use_rules`; with `hidden_size` also "table_embed", the mesh axes of the
    embedding table's embed dim (its FSDP sharding), so the decoder looks tokens up in the sharded
    table instead of gathering it (see Decoder.run)."""
    out = {}
    for k, v in activation_rules(mesh).items():
        out[k] = None if not v else (v[0] if len(v) == 1 else v)
    if hidden_size is not None:
        table = logical_to_spec(("embed",), (hidden_size,), mesh)[0]
        if table is not None:
            out["table_embed"] = table
    return out


def state_shardings(abstract_tree, mesh):
    """NamedShardings for an nnx.State whose Variables carry logical `out_sharding` names."""
    specs = nnx.get_partition_spec(abstract_tree)

    def one(spec, x):
        names = tuple(spec) if spec is not None else (None,) * x.ndim
        names = names + (None,) * (x.ndim - len(names))
        return NamedSharding(mesh, logical_to_spec(names, x.shape, mesh))

    return jax.tree.map(one, specs, abstract_tree, is_leaf=lambda s: isinstance(s, PartitionSpec))


def opt_state_shardings(abstract_opt_state, param_shardings_by_path: dict, mesh):
    """Optimizer leaves take the sharding of the parameter whose path they end with."""

    def one(path, x):
        key = jax.tree_util.keystr(path)
        for ppath, sh in param_shardings_by_path.items():
            if key.endswith(ppath) and sh[1] == getattr(x, "shape", None):
                return sh[0]
        return NamedSharding(mesh, PartitionSpec())

    return jax.tree_util.tree_map_with_path(one, abstract_opt_state)


def shardings_by_path(params, shardings):
    flat_p = jax.tree_util.tree_flatten_with_path(params)[0]
    flat_s = jax.tree.leaves(shardings)
    return {jax.tree_util.keystr(p): (s, x.shape) for (p, x), s in zip(flat_p, flat_s, strict=True)}


def batch_sharding(mesh) -> NamedSharding:
    seq = tuple(a for a in ("context", "context_ulysses") if a in mesh.shape)
    return NamedSharding(mesh, PartitionSpec(None, batch_axes(mesh) or None, seq or None))


@dataclass
class StepSettings:
    loss_chunk: int
    z_loss: float
    on_nan: str


def make_loss_and_grads(graphdef, attend, mesh, settings: StepSettings):
    """(params, frozen, batch [A, R, L]) -> (loss, grads, weighted target count), exact global mean."""
    cp = context_degree(mesh)

    def loss_sums(params, frozen, mb):
        model = nnx.merge(graphdef, params, frozen)
        with use_rules(mesh, model_rules(mesh, model.config.hidden_size)):
            hidden = model(mb["input_ids"], mb["positions"], mb["segment_ids"], attend=attend)
            if vocab_parallel_axes(mesh, model.config.vocab_size):  # no device holds the whole lm_head
                ce, z, n = vocab_parallel_cross_entropy(
                    model.output_embedding(), hidden, mb["targets"], mb["weights"], mesh=mesh,
                    chunk=settings.loss_chunk, z_loss=settings.z_loss)
            else:
                ce, z, n = chunked_cross_entropy(model.logits, hidden, mb["targets"], mb["weights"],
                                                 cp=cp, chunk=settings.loss_chunk, z_loss=settings.z_loss)
        return ce + z, (ce, n)

    grad_fn = jax.grad(loss_sums, has_aux=True)

    def loss_and_grads(params, frozen, batch):
        def micro(carry, mb):
            g_acc, ce_acc, n_acc = carry
            g, (ce, n) = grad_fn(params, frozen, mb)
            return (jax.tree.map(jnp.add, g_acc, g), ce_acc + ce, n_acc + n), None

        zeros = jax.tree.map(jnp.zeros_like, params)
        zero = jnp.zeros((), jnp.float32)
        (g_sum, ce_sum, n_sum), _ = jax.lax.scan(micro, (zeros, zero, zero), batch)
        denom = jnp.maximum(n_sum, 1e-9)
        return ce_sum / denom, jax.tree.map(lambda g: g / denom, g_sum), n_sum

    return loss_and_grads


def make_train_step(graphdef, tx, attend, mesh, settings: StepSettings):
    """The pure step (not yet jitted): (state, frozen, batch) -> (state, metrics)."""
    loss_and_grads = make_loss_and_grads(graphdef, attend, mesh, settings)

    def train_step(state, frozen, batch):
        params = state["params"]
        loss, grads, n_sum = loss_and_grads(params, frozen, batch)
        grad_norm = optax.tree.norm(grads)
        updates, new_opt = tx.update(grads, state["opt_state"], params)
        new_params = optax.apply_updates(params, updates)
        finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
        if settings.on_nan == "skip":
            keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(finite, a, b), new, old)
            new_params, new_opt = keep(new_params, params), keep(new_opt, state["opt_state"])
        new_state = {"params": new_params, "opt_state": new_opt, "step": state["step"] + 1}
        metrics = {"loss": loss, "grad_norm": grad_norm, "tokens": n_sum,
                   "skipped": (~finite).astype(jnp.int32)}
        return new_state, metrics

    return train_step


def jit_train_step(step_fn, state_sh, frozen_sh, mesh):
    bsh = batch_sharding(mesh)
    batch_sh = {f: bsh for f in BATCH_FIELDS}
    return jax.jit(step_fn, in_shardings=(state_sh, frozen_sh, batch_sh),
                   out_shardings=(state_sh, None), donate_argnums=(0,))
