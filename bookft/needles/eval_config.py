"""The `eval:` section of a run config: the needle grid `bookft eval niah` and the needle probe score.

Why here, in needles and not in eval: the run config (bookft/train/config.py) composes every
section and types each one at load, and the train layer may not import eval (docs/design.md,
"Layers"). Two layers read this section: eval scores it, train's needle probe takes its lengths
and the check at the start of `bookft train` (bookft/train/retrieval_check.py) compares it with a
corpus's `retrieval:` section. When two layers need one thing, it moves down to the lowest layer
both read: needles, where the other needle-task section, retrieval_config.py, already lives.
What is decided only at eval time (the protocol, below) stays in eval (bookft/eval/config.py).

Design choices:
- A grid is lengths x depths x seeds. Lengths are either listed (`lengths`) or spaced between
  `min_length` and `max_length` (`length_spacing`: linear | log); depths likewise (`depths` in
  percent, or `num_depths` spaced linear | sigmoid, the sigmoid of the original NIAH test, denser
  near 0 and 100 %).
- A cell's length counts every token of the teacher-forced sequence (template, haystack, needles,
  question and answer), measured with the model's own tokenizer; this makes cells of one length
  batchable and keeps them under the model's position limit.
- `scoring` lists the scorers to run per cell: teacher_forced (exact match of the answer tokens,
  one forward pass) and generate (greedy decoding + RULER string_match_all). The first one is the
  headline: the summary, the heatmap and the effective length come from it.
- None means "set nowhere, decided at eval time" (bookft.eval.config.resolve_settings), so the
  section stays typed while the defaults that depend on the subject stay representable:
  `scoring` and `chat_template` take the RULER protocol under `bookft eval niah` when the phrasing
  is ruler (generated text scored by string match, the tokenizer's chat template when it has
  one: a pretrained chat model answers ":3708443" where the forced target is " 3708443", so exact
  match on forced tokens scores formatting, not retrieval), else the library defaults
  (teacher_forced, no template: what the tiny default is scored by, where teacher forcing is exact,
  its model trained on bookft's own short phrasing); `max_length` takes the run's data.seq_len
  (a preset's length ends its grid), else DEFAULT_MAX_LENGTH.
- The task knobs have NeedleSpec's names and defaults (bookft/needles/tasks.py), so `make_task`
  takes this section as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bookft.errors import ConfigError

Task = Literal["niah", "multikey", "multivalue", "multiquery", "passkey", "vartrack",
               "cwe", "niah_fact", "multikey_uuid", "hops"]  # the last four: evaluation only
HaystackKind = Literal["essay", "noise", "corpus"]
# generate and ruler: greedy generation scored by RULER's string_match_all (named generate, or ruler
# beside strict); strict: the same generation, right only with every expected item and no other of
# its kind (bookft/eval/strict.py). strict or ruler: both are reported
Scorer = Literal["teacher_forced", "generate", "strict", "ruler"]
GENERATION_SCORERS = ("generate", "strict", "ruler")
STRICT_BUDGET = 64  # new tokens under strict/ruler scoring, or the answer's length + 8 when longer

DEFAULT_MAX_LENGTH = 2048  # a spaced grid's longest length when neither the section nor the run sets one


@dataclass(frozen=True, kw_only=True)
class EvalConfig:
    task: Task = "niah"
    # Grid: explicit lists win over the spaced ranges.
    lengths: tuple[int, ...] = ()
    min_length: int = 256
    max_length: int | None = None  # None = the run's data.seq_len, else DEFAULT_MAX_LENGTH
    num_lengths: int = 4
    length_spacing: Literal["linear", "log"] = "log"
    length_multiple: int = 1  # round spaced lengths to a multiple (e.g. 2*cp*block for ring)
    # batch lengths are bucketed (2^k * (1 + j/length_buckets), then the attention's chunks and
    # blocks) so a grid compiles once per bucket; padding is masked (segment id 0). 0 = exact lengths
    length_buckets: int = 4
    depths: tuple[float, ...] = ()  # percent, 0 = start of the haystack, 100 = end
    num_depths: int = 5
    depth_spacing: Literal["linear", "sigmoid"] = "linear"
    seeds: tuple[int, ...] = (0, 1)
    # Haystack
    haystack: HaystackKind = "essay"
    corpus: str | None = None  # corpus dir or version dir, for haystack: corpus
    # Task knobs (RULER defaults)
    num_distractors: int = 3  # multikey: other keys in the haystack
    num_values: int = 4  # multivalue: values under the same key
    num_queries: int = 2  # multiquery: keys asked at once
    num_hops: int = 4  # vartrack: assignments after the first
    value_digits: int = 7
    phrasing: Literal["ruler", "short"] = "ruler"  # niah/multikey wording (tasks.py)
    # Scoring
    scoring: tuple[Scorer, ...] | None = None  # None = the protocol: generate for ruler phrasing, else teacher_forced
    threshold: float = 0.85  # RULER effective length: the largest length with every length <= it >= this
    batch_size: int = 4
    # generation budget: 0 = the protocol's (strict/ruler: max(64, answer length + 8) for every model;
    # generate alone: answer length + 8)
    max_new_tokens: int = 0
    # frozen split: dev | test draw the split's own seeds (10,000 + s, 20,000 + s) and, on a corpus
    # haystack, the split's own held-out books in non-overlapping blocks (bookft/eval/split.py);
    # None: the seeds and haystacks as given
    split: Literal["dev", "test"] | None = None
    fewshot: int = 0  # solved examples of the same task before each prompt (bookft/needles/fewshot.py)
    fewshot_tokens: int = 512  # at most this many tokens each
    # wrap the prompt with tokenizer_config's chat_template; None = the protocol: for ruler phrasing
    # under `bookft eval niah`, whether the tokenizer has one, else no
    chat_template: bool | None = None
    add_bos: bool | None = None  # None = whatever the tokenizer's post-processor prepends
    logits_tail: int = 512  # model driver: logits only for the last N positions (never [S, V])

    def __post_init__(self) -> None:
        if isinstance(self.scoring, str):  # `scoring: strict` as well as `scoring: [strict]`
            object.__setattr__(self, "scoring", tuple(x.strip() for x in self.scoring.split(",")))

    def validate(self) -> None:
        if self.fewshot < 0 or self.fewshot_tokens < 64:
            raise ConfigError(f"eval.fewshot must be >= 0 and eval.fewshot_tokens >= 64, got "
                              f"{self.fewshot} and {self.fewshot_tokens}")
        if self.split is not None and self.split not in ("dev", "test"):
            raise ConfigError(f"eval.split: dev or test (or unset), got {self.split!r}")
        if any(n <= 0 for n in self.lengths):
            raise ConfigError(f"eval.lengths: every length must be positive, got {list(self.lengths)}")
        top = self.min_length if self.max_length is None else self.max_length  # None: checked once decided
        if not self.lengths and not 0 < self.min_length <= top:
            raise ConfigError(
                f"eval.min_length ({self.min_length}) must be positive and <= eval.max_length "
                f"({self.max_length})")
        if self.num_lengths < 1 or self.num_depths < 1:
            raise ConfigError("eval.num_lengths and eval.num_depths must be at least 1")
        if any(not 0.0 <= d <= 100.0 for d in self.depths):
            raise ConfigError(f"eval.depths: depths are percentages in [0, 100], got {list(self.depths)}")
        if not self.seeds:
            raise ConfigError("eval.seeds: give at least one seed, for example [0, 1]")
        if self.scoring is not None and not self.scoring:
            raise ConfigError("eval.scoring: choose teacher_forced, generate, strict and/or ruler")
        if self.haystack == "corpus" and not self.corpus:
            raise ConfigError("eval.haystack is corpus but eval.corpus is not set (a corpus directory)")
        if not 0.0 <= self.threshold <= 1.0:
            raise ConfigError(f"eval.threshold is a fraction in [0, 1], got {self.threshold}")
        if self.length_buckets < 0:
            raise ConfigError(f"eval.length_buckets: steps per doubling, >= 0 (0 = no bucketing), "
                              f"got {self.length_buckets}")
        if self.batch_size < 1 or self.length_multiple < 1 or self.logits_tail < 1:
            raise ConfigError("eval.batch_size, eval.length_multiple and eval.logits_tail must be >= 1")
        if min(self.num_distractors, self.num_hops) < 0 or min(self.num_values, self.num_queries) < 1:
            raise ConfigError("eval task knobs: num_values/num_queries >= 1, num_distractors/num_hops >= 0")
        if not 1 <= self.value_digits <= 32:
            raise ConfigError(f"eval.value_digits must be in 1..32, got {self.value_digits}")
