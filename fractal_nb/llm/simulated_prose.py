"""What :class:`~fractal_nb.SimulatedLLM`'s answers and syntheses say about a question (issue 27).

Each names what its question is about (``Reading.subject``, :mod:`.simulated_questions`)
and a few factors that decide it, and still says plainly that it is simulated: each
starts with "[simulated]".
"""

from __future__ import annotations

from collections.abc import Sequence
from random import Random

from .simulated_frames import CAUSE, DECISION, GENERIC, capital
from .simulated_questions import Reading

# Singular or uncountable, each: a factor may be the subject of "weighs" or "decides".
FACTORS = {
    DECISION: [
        "the upfront cost",
        "the yearly running cost",
        "how many people it reaches",
        "the split of costs and gains",
        "the timing",
        "local politics",
        "the quality of the data",
        "the size of the first phase",
        "the pace of habit change",
        "the permit process",
        "what neighbouring places do",
        "demand over the years",
        "upkeep",
        "public support",
        "the price of land",
        "the skill base",
    ],
    CAUSE: [
        "an early head start",
        "the supply of land",
        "the pull of incentives",
        "feedback",
        "the risk of outside shocks",
        "the starting point",
        "geography",
        "policy",
        "chance",
        "the speed of change",
        "how it is measured",
        "the network effect",
        "the flow of people and money",
        "the strength of local institutions",
        "the cost of moving",
        "the long-run trend",
    ],
}
FACTORS[GENERIC] = FACTORS[CAUSE][:8] + FACTORS[DECISION][:8]
# Each level of a path words its answers its own way (a near copy of an ancestor's answer is refused,
# llm/quality.py); a synthesis knows its level by the wording of its own answer. The subject is never
# the subject of a verb here: it may be plural.
ANSWERS = [
    "[simulated] {S}: {h} it comes down to {x} and {y}, more than to {z}.",
    "[simulated] On {s}, {h} {x} weighs most, with {y} close behind; {z} matters less than it seems.",
    "[simulated] For {s}, {h} the deciding factor is {x}; {y} and {z} shift the result only at the margins.",
    "[simulated] Three things settle {s}: {h} {x} first, then {y} and {z}.",
    "[simulated] Looking at {s}, {h} {x} and {y} pull in opposite directions, while {z} barely moves it.",
    "[simulated] The short answer on {s}: {h} {x} decides it, and {y} sets how far; {z} is a side issue.",
]
_ANSWER_MARKS = [
    " it comes down to ",
    " weighs most, with ",
    " the deciding factor is ",
    "Three things settle ",
    " pull in opposite directions, ",
    "The short answer on ",
]
SYNTHESES = [
    "[simulated] Across {n}, what decides {s} turns out to be {x}; {y} matters less than it first seemed.",
    "[simulated] Taken together, the {n} on {s} put {x} first, and leave open how much {y} adds.",
    "[simulated] {S}: going by {n}, {x} is the main driver, with {y} still in dispute.",
    "[simulated] Summing up {n}: for {s}, {x} comes first and {y} second.",
    "[simulated] Below {s}, the weight of {n} falls on {x}; how far {y} matters stays open.",
    "[simulated] For {s}, the evidence of {n} points to {x}, qualified by {y}.",
]


def answer_level(answer: str) -> int:
    """The wording of :data:`ANSWERS` ``answer`` has (its level); 0 for any other text (the seed's plan)."""
    return next((i for i, mark in enumerate(_ANSWER_MARKS) if mark in answer), 0)


def factors(kind: str, rng: Random, k: int = 3) -> list[str]:
    """``k`` distinct factors a simulated text names for a question of ``kind``."""
    return rng.sample(FACTORS[kind], k=k)


def answer_text(reading: Reading, level: int, hedge: str, named: Sequence[str]) -> str:
    """A simulated answer: what ``reading`` is about turns on the ``named`` factors (three)."""
    x, y, z = named
    s = reading.subject
    return ANSWERS[level % len(ANSWERS)].format(S=capital(s), s=s, h=hedge, x=x, y=y, z=z)


def synthesis_text(reading: Reading, level: int, children: int, named: Sequence[str]) -> str:
    """A simulated synthesis of ``children`` sub-findings on what ``reading`` is about (two factors)."""
    x, y = named[:2]
    s = reading.subject
    n = f"{children} sub-finding" + ("" if children == 1 else "s")
    return SYNTHESES[level % len(SYNTHESES)].format(S=capital(s), s=s, n=n, x=x, y=y)
