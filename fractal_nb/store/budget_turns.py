"""A new budget for a ``budget_exhausted`` graph: the turn of kind ``budget`` that goes on with it.

A plain class composed by :class:`~fractal_nb.store.GraphStore` (docs/architecture/store.md,
"The graph contract" and "Turns and heads"): ``budget_exhausted`` is terminal for resume,
and going on is this store move. In one transaction it checks the new limits, merges them
into the graph's limits (``metadata["limits"]``, as the facade keeps them), refuses a token
or cost budget the graph's spend has reached already, ends the stopped turn in a head and
opens the ``budget`` turn with the graph's limits as its request; the graph is ``active``
again. A refused call writes nothing.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from ..checks import merged_metadata, shown
from ..errors import InvalidInputError, StateError
from ..vocabulary import GraphStatus, JsonArgument, TurnKind, parse_metadata
from .base import StoreCore
from .records import TurnRequest

if TYPE_CHECKING:
    from .turns import Turns

# The graph's limits a new budget may set, as metadata["limits"] holds them (engine/limits.py Limits).
BUDGET_KEYS = ("max_tokens", "max_cost", "max_wall_s", "node_timeout_s", "prices")


class BudgetTurns:
    """The new budgets of the graphs in one store; ``GraphStore`` delegates ``new_budget`` here."""

    def __init__(self, core: StoreCore, turns: Turns) -> None:
        self._core = core
        self._db = core.db
        self._turns = turns

    def new_budget(self, graph_id: str, limits: JsonArgument) -> TurnRequest:
        """Go on with a ``budget_exhausted`` graph: a new turn of kind ``budget`` with its new limits.

        ``limits`` holds what changes (``max_tokens``, ``max_cost``, ``max_wall_s``,
        ``node_timeout_s``, ``prices``); ``{}`` keeps the graph's limits, for a graph
        its circuit breaker or wall clock stopped (each run has its own). Refused, and
        nothing written: any other status, an unknown key or a bad value, and a token
        or cost budget the graph has spent already.
        """
        given = checked_limits(parse_metadata(limits))
        with self._db.write():
            graph = self._core.graph(graph_id)
            if graph.status != GraphStatus.BUDGET_EXHAUSTED:
                raise StateError(
                    f"graph {graph.graph_id} is {graph.status!r}: a new budget opens a turn only on a "
                    "'budget_exhausted' graph (a paused one resumes: resume_graph)",
                    graph_id=graph.graph_id,
                )
            metadata = json.loads(graph.metadata_json)
            kept = {**(metadata.get("limits") or {}), **given}
            if spent := self._spent(graph.graph_id, kept):
                raise StateError(
                    f"graph {graph.graph_id}: the new budget is spent already ({spent}); send a larger "
                    "max_tokens or max_cost",
                    graph_id=graph.graph_id,
                )
            _, text = merged_metadata(metadata, {"limits": kept}, f"graph {graph.graph_id}")
            now = self._core.clock()
            self._db.execute(
                "UPDATE graphs SET metadata = ?, updated_at = ? WHERE graph_id = ?",
                [text, now, graph.graph_id],
            )
            self._core.log(graph.graph_id, None, "graph_metadata_updated", None, {"keys": ["limits"]}, now)
            turn = self._turns.open_turn(graph, TurnKind.BUDGET)
            shown_limits = {k: v for k, v in kept.items() if v not in (None, {})}  # what the budget holds
            return self._turns.record(graph.graph_id, turn, TurnKind.BUDGET, {"limits": shown_limits}, [], [])

    def _spent(self, graph_id: str, limits: dict[str, Any]) -> str | None:
        """Which of ``limits``' token and cost budgets the graph's paid calls have reached, or None.

        As ``Limits.spent`` counts (engine/limits.py): replayed calls and tool-call rows
        are not paid; a model without a price makes a cost budget unknowable, so reached.
        """
        rows = self._db.fetchall(
            "SELECT model, coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0) "
            "FROM llm_calls WHERE graph_id = ? AND outcome <> 'cached' AND role NOT LIKE 'tool:%' "
            "GROUP BY model",
            [graph_id],
        )
        tokens = sum(int(p) + int(c) for _, p, c in rows)
        if limits.get("max_tokens") is not None and tokens >= limits["max_tokens"]:
            return f"token budget of {limits['max_tokens']:,} reached ({tokens:,} spent)"
        if limits.get("max_cost") is None:
            return None
        prices = limits.get("prices") or {}
        cost = sum(
            (int(p) * prices[m][0] + int(c) * prices[m][1]) / 1e6 if m in prices else math.inf
            for m, p, c in rows
        )
        if cost >= limits["max_cost"]:
            return f"cost budget of {limits['max_cost']:g} reached ({cost:.4f} spent)"
        return None


def checked_limits(limits: dict[str, Any]) -> dict[str, Any]:
    """``limits`` if each key is a budget's and each value fits it; InvalidInputError naming the bad one.

    >>> checked_limits({"max_tokens": 400_000, "max_wall_s": 60})
    {'max_tokens': 400000, 'max_wall_s': 60}
    >>> checked_limits({"tokens": 5})
    Traceback (most recent call last):
    ...
    fractal_nb.errors.InvalidInputError: limits has an unknown key 'tokens'; a new budget sets max_tokens, \
max_cost, max_wall_s, node_timeout_s or prices
    """
    for key, value in limits.items():
        if key not in BUDGET_KEYS:
            raise InvalidInputError(
                f"limits has an unknown key {key!r}; a new budget sets "
                f"{', '.join(BUDGET_KEYS[:-1])} or prices"
            )
        if key == "prices":
            _check_prices(value)
        elif not _positive(value, integer=key == "max_tokens"):
            kind = "a positive integer" if key == "max_tokens" else "a positive number"
            raise InvalidInputError(f"limits[{key!r}] must be {kind}, not {shown(value)}")
    return limits


def _positive(value: object, *, integer: bool) -> bool:
    kinds = (int,) if integer else (int, float)
    return isinstance(value, kinds) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _check_prices(prices: object) -> None:
    """A price table: {model: [input, output]} per million tokens, each price a number >= 0."""
    fits = isinstance(prices, dict) and all(
        isinstance(pair, list | tuple)
        and len(pair) == 2
        and all(
            isinstance(p, int | float) and not isinstance(p, bool) and math.isfinite(p) and p >= 0
            for p in pair
        )
        for pair in prices.values()
    )
    if not fits:
        raise InvalidInputError(
            f"limits['prices'] must be {{model: [input, output]}} per million tokens, not {shown(prices)}"
        )
