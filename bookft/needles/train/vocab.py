"""Keys and values of the training generator: words, names, numbers and dates, never UUIDs.

Design choices:
- No word here is an eval key, value or candidate (RULER's adjective-noun keys in
  bookft/needles/tasks.py, the eval-only families' words in bookft/needles/eval_vocab.py), and the
  number formats differ from the eval's (7-digit values, 5-digit vartrack values): 4 digits,
  6 digits or "ddd-ddd". tests/needles/test_generators_disjoint.py checks all of it.
- Keys and variable names come in several spellings, one per example (as one document or program
  keeps one): a word-pair key as "velvet thimble", "velvet-thimble", "velvet_thimble" or
  "velvetThimble"; a variable as snake_case, camelCase, UPPER_SNAKE, a few random capitals or a
  letter with digits. A model taught one spelling learns that spelling rather than the skill
  (docs/log.md, 2026-12-06). Never RULER's five capitals.
- UUIDs stay an untrained family (the eval's multikey_uuid).
"""

from __future__ import annotations

import numpy as np

KEY_ADJ = tuple("""velvet tawny brisk mossy russet dappled stout narrow lofty briny speckled crooked
ivory sable woven gilded rustic pewter scarlet misshapen jagged nimble ochre frosted""".split())
KEY_NOUN = tuple("""thimble quill satchel weathervane inkwell tankard spindle lattice bobbin gazebo
sundial trellis ledger skiff anvil lectern hearth parapet turnstile dovecote kiln hamper sextant""".split())
FIRST = tuple("""Alma Bruno Celeste Dmitri Edwina Felix Greta Hamish Ingrid Joaquin Kasimir Lorna Magnus
Nadia Oswin Priya Quentin Rhoda Stellan Tamsin Udo Vesna Wilfred Xenia Yusuf Zelda Anselm Brigid
Caspar Dagny""".split())
LAST = tuple("""Abernathy Blackwood Castellan Driscoll Eriksen Fairweather Greenhalgh Holloway Ishikawa
Jablonski Kowalczyk Lindqvist Mbeki Nakagawa Okonkwo Pettigrew Quimby Radcliffe Saltonstall Thornbury
Underhill Vasquez Whitlock Yardley Zamora""".split())
VALUE_WORDS = tuple("""marmalade harpsichord tundra meringue paisley quasar juniper obsidian carousel
sorrel tapestry gondola nutmeg sapphire walrus zeppelin mandolin bramble cormorant dulcimer fjord
gargoyle hyacinth iguana kumquat lanolin minaret nectarine origami pagoda quartz rhubarb cardamom
tambourine vellum wisteria xylograph yarrow zither""".split())
VAR_LEFT = tuple("""reg buf acc tmp cnt idx ptr val arg sum""".split())
VAR_RIGHT = tuple("""heron maple cobble fennel pebble birch cinder hazel thorn willow lark moss reed
flint ember""".split())
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")


def number(rng: np.random.Generator) -> str:
    """4 digits, 6 digits or ddd-ddd: never the eval's 7- or 5-digit forms."""
    form = int(rng.integers(3))
    if form == 0:
        return str(int(rng.integers(1000, 10000)))
    if form == 1:
        return str(int(rng.integers(100000, 1000000)))
    return f"{int(rng.integers(100, 1000))}-{int(rng.integers(100, 1000))}"


def date(rng: np.random.Generator) -> str:
    d, m, y = int(rng.integers(1, 29)), MONTHS[int(rng.integers(12))], int(rng.integers(1890, 2030))
    return f"{d} {m} {y}" if rng.random() < 0.5 else f"{m} {d}, {y}"


def name(rng: np.random.Generator) -> str:
    return f"{FIRST[int(rng.integers(len(FIRST)))]} {LAST[int(rng.integers(len(LAST)))]}"


def word(rng: np.random.Generator) -> str:
    return VALUE_WORDS[int(rng.integers(len(VALUE_WORDS)))]


def _letters(rng: np.random.Generator, n: int) -> str:
    return "".join(chr(65 + int(c)) for c in rng.integers(0, 26, n))


def _word_pair(rng: np.random.Generator) -> tuple[str, str]:
    return VAR_LEFT[int(rng.integers(len(VAR_LEFT)))], VAR_RIGHT[int(rng.integers(len(VAR_RIGHT)))]


def _one_of(styles: dict, rng: np.random.Generator):
    return styles[tuple(styles)[int(rng.integers(len(styles)))]]


# word-pair spellings, of keys and of variable names (a name key is always "First Last")
KEY_STYLES = {
    "space": lambda a, b: f"{a} {b}",
    "hyphen": lambda a, b: f"{a}-{b}",
    "underscore": lambda a, b: f"{a}_{b}",
    "camel": lambda a, b: a + b.capitalize(),
}

# variable-name spellings; "capitals" has 3, 4 or 6 letters: five are RULER's
VAR_STYLES = {
    "snake": lambda rng: KEY_STYLES["underscore"](*_word_pair(rng)),
    "camel": lambda rng: KEY_STYLES["camel"](*_word_pair(rng)),
    "upper_snake": lambda rng: KEY_STYLES["underscore"](*_word_pair(rng)).upper(),
    "capitals": lambda rng: _letters(rng, (3, 4, 6)[int(rng.integers(3))]),
    "letter_digits": lambda rng: chr(97 + int(rng.integers(26))) + str(int(rng.integers(1, 100))),
}


def var_namer(rng: np.random.Generator):
    """A draw of variable names in one spelling (VAR_STYLES), chosen by `rng`."""
    return _one_of(VAR_STYLES, rng)


def key_speller(kind: str, rng: np.random.Generator):
    """How one example spells its keys: (a, b) -> text."""
    return KEY_STYLES["space"] if kind == "name" else _one_of(KEY_STYLES, rng)


def phrase_pair(rng: np.random.Generator) -> tuple[str, str]:
    return KEY_ADJ[int(rng.integers(len(KEY_ADJ)))], KEY_NOUN[int(rng.integers(len(KEY_NOUN)))]


def name_pair(rng: np.random.Generator) -> tuple[str, str]:
    return FIRST[int(rng.integers(len(FIRST)))], LAST[int(rng.integers(len(LAST)))]


VALUES = {"number": number, "date": date, "name": name, "word": word}
KEYS = {"phrase": phrase_pair, "name": name_pair}  # keys as word pairs, spelled by key_speller


def distinct(draw, rng: np.random.Generator, n: int, avoid: set | None = None) -> list:
    """n distinct draws of `draw`, none in `avoid`."""
    out: list = []
    seen = set(avoid or ())
    for _ in range(200 * n):
        if len(out) == n:
            break
        v = draw(rng)
        if v not in seen:
            seen.add(v)
            out.append(v)
    return out


def near_miss(key: tuple[str, str], rng: np.random.Generator) -> tuple[str, str]:
    """A key one word away from `key` (same first word, another second, or the other way round)."""
    a, b = key
    if a in FIRST or b in LAST:
        pool_a, pool_b = FIRST, LAST
    else:
        pool_a, pool_b = KEY_ADJ, KEY_NOUN
    if rng.random() < 0.5:
        return a, [x for x in pool_b if x != b][int(rng.integers(len(pool_b) - 1))]
    return [x for x in pool_a if x != a][int(rng.integers(len(pool_a) - 1))], b
