"""Code repository (a folder or a git checkout) -> one long document, gitingest/repomix style.

Design choices:
- Deterministic order: README* at the root first, then a sorted depth-first tree walk.
- One document per repository; each file starts with a header line `=== FILE: path (language) ===`
  and is separated from the next by a blank line, so file starts are paragraph boundaries the
  packer can split at.
- Honoured: .gitignore files (root and nested, via pathspec's gitignore semantics); `.git` is never
  read. Skipped with a reason in the manifest: binaries (content sniffing, not extensions), files
  over the size cap, vendored folders, lock files, minified files, symlinks that leave the tree,
  symlink loops, directory symlinks (never followed, so no cycles).
- Secrets (private keys, cloud and API tokens, passwords in config) are redacted file by file before
  the document is assembled, when a scanner is given (on by default: bookft/ingest/filters/secrets.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from bookft.ingest.documents import Document, Entry, ExtractResult, decode_text, looks_binary
from bookft.ingest.filters.secrets import SecretScanner

VENDORED_DIRS = {"node_modules", "vendor", "third_party", "__pycache__", ".venv", "venv", "dist", "build",
                 ".tox", ".mypy_cache", ".pytest_cache", ".ruff_cache", "site-packages", ".eggs"}
LOCK_FILES = {"package-lock.json", "yarn.lock", "pnpm-lock.yaml", "poetry.lock", "Pipfile.lock", "uv.lock",
              "Cargo.lock", "composer.lock", "Gemfile.lock", "go.sum", "mix.lock", "flake.lock"}
LANGUAGES = {".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript", ".ts": "typescript",
             ".tsx": "typescript", ".jsx": "javascript", ".java": "java", ".kt": "kotlin", ".go": "go",
             ".rs": "rust", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".hpp": "cpp", ".cs": "csharp",
             ".rb": "ruby", ".php": "php", ".swift": "swift", ".scala": "scala", ".sh": "shell",
             ".bash": "shell", ".md": "markdown", ".rst": "rst", ".txt": "text", ".toml": "toml",
             ".yaml": "yaml", ".yml": "yaml", ".json": "json", ".html": "html", ".css": "css",
             ".sql": "sql", ".r": "r", ".jl": "julia", ".lua": "lua", ".xml": "xml", ".cfg": "ini",
             ".ini": "ini", ".proto": "protobuf", ".tex": "latex"}
CODE_EXTS = set(LANGUAGES) - {".md", ".rst", ".txt", ".json", ".xml", ".html", ".yaml", ".yml"}


def language(path: str) -> str:
    name = os.path.basename(path)
    if name in ("Makefile", "Dockerfile", "CMakeLists.txt"):
        return name.lower()
    return LANGUAGES.get(os.path.splitext(name)[1].lower(), "text")


def _minified(text: str) -> bool:
    lines = text.count("\n") + 1
    return len(text) > 2000 and len(text) / lines > 400


class Walker:
    """The files of a repository the extractor reads, in its order; what it leaves out becomes entries
    of `res` (also the content hash's walk: bookft/ingest/sources.py)."""

    def __init__(self, root: Path, res: ExtractResult, include_hidden: bool, skip_vendored: bool) -> None:
        self.root = root
        self.real_root = os.path.realpath(root)
        self.res = res
        self.include_hidden = include_hidden
        self.skip_vendored = skip_vendored

    def skip(self, rel: str, reason: str, status: str = "skipped") -> None:
        self.res.entries.append(Entry(f"{self.root}/{rel}", status, reason, "code"))

    def _ignore_spec(self, folder: Path, rel: str, specs: list) -> list:
        gi = folder / ".gitignore"
        if gi.is_file() and not gi.is_symlink():
            try:
                lines = gi.read_text(encoding="utf-8", errors="replace").splitlines()
                import pathspec  # here: ~0.1 s of imports (typing_extensions) every ingest would pay otherwise

                specs = specs + [(rel, pathspec.GitIgnoreSpec.from_lines(lines))]
            except OSError:
                pass
        return specs

    @staticmethod
    def _ignored(rel: str, is_dir: bool, specs: list) -> bool:
        for base, spec in specs:
            if base and not rel.startswith(base + "/"):
                continue
            sub = rel[len(base) + 1:] if base else rel
            if spec.match_file(sub + ("/" if is_dir else "")):
                return True
        return False

    def walk(self, folder: Path, rel: str, specs: list) -> list[tuple[str, Path]]:
        """Files to read as (relative path, path), in tree order (README first at the root)."""
        specs = self._ignore_spec(folder, rel, specs)
        try:
            names = sorted(os.listdir(folder))
        except OSError as e:
            self.skip(rel or ".", f"cannot list folder: {e.strerror or e}", "failed")
            return []
        if not rel:
            readmes = [n for n in names if n.lower().startswith("readme")]
            names = readmes + [n for n in names if n not in readmes]
        out: list[tuple[str, Path]] = []
        for name in names:
            path = folder / name
            r = f"{rel}/{name}" if rel else name
            if name == ".git":
                continue
            if name.startswith(".") and not self.include_hidden and name not in (".gitignore",):
                continue
            if os.path.islink(path):
                try:
                    target = os.path.realpath(path, strict=True)
                except OSError as e:
                    why = "symlink loop" if "loop" in str(e).lower() or e.errno == 40 else "dangling symlink"
                    self.skip(r, why)
                    continue
                if not (target == self.real_root or target.startswith(self.real_root + os.sep)):
                    self.skip(r, "symlink leaves the repository; not followed")
                    continue
                if os.path.isdir(target):
                    self.skip(r, "symlink to a folder; not followed (avoids cycles)")
                    continue
            is_dir = os.path.isdir(path)
            if self._ignored(r, is_dir, specs):
                continue
            if is_dir:
                if self.skip_vendored and name in VENDORED_DIRS:
                    self.skip(r + "/", "vendored or generated folder")
                    continue
                out.extend(self.walk(path, r, specs))
            elif os.path.isfile(path):
                out.append((r, path))
        return out


def extract_code(root: Path, collection: str, max_file_kb: int = 1024, skip_vendored: bool = True,
                 include_hidden: bool = False, secrets: SecretScanner | None = None) -> ExtractResult:
    """A repository -> one document; with `secrets`, each file's secrets are redacted (lines counted in
    the file as read, newlines normalised) and listed in `res.secrets`."""
    res = ExtractResult(source=str(root), kind="code")
    walker = Walker(root, res, include_hidden, skip_vendored)
    parts: list[str] = []
    for rel, path in walker.walk(root, "", []):
        name = os.path.basename(rel)
        if skip_vendored and (name in LOCK_FILES or ".min." in name):
            walker.skip(rel, "lock file" if name in LOCK_FILES else "minified file")
            continue
        try:
            size = os.path.getsize(path)
            if size > max_file_kb * 1024:
                walker.skip(rel, f"file over the size cap ({size // 1024} KiB > {max_file_kb} KiB)")
                continue
            data = path.read_bytes()
        except OSError as e:
            walker.skip(rel, f"cannot read file: {e.strerror or e}", "failed")
            continue
        if looks_binary(data):
            walker.skip(rel, "binary content")
            continue
        text, note = decode_text(data)
        if skip_vendored and _minified(text):
            walker.skip(rel, "minified file (very long lines)")
            continue
        text = text.replace("\r\n", "\n")
        if secrets is not None:
            text, found = secrets.redact(text, rel)
            if found:
                res.secrets.extend(f.record(f"{root}/{rel}") for f in found)
                res.add("secrets", len(found))
        text = text.strip("\n")
        if not text.strip():
            walker.skip(rel, "empty file")
            continue
        parts.append(f"=== FILE: {rel} ({language(rel)}) ===\n{text}")
        res.entries.append(Entry(f"{root}/{rel}", "ingested", note, "code"))
        res.add("files")
    if parts:
        res.documents.append(Document(str(root), collection, "code", "\n\n".join(parts), collection,
                                      {"files": len(parts)}))
    else:
        res.entries.append(Entry(str(root), "skipped", "no readable text files in the repository", "code"))
    return res


def looks_like_repository(folder: Path) -> bool:
    """A git checkout, or a folder that mostly holds source code and no documents (PDF, archives, JSONL)."""
    if (folder / ".git").exists():
        return True
    n = code = 0
    for _dirpath, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in VENDORED_DIRS]
        for f in files:
            if f.lower().endswith((".pdf", ".epub", ".docx", ".zip", ".tar", ".gz", ".tgz", ".xz", ".jsonl",
                                   ".ndjson")):
                return False  # documents, not a code base: the folder is opened instead
            n += 1
            code += os.path.splitext(f)[1].lower() in CODE_EXTS
        if n > 2000:
            break
    return n > 0 and code / n >= 0.3
