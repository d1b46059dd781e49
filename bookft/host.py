"""Host copies of device arrays: what eval and decoding read back, the same on every process.

It sits at the bottom layer (next to config and errors) because both the model (greedy decoding
reads its tokens back) and eval need it, and the model knows nothing of meshes or of parallel/.
"""

from __future__ import annotations


def to_host(x, dtype=None):
    """A (possibly sharded) jax array as a numpy array on every process. On one host that is a
    plain copy; across hosts the shards other processes hold are gathered first
    (multihost_utils.process_allgather), so results (eval logits, decoded tokens) read the same
    on every host."""
    import numpy as np

    if getattr(x, "is_fully_addressable", True):
        return np.asarray(x, dtype=dtype)
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True), dtype=dtype)
