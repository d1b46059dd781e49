"""A version is complete before it is visible, and checked before it is trusted.

Design choices:
- Sealing: the last thing written into a staged version is its inventory, `files` in manifest.json
  ({relative path: [size, sha256]} of every other file, retrieval.json included); the publish then
  fsyncs and renames the whole folder. A version whose files do not match its inventory was never
  published complete (or was damaged since).
- Every build and every refresh, "unchanged" ones included, starts with `recover`: the current
  version is checked file by file (size and sha256; 370-420 MB/s here, a 2-core host at load 14),
  the others by presence and size. A file digested before with the same size and mtime is not read
  again (CORPUS/cache/verified.json, as git's index does): a schedule of "unchanged" refreshes does
  not reread the corpus, and a file changed in place gets a new mtime; a broken one is renamed aside and deleted, and
  `current` goes back to the newest intact version, so the run that follows rebuilds it (from its
  caches, and its tokenizer when that is intact: `_keep_tokenizer`) instead of answering
  "unchanged" over it, and no training run can pin it. A manifest
  written before inventories existed is checked for the parts every version has (manifest,
  documents, sequences, tokenizer, and retrieval.json when its config synthesizes examples).
- sha256 from the standard library (hashlib.file_digest): no dependency for one digest.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from bookft.corpus.store import fsync_dir, version_numbers, write_json

INVENTORY_KEY = "files"
REUSE_TOKENIZER = "reuse-tokenizer"  # under CORPUS/cache: a removed broken version's intact tokenizer
VERIFIED = "verified.json"  # under CORPUS/cache: size, mtime and sha256 of the current version's files checked


def digest(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def inventory(vdir: Path) -> dict[str, list]:
    """{relative path: [size, sha256]} of every file of the version but manifest.json."""
    out: dict[str, list] = {}
    for dirpath, _, names in os.walk(vdir):
        for n in sorted(names):
            p = Path(dirpath) / n
            rel = p.relative_to(vdir).as_posix()
            if rel != "manifest.json":
                out[rel] = [p.stat().st_size, digest(p)]
    return dict(sorted(out.items()))


def seal(staged: Path, manifest: dict) -> None:
    """Record the staged version's inventory in its manifest (the last write before the publish)."""
    manifest[INVENTORY_KEY] = inventory(staged)
    write_json(staged / "manifest.json", manifest)


def _legacy_parts(vdir: Path, m: dict) -> list[str]:
    need = ["tokenizer/tokenizer.json", "documents/state.json", "sequences/state.json"]
    for part in ("documents", "sequences"):
        try:
            state = json.loads((vdir / part / "state.json").read_text())
            need += [f"{part}/{f['filename']}" for f in state["_data_files"]]
        except (OSError, ValueError, KeyError, TypeError):
            pass
    if float(((m.get("config") or {}).get("retrieval") or {}).get("rate") or 0) > 0:
        need.append("retrieval.json")
    return [f"{rel}: missing" for rel in need if not (vdir / rel).is_file()]


def verify(vdir: Path, digests: bool = True, seen: dict | None = None) -> list[str]:
    """What is wrong with the version folder `vdir` against its manifest ([] = intact). `seen`: {relative
    path: [size, mtime_ns, sha256]} of files digested before; a file whose size and mtime are those is
    not read again; filled with the files digested now."""
    try:
        m = json.loads((vdir / "manifest.json").read_text())
        if not isinstance(m, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as e:
        return [f"manifest.json: unreadable ({e})"]
    files = m.get(INVENTORY_KEY)
    if not isinstance(files, dict):
        return _legacy_parts(vdir, m)
    problems = []
    for rel, (size, sha) in files.items():
        p = vdir / rel
        st = p.stat() if p.is_file() else None
        if st is None:
            problems.append(f"{rel}: missing")
        elif st.st_size != size:
            problems.append(f"{rel}: {st.st_size} bytes, the manifest says {size}")
        elif digests and (seen or {}).get(rel) != [size, st.st_mtime_ns, sha]:
            if digest(p) != sha:
                problems.append(f"{rel}: content differs from the manifest's sha256")
            elif seen is not None:
                seen[rel] = [size, st.st_mtime_ns, sha]
    return problems


def _keep_tokenizer(vdir: Path, problems: list[str]) -> None:
    """The broken current version's tokenizer, when intact, to CORPUS/cache/reuse-tokenizer/: the
    rebuild reuses it (ingest/phases/tokens.py) as it would have reused the version's own, so the
    rebuilt version is the one that was meant; the next publish removes it."""
    if any(p.startswith("tokenizer/") or p.startswith("manifest.json") for p in problems):
        return
    dst = vdir.parent.parent / "cache" / REUSE_TOKENIZER
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(vdir / "tokenizer", dst / "tokenizer")
    shutil.copyfile(vdir / "manifest.json", dst / "manifest.json")


def recover(root: Path) -> list[str]:
    """Remove broken versions (the current one checked by digest, the others by size) and point
    `current` back at the newest intact version; returns one line per version removed."""
    root = Path(root)
    link = root / "current"
    cur = os.path.basename(os.path.realpath(link)) if link.is_symlink() else None
    out: list[str] = []
    intact: list[str] = []
    seen_file = root / "cache" / VERIFIED
    try:
        seen_all = json.loads(seen_file.read_text())
    except (OSError, ValueError):
        seen_all = {}
    seen = seen_all.get(cur) if isinstance(seen_all, dict) and isinstance(seen_all.get(cur), dict) else {}
    for n in version_numbers(root):
        name = f"{n:04d}"
        problems = verify(root / "versions" / name, digests=name == cur, seen=seen if name == cur else None)
        if not problems:
            intact.append(name)
            if name == cur and seen_file.parent.is_dir():
                write_json(seen_file, {cur: seen})
            continue
        aside = root / "versions" / f".tmp-{os.getpid()}-broken-{name}"
        if name == cur:
            _keep_tokenizer(root / "versions" / name, problems)
        os.rename(root / "versions" / name, aside)
        shutil.rmtree(aside, ignore_errors=True)
        shown = "; ".join(problems[:5]) + (f"; {len(problems) - 5} more" if len(problems) > 5 else "")
        out.append(f"versions/{name} (incomplete{', was current' if name == cur else ''}: {shown}): removed")
    if cur is not None and cur not in intact:
        tmp = root / f"current.tmp-{os.getpid()}-recover"
        if intact:
            os.symlink(os.path.join("versions", intact[-1]), tmp)
            os.replace(tmp, link)
            out.append(f"current -> versions/{intact[-1]} (the newest intact version)")
        else:
            link.unlink()
            out.append("current removed (no intact version left)")
        fsync_dir(root)
    return out
