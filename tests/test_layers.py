"""The layering holds: import-linter's contracts in pyproject.toml ([tool.importlinter]) are all kept.

Layers (docs/design.md): cli/commands > pipelines > flows > ingest > plan > eval > train > model >
attention, parallel > corpus, needles > config, host > errors; ingest imports neither eval nor jax;
model imports neither parallel nor train. No module imports itself through others (a cycle), on
grimp's graph, the one import-linter checks. Imports inside functions count.
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


def _cycle(graph) -> list[str] | None:
    """One import cycle among bookft's modules (a depth-first search on grimp's graph), or None."""
    colour: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        colour[m] = 1
        stack.append(m)
        for n in sorted(graph.find_modules_directly_imported_by(m)):
            if not n.startswith("bookft") or n == m:
                continue
            if colour.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in colour and (found := visit(n)):
                return found
        stack.pop()
        colour[m] = 2
        return None

    for m in sorted(graph.modules):
        if m not in colour and (found := visit(m)):
            return found
    return None


def test_no_import_cycle_among_modules():
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("bookft")
    found = _cycle(graph)
    assert found is None, " -> ".join(found)
    graph.add_import(importer="bookft.corpus.reader", imported="bookft.corpus.store")
    graph.add_import(importer="bookft.corpus.store", imported="bookft.corpus.reader")
    assert _cycle(graph) is not None  # the check can fail


def _defs_and_commands():
    import ast

    defs, commands = {}, []
    for path in sorted((ROOT / "bookft").rglob("*.py")):
        src = path.read_text()
        name = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                defs.setdefault(node.name, []).append(name)
            if isinstance(node, ast.Attribute) and node.attr in ("command", "add_typer") and \
                    not name.startswith("bookft/commands/"):
                commands.append(f"{name}:{node.lineno}")
    return defs, commands


def test_commands_register_in_commands_and_the_flows_share_their_phases():
    """Every CLI command is registered by a module of bookft/commands/; the flows' shared readings
    are defined once in bookft (one per_depth, one summary shape, one progress-and-timing helper)."""
    defs, commands = _defs_and_commands()
    assert not commands, f"CLI commands registered outside bookft/commands/: {commands}"
    for name in ("per_depth", "flow_summary", "task_figures", "figures_table"):
        assert defs.get(name) == [defs[name][0]] and defs[name][0].startswith("bookft/flows/"), (name, defs.get(name))
    assert not (ROOT / "bookft" / "quickstart.py").exists() and not (ROOT / "bookft" / "tune_flow.py").exists()
