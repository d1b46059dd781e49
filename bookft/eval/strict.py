"""Strict scoring: right only if the answer holds every expected item and no other item of its kind.

RULER's string_match_all (bookft/eval/scoring.py, `ruler` in the results) counts a reference found
anywhere in the output, so a list of every number in the context scores 1.0 on a task without
distractors. Strict scoring reads the answer as an answer.

Design choices:
- The answer is the output up to its first newline (leading blanks and newlines skipped) or the
  end of the turn (the EOS was cut by the generator): what follows a line break is not the answer.
- Right iff every reference occurs in the answer (case-insensitive) and no other candidate of the
  answer's kind does. Candidates are what the task names (TaskInstance.kind_pattern: a regex for
  any item of the kind, e.g. every digit run for number values, five capitals for RULER's variable
  names, UUIDs; TaskInstance.candidates: explicit words, e.g. the cwe list's words, the hops
  towns), matched as whole words. A candidate equal to a reference, or inside one (a town inside
  the answer's own phrase), is not an extra.
"""

from __future__ import annotations

import re
from collections.abc import Sequence


def answer_line(output: str) -> str:
    """The output up to its first newline, leading whitespace skipped."""
    return output.lstrip().split("\n", 1)[0]


def extras(line: str, references: Sequence[str], kind_pattern: str, candidates: Sequence[str]) -> list[str]:
    """Items of the answer's kind in `line` that are not references (nor part of one)."""
    refs = [r.lower() for r in references]
    found = re.findall(kind_pattern, line) if kind_pattern else []
    low = line.lower()
    found += [c for c in candidates if re.search(rf"(?<!\w){re.escape(c.lower())}(?!\w)", low)]
    return sorted({f for f in found if not any(f.lower() in r for r in refs)})


def strict_match(output: str, references: Sequence[str], kind_pattern: str = r"\d+",
                 candidates: Sequence[str] = ()) -> float:
    """1.0 when the answer line holds every reference and no other candidate of its kind, else 0.0."""
    if not references:
        return 0.0
    line = answer_line(output)
    low = line.lower()
    if not all(r.lower() in low for r in references):
        return 0.0
    return 0.0 if extras(line, references, kind_pattern, candidates) else 1.0
