"""Lazy package exports (PEP 562): `from bookft.model import init_model` works, but importing one light
submodule (`bookft.model.config`) does not run the package's re-exports (jax, flax). Each package that
uses it gives the import time it saves, measured against plain imports, in its __init__."""

from __future__ import annotations

import importlib


def lazy(package: str, exports: dict[str, list[str]]):
    """(__getattr__, __dir__, __all__) for a package whose public names live in its submodules."""
    where = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str):
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(importlib.import_module(package), name, value)  # later lookups skip this hook
        return value

    def __dir__():
        return sorted(set(where) | set(vars(importlib.import_module(package))))

    return __getattr__, __dir__, sorted(where)
