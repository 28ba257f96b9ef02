"""Budgets beyond depth: tokens, cost, wall time and time per node (README, "Budgets").

The intensity bounds agents and depth; these bound what a run may spend. Tokens
and cost count the graph's whole call log (a ceiling for the exploration, kept
with the graph); wall time counts one ``run()``. Workers check before each claim,
so a run overshoots by at most the nodes in flight when the budget is reached.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import InvalidInputError

Prices = dict[str, tuple[float, float]]
"""Per model: (input, output) price per million tokens, in the currency the user thinks in."""


@dataclass(frozen=True)
class Limits:
    """What a run may spend; None: no limit."""

    max_tokens: int | None = None
    max_cost: float | None = None
    max_wall_s: float | None = None
    node_timeout_s: float | None = None
    prices: Prices = field(default_factory=dict)

    @classmethod
    def parse(
        cls,
        *,
        max_tokens: object = None,
        max_cost: object = None,
        max_wall_s: object = None,
        node_timeout_s: object = None,
        prices: object = None,
    ) -> Limits:
        """Check the keyword arguments a person passed; InvalidInputError naming the bad one."""
        limits = cls(
            max_tokens=_positive("max_tokens", max_tokens, integer=True),
            max_cost=_positive("max_cost", max_cost),
            max_wall_s=_positive("max_wall_s", max_wall_s),
            node_timeout_s=_positive("node_timeout_s", node_timeout_s),
            prices=_prices(prices),
        )
        if limits.max_cost is not None and not limits.prices:
            raise InvalidInputError(
                "max_cost needs a price table: prices={'model': (input, output)} "
                "per million tokens (there is none by default)"
            )
        return limits

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> Limits:
        """The limits kept with a graph (``metadata["limits"]``)."""
        kept = dict(metadata.get("limits") or {})
        kept["prices"] = {m: (float(p[0]), float(p[1])) for m, p in (kept.get("prices") or {}).items()}
        return cls(**kept)

    def to_metadata(self) -> dict[str, Any]:
        """JSON-ready form, for the graph's metadata."""
        data = asdict(self)
        data["prices"] = {m: list(p) for m, p in self.prices.items()}
        return data

    def merged(self, other: Limits) -> Limits:
        """These limits with every limit ``other`` sets taking over."""
        return Limits(
            **{
                **{k: v for k, v in asdict(self).items() if v not in (None, {})},
                **{k: v for k, v in asdict(other).items() if v not in (None, {})},
            }
        )

    def cost(self, spend: Sequence[Mapping[str, Any]]) -> float | None:
        """What ``spend`` (rows of model, prompt_tokens, completion_tokens) cost; None without prices."""
        if not self.prices:
            return None
        total = 0.0
        for row in spend:
            price = self.prices.get(row["model"])
            if price is None:  # a model the table does not name: refuse to guess
                return math.inf
            total += (row["prompt_tokens"] * price[0] + row["completion_tokens"] * price[1]) / 1e6
        return total

    def reached(self, spend: Sequence[Mapping[str, Any]], elapsed_s: float) -> str | None:
        """Why the run must stop now (e.g. ``"token budget of 5,000 reached (5,210 spent)"``), or None."""
        tokens = spend_tokens(spend)
        if self.max_tokens is not None and tokens >= self.max_tokens:
            return f"token budget of {self.max_tokens:,} reached ({tokens:,} spent)"
        cost = self.cost(spend)
        if self.max_cost is not None and cost is not None and cost >= self.max_cost:
            if math.isinf(cost):
                unpriced = sorted({r["model"] for r in spend} - set(self.prices))
                return f"cost budget: no price for model(s) {', '.join(unpriced)}"
            return f"cost budget of {self.max_cost:g} reached ({cost:.4f} spent)"
        if self.max_wall_s is not None and elapsed_s >= self.max_wall_s:
            return f"wall-time budget of {self.max_wall_s:g} s reached ({elapsed_s:.1f} s)"
        return None


def spend_tokens(spend: Sequence[Mapping[str, Any]]) -> int:
    """The tokens, prompt and completion, of ``llm_spend`` rows."""
    return sum(int(r["prompt_tokens"]) + int(r["completion_tokens"]) for r in spend)


def _positive(name: str, value: object, *, integer: bool = False) -> Any:
    if value is None:
        return None
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not value > 0 or value != value:
        kind = "an integer" if integer else "a number"
        raise InvalidInputError(f"{name} must be {kind} > 0 or None, not {value!r}")
    return value


def _prices(value: object) -> Prices:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"prices must be a dict {{model: (input, output)}}, not {value!r}")
    table: Prices = {}
    for model, pair in value.items():
        if (
            not isinstance(model, str)
            or not isinstance(pair, list | tuple)
            or len(pair) != 2
            or not all(isinstance(p, int | float) and not isinstance(p, bool) and p >= 0 for p in pair)
        ):
            raise InvalidInputError(
                f"prices[{model!r}] must be (input, output) prices per million tokens, "
                f"each a number >= 0, not {pair!r}"
            )
        table[model] = (float(pair[0]), float(pair[1]))
    return table
