"""The model's tokenizer as the needle tasks need it (eval and synthesis): counting, offsets, special
tokens and the chat template.

Design choices:
- Wraps a `tokenizers.Tokenizer` (the same object a bookft corpus stores); an HF folder is read
  from its tokenizer.json, plus tokenizer_config.json (bos/eos, chat_template) or a
  chat_template.jinja file (transformers 5 writes that one).
- Text is always encoded with add_special_tokens=False; the special prefix the post-processor
  would add (BOS for Llama) is found once by encoding a probe both ways and is prepended
  explicitly, so no special token ever lands inside the haystack.
- Chat templates are rendered by transformers' own jinja renderer (same sandbox and globals as
  `apply_chat_template`), imported lazily.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tokenizers import Tokenizer

from bookft.errors import EvalError

_EOS_GUESSES = ("<|eot_id|>", "<|end_of_text|>", "<|endoftext|>", "<|im_end|>", "</s>", "[SEP]", "<eos>")


def _token_str(value) -> str | None:
    if isinstance(value, dict):
        return value.get("content")
    return value if isinstance(value, str) else None


class ModelTokenizer:
    def __init__(self, tokenizer: Tokenizer, *, name: str = "tokenizer", config: dict | None = None,
                 chat_template: str | None = None):
        self.tok = tokenizer
        self.name = name
        self.config = dict(config or {})
        self.chat_template = chat_template
        self._glue: tuple[str, str] | None = None  # turn_glue, rendered on first use
        added = tokenizer.get_added_tokens_decoder()  # id -> AddedToken
        unk = getattr(tokenizer.model, "unk_token", None)  # unknown characters are not a leak
        self.special_ids = {i for i, t in added.items() if t.special and t.content != unk}
        self.special_strings = sorted({t.content for t in added.values() if t.special}, key=len, reverse=True)
        probe = "probe text"
        plain = tokenizer.encode(probe, add_special_tokens=False).ids
        full = tokenizer.encode(probe, add_special_tokens=True).ids
        k = next((i for i in range(len(full)) if full[i:i + len(plain)] == plain), 0)
        self.prefix_ids: list[int] = list(full[:k])
        self.bos_token = _token_str(self.config.get("bos_token"))
        self.eos_token = _token_str(self.config.get("eos_token"))
        self.eos_id = self._eos_id()
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        self.fingerprint = hashlib.sha256(tokenizer.to_str().encode()).hexdigest()[:16]

    @classmethod
    def load(cls, src: Tokenizer | ModelTokenizer | str | Path) -> ModelTokenizer:
        """A Tokenizer object, a tokenizer.json path, or an HF folder holding tokenizer.json."""
        if isinstance(src, ModelTokenizer):
            return src
        if isinstance(src, Tokenizer):
            return cls(src)
        path = Path(src)
        folder = path if path.is_dir() else path.parent
        file = path / "tokenizer.json" if path.is_dir() else path
        if not file.is_file():
            raise EvalError(f"{path}: no tokenizer.json found; pass an HF folder or a tokenizer.json file")
        try:
            tok = Tokenizer.from_file(str(file))
        except Exception as e:  # tokenizers raises a bare Exception on bad JSON
            raise EvalError(f"{file}: not a readable tokenizers file ({e})") from None
        config: dict = {}
        cfg_file = folder / "tokenizer_config.json"
        if cfg_file.is_file():
            try:
                config = json.loads(cfg_file.read_text(encoding="utf-8"))
            except json.JSONDecodeError as e:
                raise EvalError(f"{cfg_file}: not valid JSON ({e})") from None
        template = config.get("chat_template")
        if isinstance(template, list):  # [{"name": "default", "template": ...}, ...]
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
            template = named.get("default") or next(iter(named.values()), None)
        jinja_file = folder / "chat_template.jinja"
        if template is None and jinja_file.is_file():
            template = jinja_file.read_text(encoding="utf-8")
        return cls(tok, name=str(file), config=config, chat_template=template)

    def _eos_id(self) -> int | None:
        for s in ([self.eos_token] if self.eos_token else []) + list(_EOS_GUESSES):
            i = self.tok.token_to_id(s)
            if i is not None:
                return int(i)
        return None

    def encode(self, text: str):
        """Encoding (ids, offsets) of `text` with no special tokens added."""
        return self.tok.encode(text, add_special_tokens=False)

    def count(self, texts: list[str]) -> list[int]:
        return [len(e.ids) for e in self.tok.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids) -> str:
        return self.tok.decode([int(i) for i in ids], skip_special_tokens=False)

    def sanitize(self, text: str) -> str:
        """Remove special-token strings (e.g. '<|endoftext|>' in a scraped book) from haystack text."""
        for s in self.special_strings:
            if s and s in text:
                text = text.replace(s, " ")
        return text

    def _render(self, conv: list[dict], what: str) -> str:
        if not self.chat_template:
            raise EvalError(
                f"{self.name}: chat_template is on but the tokenizer has none (tokenizer_config.json "
                "chat_template or chat_template.jinja); set eval.chat_template=false")
        from transformers.utils.chat_template_utils import render_jinja_template

        special = {k: _token_str(v) for k, v in self.config.items() if k.endswith("_token")}
        try:
            rendered, _ = render_jinja_template(
                conversations=[conv], chat_template=self.chat_template, add_generation_prompt=True,
                **{k: v for k, v in special.items() if v is not None})
        except Exception as e:  # jinja errors come in many types
            raise EvalError(f"{self.name}: chat_template failed to render {what}: {e}") from None
        return rendered[0]

    def render_chat(self, user_text: str) -> str:
        """The chat-templated prompt for one user turn, ending with the assistant's generation prompt."""
        return self._render([{"role": "user", "content": user_text}], "one turn")

    def turn_glue(self) -> tuple[str, str]:
        """(text from the end of an assistant answer to the next user message, text from the end of that
        message to the end of the assistant's generation prompt): what joins a follow-up question to the
        conversation, as the chat template renders a second turn. Rendered once per tokenizer."""
        if self._glue is None:
            self._glue = self._render_glue()
        return self._glue

    def _render_glue(self) -> tuple[str, str]:
        marks = ("\u2063A1\u2063", "\u2063U2\u2063")
        rendered = self._render([{"role": "user", "content": "question"}, {"role": "assistant", "content": marks[0]},
                                 {"role": "user", "content": marks[1]}], "two turns")
        if any(rendered.count(m) != 1 for m in marks) or rendered.index(marks[0]) > rendered.index(marks[1]):
            raise EvalError(f"{self.name}: chat_template does not keep an earlier answer verbatim; "
                            "ask one question per example (retrieval.asks)")
        a_end = rendered.index(marks[0]) + len(marks[0])
        u_start = rendered.index(marks[1])
        return rendered[a_end:u_start], rendered[u_start + len(marks[1]):]

    def info(self) -> dict:
        return {"name": self.name, "vocab_size": self.vocab_size, "fingerprint": self.fingerprint,
                "prefix_ids": self.prefix_ids, "eos_id": self.eos_id,
                "has_chat_template": bool(self.chat_template)}
