"""``ScriptedLLM``: replies by goal; a bad script is refused, a missing reply is a model error."""

from __future__ import annotations

from typing import Any

import pytest

from fractal_nb import LLMError, ScriptedLLM
from fractal_nb.errors import InvalidInputError
from fractal_nb.llm.schemas import Eval, Think
from fractal_nb.prompts import chat


def think_prompt(goal: str) -> Any:
    return chat("thinkon_think", goal=goal, parent="(none)", depth=0, max_depth=3)


def test_replies_come_in_turn_by_goal_and_the_last_repeats() -> None:
    llm = ScriptedLLM(
        think={
            "Pack   for a hike.": [
                {"type": "TODO", "description": "t1. Pack water."},
                {"type": "RETURN", "description": "Done packing now."},
            ]
        }
    )
    replies = [llm.complete(think_prompt("Pack for a hike."), Think)["type"] for _ in range(3)]
    assert replies == ["TODO", "RETURN", "RETURN"], "whitespace in a goal does not matter"
    assert len(llm.asked("think", "Pack for a hike.")) == 3 and llm.asked("eval", "Pack for a hike.") == []
    assert repr(llm) == "ScriptedLLM(think=1 goals, evaluate=0 goals)"


def test_a_goal_without_a_reply_is_a_model_error() -> None:
    llm = ScriptedLLM(evaluate={"Other goal.": [{"type": "RETURN", "description": "All done here."}]})
    with pytest.raises(LLMError, match="no think reply for the goal 'Pack for a hike.'"):
        llm.complete(think_prompt("Pack for a hike."), Think)
    with pytest.raises(LLMError, match="no eval reply"):
        llm.complete([{"role": "user", "content": "no goal here"}], Eval)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"think": ["a"]}, "must map goals"),
        ({"think": {"  ": [{"type": "RETURN"}]}}, "non-empty text"),
        ({"think": {"Go.": []}}, "non-empty list"),
        ({"think": {"Go.": {"type": "RETURN"}}}, "non-empty list"),
        ({"evaluate": {"Go.": ["RETURN"]}}, "must be a dict"),
    ],
)
def test_a_bad_script_is_refused(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        ScriptedLLM(**kwargs)
