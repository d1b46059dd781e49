"""Mesh configuration: axis sizes by name; -1 means "the rest of the devices"."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class ParallelConfig:
    # Named mesh axes in order (outermost first). Sizes multiply to the device count; one may be -1.
    mesh: dict[str, int] = field(default_factory=lambda: {"data": 1, "fsdp": -1, "context": 1})
    # Multi-slice (TPU slices joined by the data-center network, DCN): how many slices each axis spans,
    # e.g. {data: 2}; only `data` and `fsdp` may cross slices and the sizes multiply to the slice count.
    # The `mesh` sizes stay the whole job's. Empty: one slice, or all slices on `data` (else `fsdp`).
    dcn_mesh: dict[str, int] = field(default_factory=dict)
    # On a CPU host: how many simulated devices to ask XLA for (0 = leave as is); in a job of N
    # processes (bookft launch) this is the whole job's count, each process taking 1/N of it.
    cpu_devices: int = 0
    # Multi-host: call jax.distributed.initialize() ("auto": when the environment says so).
    distributed: bool | None = None
