"""No private name crosses a module: in bookft/, benchmarks/ and experiments/, no `from M import _x` and no `m._x` on
an imported module `m` (a leading underscore means "this module's own"; what another module needs
is made public or moved down a layer). Found with ast, so imports inside functions count.

EXEMPT lists the third-party private names bookft still reaches, each with why; an exemption that
is no longer used fails too, so the list only shrinks."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXEMPT = {
    # a documented function of the standard library (exit without cleanup): the crash hook where the
    # platform has no SIGKILL, and a pool worker whose parent died
    "bookft/corpus/crash.py": {"os._exit"},
    "bookft/ingest/engine/pool.py": {"os._exit"},
    # detect-secrets' per-line scan and filters, as its own loop calls them (no public per-line API)
    "bookft/ingest/filters/secrets.py": {"detect_secrets.core.scan._is_filtered_out",
                                         "detect_secrets.core.scan._scan_line"},
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def crossings(src: str) -> set[str]:
    """Every private name `src` imports from another module or reaches on an imported module."""
    tree = ast.parse(src)
    modules: set[str] = set()  # names bound to imported modules (or to names imported from them)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                if _private(a.name):
                    found.add(f"{'.' * node.level}{node.module or ''}.{a.name}")
                modules.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            modules.update((a.asname or a.name).split(".")[0] for a in node.names)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in modules:
                found.add(ast.unparse(node))
    return found


def _files():
    for folder in ("bookft", "benchmarks", "experiments"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "results" not in path.relative_to(ROOT).parts:
                yield path


def test_no_private_name_crosses_a_module():
    hits, used = [], set()
    for path in _files():
        name = str(path.relative_to(ROOT))
        for got in sorted(crossings(path.read_text())):
            if got in EXEMPT.get(name, ()):
                used.add((name, got))
            else:
                hits.append(f"{name}: {got}")
    assert not hits, "private names reached across modules (make them public):\n" + "\n".join(hits)
    stale = {(f, n) for f, names in EXEMPT.items() for n in names} - used
    assert not stale, f"exemptions no longer used: {sorted(stale)}"


def test_the_scan_can_fail():
    src = ("from bookft.eval.entry import _run_config, evaluate\nimport bookft.tokenize as tk\n"
           "from bookft.model import hf_io\n\ndef f(self):\n    tk._encode_batch(1)\n    hf_io._hf_shape(2)\n"
           "    self._own = 1\n    return _local()\n")
    assert crossings(src) == {"bookft.eval.entry._run_config", "tk._encode_batch", "hf_io._hf_shape"}
    assert crossings("def _f():\n    return 1\n\nclass A:\n    def __init__(self):\n        self._x = _f()\n") == set()
