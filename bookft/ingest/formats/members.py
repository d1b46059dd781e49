"""The members of a zip, a tar or a folder, read under the hostile-input rules.

Design choices:
- Members are read into memory and never written to disk, but dangerous members are still refused
  with a reason, because the container is hostile input: absolute paths or `..` (zip slip), links
  (symlinks, hard links, devices), and decompression bombs (per-member size cap, compression-ratio
  cap, total uncompressed cap; reads are bounded, declared sizes are not trusted).
- One reader for every format that is a container: legal archives and folders (archive.py) and
  the zip-based documents EPUB and DOCX (`zip_parts`: the members they ask for, by name). It
  imports none of those readers, so they all import it.
"""

from __future__ import annotations

import os
import stat
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import IO

from bookft.ingest.config import LimitsConfig
from bookft.ingest.documents import Entry, ExtractResult

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
ZIP_DOCUMENT_SUFFIXES = (".epub", ".docx")  # zip containers read by their own extractors (epub.py, docx.py)
ARCHIVE_ERRORS = (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, ValueError)
MB = 1 << 20


def is_archive(path: Path) -> bool:
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def unsafe_name(name: str) -> str | None:
    """Why a member name is refused (zip slip), or None."""
    if not name or "\x00" in name:
        return "empty or NUL in member name"
    norm = name.replace("\\", "/")
    if norm.startswith("/") or (len(norm) > 1 and norm[1] == ":"):
        return f"absolute path {name!r} (zip slip)"
    if ".." in PurePosixPath(norm).parts:
        return f"path {name!r} escapes the archive with '..' (zip slip)"
    return None


def zip_members(path: Path | IO[bytes], lim: LimitsConfig, res: ExtractResult, kind: str = "legal",
                 want: Callable[[str], bool] | None = None, label: str | None = None
                 ) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of the zip's safe members; refused ones become entries of `kind`. `want(name)`,
    when given, is asked about every safe member and only those it accepts are read."""
    total = 0
    label = str(path) if label is None else label
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        if len(infos) > lim.archive_max_members:
            raise ValueError(f"{len(infos)} members, over the cap of {lim.archive_max_members}")
        for info in infos:
            src = f"{label}:{info.filename}"
            if info.is_dir():
                continue
            why = unsafe_name(info.filename)
            mode = info.external_attr >> 16
            if why is None and stat.S_ISLNK(mode):
                why = "symbolic link member refused"
            if why is None and info.file_size > lim.archive_max_member_mb * MB:
                why = f"member declares {info.file_size} bytes, over the {lim.archive_max_member_mb:g} MiB cap"
            if why is None and info.file_size > MB and info.file_size / max(info.compress_size, 1) > \
                    lim.archive_max_ratio:
                why = (f"compression ratio {info.file_size / max(info.compress_size, 1):.0f}:1 over the cap "
                       f"{lim.archive_max_ratio:g}:1 (decompression bomb)")
            if why:
                res.entries.append(Entry(src, "skipped", why, kind))
                continue
            if want is not None and not want(info.filename):
                continue
            cap = int(min(lim.archive_max_member_mb * MB, lim.archive_max_total_mb * MB - total))
            with zf.open(info) as f:
                data = f.read(cap + 1)
            if len(data) > cap:
                res.entries.append(Entry(src, "skipped", "member inflates past the size caps (decompression "
                                         "bomb); not read further", kind))
                if total + len(data) > lim.archive_max_total_mb * MB:
                    res.entries.append(Entry(label, "skipped", "archive total uncompressed size over "
                                             f"{lim.archive_max_total_mb:g} MiB; remaining members not read",
                                             kind))
                    return
                continue
            total += len(data)
            yield info.filename, data


def tar_members(path: Path, lim: LimitsConfig, res: ExtractResult) -> Iterator[tuple[str, bytes]]:
    total = 0
    n = 0
    with tarfile.open(path, "r:*") as tf:
        for m in tf:
            n += 1
            if n > lim.archive_max_members:
                raise ValueError(f"over the cap of {lim.archive_max_members} members")
            src = f"{path}:{m.name}"
            if m.isdir():
                continue
            why = unsafe_name(m.name)
            if why is None and (m.issym() or m.islnk()):
                why = f"link member refused ({'symlink' if m.issym() else 'hard link'} to {m.linkname!r})"
            if why is None and not m.isfile():
                why = "device, FIFO or other special member refused"
            if why is None and m.size > lim.archive_max_member_mb * MB:
                why = f"member is {m.size} bytes, over the {lim.archive_max_member_mb:g} MiB cap"
            if why is None and total + m.size > lim.archive_max_total_mb * MB:
                res.entries.append(Entry(str(path), "skipped", "archive total uncompressed size over "
                                         f"{lim.archive_max_total_mb:g} MiB; remaining members not read", "legal"))
                return
            if why:
                res.entries.append(Entry(src, "skipped", why, "legal"))
                continue
            f = tf.extractfile(m)
            data = f.read(m.size) if f else b""
            total += len(data)
            yield m.name, data


def folder_members(root: Path, lim: LimitsConfig, res: ExtractResult) -> Iterator[tuple[str, bytes | None]]:
    """(relative path, bytes) of the folder's files; None for an archive, EPUB or DOCX (opened by path)."""
    real_root = os.path.realpath(root)
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in sorted(files):
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                try:
                    target = os.path.realpath(p, strict=True)
                except OSError:
                    res.entries.append(Entry(str(p), "skipped", "symlink loop or dangling symlink", "legal"))
                    continue
                if not target.startswith(real_root + os.sep):
                    res.entries.append(Entry(str(p), "skipped", "symlink leaves the folder; not followed", "legal"))
                    continue
            try:
                if p.stat().st_size > lim.max_file_mb * MB:
                    res.entries.append(Entry(str(p), "skipped", f"file over {lim.max_file_mb:g} MiB", "legal"))
                    continue
                data = None if is_archive(p) or name.lower().endswith(ZIP_DOCUMENT_SUFFIXES) else p.read_bytes()
            except OSError as e:
                res.entries.append(Entry(str(p), "failed", f"cannot read file: {e.strerror or e}", "legal"))
                continue
            yield rel, data


def archive_members(path: Path, lim: LimitsConfig, res: ExtractResult) -> Iterator[tuple[str, bytes]]:
    return zip_members(path, lim, res) if path.name.lower().endswith(".zip") else tar_members(path, lim, res)


def zip_parts(file: Path | IO[bytes], label: str, lim: LimitsConfig, res: ExtractResult, kind: str,
              want: Callable[[str], bool]) -> dict[str, bytes]:
    """The members of a zip-based document (EPUB, DOCX) that `want` accepts, by name, read under the
    archive rules (refused members become entries of `kind`). Raises ARCHIVE_ERRORS for a bad zip."""
    return dict(zip_members(file, lim, res, kind, want, label))
