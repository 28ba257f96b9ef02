"""Telling prose from junk in a model's reply, before anything is stored (README, "Output you can trust").

A small model fills a schema with whatever it has: fragments of JSON (``}, {``),
a number, a URL, a line of the prompt, the schema's own field descriptions,
``Yes`` as a question. The schemas in :mod:`.schemas` run the rules below as
pydantic validators, so junk is a validation error like any other: the reply
gets one correction round trip that names the problem, then the call counts as
rejected and nothing of it is stored.

Echoes need the prompt: validate with ``context=ReplyContext.of(messages, schema)``.
Without a context (the simulated model's own check) the other rules still hold;
with :data:`STORED` (text read back from the store) none of them run.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ValidationInfo

from ..text import clip, normalize
from .protocol import Message

_WORD = re.compile(r"[^\W\d_]{2,}")  # two letters or more: "1", "}, {" and ":{" hold none
_URL = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)
_JSON_KEY = re.compile(r'"\w+"\s*:')
_REPLY_WITH = "Reply with a JSON object:"
_HINT = re.compile(r"\(([^()]+)\)")
_QUESTION_MARKS = ("?", "？", "؟")
_ASKING = frozenset(
    "what why how which who whom whose when where whether is are was were do does did can could "
    "should would will shall may might must has have had".split()
)
_ASKING_PAIRS = frozenset(
    {
        "to what",
        "in what",
        "in which",
        "to which",
        "by how",
        "under what",
        "at what",
        "for what",
        "from what",
        "with what",
        "on what",
        "of what",
        "on which",
    }
)
GENERIC_PLACEHOLDERS = frozenset(
    {
        "text",
        "string",
        "str",
        "question",
        "questions",
        "answer",
        "synthesis",
        "summary",
        "finding",
        "note",
        "tension",
        "gap",
        "none",
        "null",
        "n/a",
        "na",
        "todo",
        "tbd",
        "placeholder",
        "example",
        "lorem ipsum",
        "your answer",
        "your answer here",
        "the answer",
        "question text",
        "answer text",
        "...",
        "…",
    }
)
ECHO_MIN_WORDS = 3  # shorter texts ("Paris") may well appear in a prompt; they are judged by the rest
MIN_LETTER_SHARE = 0.35  # letters among the visible characters of prose
_REPEAT_MIN_WORDS, _REPEAT_MAX_SHARE = 12, 0.25  # "the the the ...": a model caught in a loop


@dataclass(frozen=True)
class ReplyContext:
    """What a reply is judged against: the prompt it answers and the schema's own wording."""

    prompt: str = ""  # normalized text of every message sent
    placeholders: frozenset[str] = field(default=GENERIC_PLACEHOLDERS)
    trusted: bool = False  # text read back from the store: judged when it was written

    @classmethod
    def of(cls, messages: list[Message], schema: type[BaseModel]) -> ReplyContext:
        """The context of a reply to ``messages`` asked for as ``schema``."""
        prompt = " \n ".join(normalize(m["content"]) for m in messages)
        asked = {normalize(hint) for m in messages for hint in _reply_hints(m["content"])}
        return cls(prompt=prompt, placeholders=_placeholders(schema) | asked)


STORED = ReplyContext(trusted=True)


def prose(text: str, info: ValidationInfo, *, min_words: int, echo: bool = True) -> str:
    """``text`` if it reads as prose of at least ``min_words`` words; else ValueError saying why."""
    context = _context(info)
    if context.trusted:
        return text
    shown = clip(text, 60)
    words = _WORD.findall(_URL.sub(" ", text))
    if not words:
        raise ValueError(f"{shown!r} holds no words: write sentences, not symbols, numbers or a link")
    if len(words) < min_words:
        raise ValueError(f"{shown!r} is too short: write at least {min_words} words")
    visible = [ch for ch in text if not ch.isspace()]
    if sum(ch.isalpha() for ch in visible) < MIN_LETTER_SHARE * len(visible):
        raise ValueError(f"{shown!r} is mostly symbols: write sentences")
    stripped = text.strip()
    if (stripped[:1] in "{[" and stripped[-1:] in "}]") or _JSON_KEY.search(text):
        raise ValueError(f"{shown!r} is JSON inside a text field: write the text itself")
    if len(words) >= _REPEAT_MIN_WORDS and len({w.lower() for w in words}) < _REPEAT_MAX_SHARE * len(words):
        raise ValueError(f"{shown!r} repeats itself: write it once, in full sentences")
    key = normalize(text)
    if key in context.placeholders:
        raise ValueError(f"{shown!r} is the schema's wording, not content: write your own text")
    if echo and context.prompt and len(key.split()) >= ECHO_MIN_WORDS and key in context.prompt:
        raise ValueError(f"{shown!r} copies the prompt: write it in your own words")
    return text


def question(text: str, info: ValidationInfo) -> str:
    """``text`` if it asks something in at least three words; else ValueError saying why."""
    text = prose(text, info, min_words=3)
    if _context(info).trusted:
        return text
    stripped = text.strip().lstrip("¿¡\"'“ ").lower()
    first_two = " ".join(stripped.split()[:2])
    if not (
        text.rstrip().rstrip("\"'”").endswith(_QUESTION_MARKS)
        or stripped.split()[0].strip(",:") in _ASKING
        or first_two in _ASKING_PAIRS
    ):
        raise ValueError(f"{clip(text, 60)!r} asks nothing: write a question that ends with '?'")
    return text


def _reply_hints(content: str) -> list[str]:
    """The parenthesized hints of a prompt's "Reply with a JSON object: ..." paragraph.

    ``decomposition (two or three sentences of your own ...)`` says what to write;
    a model that writes the hint itself has written nothing (prompts/*.txt).
    """
    _, found, reply = content.rpartition(_REPLY_WITH)
    return _HINT.findall(reply) if found else []


def _context(info: ValidationInfo) -> ReplyContext:
    context = info.context
    return context if isinstance(context, ReplyContext) else ReplyContext()


@lru_cache(maxsize=256)
def _placeholders(schema: type[BaseModel]) -> frozenset[str]:
    wording = {normalize(text) for text in _schema_wording(schema.model_json_schema())}
    return GENERIC_PLACEHOLDERS | (wording - {""})


def _schema_wording(node: Any) -> Iterator[str]:
    """Every title and description in a JSON schema: what a model may copy instead of answering."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("title", "description") and isinstance(value, str):
                yield value
            else:
                yield from _schema_wording(value)
    elif isinstance(node, list):
        for item in node:
            yield from _schema_wording(item)
