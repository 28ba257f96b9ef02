"""A fifth way of thinking, plugged in from outside the package: the question's own parts are its seed.

"Why do rivers flood and how do dams help?" is seeded with "Why do rivers flood?"
and "How do dams help?" without a model call; everything after the seed is the
fractal strategy's. It is one module and one ``register`` line
(docs/architecture/engine.md, "Strategies"), and nothing in ``fractal_nb/`` names it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from fractal_nb.engine import seeding
from fractal_nb.engine.strategies import register
from fractal_nb.engine.strategies.fractal import Fractal
from fractal_nb.results.result import StepRecord

if TYPE_CHECKING:
    from fractal_nb.engine.run_state import RunState


def parts_of(question: str) -> list[str]:
    """The question's parts, each a question of its own.

    >>> parts_of("Why do rivers flood and how do dams help?")
    ['Why do rivers flood?', 'How do dams help?']
    """
    pieces = [p.strip(" ?,;") for p in re.split(r"\band\b|;", question)]
    return [p[0].upper() + p[1:] + "?" for p in pieces if p]


class Parts(Fractal):
    """The parts strategy's part: a seed with no model call, the rest fractal."""

    name = "parts"

    def seed(self, run: RunState) -> StepRecord | None:
        """The root answered by its own parts, hung under it as the seed questions."""
        root = run.store.get_synthesis_inputs(run.graph_id, run.root_id)["node"]
        if root["status"] != "open":
            return None
        parts = parts_of(run.seed)
        return seeding.write_plan(run, f"The question has {len(parts)} parts.", {"parts": len(parts)}, parts)


PART = register(Parts())
