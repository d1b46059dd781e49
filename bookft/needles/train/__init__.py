"""The training generator: tasks whose wording, keys and values no eval task uses.

- bank.py: instructions, needle sentences, questions and answer prefixes (tens of each).
- vocab.py: keys and values (word pairs, names, numbers, dates; never UUIDs), distractor keys.
- tasks.py: `make_train_task(kind, seed, depth)`: single-key retrieval, multi-key with distractor
  families, multi-value, variable tracking, as bookft.needles.tasks.TaskInstance.

A corpus with `retrieval.generator: train` draws its task examples here (bookft/needles/task_examples.py)
and records the generator (GENERATOR) per example in its rows and retrieval.json.
"""

from bookft.needles.train.tasks import GENERATOR, TRAIN_KINDS, make_train_task

__all__ = ["GENERATOR", "TRAIN_KINDS", "make_train_task"]
