"""The simulated model's questions: angles and follow-ups that narrow, read back exactly by the simulator."""

from __future__ import annotations

import doctest
import random

import pytest

from fractal_nb.llm import simulated_questions
from fractal_nb.llm.schemas import ProxySignal
from fractal_nb.llm.simulated_frames import CAUSE, DECISION, GENERIC, Frame
from fractal_nb.llm.simulated_questions import ANGLES, angle_questions, follow_up, read


def test_doctests() -> None:
    assert doctest.testmod(simulated_questions).failed == 0


@pytest.mark.parametrize("kind", [DECISION, CAUSE, GENERIC])
def test_every_angle_reads_back_as_its_aspect(kind: str) -> None:
    frame = Frame(kind, "the harbour", "widen" if kind != GENERIC else "", singular=True)
    for index, question in enumerate(angle_questions(frame, range(len(ANGLES[kind])))):
        reading = read(question)
        assert reading.subject == ANGLES[kind][index][1].format(**frame.slots), question
        assert reading.kind == kind and reading.signals == frozenset()


@pytest.mark.parametrize("signal", list(ProxySignal))
def test_every_follow_up_reads_back_with_its_signal_and_narrows_its_question(signal: ProxySignal) -> None:
    seed_question = "What could go wrong with a tram line, and how badly?"
    rng = random.Random(7)
    first = follow_up(read(seed_question), signal, rng)
    reading = read(first)
    assert reading.signals == {signal} and reading.subject.startswith("the main risks of a tram line ")
    for other in ProxySignal:  # a level deeper: the aspect, the element it added, one more
        deeper = follow_up(reading, other, rng)
        assert reading.subject in deeper and read(deeper).signals == {signal, other}
        assert deeper[:40] != first[:40]


def test_a_follow_up_avoids_the_texts_it_is_told_to() -> None:
    reading = read("Who would actually use a tram line, and who would not?")
    seen = {follow_up(reading, ProxySignal.QUALIFIERS, random.Random(1))}
    for _ in range(5):
        seen.add(follow_up(reading, ProxySignal.QUALIFIERS, random.Random(1), avoid="; ".join(seen)))
    assert len(seen) == 6


def test_a_boundary_question_is_read_as_the_question_it_quotes() -> None:
    quoted = "Would the full cost of a tram line hold up in a recession?"
    boundary = (
        f'The answer to "{quoted}" and answer [n-0123456789abcdef] from another branch both conclude: '
        "[simulated] both point to upkeep. What does this convergence imply?"
    )
    assert read(boundary) == read(quoted)
    assert read(f'The answer to "{boundary}" and answer [n-0123456789abcdef] from …') == read(quoted)
