"""`bookft import`: a GGUF file, or a checkpoint folder transformers reads, -> an HF folder bookft loads.

Design choices:
- transformers does the reading: `from_pretrained(folder, gguf_file=name)` dequantizes a GGUF
  (through gguf-py) and rebuilds its tokenizer with the chat template. Such a model refuses
  `save_pretrained` ("quantized with gguf"), so its dequantized state dict is loaded into a fresh
  model built on the meta device from the same config minus `quantization_config` (no random
  init, no second copy of the weights) and that one is saved: safetensors, config.json,
  generation_config.json, tokenizer.json and tokenizer_config.json with the chat template inline
  (save_jinja_files=False, so tools that only read tokenizer_config.json see it too). The
  tokenizer's bos/eos/pad/unk follow the GGUF's own `tokenizer.ggml.*_token_id` metadata where the
  conversion disagrees (align_special_tokens), so every transformers release writes the same ones.
- Everything cheap is checked before transformers runs, each failure a ModelError naming the file
  and what to do: a missing `bookft[gguf]` extra, not a GGUF file, truncated or corrupt
  (gguf_header.py), an architecture bookft cannot load, a quantization gguf-py cannot dequantize.
  The converted config is then checked with bookft's own reader (config_from_hf) before a byte
  of weights is written, so a folder that transformers would load but bookft not is never made.
- A folder source is loaded with trust_remote_code=False; transformers refuses pickle files unless
  torch's weights_only loader accepts them, so converting a *.bin checkpoint to safetensors is safe.
- The folder is written aside (.OUT.importing-PID) and renamed into place, so an interrupted import
  leaves no half folder. OUT may be replaced only with overwrite=True and only if it is empty or
  holds a model (config.json).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import importlib.util
import os
import shutil
import time
from collections import Counter
from pathlib import Path

from bookft.errors import ModelError
from bookft.model.gguf_header import GgufHeader, dequantizable_types, read_gguf_header, type_name
from bookft.model.hf_config import ARCHITECTURES, config_from_hf
from bookft.model.hf_io import read_hf_config

# GGUF `general.architecture` values that transformers turns into a model_type bookft loads
# (llama.cpp writes Mistral models as "llama"; transformers tells them apart by general.name)
GGUF_ARCHITECTURES = ("llama", "mistral", "qwen2", "qwen3")
GGUF_EXTRA = ("gguf", "accelerate", "torch")
DTYPES = ("float32", "bfloat16")


@dataclasses.dataclass(frozen=True)
class ImportReport:
    source: Path
    out: Path
    kind: str  # "gguf" | "folder"
    model_type: str
    dtype: str
    parameters: int
    quantization: dict[str, int]  # ggml type name -> tensor count (GGUF only)
    chat_template: bool
    seconds: float


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "(unknown version)"


def _missing(modules) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


def _require(modules, what: str) -> None:
    missing = _missing(modules)
    if missing:
        raise ModelError(f"{what} needs {', '.join(missing)} (the gguf extra): pip install 'bookft[gguf]'")


def _resolve_source(src: Path) -> tuple[str, Path]:
    if not src.exists():
        raise ModelError(f"{src}: no such file or folder; pass a .gguf file or a Hugging Face model folder")
    if src.is_file():
        return "gguf", src
    if (src / "config.json").is_file():
        return "folder", src
    ggufs = sorted(src.glob("*.gguf"))
    if len(ggufs) == 1:
        return "gguf", ggufs[0]
    if ggufs:
        raise ModelError(f"{src}: holds {len(ggufs)} GGUF files ({', '.join(p.name for p in ggufs[:4])}); pass one")
    raise ModelError(f"{src}: neither a model folder (config.json) nor a folder with a .gguf file")


def _check_out(src: Path, out: Path, overwrite: bool) -> None:
    if out.resolve() == src.resolve() or src.resolve() in out.resolve().parents:
        raise ModelError(f"{out}: the output may not be the source or inside it; choose another folder")
    if out.exists():
        if not out.is_dir():
            raise ModelError(f"{out}: exists and is not a folder")
        if any(out.iterdir()):
            if not (out / "config.json").is_file():
                raise ModelError(f"{out}: not empty and not a model folder; choose another folder")
            if not overwrite:
                raise ModelError(f"{out}: already holds a model (config.json); pass --overwrite to replace it")


def _check_gguf(header: GgufHeader) -> Counter:
    path, arch = header.path, header.architecture
    if arch not in GGUF_ARCHITECTURES:
        raise ModelError(f"{path}: GGUF architecture {arch!r} is not supported by bookft (supported: "
                         f"{', '.join(GGUF_ARCHITECTURES)}, the Llama, Mistral and Qwen2/3 families); "
                         "use a model of one of those families")
    types = Counter(t.type_id for t in header.tensors)
    ok = dequantizable_types(types)
    bad = sorted(t for t in types if not ok[t])
    if bad:
        example = next(t.name for t in header.tensors if t.type_id == bad[0])
        raise ModelError(f"{path}: quantization {', '.join(type_name(t) for t in bad)} ({sum(types[t] for t in bad)} "
                         f"tensors, e.g. {example!r}) cannot be dequantized by gguf {_version('gguf')}; use a file "
                         "quantized as F16/BF16/Q8_0/Q4_K_M/Q4_0/... or convert from the original safetensors")
    return Counter({type_name(t): n for t, n in types.items()})


def _check_folder(path: Path) -> None:
    hf = read_hf_config(path)
    quant = hf.get("quantization_config")
    if quant:
        method = quant.get("quant_method", "quantized") if isinstance(quant, dict) else "quantized"
        raise ModelError(f"{path / 'config.json'}: a {method} checkpoint; import the unquantized model "
                         "(or its GGUF file)")
    own = sorted(k for k in hf if k.startswith("bookft_"))
    if own:
        raise ModelError(f"{path / 'config.json'}: a bookft folder with layers transformers lacks ({', '.join(own)}); "
                         "transformers would drop them. Use the folder as it is (bookft loads it directly)")
    config_from_hf(hf, str(path / "config.json"))  # refuses what bookft cannot load


@contextlib.contextmanager
def _memoized_gguf_reads():
    """Memoize two pure reads of transformers' legacy GGUF loader (the Llama family in 5.24) for one import.

    It opens the file with gguf.GGUFReader twice (config, then tensors: about 7 s each on 2 cores, parsing
    every vocabulary string) and builds gguf.TensorNameMap once per torch module (397 times for 30 layers,
    about 11 s). Both are looked up on the gguf module at call time, so caching them here changes no output
    (tests/model/test_model_real.py checks the logits) and is a no-op if transformers stops calling them.
    """
    import gguf

    saved = {name: getattr(gguf, name) for name in ("GGUFReader", "get_tensor_name_map") if hasattr(gguf, name)}
    readers: dict = {}
    maps: dict = {}

    def reader(path, mode="r"):
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = saved["GGUFReader"](path, mode)
        return readers[key]

    def name_map(arch, n_blocks):
        if (arch, n_blocks) not in maps:
            maps[arch, n_blocks] = saved["get_tensor_name_map"](arch, n_blocks)
        return maps[arch, n_blocks]

    if len(saved) == 2:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(gguf, name, value)
        readers.clear()


# the tokenizer's special tokens and the GGUF metadata keys that give their ids
GGUF_SPECIAL_TOKENS = {"bos_token": "tokenizer.ggml.bos_token_id", "eos_token": "tokenizer.ggml.eos_token_id",
                       "pad_token": "tokenizer.ggml.padding_token_id", "unk_token": "tokenizer.ggml.unknown_token_id"}


def align_special_tokens(tokenizer, metadata: dict) -> dict[str, str]:
    """Set the tokenizer's bos/eos/pad/unk tokens to the ids the GGUF's metadata gives, where
    transformers' conversion disagrees (transformers 5.17 reads SmolLM2's eos, id 2 `<|im_end|>`,
    as `<|im_start|>` and drops its pad); {attribute: token set}."""
    changed = {}
    vocab = len(tokenizer)
    for attr, key in GGUF_SPECIAL_TOKENS.items():
        i = metadata.get(key)
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < vocab:
            continue
        token = tokenizer.convert_ids_to_tokens(i)
        if isinstance(token, str) and getattr(tokenizer, attr) != token:
            setattr(tokenizer, attr, token)
            changed[attr] = token
    return changed


def _load_gguf(path: Path, metadata: dict):
    """(dequantized float32 model with a plain config, tokenizer) via transformers' GGUF reader; the
    tokenizer's special tokens as the file's `metadata` gives them."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(path.parent), path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    align_special_tokens(tokenizer, metadata)
    with _memoized_gguf_reads():
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    cfg = loaded.config.to_dict()
    for key in ("quantization_config", "_name_or_path", "_model_name_or_path", "transformers_version"):
        cfg.pop(key, None)
    config = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    state = {k: v for k, v in loaded.state_dict().items() if k in model.state_dict()}
    model.load_state_dict(state, strict=True, assign=True)
    model.tie_weights()
    return model, tokenizer


def _load_folder(path: Path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32, trust_remote_code=False)
    tokenizer = AutoTokenizer.from_pretrained(str(path), trust_remote_code=False)
    return model, tokenizer


def _readable(folder: Path) -> None:
    """safetensors writes its file 0600; give every file the mode the umask allows, like the others."""
    umask = os.umask(0)
    os.umask(umask)
    for f in folder.iterdir():
        if f.is_file():
            f.chmod(0o666 & ~umask)


def import_model(src: str | Path, out: str | Path, *, dtype: str = "float32", overwrite: bool = False) -> ImportReport:
    """Convert `src` (a .gguf file, a folder with one, or an HF folder) into the HF folder `out`."""
    t0 = time.perf_counter()
    src, out = Path(src), Path(out)
    if dtype not in DTYPES:
        raise ModelError(f"--dtype {dtype!r}: expected one of {', '.join(DTYPES)}")
    kind, path = _resolve_source(src)
    _check_out(path, out, overwrite)
    quantization: Counter = Counter()
    if kind == "gguf":
        _require(GGUF_EXTRA, f"importing {path}")
        header = read_gguf_header(path)
        quantization = _check_gguf(header)
    else:
        _require(("torch",), f"importing {path}")
        _check_folder(path)
    try:
        model, tokenizer = _load_gguf(path, header.metadata) if kind == "gguf" else _load_folder(path)
    except ModelError:
        raise
    except Exception as e:  # transformers/gguf raise many types; the file is what the user can act on
        raise ModelError(f"{path}: transformers could not read it ({type(e).__name__}: {e}); "
                         "the file may be corrupt or of an unsupported variant") from None
    hf = model.config.to_dict()
    if hf.get("model_type") not in ARCHITECTURES:
        raise ModelError(f"{path}: transformers read it as model_type {hf.get('model_type')!r}, which bookft "
                         f"cannot load (supported: {', '.join(ARCHITECTURES)})")
    config_from_hf(hf, f"{path} (converted config)")
    tmp = out.parent / f".{out.name}.importing-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        import torch

        model = model.to(getattr(torch, dtype))
        model.config.dtype = dtype
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp), save_jinja_files=False)
        config_from_hf(read_hf_config(tmp), str(tmp / "config.json"))
        _readable(tmp)
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return ImportReport(source=path, out=out, kind=kind, model_type=hf["model_type"], dtype=dtype,
                        parameters=sum(p.numel() for p in model.parameters()),
                        quantization=dict(quantization), chat_template=bool(tokenizer.chat_template),
                        seconds=time.perf_counter() - t0)
