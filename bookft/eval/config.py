"""Eval configuration: the `eval:` section's dataclass and what eval time decides in it.

EvalConfig itself lives in bookft/needles/eval_config.py (the run config composes it, and the
train layer below eval reads it; that module says why and documents the keys). This module keeps
what only eval time knows: the keys left None ("set nowhere") are decided by `resolve_settings`.

Design choices:
- Two ways to decide them. `bookft eval niah` (bookft.eval.entry.evaluate) knows its subject, so it passes
  whether the tokenizer has a chat template: the RULER phrasing is then scored RULER's way
  (`ruler_protocol_defaults`: generated text scored by string match, the chat template where the
  tokenizer has one). A library call (run_niah, the needle probe) passes nothing and gets the
  library defaults: teacher_forced, no chat template.
- `max_length` left None takes the run's data.seq_len when the caller has a run (a preset's length
  ends the grid), else DEFAULT_MAX_LENGTH.
- Deciding twice changes nothing: run_niah resolves what it is given, so settings that
  `bookft eval niah` resolved pass through unchanged.
"""

from __future__ import annotations

import dataclasses

from bookft.needles.eval_config import DEFAULT_MAX_LENGTH, EvalConfig, HaystackKind, Scorer, Task

RULER_SCORING = ("generate",)
LIBRARY_DEFAULTS = {"scoring": ("teacher_forced",), "chat_template": False}


def ruler_protocol_defaults(phrasing: str, has_chat_template: bool) -> dict:
    """What `bookft eval niah` gives the keys left unset: RULER phrasing is scored RULER's way.

    {"scoring": ("generate",), "chat_template": has_chat_template} when the phrasing is ruler, else
    {}. teacher_forced stays available (`--scoring generate,teacher_forced`).
    """
    if phrasing != "ruler":
        return {}
    return {"scoring": RULER_SCORING, "chat_template": bool(has_chat_template)}


def resolve_settings(cfg: EvalConfig, *, has_chat_template: bool | None = None,
                     seq_len: int | None = None) -> EvalConfig:
    """`cfg` with every key left None decided (see the module docstring); the rest as set.

    has_chat_template: None for a library call (the library defaults), else whether the subject's
    tokenizer has a chat template (the RULER protocol for ruler phrasing). seq_len: the run's
    data.seq_len, which a spaced grid ends at when eval.max_length is unset.
    """
    fill = dict(LIBRARY_DEFAULTS)
    if has_chat_template is not None:
        fill.update(ruler_protocol_defaults(cfg.phrasing, has_chat_template))
    fill["max_length"] = seq_len or DEFAULT_MAX_LENGTH
    unset = {k: v for k, v in fill.items() if getattr(cfg, k) is None}
    if not unset:
        return cfg
    out = dataclasses.replace(cfg, **unset)
    out.validate()
    return out


__all__ = ["DEFAULT_MAX_LENGTH", "EvalConfig", "HaystackKind", "LIBRARY_DEFAULTS", "RULER_SCORING", "Scorer",
           "Task", "resolve_settings", "ruler_protocol_defaults"]
