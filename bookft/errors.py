"""Exception families. One type per failure family; messages say what, where, and what to do."""

from __future__ import annotations


class BookftError(Exception):
    """Base of every error bookft raises on purpose (the CLI prints these without a traceback)."""


class ConfigError(BookftError):
    """A config file or override is wrong: unknown key, wrong type, impossible combination."""


class IngestError(BookftError):
    """A source could not be read or turned into documents."""


class CorpusError(BookftError):
    """A corpus directory is missing, not a corpus, or inconsistent."""


class ModelError(BookftError):
    """A model folder or checkpoint cannot be loaded, saved or used."""


class AttentionError(ConfigError):
    """An attention strategy/kernel cannot run with the given mesh, shapes or options."""


class TrainError(BookftError):
    """Training cannot start or had to stop (bad data, NaN loss, checkpoint trouble)."""


class EvalError(BookftError):
    """An evaluation cannot be built or run as asked."""


class PlanError(BookftError):
    """Ahead-of-time planning cannot run (no libtpu, unknown topology, ...)."""


class PipelineError(BookftError):
    """A refresh pipeline definition or run failed."""
