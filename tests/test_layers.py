"""The layering holds: import-linter's contracts in pyproject.toml ([tool.importlinter]) are all kept.

Layers (docs/design.md): cli/commands > pipelines, quickstart > ingest > plan > eval > train > model >
attention, parallel > corpus, needles > config, host > errors; ingest imports neither eval nor jax;
model imports neither parallel nor train. Imports inside functions count.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _lint(config: Path) -> subprocess.CompletedProcess:
    pytest.importorskip("importlinter")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    code = ("import sys; from importlinter.cli import lint_imports; "
            f"sys.exit(lint_imports(config_filename={str(config)!r}, no_cache=True))")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)


def test_import_contracts_are_kept():
    res = _lint(ROOT / "pyproject.toml")
    out = res.stdout + res.stderr
    assert "layers: every import points down KEPT" in out, out[-3000:]
    assert "ingest imports neither eval nor jax" in out and "BROKEN" not in out, out[-3000:]
    assert res.returncode == 0, out[-3000:]


def test_an_upward_import_breaks_the_layers(tmp_path):
    """The check can fail: a contract that eval must not import train is broken by this code base."""
    cfg = tmp_path / "contracts.toml"
    cfg.write_text('[tool.importlinter]\nroot_package = "bookft"\n\n[[tool.importlinter.contracts]]\n'
                   'name = "probe"\ntype = "forbidden"\nsource_modules = ["bookft.eval"]\n'
                   'forbidden_modules = ["bookft.train"]\n')
    res = _lint(cfg)
    assert res.returncode != 0 and "BROKEN" in res.stdout + res.stderr
