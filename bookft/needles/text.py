"""The text form of a corpus document: the ingest's normalisation and the units its encoder takes.

The ingest cleans every extracted text (`clean_text`) and encodes it paragraph by paragraph
(`units`: split after each blank line). The example synthesizer (examples.py, tokencount.py) must
give its examples exactly the tokens the build will, so it uses these same two functions; they
live here, below ingest, and bookft.ingest.documents and bookft.ingest.tokenize re-export them.
"""

from __future__ import annotations

import re
import unicodedata

_LIGATURES = {"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl",
              "\ufb05": "st", "\ufb06": "st"}
_LIG_RE = re.compile("[" + "".join(_LIGATURES) + "]")
_CTRL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SPACES_RE = re.compile(r"[ \t\u00a0]+\n")
_BLANKS_RE = re.compile(r"\n{3,}")


def clean_text(text: str) -> str:
    """Normalise newlines, ligatures, control characters, trailing spaces and runs of blank lines."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.isascii():  # ASCII has no ligatures and is NFC already (the scans cost ~30 ms per 4M chars)
        text = _LIG_RE.sub(lambda m: _LIGATURES[m.group()], text)
        text = unicodedata.normalize("NFC", text)
    text = _CTRL_RE.sub("", text)
    if " \n" in text or "\t\n" in text or "\u00a0\n" in text:  # the regex tries every space: ~50 ms per 4M chars
        text = _SPACES_RE.sub("\n", text)
    if "\n\n\n" in text:
        text = _BLANKS_RE.sub("\n\n", text)
    return text.strip()


def units(text: str) -> list[str]:
    """Split after each blank line; the concatenation of the units is the text."""
    parts = text.split("\n\n")
    out = [p + "\n\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return [u for u in out if u]
