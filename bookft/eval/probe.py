"""The needle probe: retrieval measured while training, on the live sharded parameters.

`train.probe_every: N` scores a small teacher-forced NIAH grid (`train.probe`: a few lengths,
depths and seeds) every N steps and at the end, and the loop writes it into that step's row of
metrics.jsonl (`probe/<length>`, `probe/min`) and TensorBoard. It is how a run that fails to learn
retrieval explains itself: the step at which the copy appears (or does not), per length.

Design choices:
- The same program as training: the trainer's own attend (strategy and kernel) over its mesh, the
  inputs laid out as `bookft eval` lays them out (bucketed length, zig-zag order, sharded along S
  over the context axes), and the parameters exactly where the train state holds them: the
  forward takes (params, frozen) as arguments (drivers.tail_logits_fn), so nothing is gathered to
  one device or copied, and one compiled program per length serves every probe.
- The same task and scorer as `bookft eval niah` (runner.run_niah with the run's eval section),
  with its own seeds (default 100, 101: not the eval's 0-9), so a probe curve that reaches 1.0
  predicts the final grid without being it.
- A hook (`every`, `fn(trainer, step) -> metrics`): the loop knows nothing of eval; the command
  layer attaches the probe (`probe_hooks(cfg)`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from bookft.eval.config import resolve_settings
from bookft.eval.drivers import tail_logits_fn
from bookft.eval.layout import SeqLayout, length_rule
from bookft.eval.runner import run_niah


class NeedleProbe:
    """fn(trainer, step) -> {"probe/<length>": accuracy, ..., "probe/min": worst cell}."""

    def __init__(self, cfg):
        self.cfg = cfg
        p = cfg.train.probe
        # the run's eval section with the probe's grid, teacher-forced; lengths: the probe's, else the eval's
        self.settings = resolve_settings(dataclasses.replace(
            cfg.eval, lengths=tuple(p.lengths or cfg.eval.lengths or (1024,)), depths=tuple(p.depths),
            seeds=tuple(p.seeds), scoring=("teacher_forced",)))
        self.settings.validate()
        self.every = cfg.train.probe_every
        self._fn = None
        self._layout = None

    def _build(self, trainer) -> None:
        att = trainer.program.attention  # what the train step runs (bookft.attention.resolve)
        mesh = att.mesh  # None when the strategy is local
        self._layout = SeqLayout(mesh=mesh, balanced=att.load_balanced,
                                 rule=length_rule(self.cfg.attention, mesh), per_octave=self.settings.length_buckets)
        self._fn = tail_logits_fn(trainer.graphdef, attend=trainer.attend, tail=self.settings.logits_tail,
                                  layout=self._layout)
        self._tokenizer = Path(trainer.corpus.tokenizer_path).parent

    def grid(self, trainer) -> dict[str, Any]:
        """The probe's eval results (run_niah's dict) for the trainer's current parameters."""
        if self._fn is None:
            self._build(trainer)
        states = (trainer.state["params"], trainer.frozen)

        def logits_fn(ids, pos, seg):
            return self._fn(states, ids, pos, seg)

        return run_niah(None, self._tokenizer, self.settings, logits_fn=logits_fn, layout=self._layout,
                        model_config=trainer.cfg.model, progress=False)

    def __call__(self, trainer, step: int) -> dict[str, float]:
        res = self.grid(trainer)
        out = {f"probe/{n}": float(v) for n, v in res["summary"]["per_length"].items()}
        out["probe/min"] = float(min(c["scores"]["teacher_forced"] for c in res["cells"]))
        return out


def probe_hooks(cfg) -> list:
    """The hooks `bookft train` attaches for `cfg` ([] when train.probe_every is 0)."""
    return [NeedleProbe(cfg)] if cfg.train.probe_every > 0 else []


def probe_rows(run_dir: str | Path) -> list[dict]:
    """The rows of a run's metrics.jsonl that carry probe figures ({step, probe/<length>...})."""
    import json

    p = Path(run_dir) / "metrics.jsonl"
    if not p.is_file():
        return []
    rows = [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()]
    return [{k: v for k, v in r.items() if k == "step" or k.startswith("probe/")}
            for r in rows if any(k.startswith("probe/") for k in r)]


__all__ = ["NeedleProbe", "probe_hooks", "probe_rows"]
