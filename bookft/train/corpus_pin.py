"""Which corpus version a run trains on: the one it started on, until the user says otherwise.

Design choices:
- A run directory records the corpus and version it trains on in RUN_DIR/corpus.json: the corpus
  folder, the version, its data hash, and a history of {step, version}: the step after which each version
  was first read. A resume opens that version (CORPUS/versions/NNNN), not whatever
  `current` points to now, so a refresh or another `bookft ingest --out` into the same corpus
  folder never changes the data under a run. Naming the same corpus again does not move it on.
- Moving on is explicit: `--corpus-version latest` (what `current` points to) or a number. A run
  pointed at another corpus folder takes that folder's current version, and says so.
- A pinned version that no longer exists, or whose data hash changed, is an error that names it.
- A corpus given as a version folder (CORPUS/versions/NNNN) is that version, pinned as such.
- The run holds a reader lease on its version (bookft/corpus/lease.py) while it trains, so a
  refresh's `retention` never prunes it; the lease ends with the process.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from bookft.corpus.store import version_numbers
from bookft.errors import CorpusError

PIN_FILE = "corpus.json"


@dataclass
class Pin:
    """The version a run opens now, and what it says about it."""

    root: Path | None  # the corpus folder (None: a bare version folder outside a corpus)
    version_dir: Path
    version: int | None
    data_hash: str
    note: str | None = None  # one line for the user (a newer version exists, the run moved on)
    moved_from: int | None = None  # the version trained on before this invocation, when it changed
    history: list = field(default_factory=list)


def _manifest(version_dir: Path) -> dict:
    try:
        return json.loads((version_dir / "manifest.json").read_text())
    except (OSError, ValueError) as e:
        raise CorpusError(f"{version_dir}: not a readable corpus version ({e})") from None


def _root_of(path: Path) -> tuple[Path | None, Path | None]:
    """(corpus folder, explicit version folder or None) for a `--corpus` path."""
    if (path / "current").exists() or (path / "versions").is_dir():
        return path.resolve(), None
    if (path / "manifest.json").is_file():
        v = path.resolve()
        return (v.parent.parent if v.parent.name == "versions" else None), v
    if not path.exists():
        raise CorpusError(f"{path}: no such corpus (run `bookft ingest ... --out {path}` first)")
    raise CorpusError(f"{path}: not a bookft corpus (no `current` link and no manifest.json)")


def read_pin(run_dir: Path) -> dict | None:
    try:
        return json.loads((Path(run_dir) / PIN_FILE).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise CorpusError(f"{Path(run_dir) / PIN_FILE}: unreadable ({e}); it records the corpus version "
                          "this run trains on") from None


def parse_request(request: str | int | None) -> str | int | None:
    """`--corpus-version`: None (the pinned one), "latest", or a version number."""
    if request is None or request == "latest":
        return request
    try:
        n = int(request)
    except (TypeError, ValueError):
        raise CorpusError(f"--corpus-version {request!r}: expected `latest` or a version number") from None
    if n < 1:
        raise CorpusError(f"--corpus-version {n}: versions are numbered from 1")
    return n


def _version_dir(root: Path, n: int, why: str) -> Path:
    d = root / "versions" / f"{n:04d}"
    if not d.is_dir():
        have = ", ".join(str(v) for v in version_numbers(root)) or "none"
        raise CorpusError(f"{root}: version {n} ({why}) no longer exists (versions there: {have}); "
                          "pass --corpus-version latest or N to train on another")
    return d


def choose(run_dir: Path, corpus: str | Path, request: str | int | None = None) -> Pin:
    """The version this invocation of a run trains on (see the module docstring)."""
    request = parse_request(request)
    root, explicit = _root_of(Path(corpus))
    pin = read_pin(run_dir)
    same = pin is not None and root is not None and pin.get("corpus") == str(root)
    if explicit is not None:
        if request is not None:
            raise CorpusError(f"{corpus}: a version folder is a version already; drop --corpus-version "
                              "or name the corpus folder")
        vdir = explicit
    elif request == "latest" or (request is None and not same):
        vdir = Path(os.path.realpath(root / "current"))
        if not vdir.is_dir():
            raise CorpusError(f"{root}: no current version (run `bookft ingest ... --out {root}` first)")
    elif request is None:
        vdir = _version_dir(root, int(pin["version"]), f"which this run trains on, recorded in "
                                                         f"{Path(run_dir) / PIN_FILE}")
    else:
        vdir = _version_dir(root, int(request), "asked for with --corpus-version")
    m = _manifest(vdir)
    version = m.get("version")
    out = Pin(root=root, version_dir=vdir, version=version, data_hash=str(m.get("data_hash", "")),
              history=list(pin.get("history", [])) if pin else [])
    moved = pin is not None and pin.get("version_dir") != str(vdir)
    if pin is not None and not moved and pin.get("data_hash") and pin["data_hash"] != out.data_hash:
        raise CorpusError(f"{vdir}: version {version}'s data hash is {out.data_hash[:12]}, but this run "
                          f"started on {pin['data_hash'][:12]}; the version was rewritten under the run")
    if moved:
        out.moved_from = pin.get("version")
        was = f"version {pin.get('version')}" + ("" if same else f" of {pin.get('corpus')}")
        out.note = f"moving on from {was} to version {version}" + ("" if same else f" of {root or vdir}")
    elif root is not None and version is not None:
        newer = max(version_numbers(root), default=0)
        if newer > version:
            out.note = (f"training on version {version}; version {newer} is newer "
                        "(--corpus-version latest to move on)")
    return out


def record(run_dir: Path, pin: Pin, step: int) -> None:
    """Write RUN_DIR/corpus.json: the version trained on from `step` on (history kept)."""
    history = list(pin.history)
    if not history or pin.moved_from is not None:
        history.append({"step": step, "version": pin.version})
    data = {"corpus": str(pin.root) if pin.root is not None else None, "version": pin.version,
            "version_dir": str(pin.version_dir), "data_hash": pin.data_hash, "history": history}
    tmp = Path(run_dir) / (PIN_FILE + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, Path(run_dir) / PIN_FILE)
