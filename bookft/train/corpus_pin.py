"""Which corpus version a run trains on: the one it started on, until the user says otherwise.

Design choices:
- A run directory records the corpus and version it trains on in RUN_DIR/corpus.json: the corpus
  folder, the version, its data hash, and a history of {step, version}: the step after which each version
  was first read. A resume opens that version (CORPUS/versions/NNNN), not whatever
  `current` points to now, so a refresh or another `bookft ingest --out` into the same corpus
  folder never changes the data under a run. Naming the same corpus again does not move it on.
- Moving on is explicit: `--corpus-version latest` (what `current` points to) or a number. A run
  pointed at another corpus folder takes that folder's current version, and says so.
- A pinned version that no longer exists, or whose data hash changed, is an error that names it;
  so is a version whose files do not match its manifest (sizes; corpus/integrity.py): no run pins
  an incomplete version.
- A corpus given as a version folder (CORPUS/versions/NNNN) is that version, pinned as such.
- The run holds a lease on its version (bookft/corpus/lease.py) from its first step until it
  finishes: a refresh's `retention` never prunes it, even after the run was killed with -9.
- The record is never rewritten: its history only grows. A missing corpus.json in a run that has
  checkpoints, or one of any other shape than this module writes (`null`, `{}`, a list, a version
  that is not a number, ...), is refused with an error that names the file and the choice:
  `--corpus-version N|latest`. With that choice the run goes on; an unreadable file is kept beside
  (corpus.json.unreadable) and the new record's history starts at the step it resumes from, marked
  in the metrics like any move.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from bookft.corpus.integrity import verify
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
    lost: str | None = None  # why the run's record was missing or unreadable (a new one is started)

    @property
    def marked(self) -> bool:
        """The first step of this invocation carries corpus_version in the metrics (a move, a new record)."""
        return self.moved_from is not None or self.lost is not None


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


CHOOSE = ("it records the corpus version this run trains on; choose the version to go on with: "
          "--corpus-version N (a version number) or --corpus-version latest")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def shape_problem(d) -> str | None:
    """What is wrong with the shape of a corpus.json record (None: nothing)."""
    if not isinstance(d, dict):
        return f"holds {json.dumps(d)[:60]}, not a record ({{\"corpus\": ..., \"version\": N, ...}})"
    for key, ok, what in (("version", _is_int, "a version number"),
                          ("version_dir", lambda v: isinstance(v, str) and v, "a folder"),
                          ("corpus", lambda v: v is None or isinstance(v, str), "a corpus folder or null"),
                          ("data_hash", lambda v: isinstance(v, str), "a data hash"),
                          ("history", lambda v: isinstance(v, list) and all(
                              isinstance(h, dict) and _is_int(h.get("step")) and _is_int(h.get("version"))
                              for h in v), "a list of {step, version}")):
        if key not in d:
            return f"has no {key!r}"
        if not ok(d[key]):
            return f"{key!r} is {json.dumps(d[key])[:60]}, not {what}"
    return None


def read_pin(run_dir: Path) -> dict | None:
    """The run's record (None: there is none); CorpusError naming the file for any other shape."""
    f = Path(run_dir) / PIN_FILE
    try:
        data = json.loads(f.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise CorpusError(f"{f}: unreadable ({e}); {CHOOSE}") from None
    problem = shape_problem(data)
    if problem is not None:
        raise CorpusError(f"{f}: {problem}; {CHOOSE}")
    return data


def has_checkpoints(run_dir: Path) -> bool:
    d = Path(run_dir) / "checkpoints"
    return d.is_dir() and any(p.name.isdigit() for p in d.iterdir())


def _read_or_choose(run_dir: Path, request) -> tuple[dict | None, str | None]:
    """(the record, None), or (None, why the record is lost) when the user chose a version anyway."""
    f = Path(run_dir) / PIN_FILE
    try:
        pin = read_pin(run_dir)
    except CorpusError as e:
        if request is None:
            raise
        return None, str(e).split(";")[0]
    if pin is None and has_checkpoints(run_dir):
        if request is None:
            raise CorpusError(f"{f}: missing, but {run_dir} has checkpoints: without it the version its steps "
                              f"trained on is unknown; {CHOOSE}")
        return None, f"{f}: missing"
    return pin, None


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


def _version_dir(root: Path, n: int, why: str, asked: bool = False) -> Path:
    d = root / "versions" / f"{n:04d}"
    if not d.is_dir():
        have = ", ".join(str(v) for v in version_numbers(root)) or "none"
        if asked:
            raise CorpusError(f"{root}: no version {n} exists ({why}; versions there: {have}); "
                              "pass --corpus-version latest or one of those")
        raise CorpusError(f"{root}: version {n} ({why}) no longer exists (versions there: {have}); "
                          "pass --corpus-version latest or N to train on another")
    return d


def choose(run_dir: Path, corpus: str | Path, request: str | int | None = None) -> Pin:
    """The version this invocation of a run trains on (see the module docstring)."""
    request = parse_request(request)
    root, explicit = _root_of(Path(corpus))
    pin, lost = _read_or_choose(run_dir, request)
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
        vdir = _version_dir(root, int(request), "asked for with --corpus-version", asked=True)
    m = _manifest(vdir)
    broken = verify(vdir, digests=False)  # sizes only: cheap; the next build or refresh repairs it
    if broken:
        raise CorpusError(f"{vdir}: incomplete corpus version ({'; '.join(broken[:3])}); a refresh "
                          "(`bookft pipeline run`) or `bookft ingest` removes and rebuilds it")
    version = m.get("version")
    out = Pin(root=root, version_dir=vdir, version=version, data_hash=str(m.get("data_hash", "")),
              history=list(pin.get("history", [])) if pin else [], lost=lost)
    if lost is not None:
        out.note = f"{lost}: a new record starts here, on version {version} as asked"
        return out
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
    """Write RUN_DIR/corpus.json: the version trained on from `step` on. The history only grows (an
    unreadable record the user chose to replace is kept beside, as corpus.json.unreadable)."""
    f = Path(run_dir) / PIN_FILE
    history = list(pin.history)
    if not history or pin.moved_from is not None or pin.lost is not None:
        history.append({"step": step, "version": pin.version})
    if pin.lost is not None and f.exists():
        os.replace(f, f.with_name(PIN_FILE + ".unreadable"))
    data = {"corpus": str(pin.root) if pin.root is not None else None, "version": pin.version,
            "version_dir": str(pin.version_dir), "data_hash": pin.data_hash, "history": history}
    tmp = f.with_name(PIN_FILE + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, f)
