"""Device mesh from config: named axes, sizes that multiply to the device count, -1 = the rest.

Axis names used by bookft: `data` (pure data parallel), `fsdp` (data parallel with sharded
parameters/optimizer state), `context` (sequence / ring axis), `context_ulysses` (the inner
all-to-all axis of usp), `tensor` (heads / mlp). Axes of size 1 are kept, so sharding rules and
attention strategies can name them whatever the hardware.

Multi-slice (devices carrying several `slice_index` values: TPU slices joined by the data-center
network): `parallel.dcn_mesh` says how many slices each axis spans; the mesh is then built by
`mesh_utils.create_hybrid_device_mesh`, so an axis of size n spanning k slices holds n/k devices of
one slice in a row, slice after slice, and every other axis stays inside a slice (its traffic on ICI).
Only `data` and `fsdp` may cross slices: their collectives are one gradient reduction (and, for fsdp,
parameter gathers) per step, while the context axes' ring / all-to-all and tensor's per-layer
reductions would run over DCN at a fraction of ICI's bandwidth.
"""

from __future__ import annotations

import math
import os

import numpy as np

from bookft.errors import ConfigError
from bookft.parallel.config import ParallelConfig

KNOWN_AXES = ("data", "fsdp", "context", "context_ulysses", "tensor")
CONTEXT_AXES = ("context", "context_ulysses")
DCN_AXES = ("data", "fsdp")  # the axes that may span slices (DCN)


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


def slice_count(devices) -> int:
    """How many slices `devices` span (their distinct `slice_index`; 1 when devices have none, as on CPU)."""
    return len({getattr(d, "slice_index", 0) for d in devices})


def resolve_dcn_sizes(dcn_cfg: dict[str, int], sizes: dict[str, int], n_slices: int) -> dict[str, int]:
    """Slices spanned per axis (1 for axes not named): `parallel.dcn_mesh` checked against the mesh and the
    devices' slices, or, when it is empty and there are several slices, all of them on `data` (else fsdp)."""
    unknown = [a for a in dcn_cfg if a not in sizes]
    if unknown:
        raise ConfigError(f"parallel.dcn_mesh: axis {unknown[0]!r} is not in parallel.mesh ({', '.join(sizes)})")
    bad = [a for a, k in dcn_cfg.items() if k < 1]
    if bad:
        raise ConfigError(f"parallel.dcn_mesh.{bad[0]}: slices must be >= 1, got {dcn_cfg[bad[0]]}")
    inner = [a for a, k in dcn_cfg.items() if k > 1 and a not in DCN_AXES]
    if inner:
        raise ConfigError(f"parallel.dcn_mesh.{inner[0]}: only {' and '.join(DCN_AXES)} may span slices; keep "
                          f"{inner[0]} inside a slice (its collectives need ICI, not the data-center network)")
    dcn = {a: 1 for a in sizes}
    if not dcn_cfg:
        if n_slices == 1:
            return dcn
        axis = next((a for a in DCN_AXES if sizes.get(a, 1) % n_slices == 0 and sizes.get(a, 1) > 1), None)
        if axis is None:
            raise ConfigError(f"parallel.mesh: the devices span {n_slices} slices, but neither data "
                              f"({sizes.get('data', 1)}) nor fsdp ({sizes.get('fsdp', 1)}) is a multiple of "
                              f"{n_slices}; set parallel.dcn_mesh (e.g. {{data: {n_slices}}}) and a mesh to match")
        dcn[axis] = n_slices
        return dcn
    dcn.update(dcn_cfg)
    for a, k in dcn.items():
        if sizes[a] % k:
            raise ConfigError(f"parallel.dcn_mesh.{a}={k}: does not divide parallel.mesh.{a}={sizes[a]} "
                              "(each slice must hold an equal part of the axis)")
    total = math.prod(dcn.values())
    if total != n_slices:
        desc = " x ".join(f"{a}={k}" for a, k in dcn_cfg.items())
        raise ConfigError(f"parallel.dcn_mesh: {desc} = {total} slices, but the devices span {n_slices} "
                          "(their slice_index)")
    return dcn


def device_array(cfg: ParallelConfig, devices) -> tuple[tuple[str, ...], np.ndarray]:
    """(axis names, array of `devices` in mesh shape): the configured axes; with several slices, the
    hybrid ICI x DCN layout of `parallel.dcn_mesh`."""
    devices = list(devices)
    sizes = resolve_axis_sizes(cfg.mesh, len(devices))
    names = tuple(sizes)
    shape = tuple(sizes[a] for a in names)
    n_slices = slice_count(devices)
    dcn = resolve_dcn_sizes(cfg.dcn_mesh, sizes, n_slices)
    from jax.experimental import mesh_utils

    if n_slices > 1:
        per_slice = {}
        for d in devices:
            per_slice.setdefault(d.slice_index, []).append(d)
        counts = sorted({len(v) for v in per_slice.values()})
        if len(counts) > 1:
            raise ConfigError(f"parallel.dcn_mesh: the slices hold different device counts ({counts})")
        ici = tuple(sizes[a] // dcn[a] for a in names)
        dcn_shape = tuple(dcn[a] for a in names)
        try:
            arr = mesh_utils.create_hybrid_device_mesh(ici, dcn_shape, devices, allow_split_physical_axes=True)
        except Exception:  # devices without a physical topology (tests, unusual hosts): plain order per slice
            blocks = [np.asarray(per_slice[k], dtype=object).reshape(ici) for k in sorted(per_slice)]
            grid = np.empty(len(blocks), dtype=object)
            grid[:] = blocks
            arr = np.block(grid.reshape(dcn_shape).tolist())
        return names, arr
    try:
        arr = mesh_utils.create_device_mesh(shape, devices=devices, allow_split_physical_axes=True)
    except Exception:  # CPU devices / unusual topologies: plain order
        arr = np.asarray(devices, dtype=object).reshape(shape)
    return names, arr


def make_mesh(cfg: ParallelConfig, devices=None):
    """A `jax.sharding.Mesh` (Auto axes) over `devices` (default all) with the configured axes."""
    import jax

    names, arr = device_array(cfg, list(jax.devices()) if devices is None else devices)
    return jax.sharding.Mesh(arr, names)


def context_degree(mesh) -> int:
    """Number of sequence shards: the product of the mesh's context axes."""
    return math.prod(mesh.shape.get(a, 1) for a in CONTEXT_AXES)


def batch_axes(mesh) -> tuple[str, ...]:
    return tuple(a for a in ("data", "fsdp") if a in mesh.shape)
