"""TPU topology names as libtpu writes them (`v5p:4x4x4`) and as users say them (`v5p-128`).

In the `gen-N` form N counts TensorCores, as Google Cloud names slices: a v4/v5p chip (megacore)
has 2, a v5e/v6e chip 1; an Ironwood (v7) chip has 2 TensorCores that JAX shows as 2 devices.
Shapes for `gen-N` follow Cloud TPU's standard slice shapes (3D torus for v4/v5p/v7, 2D for
v5e/v6e). Chip facts (HBM, peak bf16 FLOP/s) are in bookft/parallel/hardware.py.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass

from bookft.errors import PlanError
from bookft.parallel.hardware import CHIPS, Chip


@dataclass(frozen=True)
class Generation:
    libtpu_name: str
    chip_config: str
    dims: int  # 3 = 3D torus, 2 = 2D
    cores_per_chip: int  # TensorCores per chip (the N in `gen-N` counts these)
    devices_per_chip: int  # JAX devices per chip
    chip: Chip


GENERATIONS: dict[str, Generation] = {
    "v4": Generation("v4", "megacore", 3, 2, 1, CHIPS["v4"]),
    "v5p": Generation("v5p", "megacore", 3, 2, 1, CHIPS["v5p"]),
    "v5e": Generation("v5e", "default", 2, 1, 1, CHIPS["v5e"]),
    "v6e": Generation("v6e", "default", 2, 1, 1, CHIPS["v6e"]),
    "v7": Generation("tpu7x", "default", 3, 2, 2, CHIPS["v7"]),
}
ALIASES = {"v5litepod": "v5e", "v5lite": "v5e", "trillium": "v6e", "v7x": "v7", "tpu7x": "v7", "ironwood": "v7",
           "v5": "v5p"}

# chips -> standard slice shape
SHAPES_3D = {1: (1, 1, 1), 2: (1, 2, 1), 4: (2, 2, 1), 8: (2, 2, 2), 16: (2, 2, 4), 32: (2, 4, 4), 64: (4, 4, 4),
             128: (4, 4, 8), 256: (4, 8, 8), 512: (8, 8, 8), 1024: (8, 8, 16), 2048: (8, 16, 16),
             4096: (16, 16, 16), 8960: (16, 20, 28)}
SHAPES_2D = {1: (1, 1), 4: (2, 2), 8: (2, 4), 16: (4, 4), 32: (4, 8), 64: (8, 8), 128: (8, 16), 256: (16, 16)}


@dataclass(frozen=True)
class Topology:
    generation: str
    shape: tuple[int, ...]
    gen: Generation

    @property
    def chips(self) -> int:
        return math.prod(self.shape)

    @property
    def n_devices(self) -> int:
        return self.chips * self.gen.devices_per_chip

    @property
    def libtpu_name(self) -> str:
        return f"{self.gen.libtpu_name}:{'x'.join(map(str, self.shape))}"

    @property
    def user_name(self) -> str:
        return f"{self.generation}-{self.chips * self.gen.cores_per_chip}"

    @property
    def hbm_per_device(self) -> float:
        return self.gen.chip.hbm_bytes / self.gen.devices_per_chip

    @property
    def flops_per_device(self) -> float:
        return self.gen.chip.peak_bf16_flops / self.gen.devices_per_chip


def parse_topology(name: str) -> Topology:
    """`v5p:4x4x4`, `v5p-128`, `v6e:2x4`, `v6e-8`, `v7:2x2x1`, `tpu7x-8` -> Topology."""
    s = name.strip().lower()
    m = re.fullmatch(r"([a-z0-9]+):(\d+(?:x\d+)+)", s)
    m2 = re.fullmatch(r"([a-z0-9]+)-(\d+)", s)
    if not (m or m2):
        raise PlanError(f"topology {name!r}: expected GEN:AxBxC (v5p:4x4x4) or GEN-N (v5p-128); "
                        f"generations: {', '.join(GENERATIONS)}")
    gen_name = (m or m2).group(1)
    gen_name = ALIASES.get(gen_name, gen_name)
    if gen_name not in GENERATIONS:
        raise PlanError(f"topology {name!r}: unknown TPU generation {gen_name!r} "
                        f"(known: {', '.join(GENERATIONS)})")
    gen = GENERATIONS[gen_name]
    if m:
        shape = tuple(int(x) for x in m.group(2).split("x"))
        if len(shape) != gen.dims:
            raise PlanError(f"topology {name!r}: {gen_name} slices are {gen.dims}-D (e.g. "
                            f"{gen_name}:{'x'.join(['2'] * gen.dims)})")
    else:
        cores = int(m2.group(2))
        if cores % gen.cores_per_chip:
            raise PlanError(f"topology {name!r}: {gen_name}-N counts TensorCores ({gen.cores_per_chip} per chip)")
        chips = cores // gen.cores_per_chip
        table = SHAPES_3D if gen.dims == 3 else SHAPES_2D
        if chips not in table:
            raise PlanError(f"topology {name!r}: no standard {gen_name} slice with {chips} chips "
                            f"(known: {', '.join(f'{gen_name}-{c * gen.cores_per_chip}' for c in table)})")
        shape = table[chips]
    return Topology(gen_name, shape, gen)


def topology_devices(topo: Topology):
    """The abstract TPU devices of `topo` (needs libtpu; no TPU needed)."""
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")  # AOT only: several processes may plan at once
    os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v5p-8")  # quiets libtpu's start-up probing
    os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
    try:
        import libtpu  # noqa: F401
    except ImportError:
        raise PlanError("bookft plan compiles for TPU ahead of time and needs libtpu: "
                        "pip install 'bookft[tpu]'") from None
    from jax.experimental import topologies

    shape = topo.shape if len(topo.shape) == 3 else (*topo.shape, 1)
    bounds = tuple(min(2, s) for s in shape[:2]) + (1,)
    try:
        desc = topologies.get_topology_desc(platform="tpu", topology_name=topo.libtpu_name,
                                            chip_config_name=topo.gen.chip_config, chips_per_host_bounds=bounds,
                                            num_slices=1)
    except Exception as e:
        raise PlanError(f"libtpu does not know topology {topo.libtpu_name} ({str(e).splitlines()[0][:200]})") from None
    return list(desc.devices)
