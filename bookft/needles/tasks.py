"""Needle tasks: single-needle NIAH and the RULER-style variants, as text.

The evaluation's generator: the eval (bookft/eval/runner.py) asks these; the training examples of
a corpus with `retrieval.generator: train` come from bookft/needles/train/ instead (other wording,
keys and values; tests/needles/test_generators_disjoint.py), while `generator: eval` (the default,
the sample's magic_number examples) asks these verbatim. It sits below eval and ingest:
ingest never imports eval. `make_task(spec, seed, depth)` takes any object with NeedleSpec's
fields; EvalConfig has them all (same names and defaults, tests/eval/test_eval_protocol.py).

Design choices:
- A task instance is pure text: needles (each with a depth as a fraction of the haystack), a
  question, an answer prefix the model is primed with, and the answer. The needle whose depth is
  the cell's nominal depth is `target`; distractors and extra values go to seeded random depths.
- Phrasing follows RULER (Hsieh et al. 2024, "RULER: What's the Real Context Size of Your
  Long-Context Language Models?"; NVIDIA/RULER scripts/data/synthetic/constants.py and niah.py):
  "One of the special magic numbers for {key} is: {value}.", the singular template ("A special
  magic number is hidden ...") when one value is asked, a query list "k1, k2, and k3", variable
  tracking's "Question: ..." / "Answer: According to ..." with a 5-digit value; and the passkey
  filler task (Mohtashami & Jaggi 2023). Layout differs in whitespace only (the skeleton of
  bookft/needles/placement.py: a blank line before the question, the prefix on its own line).
  The eval-only families (cwe, niah_fact, multikey_uuid, hops) are in bookft/needles/families.py.
- `phrasing: short` (niah, multikey) ends the answer prefix with the needle's own words ("The
  special magic number for K is:"), so the answer is a copy of what followed them; RULER's
  paraphrased prefix ("... mentioned in the provided text is") also needs the key matched across
  different words. The tiny CPU default uses short; real models use ruler.
- Values are digit strings, keys and variable names contain no digits, and the essay filler has
  none, so a value can only come from its needle.
- Content is seeded by (seed, task) alone: every cell of a seed asks the same question, so a
  heatmap row compares like with like.
"""

from __future__ import annotations

import numpy as np

from bookft.errors import EvalError
from bookft.needles.families import FAMILIES
from bookft.needles.task_types import Needle, NeedleSpec, TaskInstance, other_depths, task_rng

__all__ = ["Needle", "NeedleSpec", "TaskInstance", "TASKS", "make_task"]

_ADJ = ("silver", "quiet", "amber", "hollow", "bright", "crimson", "gentle", "rapid", "frozen", "golden",
        "hidden", "lucky", "ancient", "bitter", "curious", "distant", "eager", "fancy", "glossy", "humble")
_NOUN = ("otter", "lantern", "harbor", "meadow", "falcon", "kettle", "garden", "compass", "violin",
         "canyon", "pepper", "mirror", "ribbon", "saddle", "thistle", "walnut", "beacon", "cobalt")

NIAH_INSTRUCTION = ("Some special magic numbers are hidden within the following text. Make sure to "
                    "memorize it. I will quiz you about the numbers afterwards.\n")
# RULER's template for one query of one value (niah.py turns "Some ... are" into "A ... is")
NIAH_SINGLE_INSTRUCTION = ("A special magic number is hidden within the following text. Make sure to "
                           "memorize it. I will quiz you about the number afterwards.\n")
PASSKEY_INSTRUCTION = ("There is an important info hidden inside a lot of irrelevant text. Find it and "
                       "memorize it. I will quiz you about the important information there.\n")
VT_INSTRUCTION = "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n"
VT_VALUE_DIGITS = 5  # RULER's variable_tracking draws its value from 10000..99999


def _keys(rng: np.random.Generator, n: int) -> list[str]:
    pairs = [f"{a}-{b}" for a in _ADJ for b in _NOUN]
    return [pairs[i] for i in rng.choice(len(pairs), size=n, replace=False)]


def _values(rng: np.random.Generator, n: int, digits: int) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        v = str(int(rng.integers(1, 10))) + "".join(str(int(d)) for d in rng.integers(0, 10, digits - 1))
        if v not in out:
            out.append(v)
    return out


def _magic(key: str, value: str) -> str:
    return f"One of the special magic numbers for {key} is: {value}."


def _niah(cfg: NeedleSpec, seed: int, depth: float, distractors: int) -> TaskInstance:
    rng = task_rng(seed, "niah")
    keys = _keys(rng, 1 + distractors)
    values = _values(rng, 1 + distractors, cfg.value_digits)
    depths = [depth] + other_depths(task_rng(seed, "niah-depths"), distractors)
    if cfg.phrasing == "short":
        # the answer prefix repeats the needle's words up to the value: retrieval is a plain copy
        # of what followed them (an induction head), what a tiny model trained for minutes can learn
        needles = [Needle(f"The special magic number for {k} is: {v}.", d)
                   for k, v, d in zip(keys, values, depths, strict=False)]
        question = f"What is the special magic number for {keys[0]}?"
        prefix = f"The special magic number for {keys[0]} is:"
    else:
        needles = [Needle(_magic(k, v), d) for k, v, d in zip(keys, values, depths, strict=False)]
        question = f"What is the special magic number for {keys[0]} mentioned in the provided text?"
        prefix = f"The special magic number for {keys[0]} mentioned in the provided text is"
    return TaskInstance(
        task="multikey" if distractors else "niah", needles=needles,
        instruction=NIAH_INSTRUCTION if cfg.phrasing == "short" else NIAH_SINGLE_INSTRUCTION,
        question=question, answer_prefix=prefix, answer=f" {values[0]}", references=[values[0]], target=0)


def _multivalue(cfg: NeedleSpec, seed: int, depth: float) -> TaskInstance:
    rng = task_rng(seed, "multivalue")
    key = _keys(rng, 1)[0]
    values = _values(rng, cfg.num_values, cfg.value_digits)
    depths = [depth] + other_depths(task_rng(seed, "mv-depths"), cfg.num_values - 1)
    order = sorted(range(len(values)), key=lambda i: (depths[i], i))  # answer in order of appearance
    needles = [Needle(_magic(key, v), d) for v, d in zip(values, depths, strict=False)]
    return TaskInstance(
        task="multivalue", instruction=NIAH_INSTRUCTION, needles=needles,
        question=f"What are all the special magic numbers for {key} mentioned in the provided text?",
        answer_prefix=f"The special magic numbers for {key} mentioned in the provided text are",
        answer=" " + ", ".join(values[i] for i in order), references=list(values), target=0)


def _multiquery(cfg: NeedleSpec, seed: int, depth: float) -> TaskInstance:
    rng = task_rng(seed, "multiquery")
    keys = _keys(rng, cfg.num_queries)
    values = _values(rng, cfg.num_queries, cfg.value_digits)
    depths = [depth] + other_depths(task_rng(seed, "mq-depths"), cfg.num_queries - 1)
    needles = [Needle(_magic(k, v), d) for k, v, d in zip(keys, values, depths, strict=False)]
    ks = ", ".join(keys[:-1]) + ", and " + keys[-1] if len(keys) > 1 else keys[0]  # RULER's query list
    return TaskInstance(
        task="multiquery", instruction=NIAH_INSTRUCTION, needles=needles,
        question=f"What are all the special magic numbers for {ks} mentioned in the provided text?",
        answer_prefix=f"The special magic numbers for {ks} mentioned in the provided text are",
        answer=" " + ", ".join(values), references=list(values), target=0)


def _passkey(cfg: NeedleSpec, seed: int, depth: float) -> TaskInstance:
    value = _values(task_rng(seed, "passkey"), 1, cfg.value_digits)[0]
    return TaskInstance(
        task="passkey", instruction=PASSKEY_INSTRUCTION,
        needles=[Needle(f"The pass key is {value}. Remember it. {value} is the pass key.", depth)],
        question="What is the pass key?", answer_prefix="The pass key is", answer=f" {value}",
        references=[value], target=0)


def _var_names(rng: np.random.Generator, n: int) -> list[str]:
    letters = np.array(list("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    out: list[str] = []
    while len(out) < n:
        name = "".join(rng.choice(letters, 5))
        if name not in out:
            out.append(name)
    return out


def _vartrack(cfg: NeedleSpec, seed: int, depth: float) -> TaskInstance:
    rng = task_rng(seed, "vartrack")
    names = _var_names(rng, cfg.num_hops + 1)
    value = _values(rng, 1, VT_VALUE_DIGITS)[0]
    hops = sorted(other_depths(task_rng(seed, "vt-depths"), cfg.num_hops, lo=depth, hi=1.0))
    needles = [Needle(f"VAR {names[0]} = {value}.", depth)]
    needles += [Needle(f"VAR {names[i + 1]} = VAR {names[i]}.", d) for i, d in enumerate(hops)]
    n = len(names)
    return TaskInstance(
        task="vartrack", instruction=VT_INSTRUCTION, needles=needles,
        question=f"Question: Find all variables that are assigned the value {value} in the text above.",
        answer_prefix=(f"Answer: According to the chain(s) of variable assignment in the text above, {n} "
                       f"variables are assigned the value {value}, they are:"),
        answer=" " + " ".join(names), references=list(names), target=0, kind_pattern=r"\b[A-Z]{5}\b")


TASKS = {
    "niah": lambda cfg, seed, depth: _niah(cfg, seed, depth, 0),
    "multikey": lambda cfg, seed, depth: _niah(cfg, seed, depth, cfg.num_distractors),
    "multivalue": _multivalue,
    "multiquery": _multiquery,
    "passkey": _passkey,
    "vartrack": _vartrack,
    **FAMILIES,  # evaluation only: cwe, niah_fact, multikey_uuid, hops
}


def make_task(cfg: NeedleSpec, seed: int, depth_percent: float) -> TaskInstance:
    try:
        build = TASKS[cfg.task]
    except KeyError:
        raise EvalError(f"unknown eval.task {cfg.task!r}; choose one of {', '.join(TASKS)}") from None
    return build(cfg, seed, depth_percent / 100.0)
