"""fractal_nb: fractal thinking in Jupyter, on a DuckDB graph of questions and answers."""

from .errors import (
    BudgetError,
    FractalError,
    GraphNotActiveError,
    InvalidInputError,
    InvalidTransitionError,
    NotFoundError,
    StateError,
    StoreLockedError,
)
from .store import GraphStore

__all__ = [
    "BudgetError",
    "FractalError",
    "GraphNotActiveError",
    "GraphStore",
    "InvalidInputError",
    "InvalidTransitionError",
    "NotFoundError",
    "StateError",
    "StoreLockedError",
]
