"""needles: the needle tasks and the training examples built from them, shared by ingest and eval.

- tasks.py: NIAH and the RULER-style tasks as text (`make_task`), asked by the eval and by the probe;
  families.py (with eval_vocab.py): the evaluation-only families cwe, niah_fact, multikey_uuid, hops;
  task_types.py: what a task is made of; fewshot.py: solved examples before a prompt.
- train/: the training generator (its own wording, keys and values), for `retrieval.generator: train`.
- examples.py: one synthesized training example (`build_example`): a task's needle, or a sentence
  or a function signature, placed in a window of corpus text and asked about at the end.
- tokencount.py, text.py: the ingest's token counts and text form, measured here without the
  ingest (an example must have exactly the tokens the build will give it).
- retrieval_config.py: the `retrieval:` section of a corpus YAML; eval_config.py: the `eval:` section
  of a run config (typed by the run config in train, scored by eval: both read it from here).
- tokenizer.py (the model's tokenizer: offsets, special tokens, the chat template), haystack.py
  (sentence-chunked filler) and placement.py (needles at sentence boundaries, the prompt and answer
  as token ids): how a task becomes a sequence, for the eval and for the synthesized examples.

This layer sits below ingest and eval (docs/design.md, "Layers"): it imports only bookft.config
and bookft.errors. The ingest writes the examples to files (bookft/ingest/example_writer.py).
"""

from bookft.needles.tasks import (
    NIAH_INSTRUCTION,
    PASSKEY_INSTRUCTION,
    TASKS,
    VT_INSTRUCTION,
    Needle,
    NeedleSpec,
    TaskInstance,
    make_task,
)

__all__ = ["NIAH_INSTRUCTION", "PASSKEY_INSTRUCTION", "TASKS", "VT_INSTRUCTION", "Needle", "NeedleSpec",
           "TaskInstance", "make_task"]
