"""Prompts: role instructions reach models whose template drops the system turn; nothing to copy."""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest
from pydantic import ValidationError

from fractal_nb.llm.quality import STORED, ReplyContext
from fractal_nb.llm.schemas import Answer, Connections, HarvestFindings, LeafAnswer, SeedPlan, Synthesis
from fractal_nb.prompts import chat, render

NAMES = ["seed", "answer", "answer_branch", "answer_leaf", "connect", "synthesize", "harvest"]


@pytest.mark.parametrize("name", NAMES)
def test_the_role_instructions_open_the_user_turn_too(name: str) -> None:
    text = resources.files("fractal_nb.prompts").joinpath(f"{name}.txt").read_text()
    values = dict.fromkeys(re.findall(r"\$(\w+)", text), "x")
    system, user = chat(name, **values)
    assert system["role"] == "system" and user["role"] == "user"
    assert user["content"].startswith(render("system"))


@pytest.mark.parametrize("name", NAMES)
def test_no_placeholder_a_small_model_could_copy(name: str) -> None:
    text = resources.files("fractal_nb.prompts").joinpath(f"{name}.txt").read_text()
    assert "Return JSON: {" not in text
    assert not re.search(r"\{[^}]*\.\.\.[^}]*\}", text), "a JSON example with ... placeholders"
    # Field hints in parentheses ("decomposition (two or three sentences ...)") get copied verbatim by a
    # small model; it follows a worked example on another topic (docs/architecture/models.md, "Small models").
    assert "Reply with a JSON object:" not in text


# Each role's worked example: a whole reply on another topic (a four-day school week, coffee at work).
EXAMPLES = {
    "seed": (SeedPlan, {"seed": "Why do some cities grow faster than others?", "lo": 3, "hi": 4}),
    "answer_branch": (Answer, None),
    "answer_leaf": (LeafAnswer, None),
    "synthesize": (
        Synthesis,
        {"question": "Why do cities grow?", "conclusion": "", "answer": "Jobs.", "children": "- x"},
    ),
    "connect": (
        Connections,
        {"question": "Why do cities grow?", "node_id": "n-1", "answer": "Jobs.", "candidates": "- x"},
    ),
    "harvest": (HarvestFindings, {"seed": "Why do cities grow?", "chain": "- x", "gaps": "(none)"}),
}


def _examples(name: str) -> list[dict[str, object]]:
    text = resources.files("fractal_nb.prompts").joinpath(f"{name}.txt").read_text()
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_worked_example_is_a_valid_reply(name: str) -> None:
    schema, _ = EXAMPLES[name]
    examples = _examples(name)
    assert examples, f"{name}.txt shows no worked example"
    for example in examples:
        schema.model_validate(example, context=STORED)  # its shape: the gates refuse a copy of it (below)


@pytest.mark.parametrize("name", sorted(n for n, (_, values) in EXAMPLES.items() if values))
def test_a_reply_that_copies_the_worked_example_is_refused(name: str) -> None:
    schema, values = EXAMPLES[name]
    messages = chat(name, **(values or {}))
    for example in _examples(name):
        try:
            kept = schema.model_validate(example, context=ReplyContext.of(messages, schema))
        except ValidationError:
            continue  # refused whole
        # A reply made only of lists (connect's) keeps none of the copied items: each was refused.
        assert kept.refused and not any(kept.model_dump(exclude={"refused"}).values())


def test_an_answer_that_copies_the_worked_example_is_refused() -> None:
    values = {
        "seed": "Why do some cities grow faster than others?",
        "ancestry": "(this is a seed question)",
        "depth": 1,
        "max_depth": 2,
        "question": "How do transport links change which cities grow?",
        "siblings": "(none)",
        "syntheses": "(none yet)",
        "elsewhere": "(none yet)",
    }
    for task, schema in (("answer_branch", Answer), ("answer_leaf", LeafAnswer)):
        messages = chat("answer", **values, task=render(task))
        for example in _examples(task):
            with pytest.raises(ValidationError):
                schema.model_validate(example, context=ReplyContext.of(messages, schema))
