"""The simulated model's reading of a question it did not write: its kind, subject and verb."""

from __future__ import annotations

import doctest

import pytest

from fractal_nb.llm import simulated_frames
from fractal_nb.llm.simulated_frames import CAUSE, DECISION, GENERIC, read_frame


def test_doctests() -> None:
    assert doctest.testmod(simulated_frames).failed == 0


@pytest.mark.parametrize(
    ("text", "kind", "thing", "verb"),
    [
        ("Should a mid-sized city build a tram line?", DECISION, "a tram line", "build"),
        ("How should a library digitise its archive?", DECISION, "the library's archive", "digitise"),
        ("Should the city raise parking fees?", DECISION, "parking fees", "raise"),
        ("Why do some cities grow faster than others?", CAUSE, "cities", "grow"),
        ("Why does the moon glow?", CAUSE, "the moon", "glow"),
        ("How far does it scale?", CAUSE, "it", "scale"),
        ("Where should the new depot go?", GENERIC, "the new depot", ""),
        ("What are the main causes behind urban growth?", GENERIC, "the main causes behind urban growth", ""),
        ("Is remote work good for productivity?", GENERIC, "remote work", ""),
        ("Which services employ the most people downtown?", GENERIC, "services", ""),
        ("Why?", GENERIC, "the question at hand", ""),
    ],
)
def test_a_question_is_read_for_its_kind_subject_and_verb(
    text: str, kind: str, thing: str, verb: str
) -> None:
    frame = read_frame(text)
    assert (frame.kind, frame.thing, frame.verb) == (kind, thing, verb)


def test_a_cause_keeps_what_its_verb_takes_and_agrees_with_its_subject() -> None:
    frame = read_frame("How does the store keep a claim atomic under concurrent workers?")
    assert frame.subject == "the reasons the store keeps a claim atomic"
    assert read_frame("Why do tides turn twice a day?").subject == "the reasons tides turn"
