"""Prompts: role instructions reach models whose template drops the system turn; nothing to copy."""

from __future__ import annotations

import re
from importlib import resources

import pytest

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
    assert not re.search(r'": "[a-z ]+"', text), "an example value in quotes gets copied verbatim"
