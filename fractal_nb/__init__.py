"""fractal_nb: fractal thinking in Jupyter, on a DuckDB graph of questions and answers."""

from .errors import (
    BudgetError,
    FractalError,
    GraphNotActiveError,
    InvalidInputError,
    InvalidTransitionError,
    LLMError,
    LLMOutputError,
    LLMTimeoutError,
    LLMUnavailableError,
    NotFoundError,
    StateError,
    StoreLockedError,
    StoreUnreachableError,
)
from .exploration import Exploration
from .llm.cache import CachedLLM
from .llm.openai_llm import OpenAILLM
from .llm.protocol import LLM
from .llm.simulated import SimulatedLLM
from .results import FractalResult, StepRecord
from .store import GraphStore

__all__ = [
    "BudgetError",
    "CachedLLM",
    "Exploration",
    "FractalError",
    "FractalResult",
    "GraphNotActiveError",
    "GraphStore",
    "InvalidInputError",
    "InvalidTransitionError",
    "LLM",
    "LLMError",
    "LLMOutputError",
    "LLMTimeoutError",
    "LLMUnavailableError",
    "NotFoundError",
    "OpenAILLM",
    "SimulatedLLM",
    "StateError",
    "StepRecord",
    "StoreLockedError",
    "StoreUnreachableError",
]
