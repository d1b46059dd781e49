"""The `retrieval:` section of a corpus YAML: synthesized long-range retrieval examples.

Design choices:
- `rate` is the share of the published corpus's sequences that are synthesized examples (0 = off),
  so `--synthesize-retrieval 0.9` means nine synthesized sequences for every ordinary one.
- Examples come in `lengths` (tokens, each dividing packing.seq_len) so a training curriculum that
  cuts sequences into rows of one of these lengths keeps every example of that length whole.
- Loss weights: `answer_weight` on the answer tokens, `context_weight` on every other token of an
  example, `corpus_weight` on the tokens of ordinary documents (1.0 keeps plain fine-tuning as is).
- `scrub_digits` mirrors the eval's design (bookft.needles.tasks: the filler has no digits, so a value
  can only come from its needle); switch it off to make the task harder (numbers in the text).
- Kinds: `magic_number` is the eval's NIAH needle verbatim (bookft.needles.tasks); `passage` asks to
  complete a sentence seen earlier in a book; `signature` asks for a function's signature after the
  file that defines it; the RULER kinds come from the generator `generator` names (eval | train).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bookft.errors import ConfigError

# magic_number, passage, signature: this module's examples; the rest: the RULER tasks as the eval asks
# them (bookft/needles/task_examples.py)
RetrievalKind = Literal["magic_number", "passage", "signature", "niah", "multikey", "multivalue", "multiquery",
                        "vartrack"]


@dataclass(frozen=True, kw_only=True)
class RetrievalConfig:
    rate: float = 0.0  # share of sequences that are synthesized; 0 = off
    lengths: tuple[int, ...] = (256, 512, 1024, 2048)  # example lengths in tokens (EOS included)
    length_shares: tuple[float, ...] = ()  # relative share of sequences per length; () = equal
    kinds: tuple[RetrievalKind, ...] = ("magic_number",)
    kind_shares: tuple[float, ...] = ()  # relative share of examples per kind; () = equal
    answer_weight: float = 1.0
    context_weight: float = 0.05
    corpus_weight: float = 1.0
    questions: int = 1  # times the question is asked (and answered); the last one ends the example
    min_context: float = 0.5  # earlier askings stop where they would leave less of the example as context
    # earlier askings go in the last (1 - ask_from) of the span between the fact and the end, so the
    # first one still asks from far away (0: anywhere after the fact; later ones copy the nearest)
    ask_from: float = 0.0
    # share of magic_number examples whose needle sits at an edge of the context (depth 0 or 100%,
    # half each): a uniform depth almost never puts it right after the instruction, where the
    # eval's depth-0 cell does
    edge_depth: float = 0.0
    # ... only in examples of at least this many tokens (0: all): keeps the short examples, where a
    # small model first finds the copy, as they are (edge needles there stalled that in two runs)
    edge_from: int = 0
    # magic_number needles per example, one count per entry of `lengths` (() = 1 each): with n > 1 an
    # example holds n facts with distinct keys at independent depths, each asked once at the end (in a
    # random order) and no earlier askings: n far copies per example instead of one far and several
    # near ones, and a key to match among n (RULER's multi-key)
    needles: tuple[int, ...] = ()
    # questions per example of the RULER kinds, one count per entry of `lengths` (() = 1 each): with
    # n > 1 the context holds n tasks' needles (the first kind drawn as ever, the rest by kind_shares
    # among the RULER kinds), asked one after another in turns of the chat (each later question a
    # follow-up after the previous answer), the loss on every answer: n far retrievals per context
    asks: tuple[int, ...] = ()
    value_digits: int = 7  # magic_number values (as the eval's needle)
    # the RULER kinds' task knobs (the eval's eval.num_distractors, num_values, num_queries, num_hops)
    task_distractors: int = 3
    task_values: int = 4
    task_queries: int = 2
    task_hops: int = 4
    # the RULER kinds in the tokenizer's chat template (None: when the tokenizer folder has one), as the
    # eval asks an instruction-tuned model
    chat_template: bool | None = None
    phrasing: Literal["ruler", "short"] = "ruler"  # magic_number wording: the eval's eval.phrasing
    # where the RULER kinds' examples come from: `eval` asks the eval's own tasks (bookft/needles/tasks.py,
    # other seeds), `train` the training generator (bookft/needles/train/: other wording, keys and values,
    # distractor families); magic_number, passage and signature examples are the same under both
    generator: Literal["eval", "train"] = "eval"
    scrub_digits: bool = True  # drop digits from the text around a magic number (the eval's haystacks
    #                            have none either, so the value is the only number in the context)
    seed: int = 0

    def validate(self) -> None:
        if not 0.0 <= self.rate < 1.0:
            raise ConfigError(f"retrieval.rate: a share of sequences in [0, 1), got {self.rate}")
        if not self.lengths or any(n < 64 for n in self.lengths):
            raise ConfigError(f"retrieval.lengths: give lengths of at least 64 tokens, got {list(self.lengths)}")
        for name, shares, of in (("length_shares", self.length_shares, self.lengths),
                                 ("kind_shares", self.kind_shares, self.kinds)):
            if shares and (len(shares) != len(of) or min(shares) < 0 or sum(shares) <= 0):
                raise ConfigError(f"retrieval.{name}: one non-negative share per entry of "
                                  f"{name.split('_')[0]}s ({len(of)}), not all zero; got {list(shares)}")
        if self.needles and (len(self.needles) != len(self.lengths) or min(self.needles) < 1):
            raise ConfigError(f"retrieval.needles: one count (>= 1) per entry of lengths ({len(self.lengths)}), "
                              f"got {list(self.needles)}")
        if self.asks and (len(self.asks) != len(self.lengths) or not all(1 <= n <= 8 for n in self.asks)):
            raise ConfigError(f"retrieval.asks: one count (1..8) per entry of lengths ({len(self.lengths)}), "
                              f"got {list(self.asks)}")
        if not self.kinds:
            raise ConfigError("retrieval.kinds: choose at least one of magic_number, passage, signature, niah, "
                              "multikey, multivalue, multiquery, vartrack")
        if min(self.task_distractors, self.task_values, self.task_queries, self.task_hops) < 1:
            raise ConfigError("retrieval.task_distractors/task_values/task_queries/task_hops must be >= 1")
        if min(self.answer_weight, self.context_weight, self.corpus_weight) < 0:
            raise ConfigError("retrieval.answer_weight/context_weight/corpus_weight must be >= 0")
        if not 0.0 < self.min_context <= 1.0:
            raise ConfigError(f"retrieval.min_context is a fraction in (0, 1], got {self.min_context}")
        if not 0.0 <= self.edge_depth <= 1.0:
            raise ConfigError(f"retrieval.edge_depth is a fraction in [0, 1], got {self.edge_depth}")
        if self.edge_from < 0:
            raise ConfigError(f"retrieval.edge_from is a length in tokens (>= 0), got {self.edge_from}")
        if not 0.0 <= self.ask_from < 1.0:
            raise ConfigError(f"retrieval.ask_from is a fraction in [0, 1), got {self.ask_from}")
        if self.generator == "train" and "multiquery" in self.kinds:
            raise ConfigError("retrieval.kinds: multiquery is an evaluation-only form under generator: train "
                              "(choose from niah, multikey, multivalue, vartrack)")
        if self.questions < 1:
            raise ConfigError(f"retrieval.questions must be >= 1, got {self.questions}")
        if not 1 <= self.value_digits <= 32:
            raise ConfigError(f"retrieval.value_digits must be in 1..32, got {self.value_digits}")
