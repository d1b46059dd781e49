"""The sample corpus's code repository: a generated Python package, the same at every commit.

Design choices:
- Generated, not copied: the sample used to embed bookft's own source tree, so every commit was a
  new corpus (a new tokenizer, new haystacks, a new training run) and no change to the training
  recipe could be judged against the one before it. This generator is seeded and writes
  the same bytes on every machine and at every commit; tests/ingest/test_ingest_sample.py pins
  the content hash, so a change to it is a deliberate, visible new draw.
- Realistic for the code source (bookft.ingest.formats.code): a README at the root, a pyproject, a
  .gitignore that hides a generated folder, a package of modules with docstrings, imports,
  dataclasses, functions with type hints and comments, test modules, and a small binary file that
  the walker skips. Sizes are close to what the live tree had (about 0.6 MB of code), so the
  corpus's mix of books, legal text and code stays what the recipe was tuned on.
- Only `random.Random(seed)` draws integers and choices from fixed tuples, which is stable across
  platforms and Python versions.
"""

from __future__ import annotations

import random
from pathlib import Path

_NOUNS = ("ledger", "parcel", "route", "depot", "invoice", "cargo", "manifest", "vessel", "harbor", "crate",
          "tariff", "voyage", "berth", "anchor", "convoy", "freight", "quota", "permit", "schedule", "customer",
          "order", "batch", "shipment", "pallet", "carrier", "station", "region", "account", "record", "window")
_VERBS = ("load", "parse", "merge", "split", "score", "route", "price", "check", "build", "count", "group",
          "filter", "resolve", "render", "encode", "decode", "assign", "release", "reserve", "collect")
_ADJS = ("pending", "active", "late", "heavy", "fragile", "local", "remote", "daily", "open", "closed",
         "valid", "partial", "total", "nearest", "oldest", "largest", "default", "cached", "raw", "clean")
_TYPES = ("int", "float", "str", "bool", "list[str]", "dict[str, int]", "list[float]", "tuple[int, int]")
_COMMENTS = ("keep the order stable so reports compare across runs", "an empty input is not an error here",
             "the caller owns the list; copy before changing it", "rounding happens once, at the end",
             "cheap check first: most records pass it", "see the design note in the module docstring",
             "a missing key means the default, not zero", "sorted for deterministic output",
             "the limit is inclusive, as the contract says", "this mirrors what the importer does")


def _plural(noun: str) -> str:
    return noun + ("es" if noun.endswith(("ch", "sh", "x", "s")) else "s")


def _name(rng: random.Random, parts: int = 2) -> str:
    pool = (_ADJS, _NOUNS) if parts == 2 else (_NOUNS,)
    return "_".join(rng.choice(p) for p in pool)


def _camel(rng: random.Random) -> str:
    return rng.choice(_ADJS).title() + rng.choice(_NOUNS).title()


def _expr(rng: random.Random, names: list[str]) -> str:
    a, b = rng.choice(names), rng.choice(names)
    return rng.choice((f"{a} + {b}", f"{a} * {rng.randint(2, 9)}", f"max({a}, {b})", f"min({a}, {rng.randint(0, 99)})",
                       f"({a} - {b}) // {rng.randint(2, 7)}", f"abs({a} - {b})", f"{a} % {rng.randint(3, 17)}"))


def _body(rng: random.Random, args: list[str], indent: str) -> list[str]:
    names = list(args) or ["0"]
    out: list[str] = []
    for _ in range(rng.randint(2, 6)):
        kind = rng.randrange(5)
        var = _name(rng, 1) + f"_{rng.choice(_ADJS)}"
        if kind == 0:
            out.append(f"{indent}{var} = {_expr(rng, names)}")
            names.append(var)
        elif kind == 1:
            it = rng.choice(names)
            out += [f"{indent}for item in range({it}):",
                    f"{indent}    if item % {rng.randint(2, 5)} == 0:",
                    f"{indent}        continue",
                    f"{indent}    {var} = item * {rng.randint(2, 9)}"]
            out.insert(len(out) - 4, f"{indent}{var} = 0")
            names.append(var)
        elif kind == 2:
            out += [f"{indent}if {rng.choice(names)} > {rng.randint(0, 500)}:",
                    f"{indent}    # {rng.choice(_COMMENTS)}",
                    f"{indent}    {var} = {_expr(rng, names)}",
                    f"{indent}else:",
                    f"{indent}    {var} = {rng.randint(0, 50)}"]
            names.append(var)
        elif kind == 3:
            out.append(f"{indent}# {rng.choice(_COMMENTS)}")
        else:
            out.append(f'{indent}log.debug("{rng.choice(_VERBS)} %s", {rng.choice(names)})')
    out.append(f"{indent}return {_expr(rng, names)}")
    return out


def _function(rng: random.Random, indent: str = "", method: bool = False) -> tuple[str, list[str]]:
    name = f"{rng.choice(_VERBS)}_{_name(rng)}"
    args = [f"{_name(rng, 1)}_{rng.choice(('count', 'limit', 'size', 'offset', 'weight'))}"
            for _ in range(rng.randint(1, 4))]
    args = list(dict.fromkeys(args))
    sig_args = (["self"] if method else []) + [f"{a}: int" for a in args]
    lines = [f"{indent}def {name}({', '.join(sig_args)}) -> int:",
             f'{indent}    """{rng.choice(_VERBS).title()} the {rng.choice(_ADJS)} {_plural(rng.choice(_NOUNS))} '
             f'and return the {rng.choice(_ADJS)} {rng.choice(_NOUNS)}."""']
    lines += _body(rng, args, indent + "    ")
    return name, lines


def _module(rng: random.Random, package: str, siblings: list[str]) -> str:
    topic = f"{rng.choice(_ADJS)} {_plural(rng.choice(_NOUNS))}"
    lines = [f'"""{topic.capitalize()}: how the {rng.choice(_NOUNS)} service {rng.choice(_VERBS)}s them.', "",
             "Design notes:"]
    lines += [f"- {rng.choice(_COMMENTS).capitalize()}." for _ in range(rng.randint(2, 4))]
    lines += ['"""', "", "from __future__ import annotations", "", "import logging",
              "from dataclasses import dataclass, field", ""]
    for sib in rng.sample(siblings, k=min(len(siblings), rng.randint(0, 2))) if siblings else ():
        lines.append(f"from {package}.{sib} import {sib.upper()}_LIMIT")
    lines += ["", "log = logging.getLogger(__name__)", ""]
    for _ in range(rng.randint(1, 3)):
        lines.append(f"{_name(rng).upper()} = {rng.randint(1, 9999)}")
    lines.append("")
    for _ in range(rng.randint(1, 3)):
        cls = _camel(rng)
        doc = f'    """A {rng.choice(_ADJS)} {rng.choice(_NOUNS)} as the {rng.choice(_NOUNS)} table stores it."""'
        lines += ["", "@dataclass", f"class {cls}:", doc, ""]
        for _ in range(rng.randint(2, 5)):
            name, typ = _name(rng), rng.choice(_TYPES)
            lines.append(f"    {name}: {typ} = field(default_factory={rng.choice(('list', 'dict', 'int', 'str'))})")
        for _ in range(rng.randint(1, 3)):
            lines.append("")
            lines += _function(rng, "    ", method=True)[1]
    for _ in range(rng.randint(3, 8)):
        lines += ["", ""]
        lines += _function(rng)[1]
    return "\n".join(lines).replace("\n\n\n\n", "\n\n\n") + "\n"


def _test_module(rng: random.Random, package: str, module: str) -> str:
    lines = [f'"""Tests of {package}.{module}."""', "", f"from {package} import {module}", ""]
    for _ in range(rng.randint(2, 5)):
        lines += ["", f"def test_{rng.choice(_VERBS)}_{_name(rng)}():",
                  f"    got = {module}.{rng.choice(_NOUNS).upper()}_LIMIT if hasattr({module}, "
                  f"'{rng.choice(_NOUNS).upper()}_LIMIT') else {rng.randint(0, 9)}",
                  f"    assert got >= 0  # {rng.choice(_COMMENTS)}"]
    return "\n".join(lines) + "\n"


def code_repository(rng: random.Random, modules: int) -> dict[str, bytes]:
    """{relative path: bytes} of a generated Python repository with `modules` modules."""
    package = f"{rng.choice(_NOUNS)}kit"
    names: list[str] = []
    while len(names) < modules:
        n = f"{rng.choice(_ADJS)}_{_plural(rng.choice(_NOUNS))}"
        if n not in names:
            names.append(n)
    files: dict[str, bytes] = {}
    readme = [f"# {package}", "", f"{package} {rng.choice(_VERBS)}s {rng.choice(_NOUNS)}s for the "
              f"{rng.choice(_NOUNS)} service: one module per concern.", "", "## Modules", ""]
    readme += [f"- `{package}/{n}.py`: {rng.choice(_ADJS)} {rng.choice(_NOUNS)}s" for n in names]
    readme += ["", "## Run the tests", "", "```", "python -m pytest -q", "```", ""]
    files["README.md"] = "\n".join(readme).encode()
    files["pyproject.toml"] = (f'[project]\nname = "{package}"\nversion = "0.{rng.randint(1, 9)}.0"\n'
                               'requires-python = ">=3.11"\n').encode()
    files[".gitignore"] = b"generated/\n*.pyc\n"
    files["generated/cache.py"] = b"# build output: ignored by .gitignore\n"
    files[f"{package}/__init__.py"] = f'"""{package}: {rng.choice(_ADJS)} {rng.choice(_NOUNS)} tools."""\n'.encode()
    for i, n in enumerate(names):
        text = _module(rng, package, names[:i])  # imports only from modules before it: no cycles
        files[f"{package}/{n}.py"] = (text + f"\n{n.upper()}_LIMIT = {rng.randint(10, 999)}\n").encode()
        if i % 3 == 0:
            files[f"tests/test_{n}.py"] = _test_module(rng, package, n).encode()
    files["docs/logo.png"] = bytes([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) + bytes(
        rng.randrange(256) for _ in range(512))  # a binary file: the walker skips it
    return files


def write_repository(folder: Path, files: dict[str, bytes]) -> None:
    """Write `files` under `folder`, touching only files whose bytes change; remove strays."""
    for rel, data in files.items():
        p = folder / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if not (p.is_file() and p.read_bytes() == data):
            p.write_bytes(data)
    for p in sorted(folder.rglob("*"), reverse=True):
        rel = p.relative_to(folder).as_posix()
        if p.is_file() and rel not in files:
            p.unlink()
        elif p.is_dir() and not any(p.iterdir()):
            p.rmdir()
