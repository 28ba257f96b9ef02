"""Budgets beyond depth: tokens, cost, wall time and time per node (docs/notebook.md, "Budgets").

The intensity bounds agents and depth; these bound what a run may spend. Tokens
and cost count the graph's whole call log (a ceiling for the exploration, kept
with the graph); wall time counts one ``run()``. Tokens and cost are admitted
before each model call by an :class:`Allowance`; wall time is checked before
each claim. ``solve_time_s``, a thinkon chain's per-Solve limit, is checked by the
strategy before each Think or Eval (engine/strategies/thinkon_time.py).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import BudgetExhaustedError, InvalidInputError

SOLVE_TIME = "solve time limit"
"""How the ``budget_reason`` of a thinkon level the per-Solve limit cut begins (strategies/thinkon_time.py);
engine/result_of.py counts those levels among a result's degraded reasons."""
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
    # A thinkon sub-goal's Solve: its subtree's running time (docs/architecture/engine.md, "Thinkon")
    solve_time_s: float | None = None

    @classmethod
    def parse(
        cls,
        *,
        max_tokens: object = None,
        max_cost: object = None,
        max_wall_s: object = None,
        node_timeout_s: object = None,
        prices: object = None,
        solve_time_s: object = None,
    ) -> Limits:
        """Check the keyword arguments a person passed; InvalidInputError naming the bad one."""
        limits = cls(
            max_tokens=_positive("max_tokens", max_tokens, integer=True),
            max_cost=_positive("max_cost", max_cost),
            max_wall_s=_positive("max_wall_s", max_wall_s),
            node_timeout_s=_positive("node_timeout_s", node_timeout_s),
            prices=_prices(prices),
            solve_time_s=_positive("solve_time_s", solve_time_s),
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

    def spends(self) -> bool:
        """Whether a token or cost budget is set (what an :class:`Allowance` admits calls against)."""
        return self.max_tokens is not None or self.max_cost is not None

    def reached(self, spend: Sequence[Mapping[str, Any]], elapsed_s: float) -> str | None:
        """Why the run must stop now (e.g. ``"token budget of 5,000 reached (5,210 spent)"``), or None."""
        if spent := self.spent(spend):
            return spent
        if self.max_wall_s is not None and elapsed_s >= self.max_wall_s:
            return f"wall-time budget of {self.max_wall_s:g} s reached ({elapsed_s:.1f} s)"
        return None

    def spent(self, spend: Sequence[Mapping[str, Any]]) -> str | None:
        """Which spend budget (tokens, cost) ``spend`` has reached, in words; None if neither."""
        tokens = spend_tokens(spend)
        if self.max_tokens is not None and tokens >= self.max_tokens:
            return f"token budget of {self.max_tokens:,} reached ({tokens:,} spent)"
        cost = self.cost(spend)
        if self.max_cost is not None and cost is not None and cost >= self.max_cost:
            if math.isinf(cost):
                unpriced = sorted({r["model"] for r in spend} - set(self.prices))
                return f"cost budget: no price for model(s) {', '.join(unpriced)}"
            return f"cost budget of {self.max_cost:g} reached ({cost:.4f} spent)"
        return None

    def within(self, spend: Sequence[Mapping[str, Any]]) -> bool:
        """Whether ``spend`` stays under every spend budget (at a ceiling is still under)."""
        tokens, cost = spend_tokens(spend), self.cost(spend)
        return (self.max_tokens is None or tokens <= self.max_tokens) and (
            self.max_cost is None or cost is None or cost <= self.max_cost
        )


@dataclass(frozen=True, eq=False)
class Reservation:
    """One model call's hold on the budget until it is settled: its model and the most it may take."""

    model: str
    prompt_tokens: int
    completion_tokens: int


class Allowance:
    """The token and cost budgets of one graph, admitted before each model call (docs/notebook.md, "Budgets").

    A call first reserves an estimate (its prompt's tokens and its reply's bound).
    It is admitted when the reservation fits under the ceilings beside the calls
    in flight; it waits while calls in flight may still leave room; it is refused
    with :class:`~fractal_nb.errors.BudgetExhaustedError` once the spend has reached
    a ceiling. With no call in flight and budget left, a call is admitted whatever
    its size: a run ends with its budget spent, at most one call past it. ``settle``
    replaces the reservation by what the call really spent. Shared by every worker
    thread of a graph in this process; ``spent`` starts from the graph's ledger.

    >>> purse = Allowance(Limits(max_tokens=1_000))
    >>> first = purse.reserve("m", 300, 400)
    >>> purse.settle(first, 300, 750)
    >>> purse.reached()
    'token budget of 1,000 reached (1,050 spent)'
    """

    def __init__(self, limits: Limits, spent: Sequence[Mapping[str, Any]] = ()) -> None:
        self.limits = limits
        self._spent: dict[str, tuple[int, int]] = {}
        for row in spent:
            self._add(row["model"], int(row["prompt_tokens"]), int(row["completion_tokens"]))
        self._held: list[Reservation] = []
        self._changed = threading.Condition()

    def _add(self, model: str, prompt: int, completion: int) -> None:
        before = self._spent.get(model, (0, 0))
        self._spent[model] = (before[0] + prompt, before[1] + completion)

    def spend(self, *extra: Reservation) -> list[dict[str, Any]]:
        """The spend settled so far, per model (rows as ``llm_spend`` gives them), with ``extra`` added."""
        rows = [{"model": m, "prompt_tokens": p, "completion_tokens": c} for m, (p, c) in self._spent.items()]
        rows += [
            {"model": r.model, "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens}
            for r in extra
        ]
        return rows

    def reached(self) -> str | None:
        """Which spend budget the settled spend has reached, in words; None if neither."""
        with self._changed:
            return self.limits.spent(self.spend())

    def reserve(self, model: str, prompt_tokens: int, completion_tokens: int) -> Reservation:
        """Hold ``prompt_tokens + completion_tokens`` of ``model`` for a call about to be made.

        Blocks while calls in flight keep the reservation from fitting; raises
        BudgetExhaustedError once a budget is spent (the call must not be made).
        """
        held = Reservation(model, max(0, prompt_tokens), max(0, completion_tokens))
        if not self.limits.spends():
            return held
        if self.limits.max_cost is not None and model not in self.limits.prices:  # its cost is unknown
            raise BudgetExhaustedError(f"cost budget: no price for model(s) {model}")
        with self._changed:
            while True:
                if reason := self.limits.spent(self.spend()):
                    raise BudgetExhaustedError(reason)
                if not self._held or self.limits.within(self.spend(*self._held, held)):
                    self._held.append(held)
                    return held
                self._changed.wait()

    def settle(
        self, held: Reservation, prompt_tokens: int, completion_tokens: int, *, spent: bool = True
    ) -> None:
        """Replace a reservation by what the call spent (``spent=False``: nothing, e.g. a replayed call)."""
        if not self.limits.spends():
            return
        with self._changed:
            self._held = [r for r in self._held if r is not held]
            if spent:
                self._add(held.model, prompt_tokens, completion_tokens)
            self._changed.notify_all()


def spend_tokens(spend: Sequence[Mapping[str, Any]]) -> int:
    """The tokens, prompt and completion, of ``llm_spend`` rows."""
    return sum(int(r["prompt_tokens"]) + int(r["completion_tokens"]) for r in spend)


def _positive(name: str, value: object, *, integer: bool = False) -> Any:
    if value is None:
        return None
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not 0 < value < math.inf:
        kind = "an integer" if integer else "a finite number"
        raise InvalidInputError(f"{name} must be {kind} > 0 or None (no limit), not {value!r}")
    return value


def _price(value: object) -> bool:
    """Whether ``value`` is a price: a finite number >= 0."""
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < math.inf


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
            or not all(_price(p) for p in pair)
        ):
            raise InvalidInputError(
                f"prices[{model!r}] must be (input, output) prices per million tokens, "
                f"each a finite number >= 0, not {pair!r}"
            )
        table[model] = (float(pair[0]), float(pair[1]))
    return table
