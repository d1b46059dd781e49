"""Device mesh from config: named axes, sizes that multiply to the device count, -1 = the rest.

Axis names used by bookft: `data` (pure data parallel), `fsdp` (data parallel with sharded
parameters/optimizer state), `context` (sequence / ring axis), `context_ulysses` (the inner
all-to-all axis of usp), `tensor` (heads / mlp). Axes of size 1 are kept, so sharding rules and
attention strategies can name them whatever the hardware.
"""

from __future__ import annotations

import math
import os

import numpy as np

from bookft.errors import ConfigError
from bookft.parallel.config import ParallelConfig

KNOWN_AXES = ("data", "fsdp", "context", "context_ulysses", "tensor")
CONTEXT_AXES = ("context", "context_ulysses")


def resolve_axis_sizes(mesh_cfg: dict[str, int], n_devices: int) -> dict[str, int]:
    """Replace a single -1 by the devices left over; check the product equals `n_devices`."""
    unknown = [a for a in mesh_cfg if a not in KNOWN_AXES]
    if unknown:
        raise ConfigError(f"parallel.mesh: unknown axis {unknown[0]!r} (known: {', '.join(KNOWN_AXES)})")
    sizes = dict(mesh_cfg)
    rest = [a for a, s in sizes.items() if s == -1]
    if len(rest) > 1:
        raise ConfigError(f"parallel.mesh: only one axis may be -1, got {', '.join(rest)}")
    bad = [a for a, s in sizes.items() if s == 0 or s < -1]
    if bad:
        raise ConfigError(f"parallel.mesh.{bad[0]}: size must be positive or -1, got {sizes[bad[0]]}")
    fixed = math.prod(s for s in sizes.values() if s != -1)
    if rest:
        if n_devices % fixed:
            raise ConfigError(
                f"parallel.mesh: fixed axis sizes multiply to {fixed}, which does not divide the "
                f"{n_devices} devices, so {rest[0]}=-1 has no size")
        sizes[rest[0]] = n_devices // fixed
    total = math.prod(sizes.values())
    if total != n_devices:
        desc = " x ".join(f"{a}={s}" for a, s in sizes.items())
        raise ConfigError(f"parallel.mesh: {desc} = {total} devices, but {n_devices} are available")
    return sizes


def ensure_cpu_devices(n: int, exact: bool = False) -> None:
    """Ask XLA for `n` simulated CPU devices (at least `n`: a count XLA_FLAGS already asks for stays
    when larger, unless `exact`); must run before jax initialises its backend."""
    if n <= 0:
        return
    flag = f"--xla_force_host_platform_device_count={n}"
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {flag}".strip()
    import jax

    try:
        jax.config.update("jax_num_cpu_devices", n if exact else max(n, _current_cpu_count(flags)))
    except Exception:  # backend already initialised: XLA_FLAGS (set above or earlier) decides
        pass


def _current_cpu_count(flags: str) -> int:
    for part in flags.split():
        if part.startswith("--xla_force_host_platform_device_count="):
            return int(part.split("=", 1)[1])
    return 1


def make_mesh(cfg: ParallelConfig, devices=None):
    """A `jax.sharding.Mesh` (Auto axes) over `devices` (default all) with the configured axes."""
    import jax

    devices = list(jax.devices()) if devices is None else list(devices)
    sizes = resolve_axis_sizes(cfg.mesh, len(devices))
    names = tuple(sizes)
    shape = tuple(sizes[a] for a in names)
    try:
        from jax.experimental import mesh_utils

        arr = mesh_utils.create_device_mesh(shape, devices=devices, allow_split_physical_axes=True)
    except Exception:  # CPU devices / unusual topologies: plain order
        arr = np.asarray(devices, dtype=object).reshape(shape)
    return jax.sharding.Mesh(arr, names)


def context_degree(mesh) -> int:
    """Number of sequence shards: the product of the mesh's context axes."""
    return math.prod(mesh.shape.get(a, 1) for a in CONTEXT_AXES)


def batch_axes(mesh) -> tuple[str, ...]:
    return tuple(a for a in ("data", "fsdp") if a in mesh.shape)
