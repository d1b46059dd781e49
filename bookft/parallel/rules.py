"""The one table from logical axis names to mesh axes, for parameters and for activations.

The model names axes (`bookft.model` never sees a Mesh); this module maps them. Parameters are
sharded FSDP-style over `fsdp` and the context axes (as MaxText does for long context, where
`fsdp` is often 1 and the context axis spans the slice), and over `tensor` where the model has a
heads/mlp/vocab dimension. A mesh axis is used for a dimension only if it divides it, so a tiny
model on 8 devices still works (the parameter is then replicated on that axis).
"""

from __future__ import annotations

import math

from jax.sharding import NamedSharding, PartitionSpec

# logical name -> candidate mesh axes, in order of preference
PARAM_RULES: dict[str, tuple[str, ...]] = {
    "embed": ("fsdp", "context", "context_ulysses", "data"),
    "vocab": ("tensor",),
    "mlp": ("tensor",),
    "q_heads": ("tensor",),
    "kv_heads": ("tensor",),
    "head_dim": (),
    "layers": (),
    "lora_rank": (),
}

ACTIVATION_RULES: dict[str, tuple[str, ...]] = {
    "batch": ("data", "fsdp"),
    "seq": ("context", "context_ulysses"),
    "embed": (),
    "heads": ("tensor",),
    "q_heads": ("tensor",),
    "kv_heads": ("tensor",),
    "head_dim": (),
    "mlp": ("tensor",),
    "vocab": ("tensor",),
}


def logical_to_spec(names, shape, mesh, rules=PARAM_RULES) -> PartitionSpec:
    """PartitionSpec for an array of `shape` whose dims carry logical `names` (None = replicated)."""
    used: set[str] = set()
    spec = []
    for name, dim in zip(names, shape, strict=True):
        if name is None:
            spec.append(None)
            continue
        if name not in rules:
            raise KeyError(f"logical axis {name!r} has no sharding rule in bookft/parallel/rules.py")
        axes = []
        for ax in rules[name]:
            size = mesh.shape.get(ax, 1)
            if size == 1 or ax in used:
                continue
            if dim % (math.prod(mesh.shape[a] for a in axes) * size) == 0:
                axes.append(ax)
        used.update(axes)
        spec.append(tuple(axes) if len(axes) > 1 else (axes[0] if axes else None))
    return PartitionSpec(*spec)


def named_sharding(names, shape, mesh, rules=PARAM_RULES) -> NamedSharding:
    return NamedSharding(mesh, logical_to_spec(names, shape, mesh, rules))


def activation_rules(mesh) -> dict[str, tuple[str, ...]]:
    """Logical activation name -> mesh axes present in `mesh` (for bookft.model.axes.use_rules)."""
    return {k: tuple(a for a in v if mesh.shape.get(a, 1) > 1) for k, v in ACTIVATION_RULES.items()}
