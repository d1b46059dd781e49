from dataclasses import dataclass, field
from typing import Literal

import pytest

from bookft.config import apply_overrides, from_dict, load, read_yaml
from bookft.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class Inner:
    lr: float = 1e-3
    kind: Literal["a", "b"] = "a"


@dataclass(frozen=True, kw_only=True)
class Outer:
    steps: int = 10
    name: str = "x"
    sizes: tuple[int, ...] = (1, 2)
    inner: Inner = field(default_factory=Inner)
    mesh: dict[str, int] = field(default_factory=dict)


def test_defaults_and_nested():
    cfg = from_dict(Outer, {"steps": 3, "inner": {"lr": 0.5}, "sizes": [4], "mesh": {"context": 4}})
    assert cfg.steps == 3 and cfg.inner.lr == 0.5 and cfg.sizes == (4,) and cfg.mesh == {"context": 4}


def test_unknown_key_names_path():
    with pytest.raises(ConfigError, match=r"unknown key inner\.lrr"):
        from_dict(Outer, {"inner": {"lrr": 1}})


def test_wrong_type_names_path():
    with pytest.raises(ConfigError, match=r"inner\.lr: expected a number"):
        from_dict(Outer, {"inner": {"lr": "fast"}})
    with pytest.raises(ConfigError, match=r"steps: expected an integer"):
        from_dict(Outer, {"steps": "many"})
    with pytest.raises(ConfigError, match=r"inner\.kind: expected one of"):
        from_dict(Outer, {"inner": {"kind": "c"}})


def test_overrides_and_base(tmp_path):
    (tmp_path / "base.yaml").write_text("steps: 5\ninner:\n  lr: 0.1\n  kind: b\n")
    (tmp_path / "child.yaml").write_text("base: base.yaml\ninner:\n  lr: 0.2\n")
    assert read_yaml(tmp_path / "child.yaml") == {"steps": 5, "inner": {"lr": 0.2, "kind": "b"}}
    cfg = load(Outer, tmp_path / "child.yaml", ["inner.lr=1e-4", "name=run"])
    assert cfg.inner == Inner(lr=1e-4, kind="b") and cfg.name == "run" and cfg.steps == 5
    assert apply_overrides({}, ["a.b.c=3"]) == {"a": {"b": {"c": 3}}}
    with pytest.raises(ConfigError, match="child.yaml: unknown key nope"):
        load(Outer, tmp_path / "child.yaml", ["nope=1"])
    with pytest.raises(ConfigError, match="expected key=value"):
        load(Outer, None, ["steps"])
