"""The simulator's Think and Eval (engine/strategies/thinkon.py): a chain played from the prompt.

Think plans the whole task (depth 0) along a few of the seed angles of its goal,
and sometimes a sub-goal too (while a level below it is allowed); otherwise it
returns the level's result. Eval reads its plan and ``done`` back from the
prompt: it calls again a sub-goal whose return failed (one redo), else the first
plan item not returned yet, and returns the level's result once every item has.
Everything is drawn from the prompt and the call's own random draw, so a chain
is the same on every run.
"""

from __future__ import annotations

import re
from collections import Counter
from random import Random
from typing import Any

from ..text import normalize
from .simulated_frames import GENERIC, read_frame
from .simulated_prompts import prompt_field
from .simulated_prose import answer_text, factors, synthesis_text
from .simulated_questions import ANGLES, angle_questions, read

PLAN_ITEM = re.compile(r"^t\d+\. (.+)$", re.MULTILINE)
DONE_ITEM = re.compile(r"^\d+\. (.+?)( \[FAILED\]| \[CUT SHORT\])?\n   -> ", re.MULTILINE)
SUB_PLAN_CHANCE = 0.35  # a sub-goal that plans instead of returning at once
HEDGES = ["probably", "in most cases", "as far as the parts show,"]


def think_reply(prompt: str, rng: Random) -> dict[str, Any]:
    """Think: a plan at the top (and now and then below it), else the level's result."""
    goal = prompt_field(prompt, r"Goal of this level: (.+)") or "the task"
    depth, deepest = (int(v) for v in (prompt_field(prompt, r"Depth: (\d+) of") or "0", _last_depth(prompt)))
    if depth < deepest and (depth == 0 or (depth == 1 and rng.random() < SUB_PLAN_CHANCE)):
        frame = read_frame(goal)
        count = rng.randint(2, 4) if depth == 0 else 2
        items = angle_questions(frame, sorted(rng.sample(range(len(ANGLES[GENERIC])), k=count)))
        plan = "\n".join(f"t{i}. {item}" for i, item in enumerate(items, 1))
        return {
            "type": "TODO",
            "description": f"[simulated] {count} parts of {frame.subject}, one at a time, each done when "
            f"it names what decides it:\n{plan}",
        }
    reading = read(goal)
    return {
        "type": "RETURN",
        "description": answer_text(reading, depth + 1, rng.choice(HEDGES), factors(reading.kind, rng)),
    }


def eval_reply(prompt: str, rng: Random) -> dict[str, Any]:
    """Eval: a failed sub-goal again, else the next plan item not returned, else the level's result."""
    goal = prompt_field(prompt, r"Goal of this level: (.+)") or "the task"
    plan = prompt.split("do not rewrite it):", 1)[-1].split("What the sub-goals called so far", 1)[0]
    done = DONE_ITEM.findall(prompt.split("What the sub-goals called so far", 1)[-1])
    failures = Counter(normalize(g) for g, mark in done if mark == " [FAILED]")
    if done and done[-1][1] == " [FAILED]" and failures[normalize(done[-1][0])] == 1:
        return {"type": "CALL", "description": done[-1][0]}  # one redo of a failed sub-goal
    settled = {normalize(g) for g, mark in done if not mark} | {g for g, n in failures.items() if n > 1}
    pending = [item for item in PLAN_ITEM.findall(plan) if normalize(item) not in settled]
    if pending:
        return {"type": "CALL", "description": pending[0]}
    reading = read(goal)
    depth = int(prompt_field(prompt, r"Depth: (\d+) of") or "0")
    return {
        "type": "RETURN",
        "description": synthesis_text(reading, depth, len(done), factors(reading.kind, rng)),
    }


def _last_depth(prompt: str) -> str:
    return prompt_field(prompt, r"of at most (\d+)") or "0"
