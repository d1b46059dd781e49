"""A minimal safetensors reader that reads tensors with plain file reads, never mmap.

Why not `safetensors.safe_open`: it memory-maps the file, and every page a tensor read touches
stays mapped, so it counts in the process's RSS until the file is closed: loading a whole model
that way peaks at model + checkpoint. Reading into fresh numpy buffers keeps host memory to the
model plus one slice. Format: 8-byte little-endian header length, a JSON header
{name: {dtype, shape, data_offsets: [begin, end]}}, then the raw little-endian bytes.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import ml_dtypes
import numpy as np

from bookft.errors import ModelError

DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16,
          "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
MAX_HEADER = 100 << 20


class SafetensorsFile:
    """Header parsed on open; `shape(name)`, `read(name, r0, r1)` (rows of the first axis)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self._f = open(self.path, "rb")  # noqa: SIM115 - closed by close()/context manager
            n = struct.unpack("<Q", self._f.read(8))[0]
            if n > MAX_HEADER:
                raise ValueError(f"header of {n} bytes")
            header = json.loads(self._f.read(n))
        except (OSError, struct.error, ValueError, UnicodeDecodeError) as e:
            raise ModelError(f"{self.path}: not a valid safetensors file ({e})") from None
        header.pop("__metadata__", None)
        self._data = 8 + n
        self.tensors = header
        for name, info in header.items():
            if info.get("dtype") not in DTYPES:
                raise ModelError(f"{self.path}: tensor {name!r} has unsupported dtype {info.get('dtype')!r}")

    def keys(self) -> list[str]:
        return list(self.tensors)

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self.tensors[name]["shape"])

    def read(self, name: str, r0: int = 0, r1: int | None = None) -> np.ndarray:
        info = self.tensors[name]
        shape, dtype = tuple(info["shape"]), np.dtype(DTYPES[info["dtype"]])
        begin, end = info["data_offsets"]
        rows = shape[0] if shape else 1
        r1 = rows if r1 is None else r1
        row_bytes = (end - begin) // max(rows, 1)
        out = np.empty(((r1 - r0), *shape[1:]) if shape else (), dtype)
        self._f.seek(self._data + begin + r0 * row_bytes)
        buf = out.reshape(-1).view(np.uint8)
        if self._f.readinto(buf) != buf.size:
            raise ModelError(f"{self.path}: tensor {name!r} is truncated")
        return out

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> SafetensorsFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
