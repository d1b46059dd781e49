"""How eval lays sequences out for the model: bucketed lengths, zig-zag order, shardings, params.

Design choices:
- Lengths are bucketed so a grid of lengths (and the prompts of generation, whose lengths differ
  by a few tokens) compiles once per bucket: first up to a power-of-two-ish grid
  (`per_octave` steps per doubling, 2^k * (1 + j/per_octave): at most 1/per_octave padding), then
  up to what the attention needs (`LengthRule`: 2*cp chunks, whole kernel blocks per chunk).
  Padding comes after the real tokens with segment id 0, so no real query attends to it and the
  results do not change.
- With a mesh whose context axes are larger than 1, sequences go through the same layout as the
  train data path feeds the same `attend`: zig-zag order (`bookft.attention.load_balance`) when
  the strategy balances, sharded along S over the context axes and along B over data/fsdp (rows
  padded to a multiple of those axes with empty rows).
- Positions are chosen in natural coordinates (the teacher-forced window, the last prompt
  token) and looked up in stored order with `stored_index`, so nothing of size [S, D] is
  reordered or gathered: selection is a one-hot contraction (see drivers and model.generate).
- Parameters are placed with the train state's shardings (`bookft.train.step.state_shardings`:
  the logical names of bookft.parallel.rules), and model code is traced under the train
  activation rules (`model_rules`), so eval at 1M tokens has the memory layout training has.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from bookft.attention.resolution import CONTEXT_AXES, context_degree

BATCH_AXES = ("data", "fsdp")


@dataclass(frozen=True)
class LengthRule:
    """Valid sequence lengths for a strategy/kernel: whole 2*cp chunks, and whole blocks per chunk
    once a chunk is longer than one block (kernels use a single block of min(block, chunk))."""

    chunks: int = 1
    block: int = 1

    def __call__(self, n: int) -> int:
        chunk = -(-n // self.chunks)
        if chunk > self.block:
            chunk = -(-chunk // self.block) * self.block
        return chunk * self.chunks


def length_rule(attention_cfg: Any | None, mesh=None) -> LengthRule:
    if attention_cfg is None:
        return LengthRule()
    block = 1 if attention_cfg.kernel == "reference" else max(attention_cfg.block_q, attention_cfg.block_kv)
    return LengthRule(chunks=2 * context_degree(mesh), block=block)  # local is cp=1: 2 chunks


def bucket_length(n: int, per_octave: int) -> int:
    """Smallest 2^k * (1 + j/per_octave) (rounded up to an integer) that is >= n; n if per_octave is 0."""
    if per_octave <= 0 or n <= 2:
        return n
    base = 1 << (n.bit_length() - 1)  # 2^k <= n < 2^(k+1)
    for j in range(per_octave + 1):
        cand = base + -(-base * j // per_octave)
        if cand >= n:
            return cand
    return 2 * base  # not reached


@dataclass(frozen=True)
class SeqLayout:
    """mesh None = one device, natural order. balanced: the attend expects zig-zag order."""

    mesh: Any = None
    balanced: bool = False
    rule: LengthRule = LengthRule()
    per_octave: int = 4

    @property
    def cp(self) -> int:
        return context_degree(self.mesh)

    @property
    def rows(self) -> int:
        """Batch rows must be a multiple of this (the data/fsdp axes the batch is sharded over)."""
        return 1 if self.mesh is None else math.prod(self.mesh.shape.get(a, 1) for a in BATCH_AXES)

    def length(self, n: int) -> int:
        """Padded sequence length for n tokens: the bucket, then the attention's length rule."""
        return self.rule(bucket_length(n, self.per_octave))

    def describe(self) -> dict:
        return {"context_degree": self.cp, "load_balanced": self.balanced and self.cp > 1,
                "length_rule": {"chunks": self.rule.chunks, "block": self.rule.block},
                "buckets_per_octave": self.per_octave,
                "mesh": dict(self.mesh.shape) if self.mesh is not None else None}

    def stored_index(self, s: int) -> np.ndarray:
        """[s] int: where natural position i of a length-s sequence sits in stored order."""
        if not (self.balanced and self.cp > 1):
            return np.arange(s, dtype=np.int32)
        from bookft.attention.balance import load_balance

        natural_at = load_balance(np.arange(s, dtype=np.int32)[None], self.cp, axis=1)[0]
        return np.argsort(natural_at).astype(np.int32)

    def pad_rows(self, x: np.ndarray, fill: int = 0) -> np.ndarray:
        extra = -x.shape[0] % self.rows
        if not extra:
            return x
        return np.concatenate([x, np.full((extra, *x.shape[1:]), fill, x.dtype)])

    def arrange(self, *arrays: np.ndarray) -> tuple:
        """[B,S] host arrays (natural order) -> device arrays [B',S], B' = B rounded up to `rows`,
        in stored order and sharded as the attend expects. Without a mesh: the arrays as they are."""
        if self.mesh is None:
            return arrays
        import jax
        from jax.sharding import NamedSharding, PartitionSpec

        out = [self.pad_rows(np.asarray(a)) for a in arrays]
        if self.balanced and self.cp > 1:
            from bookft.attention.balance import load_balance

            out = [load_balance(a, self.cp, axis=1) for a in out]
        batch = tuple(a for a in BATCH_AXES if self.mesh.shape.get(a, 1) > 1) or None
        seq = tuple(a for a in CONTEXT_AXES if a in self.mesh.shape) or None
        sharding = NamedSharding(self.mesh, PartitionSpec(batch, seq))
        return tuple(jax.device_put(a, sharding) for a in out)

    def rules(self):
        """Context in which model code is traced: the train activation rules on this mesh."""
        if self.mesh is None:
            return contextlib.nullcontext()
        from bookft.model.axes import use_rules
        from bookft.train.step import model_rules

        return use_rules(self.mesh, model_rules(self.mesh))

    def place(self, model):
        """The model with its parameters on the mesh, sharded as training shards them (a new
        Decoder sharing nothing mutable with `model`); the model itself without a mesh."""
        if self.mesh is None:
            return model
        import jax
        from flax import nnx

        from bookft.train.step import state_shardings

        graphdef, state = nnx.split(model)
        return nnx.merge(graphdef, jax.device_put(state, state_shardings(state, self.mesh)))
