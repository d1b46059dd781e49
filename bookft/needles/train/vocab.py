"""Keys and values of the training generator: words, names, numbers and dates, never UUIDs.

Design choices:
- No word here is an eval key, value or candidate (RULER's adjective-noun keys in
  bookft/needles/tasks.py, the eval-only families' words in bookft/needles/eval_vocab.py), and the
  number formats differ from the eval's (7-digit values, 5-digit vartrack values): 4 digits,
  6 digits or "ddd-ddd". Variable names are lowercase word pairs joined by "_", never RULER's
  five capitals. tests/needles/test_generators_disjoint.py checks all of it.
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


def phrase(rng: np.random.Generator) -> str:
    return f"{KEY_ADJ[int(rng.integers(len(KEY_ADJ)))]} {KEY_NOUN[int(rng.integers(len(KEY_NOUN)))]}"


def word(rng: np.random.Generator) -> str:
    return VALUE_WORDS[int(rng.integers(len(VALUE_WORDS)))]


def var_name(rng: np.random.Generator) -> str:
    return f"{VAR_LEFT[int(rng.integers(len(VAR_LEFT)))]}_{VAR_RIGHT[int(rng.integers(len(VAR_RIGHT)))]}"


VALUES = {"number": number, "date": date, "name": name, "word": word}
KEYS = {"phrase": phrase, "name": name}


def distinct(draw, rng: np.random.Generator, n: int, avoid: set[str] | None = None) -> list[str]:
    """n distinct draws of `draw`, none in `avoid`."""
    out: list[str] = []
    seen = set(avoid or ())
    for _ in range(200 * n):
        if len(out) == n:
            break
        v = draw(rng)
        if v not in seen:
            seen.add(v)
            out.append(v)
    return out


def near_miss(key: str, rng: np.random.Generator) -> str:
    """A key one word away from `key` (same first word, another second, or the other way round)."""
    a, b = key.split(" ", 1)
    if a in FIRST or b in LAST:
        pool_a, pool_b = FIRST, LAST
    else:
        pool_a, pool_b = KEY_ADJ, KEY_NOUN
    if rng.random() < 0.5:
        return f"{a} {[x for x in pool_b if x != b][int(rng.integers(len(pool_b) - 1))]}"
    return f"{[x for x in pool_a if x != a][int(rng.integers(len(pool_a) - 1))]} {b}"
