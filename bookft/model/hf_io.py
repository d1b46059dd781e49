"""Load and save Hugging Face folders (config.json + safetensors + tokenizer files).

Design choices:
- Safetensors only. Pickle checkpoints (*.bin, *.pt, *.pth, *.ckpt) are refused: unpickling runs
  arbitrary code. Custom-code models (`auto_map`) are refused in hf_config.py.
- Streaming load (plain file reads, not mmap: see st_reader.py): every parameter is allocated
  once, on device, with its target sharding, then
  filled slice by slice (one layer of a stacked parameter, or <= 64 MB of embedding rows) by a
  jitted `dynamic_update_slice` that donates the buffer. Host memory holds at most one slice
  besides the model, so an 8B model never needs two copies. Headers are checked first (missing,
  unexpected or mis-shaped tensors are named with their file) before anything is allocated.
- Saving writes one layer at a time into shards of at most 5 GB (model-0000i-of-0000n.safetensors
  + model.safetensors.index.json), LoRA merged into the base weights, config.json in transformers
  5 form, and copies the tokenizer (and generation_config.json) from `tokenizer_dir`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from bookft.errors import ModelError
from bookft.model.axes import logical_to_spec
from bookft.model.config import KNOBS, ModelConfig
from bookft.model.decoder import Decoder, LoraParam, abstract_model
from bookft.model.hf_config import config_from_hf, config_to_hf, hf_tensor_names
from bookft.model.layers import LORA_BASE
from bookft.model.st_reader import SafetensorsFile

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                   "vocab.json", "merges.txt", "added_tokens.json", "chat_template.jinja",
                   "chat_template.json", "generation_config.json")
CHUNK_BYTES = 64 << 20
SHARD_BYTES = 5 * 10**9
Shardings = Callable[[tuple, tuple], Any] | Mapping[str, Any] | None


def read_hf_config(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_dir():
        raise ModelError(f"{path}: not a directory; expected a Hugging Face model folder")
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise ModelError(f"{cfg_file}: missing; a Hugging Face model folder needs config.json")
    try:
        data = json.loads(cfg_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelError(f"{cfg_file}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise ModelError(f"{cfg_file}: expected a JSON object")
    return data


def _weight_files(path: Path) -> dict[str, str]:
    """HF tensor name -> safetensors file name, from the index or the single file."""
    index = path / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ModelError(f"{index}: not a valid safetensors index ({e!r})") from None
        for fname in sorted(set(weight_map.values())):
            if not (path / fname).is_file():
                raise ModelError(f"{index}: lists shard {fname}, which is missing from {path}")
        return dict(weight_map)
    files = sorted(p.name for p in path.glob("*.safetensors"))
    if not files:
        pickles = sorted(p.name for p in path.iterdir() if p.suffix in PICKLE_SUFFIXES)
        if pickles:
            raise ModelError(f"{path / pickles[0]}: pickle checkpoints are refused (loading them runs "
                             "arbitrary code); convert the model to safetensors first")
        raise ModelError(f"{path}: no model.safetensors or model.safetensors.index.json found")
    out: dict[str, str] = {}
    for fname in files:
        with SafetensorsFile(path / fname) as f:
            out.update(dict.fromkeys(f.keys(), fname))
    return out


def hf_shape(name: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Our per-layer shape -> the HF tensor's shape (heads merged)."""
    if name in ("wq", "wk", "wv"):
        return (shape[0] * shape[1], shape[2])
    if name == "wo":
        return (shape[0], shape[1] * shape[2])
    if name in ("bq", "bk", "bv"):
        return (shape[0] * shape[1],)
    return shape


def _sharding_for(axes: tuple, shape: tuple, mesh, shardings: Shardings):
    if mesh is None:
        return None
    if shardings is None:
        return NamedSharding(mesh, PartitionSpec())
    if callable(shardings):
        s = shardings(axes, shape)
        return NamedSharding(mesh, s) if isinstance(s, PartitionSpec) else s
    return NamedSharding(mesh, logical_to_spec(axes, shardings))


@functools.lru_cache(maxsize=64)
def _zeros_fn(shape, dtype, sharding):
    return jax.jit(lambda: jnp.zeros(shape, dtype), out_shardings=sharding)


@functools.lru_cache(maxsize=64)
def _write_fn(sharding):
    def write(buf, chunk, starts):
        return jax.lax.dynamic_update_slice(buf, chunk.astype(buf.dtype), tuple(starts))
    return jax.jit(write, donate_argnums=0, out_shardings=sharding)


def _axes(var) -> tuple:
    return tuple(var.get_metadata().get("out_sharding") or ())


def _load_param(var, entries, files, weight_map, mesh, shardings):
    """One parameter from its HF tensors ([(name, layer index or None)]) -> (array, sharding).

    Up to CHUNK_BYTES the parameter is assembled on the host and placed once; larger ones are
    allocated on device and filled slice by slice (one layer, or CHUNK_BYTES of rows).
    """
    sds = var.get_value()
    shape, dtype = tuple(sds.shape), np.dtype(sds.dtype)
    sharding = _sharding_for(_axes(var), tuple(var.get_value().shape), mesh, shardings)
    if int(np.prod(shape)) * dtype.itemsize <= CHUNK_BYTES:
        host = np.empty(shape, dtype)
        for hf_name, layer in entries:
            tensor = files[weight_map[hf_name]].read(hf_name)
            if layer is None:
                host[...] = tensor.reshape(shape)
            else:
                host[layer] = tensor.reshape(shape[1:])
        return jax.device_put(host, sharding), sharding
    buf = _zeros_fn(shape, dtype, sharding)()
    write = _write_fn(sharding)
    for hf_name, layer in entries:
        tensor = files[weight_map[hf_name]]
        if layer is not None:
            chunk = tensor.read(hf_name).reshape((1, *shape[1:]))
            buf = write(buf, chunk, jnp.array([layer] + [0] * (len(shape) - 1), jnp.int32))
            buf.block_until_ready()  # bounded host memory: no queue of slices in flight
            continue
        rows = min(shape[0], max(1, CHUNK_BYTES // max(1, int(np.prod(shape[1:])) * 4)))
        for r0 in range(0, shape[0], rows):
            r0 = min(r0, shape[0] - rows)  # the last chunk overlaps: one compiled shape
            chunk = tensor.read(hf_name, r0, r0 + rows)
            buf = write(buf, chunk, jnp.array([r0] + [0] * (len(shape) - 1), jnp.int32))
            buf.block_until_ready()
    return buf, sharding


def load_hf(path: str | Path, dtype: str | None = None, mesh: jax.sharding.Mesh | None = None,
            shardings: Shardings = None, *, like: ModelConfig | None = None,
            lora_seed: int = 0) -> tuple[Decoder, ModelConfig]:
    """Load an HF folder into a Decoder, streaming tensor by tensor.

    dtype: parameter dtype ("float32"/"bfloat16"; default like.param_dtype or float32).
    mesh + shardings: place each parameter with its target sharding; `shardings` is a rules
    mapping {logical axis: mesh axis}, or a callable(logical axes, shape) -> PartitionSpec|Sharding;
    None = replicated. like: a ModelConfig whose knobs (dtypes, remat, scan, LoRA, theta override)
    are kept; the shape comes from config.json. LoRA A matrices are drawn from `lora_seed`.
    """
    path = Path(path)
    knobs = {k: getattr(like, k) for k in KNOBS} if like is not None else {}
    if dtype is not None:
        knobs["param_dtype"] = jnp.dtype(dtype).name
    knobs.setdefault("param_dtype", "float32")
    config = config_from_hf(read_hf_config(path), str(path / "config.json"), **knobs)
    weight_map = _weight_files(path)

    abstract = abstract_model(config)
    graphdef, state = nnx.split(abstract)
    flat = dict(state.flat_state())
    expected = hf_tensor_names(config, abstract.layers.names)
    for hf_name in expected:
        if hf_name not in weight_map:
            raise ModelError(f"{path}: tensor {hf_name!r} is missing from the checkpoint "
                             f"({config.model_type}, {config.num_layers} layers)")
    ignorable = {"lm_head.weight"} if config.tie_embeddings else set()
    for hf_name in weight_map:
        if hf_name not in expected and hf_name not in ignorable and "rotary_emb.inv_freq" not in hf_name:
            raise ModelError(f"{path / weight_map[hf_name]}: unexpected tensor {hf_name!r} for a "
                             f"{config.model_type} model of this shape; is config.json right?")
    with contextlib.ExitStack() as stack:
        files = {f: stack.enter_context(SafetensorsFile(path / f))
                 for f in sorted({weight_map[n] for n in expected})}
        # header pass: every shape is checked before anything is allocated
        sources: dict[tuple, list[tuple[str, int | None]]] = {}
        for hf_name, (ours, layer) in expected.items():
            key = tuple(ours.split("."))
            shape = tuple(flat[key].get_value().shape)
            want = hf_shape(key[-1], shape[1:] if layer is not None else shape)
            if hf_name not in files[weight_map[hf_name]].tensors:
                raise ModelError(f"{path / weight_map[hf_name]}: tensor {hf_name!r} is listed in the index "
                                 "but not in this file")
            got = files[weight_map[hf_name]].shape(hf_name)
            if got != want:
                raise ModelError(f"{path / weight_map[hf_name]}: tensor {hf_name!r} has shape {list(got)}, "
                                 f"expected {list(want)} from config.json")
            sources.setdefault(key, []).append((hf_name, layer))
        buffers = {key: _load_param(flat[key], entries, files, weight_map, mesh, shardings)
                   for key, entries in sources.items()}
    # LoRA adapters are not in HF checkpoints: A uniform(+-1/sqrt(fan_in)) on the host (small; jax's
    # random init would compile for seconds), B zero, so the delta starts at 0
    rng = np.random.default_rng(lora_seed)
    for key, var in flat.items():
        if isinstance(var, LoraParam):
            sds = var.get_value()
            shape = tuple(sds.shape)
            if key[-1].endswith("_a"):
                bound = 1.0 / np.sqrt(np.prod(shape[2:]))
                value = rng.uniform(-bound, bound, shape).astype(np.float32)
            else:
                value = np.zeros(shape, np.float32)
            sharding = _sharding_for(_axes(var), shape, mesh, shardings)
            buffers[key] = (jax.device_put(value.astype(sds.dtype), sharding), sharding)
    for key, var in flat.items():
        var.set_value(buffers[key][0])
    return nnx.merge(graphdef, state), config


def _host(arr: jax.Array, i: int | None = None) -> np.ndarray:
    """arr (or its layer i) as numpy; a single-CPU-device array is viewed without a copy or compile."""
    if len(arr.devices()) == 1 and next(iter(arr.devices())).platform == "cpu":
        host = np.asarray(arr)
        return host if i is None else host[i]
    return np.asarray(arr if i is None else arr[i])


def _merged_layer(model: Decoder, name: str, i: int) -> np.ndarray:
    """Layer i of stacked parameter `name`, with its LoRA delta (scale * B . A) merged in."""
    config = model.config
    w = _host(getattr(model.layers, name)[...], i)
    for target, (base, _) in LORA_BASE.items():
        if base == name and config.lora.rank and target in config.lora.targets:
            a = _host(getattr(model.layers, f"lora_{target}_a")[...], i).astype(np.float32)
            b = _host(getattr(model.layers, f"lora_{target}_b")[...], i).astype(np.float32)
            w = (w.astype(np.float32) + config.lora.scale * np.tensordot(b, a, axes=([-1], [0]))).astype(w.dtype)
    return w


def _tensor_plan(model: Decoder) -> list[tuple[str, tuple[int, ...], Callable[[], np.ndarray]]]:
    config = model.config
    plan = []
    for hf_name, (ours, layer) in hf_tensor_names(config, model.layers.names).items():
        key = ours.split(".")
        if layer is None:
            var = getattr(model, key[0])
            plan.append((hf_name, tuple(var.shape), lambda v=var: _host(v[...])))
        else:
            shape = hf_shape(key[1], tuple(getattr(model.layers, key[1]).shape[1:]))
            plan.append((hf_name, shape, functools.partial(_merged_layer, model, key[1], layer)))
    return plan


def save_hf(model: Decoder, config: ModelConfig | None, path: str | Path, tokenizer_dir: str | Path | None = None,
            *, dtype: str | None = None, max_shard_bytes: int = SHARD_BYTES) -> Path:
    """Write an HF folder that `transformers.AutoModelForCausalLM.from_pretrained` loads.

    LoRA is merged into the weights; tensors are written in `dtype` (default: the param dtype) into
    shards of at most `max_shard_bytes`. Tokenizer files, generation_config.json and the token ids
    of `tokenizer_dir/config.json` are copied when `tokenizer_dir` is given.
    """
    from safetensors.numpy import save_file

    config = config or model.config
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    np_dtype = jnp.dtype(dtype or config.param_dtype)
    plan = _tensor_plan(model)
    shards: list[list[tuple[str, tuple[int, ...], Callable]]] = [[]]
    size = 0
    for item in plan:
        nbytes = int(np.prod(item[1])) * np_dtype.itemsize
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(item)
        size += nbytes
    for old in list(path.glob("model*.safetensors")) + list(path.glob("model.safetensors.index.json")):
        old.unlink()
    weight_map, total = {}, 0
    for n, shard in enumerate(shards, 1):
        fname = "model.safetensors" if len(shards) == 1 else f"model-{n:05d}-of-{len(shards):05d}.safetensors"
        tensors = {}
        for hf_name, shape, get in shard:
            tensors[hf_name] = np.ascontiguousarray(get().astype(np_dtype).reshape(shape))
            weight_map[hf_name] = fname
            total += tensors[hf_name].nbytes
        tmp = path / f".{fname}.tmp"
        save_file(tensors, str(tmp), metadata={"format": "pt"})
        os.replace(tmp, path / fname)
        del tensors
    if len(shards) > 1:
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (path / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    hf = config_to_hf(config, dtype=np_dtype.name)
    if tokenizer_dir is not None:
        src = Path(tokenizer_dir)
        for name in TOKENIZER_FILES:
            if (src / name).is_file() and (src / name).resolve() != (path / name).resolve():
                shutil.copyfile(src / name, path / name)
        if (src / "config.json").is_file():
            source = json.loads((src / "config.json").read_text(encoding="utf-8"))
            for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
                if key in source:
                    hf[key] = source[key]
    (path / "config.json").write_text(json.dumps(hf, indent=2))
    return path
