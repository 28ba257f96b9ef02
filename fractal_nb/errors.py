"""Errors raised by fractal_nb; every message says what was wrong and what is allowed.

::

    FractalError
    ├── InvalidInputError        bad argument; metadata not a JSON object
    ├── BudgetError              a question deeper than the intensity's max_depth
    ├── NotFoundError            unknown graph or node id
    ├── StateError               the store, graph or node does not allow this now
    │   ├── InvalidTransitionError   status change not in the transition table
    │   ├── GraphNotActiveError      a write to a graph that is not active
    │   └── StoreUnreachableError    the MCP server behind a RemoteStore cannot be reached
    ├── StoreLockedError         the DuckDB file is held by another process
    └── LLMError                 a model call failed (recorded; the node stays recoverable)
        ├── LLMTimeoutError          the call timed out
        ├── LLMUnavailableError      the model cannot be reached or refuses every request
        └── LLMOutputError           no schema-valid output after repair and retries

A call that raises changes nothing in the store.
"""

from __future__ import annotations


class FractalError(Exception):
    """Base of every error fractal_nb raises on purpose."""

    def __init__(self, message: str, *, graph_id: str | None = None, node_id: str | None = None) -> None:
        super().__init__(message)
        self.graph_id = graph_id
        self.node_id = node_id


class InvalidInputError(FractalError, ValueError):
    """An argument is malformed or not one of the allowed values."""


class BudgetError(FractalError):
    """A question would exceed the graph's depth budget."""


class NotFoundError(FractalError, KeyError):
    """An id names no graph or node in this store."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class StateError(FractalError):
    """The store, graph or node is not in a state that allows the call."""


class InvalidTransitionError(StateError):
    """A status change that the transition table does not allow."""


class GraphNotActiveError(StateError):
    """A write to a graph whose status is not ``active``."""


class StoreUnreachableError(StateError):
    """The MCP server behind a :class:`~fractal_nb.mcp.remote.RemoteStore` cannot be reached."""


class StoreLockedError(FractalError):
    """The DuckDB file is open for writing in another process."""

    def __init__(self, message: str, *, path: str, holder_pid: int | None) -> None:
        super().__init__(message)
        self.path = path
        self.holder_pid = holder_pid


class LLMError(FractalError):
    """A model call failed; the engine records it and leaves the node recoverable."""


class LLMTimeoutError(LLMError):
    """A model call timed out."""


class NodeTimeLimitError(LLMTimeoutError):
    """A node's model call outlived the run's per-node time limit (``run(node_timeout_s=...)``)."""


class BudgetExhaustedError(LLMError):
    """A model call refused before it was made: the graph's token or cost budget is spent.

    No request is sent and nothing is logged; the node stays recoverable (docs/notebook.md, "Budgets").
    """


class LLMUnavailableError(LLMError):
    """The model cannot be reached or refuses every request (connection, key, model name, server down).

    Not the node's fault: a run that meets it keeps going only while calls still
    succeed, and pauses the graph when the model looks down (docs/shell.md, "Exit codes").
    """


class LLMOutputError(LLMError):
    """The model's output could not be parsed into the schema, even after repair and retries."""
