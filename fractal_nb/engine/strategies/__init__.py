"""The ways of thinking, one module each, and the registry from a graph's ``strategy`` to its part.

A fifth strategy is one module with a part (engine/strategies/part.py) and one
:func:`register` call (docs/architecture/engine.md, "Strategies").
"""

from __future__ import annotations

from ...errors import InvalidInputError
from . import fractal, single, thinkon, tracks
from .part import StrategyPart

_PARTS: dict[str, StrategyPart] = {}


def register(part: StrategyPart) -> StrategyPart:
    """Make ``part`` the way graphs whose metadata names ``part.name`` think; returns it.

    Registering a name again replaces its part (a notebook re-running its cell).
    """
    name = part.name
    if not isinstance(name, str) or not name.isidentifier():
        raise InvalidInputError(f"a strategy's name is a plain identifier, not {name!r}")
    _PARTS[name] = part
    return part


def strategy_part(name: object) -> StrategyPart:
    """The part registered under ``name``, or InvalidInputError naming those there are."""
    part = _PARTS.get(name) if isinstance(name, str) else None
    if part is None:
        raise InvalidInputError(f"invalid strategy {name!r}; valid values: {', '.join(sorted(_PARTS))}")
    return part


def strategy_names() -> tuple[str, ...]:
    """The registered strategies' names, the built-in ones first."""
    return tuple(_PARTS)


for _part in (fractal.PART, tracks.PART, thinkon.PART, single.PART):
    register(_part)

__all__ = ["StrategyPart", "register", "strategy_names", "strategy_part"]
