"""Helpers shared by the model tests."""

import numpy as np

from bookft.model import forward_logits


def greedy_without_cache(model, ids, n):
    """n greedy tokens by full recomputation each step, the reference for the KV-cache decode; padded to
    one length (causal: the padding is never seen)."""
    b, s = ids.shape
    buf = np.zeros((b, s + n), np.int32)
    buf[:, :s] = ids
    for t in range(s, s + n):
        buf[:, t] = forward_logits(model, buf)[:, t - 1].argmax(-1)
    return buf[:, s:]
