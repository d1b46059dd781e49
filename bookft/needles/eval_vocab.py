"""Vocabulary of the evaluation-only families (bookft/needles/families.py): never in a training example.

Design choices:
- Hand-written word lists, no download at run time (RULER draws cwe's words from the wonderwords
  package's lists; these are common English words of the same kinds). When a long context needs
  more distinct words than the list holds, `pseudo_words` adds pronounceable made-up ones.
- The training generator's vocabulary (bookft/needles/train/vocab.py) shares no word with these
  lists nor with the RULER keys (bookft/needles/tasks.py), checked by
  tests/needles/test_generators_disjoint.py.
"""

from __future__ import annotations

import numpy as np

CWE_WORDS = tuple("""
apple arrow basket beard bicycle blanket bottle bracelet bucket butter button cabin camera candle
carpet carrot castle cellar chimney cloud coffee collar cookie corner cotton cradle crayon crystal
cushion dragon drawer dress eagle elbow engine envelope fabric feather fence finger flag flower
forest fountain frog furnace glove goat grape guitar hammer hat helmet honey horse island jacket
jelly jungle kitten ladder lemon lizard locket magnet marble mask melon monkey mountain muffin
napkin needle nest noodle ocean onion orange oven owl paddle palace pencil pigeon pillow pirate
planet plum pocket pony potato puddle puppet rabbit radio raft rocket roof rope sandal scarf
shadow shell shovel skirt sled snail soap sock spider spoon squirrel stamp statue stove sugar
swan sweater table teapot tiger toast tomato tower towel tractor trumpet tulip turtle umbrella
valley vase wagon wallet whistle window wolf yogurt zebra
absorb admire argue bake balance bathe beg bless blink boil borrow bounce breathe brush bury
carve chase cheer chew clap climb coach cough crawl dance dig dive drag dream drift drip dust
fetch fold frown gallop gather giggle glide grab grin groan guard hatch hop hover hug hum hunt
juggle kneel knit knock launch lick limp march melt mend mix nod obey paint pedal peel pinch
plant pour pray pull punch push rattle rescue rinse roar rock roll rub sail scrub sew shiver
shrug sing skip slide sneeze sniff snore sparkle spill splash sprint squeeze stir stretch stumble
sweep swing tickle tiptoe trace travel tremble tug twirl wander wash weave whisper wiggle wink
wobble yawn yell
angry awkward bouncy brave bumpy chilly clumsy cozy crispy cranky dizzy dusty fluffy foggy fuzzy
gloomy greasy grumpy hairy hasty jolly juicy lazy lumpy messy misty moody muddy nervous noisy
plump prickly rusty salty sandy shaggy shiny shy silky sleepy slimy slippery smoky snowy soggy
sour spicy spotty squeaky sticky stormy sunny tangy tasty thirsty tidy tiny wavy weary wiggly
windy witty wooden woolly
""".split())

# hops: people and the towns they live in
PEOPLE = tuple("""Agnes Bartholomew Cornelia Desmond Euphemia Fitzgerald Gwendolyn Horatio Imogen Jasper
Leopold Marigold Nathaniel Ophelia Percival Rosalind Sebastian Theodora Ulysses Winifred Barnaby
Clementine Dorian Evangeline Ignatius Lavinia Montgomery Philippa Reginald Seraphina""".split())
TOWNS = tuple("""Abernethy Ballycastle Carnforth Dunvegan Ellesmere Fordingbridge Glastonbury Helmsley
Invergarry Kirkwall Ledbury Malmesbury Northallerton Oundle Pitlochry Quorndon Ravenglass Sedbergh
Tewkesbury Ullapool Wetherby Yarmouth Alnwick Bakewell Chepstow Dornoch""".split())
RELATIONS = ("sister", "brother", "cousin", "neighbour", "godmother", "landlord", "tutor", "nephew")

# niah_fact (Kamradt's form): a sentence of fact, questions that paraphrase it, answer prefixes, and
# its values as (phrase, the word a right answer must hold)
FACTS = (
    {"needle": "The best thing to do in {place} is to {value}.",
     "questions": ("According to the document, what is the most enjoyable way to spend a day in {place}?",
                   "If you visited {place}, what would the text recommend doing?"),
     "prefix": "The best way to spend a day in {place} is to",
     "values": (("watch the herons from the old bridge", "herons"), ("eat oysters on the harbour wall", "oysters"),
                ("climb the bell tower at dawn", "tower"), ("hire a rowing boat on the lake", "boat"),
                ("browse the secondhand bookshops", "bookshops"), ("picnic beside the ruined abbey", "abbey"))},
    {"needle": "The secret ingredient in {who}'s celebrated soup is {value}.",
     "questions": ("What does {who} add to the soup that makes it so well liked?",
                   "Which hidden ingredient explains why people love {who}'s soup?"),
     "prefix": "The ingredient {who} adds is",
     "values": (("smoked paprika", "paprika"), ("star anise", "anise"), ("a spoonful of miso", "miso"),
                ("roasted chestnuts", "chestnuts"), ("dried morels", "morels"), ("a splash of sherry", "sherry"))},
    {"needle": "{who} keeps the spare key to the boathouse inside {value}.",
     "questions": ("Where could someone find the spare boathouse key that {who} looks after?",
                   "If the boathouse were locked, where should one look for {who}'s spare key?"),
     "prefix": "The spare key is kept inside",
     "values": (("a hollow garden gnome", "gnome"), ("an old biscuit tin", "biscuit"),
                ("the barometer case", "barometer"), ("a cracked flowerpot", "flowerpot"),
                ("the lid of the piano", "piano"), ("a wellington boot", "wellington"))},
    {"needle": "The only animal that ever frightened {who} was {value}.",
     "questions": ("Which creature, according to the passage, scared {who}?",
                   "What animal did {who} fear, as the text tells it?"),
     "prefix": "The animal that frightened {who} was",
     "values": (("a one-eyed goose", "goose"), ("a bad-tempered llama", "llama"), ("a tiny hedgehog", "hedgehog"),
                ("the vicar's ferret", "ferret"), ("a stray peacock", "peacock"), ("an enormous badger", "badger"))},
)


def pseudo_words(n: int, seed: int, taken: set[str]) -> list[str]:
    """n pronounceable made-up words (consonant-vowel syllables), none in `taken`, seeded."""
    rng = np.random.default_rng([seed, 4051])
    cons, vows = list("bdfgklmnprstvz"), list("aeiou")
    out: list[str] = []
    while len(out) < n:
        w = "".join(str(rng.choice(cons)) + str(rng.choice(vows)) for _ in range(int(rng.integers(2, 4))))
        if w not in taken:
            taken.add(w)
            out.append(w)
    return out
