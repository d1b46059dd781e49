"""Logical axis names and activation sharding constraints.

Design choices:
- The model never sees a Mesh or PartitionSpec. Parameters carry logical names as nnx metadata
  (`out_sharding=("layers", "embed", ...)`, the flax 0.12 name for the `sharding` metadata), and
  activations call `constrain(x, ("batch", "seq", "embed"))`.
- `constrain` is a no-op unless `use_rules(mesh, rules)` is active (a contextvar, so nested and
  thread-safe). `bookft.parallel` owns the rules table: {logical name: mesh axis | tuple | None}.
- A logical name missing from an active rules table is an error (a typo must not silently mean
  "replicated"); map it to None (or ()) to replicate.
- Rules are read when a function is traced: activate them around the first call of a jitted step
  (jax's jit cache does not see the contextvar, so a function traced without rules keeps none).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator, Mapping, Sequence

import jax
from jax.sharding import NamedSharding, PartitionSpec

from bookft.errors import ConfigError

PARAM_AXES = ("vocab", "embed", "mlp", "q_heads", "kv_heads", "head_dim", "layers", "lora_rank")
ACTIVATION_AXES = ("batch", "seq", "embed", "heads", "kv_heads", "head_dim", "mlp", "vocab")
LOGICAL_AXES = tuple(dict.fromkeys(PARAM_AXES + ACTIVATION_AXES))

Rules = Mapping[str, str | tuple[str, ...] | None]
_ACTIVE: contextvars.ContextVar[tuple[jax.sharding.Mesh, Rules] | None] = contextvars.ContextVar(
    "bookft_axis_rules", default=None)


def logical_to_spec(names: Sequence[str | None], rules: Rules) -> PartitionSpec:
    """("batch", "seq", "embed") -> PartitionSpec(("data", "fsdp"), "context", None)."""
    out = []
    for name in names:
        if name is None:
            out.append(None)
            continue
        if name not in rules:
            raise ConfigError(f"logical axis {name!r} has no entry in the sharding rules "
                              f"(known: {', '.join(sorted(rules))}); map it to a mesh axis or None")
        out.append(rules[name])
    return PartitionSpec(*out)


@contextlib.contextmanager
def use_rules(mesh: jax.sharding.Mesh, rules: Rules) -> Iterator[None]:
    """Activate `rules` (logical name -> mesh axis or None) for `constrain` inside the block."""
    token = _ACTIVE.set((mesh, dict(rules)))
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def active_rules() -> tuple[jax.sharding.Mesh, Rules] | None:
    return _ACTIVE.get()


def seq_shards() -> int:
    """How many devices the active rules split the "seq" axis over (1 without rules)."""
    active = _ACTIVE.get()
    if active is None or not active[1].get("seq"):
        return 1
    mesh, rules = active
    axes = rules["seq"] if isinstance(rules["seq"], tuple | list) else (rules["seq"],)
    return math.prod(mesh.shape[a] for a in axes)


def constrain(x: jax.Array, names: Sequence[str | None]) -> jax.Array:
    """with_sharding_constraint by logical names; identity when no rules are active."""
    active = _ACTIVE.get()
    if active is None:
        return x
    mesh, rules = active
    if len(names) != x.ndim:
        raise ConfigError(f"constrain: {len(names)} axis names {tuple(names)} for an array of rank {x.ndim}")
    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, logical_to_spec(names, rules)))
