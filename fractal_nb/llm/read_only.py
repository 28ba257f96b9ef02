"""``ReadOnlyLLM``: the model of a file opened ``read_only=True`` without one.

Reading a file needs no model (issue 38: ``Exploration.open(path, read_only=True)``
asked for ``llm=`` all the same). A read-only exploration refuses every write before
its model is asked (exploration/running.py, ``check_writable``), so this one is never called; if
it is, it refuses with a :class:`~fractal_nb.StateError` naming what to pass instead.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ..errors import StateError
from .protocol import Message


class ReadOnlyLLM:
    """No model: every call is refused, naming ``llm=`` (what a run would need).

    >>> ReadOnlyLLM().complete([], BaseModel)
    Traceback (most recent call last):
    ...
    fractal_nb.errors.StateError: this exploration was opened read_only=True without a model: ...
    """

    model = "none (read_only)"

    def __repr__(self) -> str:
        return "ReadOnlyLLM()"

    def complete(self, messages: list[Message], schema: type[BaseModel]) -> dict[str, Any]:
        """Refuse: a read-only exploration reads its file and asks no model."""
        raise StateError(
            "this exploration was opened read_only=True without a model: it reads its file and calls "
            "none; to run it, Exploration.open(path, llm=...) without read_only"
        )
