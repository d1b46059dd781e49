"""Typed configuration: frozen keyword-only dataclasses filled from YAML, with strict checking.

Design choices:
- One frozen dataclass per concern (model, attention, parallel, data, train, checkpoint, eval);
  each concern owns its dataclass in its own package (`bookft/<concern>/config.py`); this module
  holds only the machinery, at the bottom layer. The composed `RunConfig` is in
  bookft/train/config.py, the layer that knows every section it composes.
- `from_dict(cls, data)` rejects unknown keys and wrong types and names the key's full path
  (`train.optimizer.lr: expected float, got 'fast'`).
- A YAML file may say `base: other.yaml` (relative to itself; or a list of files, later ones
  win): presets derive from a base instead of being copies. Mappings merge recursively; the child wins.
- `--set a.b=c` overrides are parsed as YAML scalars (`--set train.steps=10`,
  `--set model.rope.type=yarn`, `--set parallel.mesh='{context: 4}'`).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

import yaml

from bookft.errors import ConfigError

T = TypeVar("T")

_MISSING = object()


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _convert(tp: Any, value: Any, path: str) -> Any:
    """Check/convert `value` against annotation `tp`; raise ConfigError naming `path`."""
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        options = get_args(tp)
        if value is None and type(None) in options:
            return None
        errors = []
        for opt in options:
            if opt is type(None):
                continue
            try:
                return _convert(opt, value, path)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(f"{path}: expected {' or '.join(_type_name(o) for o in options)}, got {value!r}")
    if origin is Literal:
        allowed = get_args(tp)
        if value not in allowed:
            raise ConfigError(f"{path}: expected one of {', '.join(map(repr, allowed))}, got {value!r}")
        return value
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected a mapping for {tp.__name__}, got {value!r}")
        return from_dict(tp, value, path)
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{path}: expected a list, got {value!r}")
        args = get_args(tp)
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(value):
                raise ConfigError(f"{path}: expected {len(args)} items, got {len(value)}")
            items = [_convert(a, v, f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, value, strict=True))]
        else:
            item_tp = args[0] if args else Any
            items = [_convert(item_tp, v, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected a mapping, got {value!r}")
        kt, vt = get_args(tp) or (Any, Any)
        return {_convert(kt, k, f"{path}.{k}"): _convert(vt, v, f"{path}.{k}") for k, v in value.items()}
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ConfigError(f"{path}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            if isinstance(value, str):
                try:
                    return float(value)  # YAML reads "1e-4" (no dot) as a string
                except ValueError:
                    pass
            raise ConfigError(f"{path}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}: expected a string, got {value!r}")
        return value
    if isinstance(tp, type):
        if not isinstance(value, tp):
            raise ConfigError(f"{path}: expected {tp.__name__}, got {value!r}")
        return value
    return value


def from_dict(cls: type[T], data: dict[str, Any] | None, path: str = "") -> T:
    """Build dataclass `cls` from a mapping, rejecting unknown keys and wrong types."""
    data = dict(data or {})
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        where = f"{path}." if path else ""
        known = ", ".join(sorted(fields))
        raise ConfigError(f"unknown key {where}{unknown[0]} (known keys here: {known})")
    kwargs = {}
    for name, value in data.items():
        kwargs[name] = _convert(hints[name], value, f"{path}.{name}" if path else name)
    try:
        obj = cls(**kwargs)
    except TypeError as e:  # a required field missing
        raise ConfigError(f"{path or cls.__name__}: {e}") from None
    validate = getattr(obj, "validate", None)
    if callable(validate):
        validate()
    return obj


def to_dict(obj: Any) -> Any:
    """Dataclass -> plain dict (tuples become lists) for YAML/JSON."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def deep_merge(base: dict, child: dict) -> dict:
    out = dict(base)
    for k, v in child.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def read_yaml(path: str | Path, _seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """Read a YAML mapping, resolving `base:` inheritance (relative to the file)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    resolved = path.resolve()
    if resolved in _seen:
        raise ConfigError(f"{path}: `base:` chain loops back to itself")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    base = data.pop("base", None)
    bases = [base] if isinstance(base, str) else base
    if bases is not None:
        if not isinstance(bases, list) or not all(isinstance(b, str) for b in bases):
            raise ConfigError(f"{path}: base: expected a file name or a list of them, got {base!r}")
        merged: dict[str, Any] = {}
        for b in bases:  # later bases win over earlier ones; the file itself wins over all
            merged = deep_merge(merged, read_yaml(path.parent / b, _seen + (resolved,)))
        data = deep_merge(merged, data)
    return data


def parse_override(item: str) -> tuple[list[str], Any]:
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected key=value, for example train.steps=100")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {item!r}: empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Apply `a.b=c` overrides to a raw mapping (before typing, so errors name the key)."""
    data = dict(data)
    for item in overrides or ():
        keys, value = parse_override(item)
        node = data
        for k in keys[:-1]:
            child = node.get(k)
            if child is None:
                child = {}
            elif not isinstance(child, dict):
                raise ConfigError(f"--set {item!r}: {k} is not a section")
            else:
                child = dict(child)
            node[k] = child
            node = child
        node[keys[-1]] = value
    return data


def load(cls: type[T], path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = (),
         defaults: dict[str, Any] | None = None) -> T:
    """Load `cls` from YAML `path` (or only defaults) plus `--set` overrides."""
    data = dict(defaults or {})
    if path is not None:
        data = deep_merge(data, read_yaml(path))
    data = apply_overrides(data, overrides)
    where = f"{path}: " if path is not None else ""
    try:
        return from_dict(cls, data)
    except ConfigError as e:
        raise ConfigError(f"{where}{e}") from None
