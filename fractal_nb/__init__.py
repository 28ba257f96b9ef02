"""fractal_nb: fractal thinking in Jupyter, on a DuckDB graph of questions and answers.

The errors load with the package; the rest (the facade, the models, the store)
loads on first use, so the shell's ``--help`` answers without loading pandas,
openai or DuckDB (docs/architecture.md, "Layers").
"""

import importlib
import typing

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

if typing.TYPE_CHECKING:
    from .exploration.comparison import Comparison, compare
    from .exploration.exploration import Exploration
    from .exploration.source_inputs import Snippet, Table
    from .llm.cache import CachedLLM
    from .llm.openai_llm import OpenAILLM
    from .llm.protocol import LLM
    from .llm.scripted import ScriptedLLM
    from .llm.simulated import SimulatedLLM
    from .results.result import FractalResult, StepRecord
    from .store import GraphStore

_LOADED_ON_USE = {
    "CachedLLM": ".llm.cache",
    "Comparison": ".exploration.comparison",
    "compare": ".exploration.comparison",
    "Exploration": ".exploration.exploration",
    "FractalResult": ".results.result",
    "GraphStore": ".store",
    "LLM": ".llm.protocol",
    "OpenAILLM": ".llm.openai_llm",
    "ScriptedLLM": ".llm.scripted",
    "SimulatedLLM": ".llm.simulated",
    "Snippet": ".exploration.source_inputs",
    "StepRecord": ".results.result",
    "Table": ".exploration.source_inputs",
}


def __getattr__(name: str) -> object:
    """Load a public name's module when the name is first used (``from fractal_nb import Exploration``)."""
    module = _LOADED_ON_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LOADED_ON_USE})


__all__ = [
    "BudgetError",
    "CachedLLM",
    "Comparison",
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
    "ScriptedLLM",
    "SimulatedLLM",
    "Snippet",
    "StateError",
    "StepRecord",
    "StoreLockedError",
    "StoreUnreachableError",
    "Table",
    "compare",
]
