"""Secrets in code (and, when asked, legal text): found with detect-secrets before tokenization, redacted.

Design choices:
- The detector is detect-secrets (Yelp, maintained), not a regex list of our own: its plugins
  (private keys; AWS, Azure, GitHub, GitLab, Slack, Stripe, Twilio, OpenAI, PyPI, npm, ... tokens;
  JWTs; credentials in URLs; high-entropy strings; secret-sounding assignments in code and config
  files) with its default filters (UUIDs, sequential and templated strings, indirect references,
  `pragma: allowlist secret`). Left out: IPPublicDetector (an IP address is not a credential). No
  verification: nothing goes on the network.
- Speed: detect-secrets runs every plugin on every line through its injection layer (about 3,000
  lines/s here). A line can only give a finding where a plugin's own pattern matches it, so the
  plugins' patterns (and the keyword plugin's keyword list) first run over the whole text, the
  entropy plugins over each line with their limit; only the lines they hit go through
  detect-secrets' per-line pipeline (its plugins and filters, the lines around as context). The
  findings are the library's own (a test compares them with its loop over every line); the
  pipeline uses two of its private functions (`_scan_line`, `_is_filtered_out`), hence the version
  pin in pyproject.toml.
- Redaction: the secret becomes `[REDACTED:<type>]` where it stands: the value the plugin reports,
  widened to its pattern's whole match when the plugin captures only a prefix (GitHub's "ghp"). A
  private key is redacted from its BEGIN line through its END line: the detector points at the
  header, the secret is the body.
- Kept: per finding the file (document source), the line number in the text (before redaction) and
  the type (detect-secrets' name: "AWS Access Key", "Private Key", ...). Never the value. A high-
  entropy finding on the same string as a named one (a GitHub token in quotes) is not counted twice.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import groupby

PLACEHOLDER = "[REDACTED:{kind}]"
GENERIC = {"Base64 High Entropy String", "Hex High Entropy String"}  # dropped where a named kind finds the same
LEFT_OUT = {"IPPublicDetector"}
_TOKEN = re.compile(r"[A-Za-z0-9_\-+/=.]")  # characters of a token (base64, hex, JWT, vendor prefixes)
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|---- END SSH2 ENCRYPTED PRIVATE KEY ----")


@dataclass(frozen=True)
class Finding:
    line: int  # 1-based, in the scanned text
    kind: str  # detect-secrets' secret type
    value: str  # kept only in memory, to redact it; never written

    def record(self, source: str) -> dict:
        return {"source": source, "line": self.line, "kind": self.kind}


class SecretScanner:
    """Use as a context manager (it installs detect-secrets' settings for its duration):
    `with SecretScanner() as s: text, found = s.redact(text, "path/in/repo.py")`."""

    def __enter__(self) -> SecretScanner:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.plugins.keyword import DENYLIST_REGEX, KeywordDetector
        from detect_secrets.settings import get_plugins, transient_settings

        names = sorted(c.__name__ for c in get_mapping_from_secret_type_to_class().values()
                       if c.__name__ not in LEFT_OUT)
        self._settings = transient_settings({"plugins_used": [{"name": n} for n in names]})
        self._settings.__enter__()
        self.plugins = list(get_plugins())
        keyword = [re.compile(DENYLIST_REGEX, re.IGNORECASE | re.MULTILINE)] if any(
            isinstance(p, KeywordDetector) for p in self.plugins) else []
        patterns, self._others = _pattern_lists([p for p in self.plugins if not isinstance(p, KeywordDetector)])
        self._patterns = keyword + patterns
        return self

    def __exit__(self, *exc) -> None:
        self._settings.__exit__(*exc)

    def _candidates(self, lines: list[str]) -> list[int]:
        """Indices of the lines on which some plugin can find something: a superset of the lines where
        detect-secrets' own per-line test would. The keyword list and the pattern plugins' patterns run
        once over the whole text (MULTILINE: ^ and $ at line ends, as per line; every line a match
        touches counts); the other plugins (high entropy) run per line, with their entropy limit."""
        text = "\n".join(lines)
        starts = [0]
        for ln in lines[:-1]:
            starts.append(starts[-1] + len(ln) + 1)
        hit: set[int] = set()
        for rx in self._patterns:
            for m in rx.finditer(text):
                first = bisect_right(starts, m.start()) - 1
                last = bisect_right(starts, max(m.start(), m.end() - 1)) - 1
                hit.update(range(first, last + 1))
        for i, line in enumerate(lines):
            if i not in hit and line and any(_may_find(p, line) for p in self._others):
                hit.add(i)
        return sorted(hit)

    def scan(self, text: str, filename: str) -> list[Finding]:
        """Findings in `text` (named `filename`: the keyword plugin reads its extension), in line order;
        a high-entropy finding on the same string as a named one is left out."""
        out: list[Finding] = []
        for _, group in groupby(self.scan_all(text, filename), key=lambda f: f.line):
            group = list(group)
            specific = [f.value for f in group if f.kind not in GENERIC]
            out += [f for f in group if f.kind not in GENERIC or not any(f.value in v or v in f.value
                                                                          for v in specific)]
        return out

    def scan_all(self, text: str, filename: str) -> list[Finding]:
        """Every finding detect-secrets' own per-line loop gives (same lines and kinds), in line order."""
        from detect_secrets.core.scan import _is_filtered_out, _scan_line
        from detect_secrets.util.code_snippet import get_code_snippet

        lines = text.split("\n")
        stripped = [ln.rstrip() for ln in lines]
        out: list[Finding] = []
        for i in self._candidates(stripped):
            number, line = i + 1, stripped[i]
            if not line:
                continue
            context = get_code_snippet(lines=lines, line_number=number)
            if _is_filtered_out(required_filter_parameters=["line"], filename=filename, line=line, context=context):
                continue
            found = {(s.type, _whole(p, line, s.secret_value or "")) for p in self.plugins
                     for s in _scan_line(plugin=p, filename=filename, line=line, line_number=number, context=context)
                     if not _is_filtered_out(required_filter_parameters=["context"], filename=s.filename,
                                             secret=s.secret_value, plugin=p, line=line, context=context)}
            out.extend(Finding(number, kind, value) for kind, value in sorted(found))
        return out

    def redact(self, text: str, filename: str) -> tuple[str, list[Finding]]:
        """(text with every finding replaced by its placeholder, the findings)."""
        found = self.scan(text, filename)
        return (redact(text, found) if found else text), found


def _whole(plugin, line: str, value: str) -> str:
    """The text to redact for a pattern plugin's finding: some patterns capture only a prefix (the
    GitHub plugin reports "ghp" of "ghp_<36 characters>"), so a short value widens to the whole match
    that holds it, less the delimiters around it (quotes, spaces, = and :)."""
    if len(value) >= 16 or not hasattr(plugin, "denylist"):
        return value
    for rx in plugin.denylist:
        for m in rx.finditer(line):
            if value in m.group(0):
                return m.group(0).strip(" \t'\"=:[]") or value
    return value


def _may_find(plugin, line: str) -> bool:
    """Would `plugin.analyze_line` yield anything on `line`? (entropy plugins: a string over their limit)"""
    limit = getattr(plugin, "entropy_limit", None)
    for value in plugin.analyze_string(line):
        if limit is None or plugin.calculate_shannon_entropy(value) > limit:
            return True
    return False


def _pattern_lists(plugins: list) -> tuple[list[re.Pattern], list]:
    """The patterns of the pattern-list plugins (their `analyze_string` yields only where one matches),
    recompiled MULTILINE to run over a whole text, and the plugins they cannot stand for (entropy
    plugins; verbose patterns). Each pattern apart: one alternation of all is slower in `re`."""
    from detect_secrets.plugins.base import RegexBasedDetector

    patterns, others = [], []
    for p in plugins:
        pats = getattr(p, "denylist", None) if isinstance(p, RegexBasedDetector) else None
        if not pats or any(r.flags & (re.VERBOSE | re.MULTILINE | re.DOTALL) for r in pats):
            others.append(p)
            continue
        patterns += [re.compile(r.pattern, r.flags | re.MULTILINE) for r in pats]
    return patterns, others


def _spans(line: str, value: str) -> list[tuple[int, int]]:
    """Where `value` stands on `line`, each place widened over the token characters it was cut from
    (a lazy pattern stops early: the JWT plugin reports a token without its signature)."""
    out, start = [], line.find(value) if value else -1
    while start >= 0:
        a, b = start, start + len(value)
        if _TOKEN.match(value[0]):
            while a > 0 and _TOKEN.match(line[a - 1]):
                a -= 1
        if _TOKEN.match(value[-1]):
            while b < len(line) and _TOKEN.match(line[b]):
                b += 1
        out.append((a, b))
        start = line.find(value, start + len(value))
    return out


def redact(text: str, found: list[Finding]) -> str:
    """`text` with each finding replaced by its placeholder: every place its value stands on its line
    (overlapping findings merged, the first kind named), or, for a private key, its whole block."""
    lines = text.split("\n")
    drop: set[int] = set()
    by_line: dict[int, list[Finding]] = {}
    for f in found:
        by_line.setdefault(f.line - 1, []).append(f)
    for i, fs in by_line.items():
        line = lines[i]
        spans: list[tuple[int, int, str]] = []
        for f in fs:
            if f.kind == "Private Key":  # the header line is reported; the key runs to its END line
                end = next((j for j in range(i, min(len(lines), i + 500)) if _PEM_END.search(lines[j])), i)
                drop.update(range(i + 1, end + 1))
                spans.append((0, len(line), f.kind))
                continue
            places = _spans(line, f.value)
            spans += [(a, b, f.kind) for a, b in places] or [(0, len(line), f.kind)]  # not as written: all
        merged: list[list] = []
        for a, b, kind in sorted(spans, key=lambda x: (x[0], x[2] in GENERIC, -x[1])):
            if merged and a < merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b, kind])
        for a, b, kind in reversed(merged):
            line = line[:a] + PLACEHOLDER.format(kind=kind) + line[b:]
        lines[i] = line
    return "\n".join(ln for j, ln in enumerate(lines) if j not in drop)


@contextmanager
def scanner(enabled: bool) -> Iterator[SecretScanner | None]:
    """A SecretScanner when enabled, else None (callers skip scanning)."""
    if not enabled:
        yield None
        return
    with SecretScanner() as s:
        yield s
