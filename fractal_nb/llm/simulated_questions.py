"""The questions :class:`~fractal_nb.SimulatedLLM` asks, and how it reads them back (issue 27).

- Below a question it did not write (read as a :class:`~.simulated_frames.Frame`)
  it asks :data:`ANGLES` of it ("What would it cost to build a tram line, all in,
  and who would pay?"), each about an aspect ("the full cost of a tram line").
- Below those it asks follow-ups along a proxy signal: the aspect under a
  condition (qualifiers), with another option (alternatives), without what it
  takes for granted (assumptions), in another field's eyes (new domain), or as
  it reaches further (high blast radius). A follow-up names the aspect, the
  element its parent added (so each level is more specific) and a new element;
  deeper than the first follow-up the new element comes first, so labels cut
  after forty characters still differ.

It wrote those questions from the fixed lists below, so it reads them back
exactly (:func:`read`): an answer depends on its question alone.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from random import Random

from .schemas import ProxySignal
from .simulated_frames import CAUSE, DECISION, GENERIC, Frame, capital, read_frame, third_person

_BOUNDARY = re.compile(r'^The answer to "(?:The answer to ")*(.+?)" and answer \[')  # a boundary question

# -- the angles a frame is split along: (question, aspect, label) ---------------------------------
# Twelve per kind: the seed draws from twelve, as it always did, so tree sizes stay as they were.

ANGLES: dict[str, list[tuple[str, str, str]]] = {
    DECISION: [
        ("What would it cost to {v} {t}, all in, and who would pay?", "the full cost of {t}", "cost"),
        ("Who would actually use {t}, and who would not?", "the likely users of {t}", "users"),
        ("What do cheaper options offer instead of {t}?", "the options cheaper than {t}", "cheaper options"),
        (
            "Which places already chose to {v} {t}, and how did it go?",
            "the track record of {t}",
            "precedents",
        ),
        ("What could go wrong with {t}, and how badly?", "the main risks of {t}", "risks"),
        ("How many years would {t} take to pay off, if ever?", "the payback time of {t}", "payback"),
        (
            "Which budget would {t} come out of, and what would it displace?",
            "the money behind {t}",
            "funding",
        ),
        ("Who would fight {t}, and how strong is their case?", "the opposition to {t}", "opposition"),
        (
            "What else would change once the choice to {v} {t} is made?",
            "the knock-on effects of {t}",
            "side effects",
        ),
        (
            "Which numbers would show, five years on, that {t} was worth it?",
            "the success measures for {t}",
            "measures",
        ),
        ("Would a smaller first step than {t} be wiser?", "the right scale for {t}", "scale"),
        ("How would {t} affect people who never use it?", "the effect of {t} on non-users", "non-users"),
    ],
    CAUSE: [
        ("Which factors decide how {t} {vs}?", "the factors behind how {t} {vs}", "drivers"),
        ("What data would show why {t} {vs}?", "the data on why {t} {vs}", "data"),
        ("How has the way {t} {vs} changed over time?", "the history of how {t} {vs}", "history"),
        (
            "Where {do} {t} fail to {v}, and what is different there?",
            "the exceptions to how {t} {vs}",
            "exceptions",
        ),
        ("How could anyone measure how much {t} {vs}?", "the measurement of how {t} {vs}", "measurement"),
        ("What sets the pace at which {t} {vs}?", "the pace at which {t} {vs}", "pace"),
        (
            "Who gains when {t} {vs}, and who loses?",
            "the winners and losers when {t} {vs}",
            "winners and losers",
        ),
        ("Which levers could change how {t} {vs}?", "the levers on how {t} {vs}", "levers"),
        ("Does scale change why {t} {vs}?", "the role of scale in how {t} {vs}", "scale"),
        (
            "What is the best case against the usual account of why {t} {vs}?",
            "the usual account of why {t} {vs}",
            "the usual account",
        ),
        ("What limits how far {t} can {v}?", "the limits on how far {t} can {v}", "limits"),
        ("What could change how {t} {vs} within five years?", "the outlook for how {t} {vs}", "outlook"),
    ],
    GENERIC: [
        ("What matters most for {t}?", "the main driver of {t}", "main driver"),
        ("What evidence would settle the debate over {t}?", "the evidence on {t}", "evidence"),
        ("Who gains from {t}, and who loses?", "the winners and losers of {t}", "winners and losers"),
        ("How has {t} changed since it was first studied?", "the history of {t}", "history"),
        (
            "What is the strongest case against the usual view of {t}?",
            "the usual view of {t}",
            "the usual view",
        ),
        ("How could {t} be measured reliably?", "the measurement of {t}", "measurement"),
        (
            "What goes wrong if the common assumptions about {t} are false?",
            "the common assumptions about {t}",
            "assumptions",
        ),
        ("What does {t} cost, and who pays?", "the cost of {t}", "cost"),
        (
            "Which alternatives to {t} exist, and how do they compare?",
            "the alternatives to {t}",
            "alternatives",
        ),
        ("Which mechanism makes {t} work?", "the workings of {t}", "mechanism"),
        ("How does {t} differ at small and at large scale?", "the role of scale in {t}", "scale"),
        ("What would change {t} within five years?", "the outlook for {t}", "outlook"),
    ],
}
# Past the twelve angles (a widened seed), numbered ones.
EXTRA_ANGLE = ("What else matters about {t}, seen from angle {i}?", "angle {i} on {t}")
# Below a question the simulator did not write (a person's, say), the angles that answer each signal.
_ANGLES_BY_SIGNAL: dict[str, dict[ProxySignal, list[int]]] = {
    DECISION: {
        ProxySignal.QUALIFIERS: [5, 10, 9],
        ProxySignal.ALTERNATIVES: [2, 3],
        ProxySignal.ASSUMPTIONS: [1, 4, 0],
        ProxySignal.NEW_DOMAIN: [7, 11],
        ProxySignal.HIGH_BLAST_RADIUS: [8, 6],
    },
    CAUSE: {
        ProxySignal.QUALIFIERS: [8, 3, 11],
        ProxySignal.ALTERNATIVES: [7, 9],
        ProxySignal.ASSUMPTIONS: [1, 4],
        ProxySignal.NEW_DOMAIN: [6, 2],
        ProxySignal.HIGH_BLAST_RADIUS: [5, 0, 10],
    },
    GENERIC: {
        ProxySignal.QUALIFIERS: [10, 11, 5],
        ProxySignal.ALTERNATIVES: [8, 4],
        ProxySignal.ASSUMPTIONS: [6, 1],
        ProxySignal.NEW_DOMAIN: [2, 3],
        ProxySignal.HIGH_BLAST_RADIUS: [0, 7, 9],
    },
}

# -- the elements a follow-up adds, per signal ------------------------------------------------------

_FIELDS = {  # a new domain's discipline, by its expert
    "an economist": "economics",
    "an engineer": "engineering",
    "a historian": "history",
    "an ecologist": "ecology",
    "a lawyer": "law",
    "a sociologist": "sociology",
    "a health researcher": "public health",
    "an insurer": "insurance",
    "a psychologist": "psychology",
    "a geographer": "geography",
    "an accountant": "accounting",
    "a political scientist": "political science",
    "a planner": "planning",
    "a statistician": "statistics",
    "a designer": "design",
    "a safety inspector": "safety work",
}
# Short, so a label cut at forty characters holds the opening, the element and the aspect's first words.
_ELEMENTS: dict[ProxySignal, list[str]] = {
    ProxySignal.QUALIFIERS: [
        "in its first years",
        "for the poorest",
        "if costs run over",
        "in a recession",
        "at half the size",
        "at half the demand",
        "over thirty years",
        "where land is scarce",
        "once novelty fades",
        "if energy costs double",
        "for the outer suburbs",
        "under a new government",
        "in a harsh winter",
        "with half the staff",
        "after a bad first year",
        "at the busiest hour",
    ],
    ProxySignal.ALTERNATIVES: [
        "a smaller first phase",
        "a phased rollout",
        "buying the service",
        "upgrading what exists",
        "waiting five years",
        "a private partner",
        "a one-district pilot",
        "a simpler version",
        "gathering data first",
        "a neighbour's model",
        "a regional scheme",
        "a charge on use",
        "a lighter option",
        "a temporary fix",
        "a shared service",
        "doing nothing",
    ],
    ProxySignal.ASSUMPTIONS: [
        "steady demand",
        "a stable price level",
        "the plan as drawn",
        "honest survey data",
        "a complete data set",
        "a stable rulebook",
        "a loyal partner",
        "a lasting trend",
        "money on time",
        "no better option",
        "fair sharing of gains",
        "regular upkeep",
        "a stable population",
        "cheap borrowing",
        "skilled staff",
        "political backing",
    ],
    ProxySignal.NEW_DOMAIN: list(_FIELDS),  # its experts
    ProxySignal.HIGH_BLAST_RADIUS: [
        "the other budgets",
        "nearby districts",
        "next year's plans",
        "public trust",
        "the people running it",
        "the local economy",
        "the long-term plan",
        "the wider region",
        "future decisions",
        "the staff it needs",
        "prices nearby",
        "the status quo",
        "local businesses",
        "the next election",
        "other services",
        "borrowing costs",
    ],
}
# How a deeper question carries its parent's element after the aspect ("the full cost of X in a recession").
_CARRIED = {
    ProxySignal.QUALIFIERS: "{e}",
    ProxySignal.ALTERNATIVES: "with {e} instead",
    ProxySignal.ASSUMPTIONS: "given {e}",
    ProxySignal.NEW_DOMAIN: "as {e} sees it",
    ProxySignal.HIGH_BLAST_RADIUS: "as it bears on {e}",
}
# Follow-ups per signal; {f} is the focus (the aspect, with the parent's element), {e} the new element
# ({E} capitalized, {field} a new domain's discipline). Below a seed question the focus comes first, each
# signal opening its own way (cousins differ by their aspect); deeper, cousins share the aspect, so the
# new element comes first. No template makes the focus the subject of a verb: it may be plural.
FIRST_FOLLOW_UPS: dict[ProxySignal, list[str]] = {
    ProxySignal.QUALIFIERS: ["Would {f} hold up {e}?", "Would {f} stay the same {e}?"],
    ProxySignal.ALTERNATIVES: ["How would {f} change with {e} instead?", "How would {f} compare with {e}?"],
    ProxySignal.ASSUMPTIONS: ["How much would {f} rest on {e}?", "How much of {f} depends on {e}?"],
    ProxySignal.NEW_DOMAIN: ["What would {f} look like to {e}?", "What is {f} in the eyes of {e}?"],
    ProxySignal.HIGH_BLAST_RADIUS: ["How far would {f} reach into {e}?", "How far would {f} spill into {e}?"],
}
DEEPER_FOLLOW_UPS: dict[ProxySignal, list[str]] = {
    ProxySignal.QUALIFIERS: ["{E}, how would {f} shift?", "{E}, would {f} be the same?"],
    ProxySignal.ALTERNATIVES: [
        "Would {e} change {f}?",
        "Could {e} improve on {f}?",
        "Is {e} better for {f}?",
    ],
    ProxySignal.ASSUMPTIONS: ["Without {e}, would {f} hold?", "Is {e} a safe bet for {f}?"],
    ProxySignal.NEW_DOMAIN: [
        "How would {e} see {f}?",
        "What does {field} say of {f}?",
        "What would {e} add to {f}?",
    ],
    ProxySignal.HIGH_BLAST_RADIUS: ["Could {e} suffer from {f}?", "Would {e} hinge on {f}?"],
}


@dataclass(frozen=True)
class Reading:
    """What the simulator makes of a question: what it is about and how to go below it.

    ``focus`` is what its follow-ups are about (None: a question the simulator did
    not write, split along :data:`ANGLES` of its ``frame``); ``signals`` are the
    signals that led to it (its own and its parent's): a follow-up along one of
    them would go over the same ground, so none is asked.
    """

    subject: str
    kind: str
    focus: str | None = None
    frame: Frame | None = None
    signals: frozenset[ProxySignal] = frozenset()


def read(question: str) -> Reading:
    """How the simulator reads ``question``: its own texts exactly, any other by its frame."""
    text = " ".join(question.split())
    boundary = _BOUNDARY.match(text)
    if boundary:  # a boundary question is about the question it quotes
        return read(boundary.group(1))
    for signal, pattern in _follow_up_patterns():
        match = pattern.fullmatch(text)
        if match:
            aspect, carried = _split_focus(match.group("f"))
            element = _element(signal, match.group("e"))
            kind = next((k for k, p in _aspect_patterns() if p.fullmatch(aspect)), GENERIC)
            focus = f"{aspect} {_CARRIED[signal].format(e=element)}"
            signals = frozenset({signal} | ({carried} if carried else set()))
            return Reading(subject=focus, kind=kind, focus=focus, signals=signals)
    for kind, index, pattern in _angle_patterns():
        match = pattern.fullmatch(text)
        if match:
            slots = {"v": "", "vs": "", "do": "", "i": "", **match.groupdict()}
            if "vs" not in match.groupdict() and slots["v"]:
                slots["vs"] = third_person(slots["v"]) if slots["do"].lower() == "does" else slots["v"]
            aspect = (ANGLES[kind][index][1] if index >= 0 else EXTRA_ANGLE[1]).format(**slots)
            return Reading(subject=aspect, kind=kind, focus=aspect)
    frame = read_frame(text)
    return Reading(subject=frame.subject, kind=frame.kind, frame=frame)


def angle_questions(frame: Frame, indices: Sequence[int]) -> list[str]:
    """The seed questions of ``frame`` along the angles at ``indices`` (see :data:`ANGLES`)."""
    return [capital(ANGLES[_kind(frame)][i][0].format(**frame.slots)) for i in indices]


def angle_labels(frame: Frame, indices: Sequence[int]) -> list[str]:
    """What the angles at ``indices`` look at, in a word or two ("cost", "risks")."""
    return [ANGLES[_kind(frame)][i][2] for i in indices]


def extra_question(frame: Frame, number: int) -> str:
    """A numbered seed question, past the twelve angles."""
    return capital(EXTRA_ANGLE[0].format(t=frame.thing, i=number))


def follow_up(reading: Reading, signal: ProxySignal, rng: Random, avoid: str = "") -> str:
    """A sub-question of ``reading`` along ``signal``: more specific than it, and not in ``avoid``."""
    if reading.frame is not None:  # a question the simulator did not write: an angle of it
        picks = list(_ANGLES_BY_SIGNAL[_kind(reading.frame)][signal])
        rng.shuffle(picks)
        others = [i for i in range(len(ANGLES[GENERIC])) if i not in picks]
        options = angle_questions(reading.frame, picks + others)
    else:
        focus = reading.focus or reading.subject
        templates = (DEEPER_FOLLOW_UPS if reading.signals else FIRST_FOLLOW_UPS)[signal]
        elements = [e for e in _ELEMENTS[signal] if e.lower() not in focus.lower()]  # each once on a path
        rng.shuffle(elements)
        start = rng.randrange(len(templates))
        options = [
            _fill(templates[(start + i) % len(templates)], focus, e)
            for e in elements
            for i in range(len(templates))
        ]
    return next((o for o in options if o not in avoid), options[0])


def _kind(frame: Frame) -> str:
    """The angles a frame is split along: a decision needs its verb."""
    return frame.kind if frame.kind != DECISION or frame.verb else GENERIC


def _fill(template: str, focus: str, element: str) -> str:
    return capital(template.format(f=focus, e=element, E=capital(element), field=_FIELDS.get(element, "")))


def _element(signal: ProxySignal, text: str) -> str:
    """An element as listed, from how a question names it (capitalized; a new domain by its field)."""
    experts = {field: expert for expert, field in _FIELDS.items()} if signal == ProxySignal.NEW_DOMAIN else {}
    return experts.get(text) or next((e for e in _ELEMENTS[signal] if e.lower() == text.lower()), text)


def _split_focus(focus: str) -> tuple[str, ProxySignal | None]:
    """A focus as its aspect and the signal of the element it carries (None: the aspect alone)."""
    for signal, pattern in _carried_patterns():
        match = pattern.fullmatch(focus)
        if match:
            return match.group("a"), signal
    return focus, None


# -- the patterns the simulator reads its own questions back by ----------------------------------


def _pattern(template: str, slots: dict[str, str]) -> re.Pattern[str]:
    """``template`` as a regular expression, each ``{slot}`` as ``slots`` says (``.+?`` by default)."""
    parts = []
    seen: set[str] = set()
    for literal, name, _, _ in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if name is not None:
            if name in seen:
                parts.append(f"(?P={name})")
            else:
                seen.add(name)
                parts.append(f"(?P<{name}>{slots.get(name, '.+?')})")
    return re.compile("".join(parts))


def _alternation(values: Sequence[str]) -> str:
    return "|".join(re.escape(v) for v in sorted(values, key=len, reverse=True))


@cache
def _follow_up_patterns() -> list[tuple[ProxySignal, re.Pattern[str]]]:
    found = []
    for signal in ProxySignal:
        elements = _ELEMENTS[signal]
        for template in FIRST_FOLLOW_UPS[signal] + DEEPER_FOLLOW_UPS[signal]:
            # {E} and {field} name the element too: read back as {e}.
            if "{E}" in template:
                values = [capital(e) for e in elements]
                template = template.replace("{E}", "{e}")
            elif "{field}" in template:
                values = list(_FIELDS.values())
                template = template.replace("{field}", "{e}")
            else:
                values = elements
            found.append((signal, _pattern(template, {"e": f"(?:{_alternation(values)})", "f": ".+"})))
    return found


@cache
def _carried_patterns() -> list[tuple[ProxySignal, re.Pattern[str]]]:
    return [
        (signal, _pattern("{a} " + carried, {"a": ".+", "e": f"(?:{_alternation(_ELEMENTS[signal])})"}))
        for signal, carried in _CARRIED.items()
    ]


@cache
def _angle_patterns() -> list[tuple[str, int, re.Pattern[str]]]:
    slots = {"do": "do|does|Do|Does", "i": r"\d+"}
    found = [
        (kind, index, _pattern(capital(question), slots))
        for kind, angles in ANGLES.items()
        for index, (question, _, _) in enumerate(angles)
    ]
    return [*found, (GENERIC, -1, _pattern(EXTRA_ANGLE[0], slots))]


@cache
def _aspect_patterns() -> list[tuple[str, re.Pattern[str]]]:
    slots = {"do": "do|does", "i": r"\d+"}
    return [(kind, _pattern(aspect, slots)) for kind, angles in ANGLES.items() for _, aspect, _ in angles]
