"""Multi-slice meshes (`parallel.dcn_mesh`, issue 18): the axis layout over devices of several slices,
with stand-in device objects carrying `slice_index` (no multi-slice hardware here: the layout is what
is checked, not a run). An axis that spans k slices holds one slice's devices in each of k blocks;
every other axis stays inside a slice; sizes that do not match the slices are config errors."""

from dataclasses import dataclass

import numpy as np
import pytest

from bookft.errors import ConfigError
from bookft.parallel.config import ParallelConfig
from bookft.parallel.mesh import device_array, resolve_dcn_sizes, slice_count


@dataclass(frozen=True)
class FakeDevice:
    id: int
    slice_index: int
    platform: str = "cpu"  # jax's create_hybrid_device_mesh: plain order inside each slice
    device_kind: str = "cpu"
    process_index: int = 0


@dataclass(frozen=True)
class FakeTpu(FakeDevice):
    platform: str = "tpu"  # no coords: jax's physical layout fails, bookft's per-slice fallback is used
    device_kind: str = "TPU v5p"


def devices(slices: int, per_slice: int, cls=FakeDevice):
    return [cls(i, i // per_slice, process_index=i // 4) for i in range(slices * per_slice)]


def slices_of(arr: np.ndarray) -> np.ndarray:
    return np.vectorize(lambda d: d.slice_index)(arr)


@pytest.mark.parametrize("cls", [FakeDevice, FakeTpu])
def test_data_spans_slices_context_stays_inside(cls):
    cfg = ParallelConfig(mesh={"data": 4, "fsdp": 2, "context": 2}, dcn_mesh={"data": 2})
    names, arr = device_array(cfg, devices(2, 8, cls))
    assert names == ("data", "fsdp", "context") and arr.shape == (4, 2, 2)
    s = slices_of(arr)
    assert (s[:2] == 0).all() and (s[2:] == 1).all()  # data 0-1 on slice 0, 2-3 on slice 1
    for i in range(4):  # each data index: one slice holds all its fsdp x context devices
        assert len(np.unique(s[i])) == 1
    assert sorted(d.id for d in arr.ravel()) == list(range(16))  # every device once


def test_fsdp_across_slices_and_the_default():
    cfg = ParallelConfig(mesh={"data": 1, "fsdp": 8, "context": 2}, dcn_mesh={"fsdp": 4})
    _, arr = device_array(cfg, devices(4, 4))
    s = slices_of(arr)[0]  # (fsdp, context)
    assert [sorted(set(s[2 * k:2 * k + 2].ravel())) for k in range(4)] == [[0], [1], [2], [3]]
    assert all(len(set(s[:, c])) == 4 for c in range(2)) and all(len(set(s[f])) == 1 for f in range(8))
    # no dcn_mesh: all slices on data when it divides, else on fsdp
    sizes = {"data": 2, "fsdp": 4, "context": 2}
    assert resolve_dcn_sizes({}, sizes, 2) == {"data": 2, "fsdp": 1, "context": 1}
    assert resolve_dcn_sizes({}, sizes, 4) == {"data": 1, "fsdp": 4, "context": 1}
    assert resolve_dcn_sizes({}, sizes, 1) == {"data": 1, "fsdp": 1, "context": 1}
    _, auto = device_array(ParallelConfig(mesh={"data": 2, "fsdp": -1, "context": 2}), devices(2, 8))
    assert (slices_of(auto)[0] == 0).all() and (slices_of(auto)[1] == 1).all()


def test_one_slice_is_the_plain_mesh():
    devs = [FakeDevice(i, 0) for i in range(8)]
    assert slice_count(devs) == 1 and slice_count([object()]) == 1  # CPU devices carry no slice_index
    names, arr = device_array(ParallelConfig(mesh={"data": 2, "fsdp": -1, "context": 2}), devs)
    assert arr.shape == (2, 2, 2) and [d.id for d in arr.ravel()] == list(range(8))


@pytest.mark.parametrize("mesh, dcn, slices, words", [
    ({"data": 4, "fsdp": 2, "context": 2}, {"data": 4}, 2, "data=4 = 4 slices, but the devices span 2"),
    ({"data": 2, "fsdp": 4, "context": 2}, {"data": 2, "fsdp": 2}, 2, "data=2 x fsdp=2 = 4 slices"),
    ({"data": 1, "fsdp": 4, "context": 4}, {"context": 2}, 2, "only data and fsdp may span slices"),
    ({"data": 1, "fsdp": 8, "tensor": 2}, {"tensor": 2}, 2, "keep tensor inside a slice"),
    ({"data": 2, "fsdp": 2, "context": 4}, {"data": 4}, 4, "dcn_mesh.data=4: does not divide parallel.mesh.data=2"),
    ({"data": 2, "fsdp": 8}, {"replica": 2}, 2, "axis 'replica' is not in parallel.mesh"),
    ({"data": 1, "fsdp": 1, "context": 16}, {}, 2, "neither data (1) nor fsdp (1) is a multiple of 2"),
    ({"data": 4, "fsdp": 2, "context": 2}, {"data": 2}, 1, "= 2 slices, but the devices span 1"),
])
def test_layouts_that_cannot_match_the_slices_are_config_errors(mesh, dcn, slices, words):
    with pytest.raises(ConfigError, match="parallel") as e:
        device_array(ParallelConfig(mesh=mesh, dcn_mesh=dcn), devices(slices, 16 // slices))
    assert words in str(e.value)


def test_uneven_slices_are_refused():
    devs = [FakeDevice(i, 0 if i < 6 else 1) for i in range(8)]
    with pytest.raises(ConfigError, match="different device counts"):
        device_array(ParallelConfig(mesh={"data": 2, "fsdp": 4}, dcn_mesh={"data": 2}), devs)
