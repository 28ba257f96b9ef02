"""``ScriptedLLM``: a thinkon chain played from a script, to watch or test a chain step by step.

Think and Eval (engine/strategies/thinkon.py) are answered by the level's goal, read from
the prompt: each goal has a list of replies taken in turn (the last one repeats).
A reply is what the model would send (``{"type": ..., "description": ...}``),
checked by the engine like any model's, so a reply no Think or Eval accepts
plays a model's invalid output. Every prompt is kept (:attr:`ScriptedLLM.prompts`),
so a reader sees what each Eval saw. Notebook 07 plays the seed's essay with it.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from ..errors import InvalidInputError, LLMError
from .protocol import Message, estimate_tokens, messages_tokens, report_usage, report_wait

Reply = Mapping[str, Any]
_GOAL = re.compile(r"Goal of this level: (.+)")
ROLES = ("think", "eval")


class ScriptedLLM:
    """Think and Eval replies by goal (module docstring).

    >>> llm = ScriptedLLM(think={"Say hi.": [{"type": "RETURN", "description": "Hi there, reader."}]})
    >>> sorted(llm.script["think"])
    ['Say hi.']
    """

    model = "scripted"

    def __init__(
        self,
        think: Mapping[str, Sequence[Reply]] | None = None,
        evaluate: Mapping[str, Sequence[Reply]] | None = None,
    ) -> None:
        script: dict[str, dict[str, list[Reply]]] = {}
        for role, given in zip(ROLES, (think, evaluate), strict=True):
            if not isinstance(given, Mapping | None):
                raise InvalidInputError(
                    f"{role} must map goals to lists of replies, not {type(given).__name__}"
                )
            script[role] = {}
            for goal, replies in (given or {}).items():
                if not isinstance(goal, str) or not goal.strip():
                    raise InvalidInputError(f"a {role} goal must be non-empty text, not {goal!r}")
                if isinstance(replies, str | Mapping) or not isinstance(replies, Sequence) or not replies:
                    raise InvalidInputError(
                        f"the {role} replies for {goal!r} must be a non-empty list of dicts"
                    )
                if not all(isinstance(r, Mapping) for r in replies):
                    raise InvalidInputError(f"each {role} reply for {goal!r} must be a dict")
                script[role][" ".join(goal.split())] = list(replies)
        self.script = script
        self.prompts: list[tuple[str, str, str]] = []  # (role, goal, prompt), in the order asked
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"ScriptedLLM(think={len(self.script['think'])} goals, evaluate={len(self.script['eval'])} goals)"
        )

    def complete(self, messages: list[Message], schema: type[BaseModel]) -> dict[str, Any]:
        """The next scripted reply for the prompt's role and goal; LLMError when there is none."""
        role = str(getattr(schema, "role", ""))
        prompt = messages[-1]["content"]
        found = _GOAL.search(prompt)
        goal = " ".join(found.group(1).split()) if found else ""
        report_wait(0.0, "scripted")
        with self._lock:
            self.prompts.append((role, goal, prompt))
            replies = self.script.get(role, {}).get(goal)
            reply = None if not replies else replies.pop(0) if len(replies) > 1 else replies[0]
        if reply is None:
            report_usage(messages_tokens(messages), 0, estimated=True)
            raise LLMError(f"ScriptedLLM has no {role} reply for the goal {goal!r}")
        report_usage(messages_tokens(messages), estimate_tokens(json.dumps(reply)), estimated=True)
        return dict(reply)

    def asked(self, role: str, goal: str) -> list[str]:
        """The prompts of ``role`` (think or eval) for ``goal``, in order."""
        return [p for r, g, p in self.prompts if r == role and g == " ".join(goal.split())]
