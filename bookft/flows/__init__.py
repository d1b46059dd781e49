"""The flows: the work that crosses the layers, from a corpus to a base-vs-tuned report.

- default.py: `bookft quickstart`, the default loop on the tiny preset (ingest, eval of the fresh
  model, train, eval of the tuned one, compare);
- tune.py: `bookft quickstart --model DIR --docs ...`, a pretrained model tuned on the user's
  documents (tune_settings.py its sizes, inputs.py its documents, tune_evals.py and base_cache.py
  its evals and their cache, tune_report.py its page);
- phases.py: the steps both flows (and the pipelines' eval post-step) are made of, written once:
  build, train, export, evaluate, compare, and the numbered progress with each phase's wall time;
- summary.py: the one summary shape, the per-length-and-depth figures and their table.

The flows call the library layers below them with typed configs (a RunConfig, an EvalConfig);
the command layer (bookft/commands/quickstart.py) parses flags and calls one flow.
"""
