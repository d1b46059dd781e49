"""to_host: a sharded result reads back whole (one host here; process_allgather across hosts)."""

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from bookft.host import to_host


def test_to_host_of_a_sharded_array():
    mesh = jax.make_mesh((4,), ("context",), devices=jax.devices()[:4])
    x = np.arange(32, dtype=np.float32).reshape(2, 16)
    y = jax.device_put(x, NamedSharding(mesh, PartitionSpec(None, "context")))
    got = to_host(y, np.float64)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, x)
