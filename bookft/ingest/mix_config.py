"""The mix settings of a corpus YAML: per-source `weight`, `policy`, `upsample_long`, and the corpus-level
`mix:` section (a short source and its share, a total, held-out short documents).

Design choices:
- Nothing set = no mix: every kept document is packed once, in order, exactly as before the mix existed
  (the default corpus keeps its data hash).
- `weight` is relative: a source's share of the long (non-short) tokens is weight / sum(weights). Either
  every long source has a weight or none has (then the shares are the natural ones, the sources' own
  token counts: Fu et al. 2024 keep the domain mix).
- `upsample_long` (Fu et al. 2024, "Data Engineering for Scaling Language Models to 128K Context"):
  inside one source, a document of at least `min_tokens` tokens is drawn `factor` times as often as a
  shorter one; the source's token share stays what its weight asks.
- `mix.short_source` (ProLong, Gao et al. 2024): that source's documents are packed into sequences of
  their own, `short_share` of all tokens; it takes no weight.
- `policy` decides what happens to a document longer than packing.seq_len: `split` (packed over
  several sequences: books, code, legal), `truncate` (its first seq_len tokens), `drop` (left out).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bookft.errors import ConfigError

Policy = Literal["split", "truncate", "drop"]
POLICIES = ("split", "truncate", "drop")


@dataclass(frozen=True, kw_only=True)
class UpsampleLong:
    min_tokens: int  # a document of at least this many tokens is "long"
    factor: float  # drawn this many times as often as a shorter document of its source

    def validate(self) -> None:
        if self.min_tokens < 1:
            raise ConfigError(f"upsample_long.min_tokens: must be >= 1, got {self.min_tokens}")
        if not 0.0 < self.factor <= 1000.0:
            raise ConfigError(f"upsample_long.factor: must be in (0, 1000], got {self.factor}")


@dataclass(frozen=True, kw_only=True)
class MixConfig:
    short_source: str | None = None  # `name` (or `path`) of the source packed as short sequences
    short_share: float = 0.0  # its share of all tokens (ProLong)
    tokens: int | None = None  # total tokens to sample; None: as many as the scarcest source allows
    #                            without repeating it (a larger total repeats documents)
    holdout_docs: int = 0  # short documents kept out of the sequences (`bookft eval short` reads them)
    holdout_max_tokens: int = 1024  # ... each at most this many tokens
    seed: int = 0

    def validate(self) -> None:
        if self.short_source is None and self.short_share:
            raise ConfigError("mix.short_share: needs mix.short_source (the name of the source to draw them from)")
        if self.short_source is not None and not 0.0 < self.short_share < 1.0:
            raise ConfigError(f"mix.short_share: must be in (0, 1) with a short_source, got {self.short_share}")
        if self.tokens is not None and self.tokens < 1:
            raise ConfigError(f"mix.tokens: must be >= 1, got {self.tokens}")
        if self.holdout_docs < 0 or self.holdout_max_tokens < 1:
            raise ConfigError(f"mix.holdout_docs must be >= 0 and mix.holdout_max_tokens >= 1, got "
                              f"{self.holdout_docs} and {self.holdout_max_tokens}")

    @property
    def active(self) -> bool:
        return self.short_source is not None or self.tokens is not None or self.holdout_docs > 0
