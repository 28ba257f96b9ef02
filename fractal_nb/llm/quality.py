"""Telling prose from junk in a model's reply, before anything is stored.

See docs/models.md, "Output you can trust".

A small model fills a schema with whatever it has: fragments of JSON (``}, {``),
a number, a URL, a line of the prompt, the schema's own field descriptions,
``Yes`` as a question. The schemas in :mod:`.schemas` run the rules below as
pydantic validators, so junk is a validation error like any other: the reply
gets one correction round trip that names the problem, then the call counts as
rejected and nothing of it is stored.

Echoes need the prompt: validate with ``context=ReplyContext.of(messages, schema)``.
Without a context (the simulated model's own check) the other rules still hold;
with :data:`STORED` (text read back from the store) none of them run.

Copies are judged by the share of a text's words that sit in runs of
:data:`~.copies.COPY_RUN` words found in a source (word shingles, :mod:`.copies`): a text is a copy when
:data:`NEVER_CONTENT_SHARE` of it comes from what is never content, or
:data:`NEAR_COPY_SHARE` from one line of the prompt, so a small edit (a word
appended or changed) does not make it new. Some sources are never content, in any field: the
gates' own wording and the corrections sent (a model that answers with the
correction), the prompts' fixed instructions (prompts/*.txt) and the schema's
wording. The rest of the prompt (the question, the parent's answer, the
children's syntheses) is material a note or a harvest may quote, so only the
fields judged for echoes refuse a copy of one of its lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import cache, lru_cache
from importlib import resources
from typing import Any

from pydantic import BaseModel, ValidationError, ValidationInfo

from ..prompts import render
from ..text import clip, content_words, normalize
from .copies import Shingles, covered, runs, shingles, tokens
from .protocol import Message
from .urls import urls

_WORD = re.compile(r"[^\W\d_]{2,}")  # two letters or more: "1", "}, {" and ":{" hold none
# A link, however a model splits it: the scheme or "www." may be cut by spaces or a line break.
_JSON_KEY = re.compile(r'"\w+"\s*:')
_REPLY_WITH = "Reply with a JSON object:"
_HINT = re.compile(r"\(([^()]+)\)")
_PLACEHOLDER = re.compile(r"\$(?:\w+|\{\w+\})")
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
        "claim",
        "fact",
        "assumption",
        "unknown",
        "support",
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
MAX_LINK_SHARE = 0.5  # a text whose visible characters are half a link is a link, not prose
_REPEAT_MIN_WORDS, _REPEAT_MAX_SHARE = 12, 0.25  # "the the the ...": a model caught in a loop
HEADING_ECHO_MOST_WORDS = 8  # longer texts made of one line's words copy it in runs, judged above
NEAR_COPY_MIN_WORDS = 4  # a three-word note may share its one run ("the same conclusion") fairly
# Four words in five from what is never content (the gates', the instructions', the schema's wording):
# a correction quoted whole, clipped or with a word of its own is refused (tests/llm/test_quality.py).
NEVER_CONTENT_SHARE = 0.8
# Nine words in ten from one line of the prompt: a parent's answer with a word appended or changed is
# refused, while an answer that restates its question and adds a clause passes; the simulated model's
# texts, which quote their question, stay below 0.85 (tests/llm/test_quality.py).
NEAR_COPY_SHARE = 0.9
# A conclusion whose words are this share or more the instructions' (beyond the seed's) speaks of the task:
# "A worker in an exploratory exploration builds a graph of questions and answers." (demo --local) is 5 in 6.
TASK_WORDS_SHARE = 0.75

# The gates' own wording (docs/models.md, "Output you can trust"): each refusal says why, after the text
# it quotes.
NO_WORDS = "holds no words: write sentences, not symbols, numbers or a link"
TOO_SHORT = "is too short: write at least {words} words"
A_LINK = "is a link, not prose: write sentences (a link may only support them)"
SYMBOLS = "is mostly symbols: write sentences"
JSON_TEXT = "is JSON inside a text field: write the text itself"
REPEATS = "repeats itself: write it once, in full sentences"
SCHEMA_WORDING = "is the schema's wording, not content: write your own text"
INSTRUCTIONS = "repeats the instructions or a correction, not content: write your own text"
ECHO = "copies the prompt: write it in your own words"
ASKS_NOTHING = "asks nothing: write a question that ends with '?'"
UNRELATED = "is about the worked example's topic, not the one asked: keep to the seed and the question"
NO_ANSWER = "says nothing a reader can use: answer in full sentences, and say what is not known and why"
ANSWER_ASKS = "is a question, not an answer: answer the question asked"
VAGUE = "names nothing it asks about: ask about something specific"
OFF_TOPIC = "shares no word with the question asked: write about that question"
NOT_THE_SEED = (
    "is the exploration's conclusion but shares no word with its seed question: answer that question"
)
ABOUT_THE_TASK = "speaks of the task (the worker, the graph, its questions), not of the seed: answer the seed"
MARKUP = "holds HTML markup: write plain sentences"
CORRECTION = (
    "That reply was not a valid {schema}: {problem}. Reply again with only the corrected JSON object."
)
_GATES = (
    NO_WORDS,
    *(TOO_SHORT.format(words=n) for n in range(1, 6)),
    A_LINK,
    SYMBOLS,
    JSON_TEXT,
    REPEATS,
    SCHEMA_WORDING,
    INSTRUCTIONS,
    ECHO,
    ASKS_NOTHING,
    UNRELATED,
    NO_ANSWER,
    ANSWER_ASKS,
    VAGUE,
    OFF_TOPIC,
    NOT_THE_SEED,
    ABOUT_THE_TASK,
    MARKUP,
)
# Replies that answer nothing, whatever was asked ("Yes" to "How do transport links change which cities
# grow?"): an answer says what it knows, and what it does not know and why (prompts/answer_*.txt).
_NON_ANSWERS = frozenset(
    "yes|no|maybe|perhaps|unknown|it depends|not sure|no idea|i don't know|i do not know|i dont know|"
    "i am not sure|i'm not sure|i have no idea|i cannot say|i can't say|no answer|yes and no".split("|")
)
_SENTENCE_END = re.compile(r"[.!;](?:\s|$)")
_SENTENCES = re.compile(r"(?<=[.!?;])\s+")
# A web page's tags a small model carries over from its training text ("</p> <br /> <li class=").
_MARKUP = re.compile(r"</?(?:p|br|ol|ul|li|div|span|h[1-6]|sub|sup|input|table|tr|td)(?=[\s/>]|$)")
_NON_ANSWER_OPENING = (
    "i am not sure",
    "i'm not sure",
    "i don't know",
    "i do not know",
    "not sure",
    "no idea",
)
_NON_ANSWER_MOST_WORDS = 8  # "I am not sure about this policy change." says nothing more
# Questions that ask the reader's opinion, not about the topic ("What do you think about this policy?").
_ASKS_OPINION = ("what do you think", "what are your thoughts", "how do you feel", "what is your opinion")
# Words that name nothing: a question made only of them ("What do you think about this?") asks nothing.
_EMPTY_WORDS = frozenset(
    "think thing things this you your about mean means happen happens here now people someone something "
    "anything everything way ways kind sort".split()
)
# The lines of the project's prompts that name what a reply is about (prompts/*.txt): the seed, the
# question; a worked example's lines open with "Example" and are not the subject.
_SUBJECT_LINE = re.compile(r"^(?:Seed|Question|Seed of the exploration):[ \t]*(\S.*)$", re.MULTILINE)
_ASKED_NOW = re.compile(r"^Question to answer now[^\n]*:\n(.+)$", re.MULTILINE)
_EXAMPLE_LINE = ("Example ", "{")  # a worked example's lines: its seed or question, and its JSON reply
_QUOTED_WORD = re.compile(r'"[a-z_]+"')  # a JSON key or a one-word value ("questions", "fact"): no topic
# Words are compared for relatedness by their first letters: "growth" and "grow", "city" and "cities".
STEM_LETTERS = 4


class Refusal(ValueError):
    """A text a gate refused: the message quotes the text; ``reason`` is the gate's own wording."""

    def __init__(self, text: str, reason: str) -> None:
        super().__init__(f"{clip(text, 60)!r} {reason}")
        self.reason = reason


@dataclass(frozen=True)
class ReplyContext:
    """What a reply is judged against: the prompt it answers and the schema's own wording."""

    prompt: str = ""  # normalized text of every message sent
    placeholders: frozenset[str] = field(default=GENERIC_PLACEHOLDERS)
    trusted: bool = False  # text read back from the store: judged when it was written
    lines: tuple[Shingles, ...] = ()  # each line of the prompt: material an echo would copy
    # Besides the gates' wording and the instructions: the schema's wording, the corrections sent.
    never: Shingles = frozenset()
    # The stems of the seed and question the prompt names (none: unknown), of its worked examples' topic
    # that the subject lacks, and of what it shows (answers, findings), not its own text.
    subject: frozenset[str] = frozenset()
    borrowed: frozenset[str] = frozenset()
    material: frozenset[str] = frozenset()
    conclusion: bool = False  # the root's synthesis (prompts/conclusion.txt): judged against the seed alone

    @classmethod
    def of(cls, messages: list[Message], schema: type[BaseModel]) -> ReplyContext:
        """The context of a reply to ``messages`` asked for as ``schema``."""
        prompt = " \n ".join(normalize(m["content"]) for m in messages)
        asked = {normalize(hint) for m in messages for hint in _reply_hints(m["content"])}
        lines = {
            grams for m in messages for line in m["content"].splitlines() if (grams := shingles(tokens(line)))
        }
        asking = [m["content"] for m in messages if m["role"] == "user"]
        named = [
            found
            for text in asking
            for pattern in (_SUBJECT_LINE, _ASKED_NOW)
            for found in pattern.findall(text)
        ]
        examples: list[str] = []
        shown: list[str] = []
        for line in (line for text in asking for line in text.splitlines()):
            if line.startswith(_EXAMPLE_LINE):
                examples.append(line)
            elif normalize(line) not in _template_lines():
                shown.append(line)
        subject = stems(" ".join(named))
        return cls(
            prompt=prompt,
            placeholders=_placeholders(schema) | asked,
            lines=tuple(lines),
            never=_schema_shingles(schema),
            subject=subject,
            borrowed=stems(_QUOTED_WORD.sub(" ", " ".join(examples))) - subject,
            material=stems(" ".join(shown)),
            conclusion=_conclusion_marker() in prompt,
        )

    def after(self, correction: str) -> ReplyContext:
        """The context once ``correction`` (its wording without the quoted reply) was sent back."""
        return replace(self, never=self.never | shingles(tokens(correction)))


STORED = ReplyContext(trusted=True)


def prose(text: str, info: ValidationInfo, *, min_words: int, echo: bool = True, near: bool = True) -> str:
    """``text`` if it reads as prose of at least ``min_words`` words; else ValueError saying why.

    ``echo``: a copy of the prompt is refused; ``near``: a near copy of one of its lines too.
    """
    context = _context(info)
    if context.trusted:
        return text
    linked, rest = urls(text)
    words = _WORD.findall(rest)
    if not words:
        raise Refusal(text, NO_WORDS)
    visible = [ch for ch in text if not ch.isspace()]
    if linked >= MAX_LINK_SHARE * len(visible):
        raise Refusal(text, A_LINK)
    if len(words) < min_words:
        raise Refusal(text, TOO_SHORT.format(words=min_words))
    if sum(map(str.isalpha, visible)) < MIN_LETTER_SHARE * len(visible):
        raise Refusal(text, SYMBOLS)
    stripped = text.strip()
    if (stripped[:1] in "{[" and stripped[-1:] in "}]") or _JSON_KEY.search(text):
        raise Refusal(text, JSON_TEXT)
    if _MARKUP.search(text):
        raise Refusal(text, MARKUP)
    if len(words) >= _REPEAT_MIN_WORDS and len({w.lower() for w in words}) < _REPEAT_MAX_SHARE * len(words):
        raise Refusal(text, REPEATS)
    key = normalize(text)
    if key in context.placeholders:
        raise Refusal(text, SCHEMA_WORDING)
    if echo and context.prompt and len(key.split()) >= ECHO_MIN_WORDS and key in context.prompt:
        raise Refusal(text, ECHO)
    words_of = tokens(text)
    if len(words_of) >= NEAR_COPY_MIN_WORDS:
        text_runs = runs(words_of)
        never = covered(text_runs, _never_content()) | covered(text_runs, context.never)
        if len(never) >= NEVER_CONTENT_SHARE * len(words_of):
            raise Refusal(text, INSTRUCTIONS)
        if (
            echo
            and near
            and any(
                len(never | covered(text_runs, line)) >= NEAR_COPY_SHARE * len(words_of)
                for line in context.lines
            )
        ):
            raise Refusal(text, ECHO)
    if echo and context.prompt and is_heading_echo(words_of):
        raise Refusal(text, INSTRUCTIONS)
    return text


def is_heading_echo(words: list[str]) -> bool:
    """Whether ``words`` (:func:`~.copies.tokens`) are a short text made of one instruction line's words.

    A small model asked to synthesize writes the prompt's heading back with a word
    dropped: "Syntheses of sub-questions" shares no run of :data:`~.copies.COPY_RUN`
    words with "Syntheses of its sub-questions", yet says nothing. A text of at most
    :data:`HEADING_ECHO_MOST_WORDS` words, every one of them in one line of the
    prompts' fixed text (prompts/*.txt, worked examples aside) or of a correction, is that line again.

    >>> is_heading_echo(["syntheses", "of", "sub", "questions"])
    True
    >>> is_heading_echo(["value", "error"])  # a correction's words, written back as an answer
    True
    >>> is_heading_echo(["rents", "rose", "as", "the", "tram", "opened"])
    False
    """
    if not 2 <= len(words) <= HEADING_ECHO_MOST_WORDS:
        return False
    mine = frozenset(words)
    return any(mine <= line for line in _instruction_lines())


def question(text: str, info: ValidationInfo) -> str:
    """``text`` if it asks something in at least three words; else ValueError saying why."""
    # Near copies of other questions are the store's to weigh
    # (docs/architecture/store.md, rule 10): a sub-question differs from its
    # parent's by a clause, and questions quote one another.
    text = prose(text, info, min_words=3, near=False)
    if _context(info).trusted:
        return text
    if ((words := content_words(text)) and words <= _EMPTY_WORDS) or normalize(text).startswith(
        _ASKS_OPINION
    ):
        raise Refusal(text, VAGUE)
    stripped = text.strip().lstrip("¿¡\"'“ ").lower()
    first_two = " ".join(stripped.split()[:2])
    if not (
        text.rstrip().rstrip("\"'”").endswith(_QUESTION_MARKS)
        or stripped.split()[0].strip(",:") in _ASKING
        or first_two in _ASKING_PAIRS
    ):
        raise Refusal(text, ASKS_NOTHING)
    return text


def answer(text: str, info: ValidationInfo) -> str:
    """``text`` if it reads as an answer: prose, not a bare yes, no or "I don't know", not a question."""
    text = related(prose(text, info, min_words=1), info)
    if _context(info).trusted:
        return text
    sentences = [s.strip(" .!,;:") for s in _SENTENCES.split(normalize(text.replace("\u2019", "'")))]
    if all(  # "I don't know. No idea.", "I am not sure about this policy change."
        s in _NON_ANSWERS or (s.startswith(_NON_ANSWER_OPENING) and len(s.split()) <= _NON_ANSWER_MOST_WORDS)
        for s in sentences
    ):
        raise Refusal(text, NO_ANSWER)
    if text.rstrip().endswith(_QUESTION_MARKS) and not _SENTENCE_END.search(text.rstrip()[:-1]):
        raise Refusal(text, ANSWER_ASKS)
    return text


def related(text: str, info: ValidationInfo, *material: str) -> str:
    """``text`` unless it takes the worked example's topic instead of the one asked.

    A small model shown a worked example on a school's four-day week asks "What
    does the school save on heating?" under a seed on remote work: the text shares
    a word with the example and none with the seed, the question asked or
    ``material`` (the reply's own decomposition or answer). Without a worked example
    in the prompt, or a seed or question with a content word ("Why?"), nothing is judged.

    >>> stems("Why do cities grow?") & stems("City growth")
    frozenset({'city', 'grow'})
    """
    context = _context(info)
    if context.trusted or not context.borrowed or not context.subject:  # no topic to tell it from
        return text
    words = stems(text)
    # Two of the example's words at least: one ("cost", "change") is any topic's.
    if len(words & context.borrowed) >= 2 and not words & (context.subject | stems(" ".join(material))):
        raise Refusal(text, UNRELATED)
    return text


def on_topic(text: str, info: ValidationInfo) -> str:
    """``text`` if it shares a word with the question the prompt names or what it shows (a synthesis).

    A synthesis of "What causes inflation to rise after a pandemic?" that speaks of
    a student's books, and of nothing its sub-questions found, is about something
    else. Judged only where the prompt names its subject (:class:`ReplyContext`).
    The root's synthesis, the exploration's conclusion, must share a word with the
    seed itself: sub-questions' syntheses that drifted off the seed do not carry it.
    """
    context = _context(info)
    if context.trusted or not context.subject:
        return related(text, info)
    # A conclusion names the seed's own topic: a word the instructions use too ("build": "built
    # recursively") does not count, unless the seed has no other (demo --local: an apartment block
    # "built" for a seed on building a tram line).
    seed_words = (context.subject - _instruction_stems()) or context.subject
    if context.conclusion and not stems(text) & seed_words:
        raise Refusal(text, NOT_THE_SEED)
    if context.conclusion and _about_the_task(stems(text), context.subject):
        raise Refusal(text, ABOUT_THE_TASK)
    if not stems(text) & (context.subject | context.material):
        raise Refusal(text, OFF_TOPIC)
    return related(text, info)


def stems(text: str) -> frozenset[str]:
    """The first :data:`STEM_LETTERS` letters of each content word (``cities`` as ``city``)."""
    return frozenset(
        (word[:-2] + "y" if word.endswith("ie") else word)[:STEM_LETTERS] for word in content_words(text)
    )


def describe(error: ValueError) -> str:
    """Why a reply failed, briefly: each validation error's field and message, on one line."""
    if isinstance(error, ValidationError):
        errors = error.errors(include_url=False, include_input=False)
        text = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in errors)
    else:
        text = str(error)
    return clip(text, 300)


def correction(schema: type[BaseModel], error: ValueError) -> tuple[str, str]:
    """The message that sends a refused reply back, and its wording without the reply's own text.

    The second is what a model must not answer with (:meth:`ReplyContext.after`):
    the gates' reasons and pydantic's messages, not the quoted text, which the
    model may well mend into a good one.
    """
    wording = ""
    if isinstance(error, ValidationError):
        wording = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: "
            + (
                f"value error, {cause.reason}"
                if isinstance(cause := e.get("ctx", {}).get("error"), Refusal)
                else e["msg"]
            )
            for e in error.errors(include_url=False, include_input=False)
        )
    return (
        CORRECTION.format(schema=schema.__name__, problem=describe(error)),
        CORRECTION.format(schema=schema.__name__, problem=wording),
    )


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


def _about_the_task(words: frozenset[str], subject: frozenset[str]) -> bool:
    """Whether three or more content words are mostly the instructions' own, beyond the seed's.

    >>> _about_the_task(stems("A worker in an exploratory exploration builds a graph of questions."),
    ...                 stems("Should a city build a tram line?"))
    True
    >>> _about_the_task(stems("A tram line carries more people than buses, but costs more to build."),
    ...                 stems("Should a city build a tram line?"))
    False
    """
    task = words & (_instruction_stems() - subject)
    return len(words) >= 3 and len(task) >= TASK_WORDS_SHARE * len(words)


@cache
def _instruction_stems() -> frozenset[str]:
    """The stems of the prompts' fixed text, worked examples aside: what the task itself is made of."""
    return frozenset().union(*(stems(" ".join(words)) for words in _instruction_lines()))


@cache
def _conclusion_marker() -> str:
    """The sentence that marks a root's synthesis prompt (prompts/conclusion.txt), normalized."""
    return normalize(render("conclusion"))


@cache
def _template_lines() -> frozenset[str]:
    """Every line of the prompts' fixed text (prompts/*.txt), normalized: instructions, not material."""
    return frozenset(
        normalize(line) for text in _instructions() for line in text.splitlines() if line.strip()
    )


@cache
def _instruction_lines() -> tuple[frozenset[str], ...]:
    """The words of each line of the prompts' fixed text, worked examples aside (:func:`is_heading_echo`)."""
    return tuple(
        frozenset(words)
        for text in [*_instructions(), *_corrections()]
        for line in text.splitlines()
        if not line.startswith(_EXAMPLE_LINE) and (words := tokens(line))
    )


def _corrections() -> list[str]:
    """What a correction round trip tells the model: each gate's refusal as pydantic words it, CORRECTION."""
    return [f"value error, {gate}" for gate in _GATES] + [CORRECTION.format(schema="", problem="")]


@cache
def _never_content() -> Shingles:
    """What no reply may consist of: the gates' wording and every prompt's fixed instructions."""
    return frozenset().union(*(shingles(tokens(t)) for t in [*_corrections(), *_instructions()]))


def _instructions() -> Iterator[str]:
    """The fixed text of every prompt template (prompts/*.txt), cut where a value goes in."""
    for entry in resources.files("fractal_nb.prompts").iterdir():
        if entry.name.endswith(".txt"):
            yield from _PLACEHOLDER.split(entry.read_text(encoding="utf-8"))


@lru_cache(maxsize=256)
def _placeholders(schema: type[BaseModel]) -> frozenset[str]:
    wording = {normalize(text) for text in _schema_wording(schema.model_json_schema())}
    return GENERIC_PLACEHOLDERS | (wording - {""})


@lru_cache(maxsize=256)
def _schema_shingles(schema: type[BaseModel]) -> Shingles:
    """The schema's wording, and how a correction names it and its fields."""
    named = [
        CORRECTION.format(schema=schema.__name__, problem=f"{name}: value error,")
        for name in schema.model_fields
    ]
    return frozenset().union(*(shingles(tokens(text)) for text in [*_placeholders(schema), *named]))


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
