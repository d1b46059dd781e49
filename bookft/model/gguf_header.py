"""Read and check a GGUF file's header before anything heavy touches it.

Design choices:
- A small reader of our own (GGUF v2/v3: magic, metadata, tensor table), not gguf-py's
  GGUFReader (which parses every vocabulary string into numpy views: about 4 s for a 135M model)
  nor transformers' private reader. Arrays of strings (vocabulary, merges) are walked, not kept.
- Every failure is a ModelError that names the file: not a GGUF file (magic), an unsupported
  version, a truncated file (the header runs past the end, or the tensor data the table describes
  ends after the last byte), a corrupt one (bad UTF-8, impossible counts or offsets).
- Tensor byte sizes come from gguf-py's GGML_QUANT_SIZES (the `bookft[gguf]` extra), so a new
  quantization type needs no table here. Whether a type can be dequantized is asked of gguf-py
  itself by dequantizing one zero block (`dequantizable_types`), the same function transformers'
  GGUF loader calls for the Llama family.
"""

from __future__ import annotations

import dataclasses
import mmap
import struct
from pathlib import Path

from bookft.errors import ModelError

MAGIC = b"GGUF"
VERSIONS = (2, 3)
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


class _Truncated(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class GgufTensor:
    name: str
    shape: tuple[int, ...]  # ggml order (fastest-moving first), as the file stores it
    type_id: int
    offset: int  # from the start of the data section


@dataclasses.dataclass(frozen=True)
class GgufHeader:
    path: Path
    version: int
    metadata: dict  # scalars and strings; arrays of strings are kept as their length
    tensors: tuple[GgufTensor, ...]
    data_start: int
    file_size: int

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))


class _Cursor:
    def __init__(self, buf, pos: int = 0):
        self.buf, self.pos = buf, pos

    def unpack(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.buf):
            raise _Truncated
        value = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return value[0] if len(value) == 1 else value

    def string(self, where: str) -> str:
        n = self.unpack("<Q")
        if self.pos + n > len(self.buf):
            raise _Truncated
        raw = self.buf[self.pos:self.pos + n]
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ModelError(f"{where}: a metadata string is not valid UTF-8; the file is corrupt") from None

    def value(self, type_id: int, where: str):
        if type_id in _SCALARS:
            return self.unpack(_SCALARS[type_id])
        if type_id == _STRING:
            return self.string(where)
        if type_id == _ARRAY:
            item_type, count = self.unpack("<IQ")
            if item_type in _SCALARS:
                size = struct.calcsize(_SCALARS[item_type]) * count
                if self.pos + size > len(self.buf):
                    raise _Truncated
                self.pos += size
                return count
            if item_type != _STRING:
                raise ModelError(f"{where}: metadata array of value type {item_type} is not GGUF; the file is corrupt")
            for _ in range(count):
                n = self.unpack("<Q")
                self.pos += n
                if self.pos > len(self.buf):
                    raise _Truncated
            return count
        raise ModelError(f"{where}: metadata value type {type_id} is not GGUF; the file is corrupt")


def tensor_nbytes(tensor: GgufTensor, where: str) -> int:
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    try:
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType(tensor.type_id)]
    except (ValueError, KeyError):
        raise ModelError(f"{where}: tensor {tensor.name!r} has ggml type {tensor.type_id}, which this gguf package "
                         "does not know; the file is corrupt or newer than gguf (pip install -U gguf)") from None
    elements = 1
    for d in tensor.shape:
        elements *= d
    return elements // block * size


def type_name(type_id: int) -> str:
    from gguf import GGMLQuantizationType

    try:
        return GGMLQuantizationType(type_id).name
    except ValueError:
        return f"type {type_id}"


def dequantizable_types(type_ids) -> dict[int, bool]:
    """{ggml type id: whether gguf-py can dequantize it}, probed on one zero block."""
    import numpy as np
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, dequantize

    out = {}
    for t in set(type_ids):
        try:
            qtype = GGMLQuantizationType(t)
            dequantize(np.zeros(GGML_QUANT_SIZES[qtype][1], np.uint8), qtype)
            out[t] = True
        except (NotImplementedError, ValueError, KeyError):
            out[t] = False
    return out


def read_gguf_header(path: str | Path) -> GgufHeader:
    """Parse and bounds-check `path`'s GGUF header; the tensor data is not read."""
    path = Path(path)
    where = str(path)
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(4)
        if head != MAGIC:
            raise ModelError(f"{where}: not a GGUF file (it starts with {head!r}, a GGUF file with b'GGUF'); "
                             "pass a .gguf file or a folder transformers can read")
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        cur = _Cursor(buf, 4)
        try:
            version = cur.unpack("<I")
            if version not in VERSIONS:
                raise ModelError(f"{where}: GGUF version {version} is not supported (supported: 2, 3); "
                                 "re-convert it with a recent llama.cpp")
            n_tensors, n_kv = cur.unpack("<QQ")
            if n_tensors > size or n_kv > size:
                raise ModelError(f"{where}: header claims {n_tensors} tensors and {n_kv} metadata keys in a "
                                 f"{size}-byte file; the file is corrupt")
            metadata = {}
            for _ in range(n_kv):
                key = cur.string(where)
                metadata[key] = cur.value(cur.unpack("<I"), f"{where} ({key})")
            tensors = []
            for _ in range(n_tensors):
                name = cur.string(where)
                n_dims = cur.unpack("<I")
                if n_dims > 8:
                    raise ModelError(f"{where}: tensor {name!r} claims {n_dims} dimensions; the file is corrupt")
                shape = tuple(cur.unpack("<Q") for _ in range(n_dims))
                type_id, offset = cur.unpack("<IQ")
                tensors.append(GgufTensor(name, shape, type_id, offset))
        except _Truncated:
            raise ModelError(f"{where}: truncated: the GGUF header ends past the file's last byte ({size} bytes); "
                             "download or copy the file again") from None
    finally:
        buf.close()
    align = int(metadata.get("general.alignment", 32)) or 32
    data_start = (cur.pos + align - 1) // align * align
    header = GgufHeader(path, version, metadata, tuple(tensors), data_start, size)
    end = max((data_start + t.offset + tensor_nbytes(t, where) for t in tensors), default=data_start)
    if end > size:
        raise ModelError(f"{where}: truncated: its tensor table needs {end:,} bytes, the file has {size:,}; "
                         "download or copy the file again")
    if "general.architecture" not in metadata:
        raise ModelError(f"{where}: no general.architecture in the GGUF metadata; the file is corrupt")
    return header
