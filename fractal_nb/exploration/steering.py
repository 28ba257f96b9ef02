"""Turns from the notebook: ask, deepen, widen, redecompose and note, and the turns and heads as tables.

The facade half of docs/architecture/store.md, "Turns and heads": each call checks its
arguments, takes the graph's run lock (refusing while it runs), makes the store's
request (one transaction: the turn opened or joined, the nodes written, what they
reopen) and returns a :class:`TurnStep`. ``Exploration.run()`` then does the turn's
work and ``harvest()`` ends it in a head.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..checks import optional_text, require_count, require_id, require_text
from ..engine import RunState, propose_seed_questions
from ..errors import StateError
from ..store import Store
from ..store.records import TurnRecord, TurnRequest
from ..store.turn_requests import MAX_LEVELS, MAX_WIDEN
from ..vocabulary import is_chain
from .running import holding

TURN_COLUMNS = ["turn", "kind", "asked", "started_event", "head_event", "status", "tokens", "cost"]
HEAD_COUNTS = [
    "open",
    "claimed",
    "gated",
    "answered",
    "synthesized",
    "saturated",
    "error",
    "notes",
    "superseded",
]
HEAD_COLUMNS = [
    "turn",
    "head_event",
    "kind",
    "status",
    "root_synthesis",
    *HEAD_COUNTS,
    "tokens",
    "cost",
    "asked",
]


@dataclass(frozen=True)
class TurnStep:
    """What one steering call did: its turn, and the nodes it created and reopened.

    Examples
    --------
    >>> TurnStep(2, "ask", ("n-1",), ())
    TurnStep(turn=2, kind='ask', created=('n-1',), reopened=())
    """

    turn: int
    kind: str
    created: tuple[str, ...]
    reopened: tuple[str, ...]

    @classmethod
    def of(cls, request: TurnRequest) -> TurnStep:
        """The step of a store's turn request."""
        return cls(request["turn"], request["kind"], tuple(request["created"]), tuple(request["reopened"]))


class Steering:
    """The steering calls of one graph; ``Exploration`` holds one and delegates to it."""

    def __init__(
        self,
        store: Store,
        graph_id: str,
        state: RunState,
        running: threading.Lock,
        reset: Callable[[], None],
    ) -> None:
        self._store = store
        self._graph_id = graph_id
        self._state = state
        self._running = running
        self._reset = reset

    def ask(self, question: str, under: str | None = None) -> TurnStep:
        """A follow-up question under the root's answer (or under a node); see ``Exploration.ask``."""
        require_text(question, "question")
        if under is not None:
            require_id(under, "under")
        with self._idle():
            return TurnStep.of(self._store.ask(self._graph_id, question, under))

    def attach(self, question: str, under: str | None = None) -> TurnStep:
        """The narrower question of a fork made to attach from a head; see ``Exploration.attach``."""
        require_text(question, "question")
        if under is not None:
            require_id(under, "under")
        with self._idle():
            return TurnStep.of(self._store.attach(self._graph_id, question, under))

    def deepen(self, node_id: str, levels: int = 1) -> TurnStep:
        """Let a branch go past the depth for this turn; see ``Exploration.deepen``."""
        require_id(node_id, "node_id")
        require_count(levels, "levels", minimum=1, maximum=MAX_LEVELS)
        with self._idle():
            return TurnStep.of(self._store.deepen(self._graph_id, node_id, levels))

    def widen(self, n: int) -> TurnStep:
        """``n`` new seed questions from the model; see ``Exploration.widen``."""
        require_count(n, "n", minimum=1, maximum=MAX_WIDEN)
        with self._idle():
            graph = self._store.get_graph(self._graph_id)
            if graph["status"] == "error":
                raise StateError(
                    f"graph {self._graph_id} is 'error' ({graph['status_reason']}): resume it "
                    "(run(resume=True)) before steering it",
                    graph_id=self._graph_id,
                )
            if is_chain(self._state.strategy):  # before the model is paid (the store refuses it too)
                raise StateError(
                    f"graph {self._graph_id} is a thinkon chain: it takes no turns; explore the follow-up "
                    "as a new exploration",
                    graph_id=self._graph_id,
                )
            if not self._root_answered():
                raise StateError(
                    f"graph {self._graph_id} has no seed plan yet: run() seeds it, then widen() adds to it",
                    graph_id=self._graph_id,
                )
            self._reset()
            questions = propose_seed_questions(self._state, n)
            if not questions:
                raise StateError(
                    f"the model proposed no seed question that graph {self._graph_id} does not ask already",
                    graph_id=self._graph_id,
                )
            return TurnStep.of(self._store.widen(self._graph_id, questions, n))

    def redecompose(self, node_id: str, hint: str | None = None) -> TurnStep:
        """A different decomposition of a question; see ``Exploration.redecompose``."""
        require_id(node_id, "node_id")
        optional_text(hint, "hint")
        with self._idle():
            return TurnStep.of(self._store.redecompose(self._graph_id, node_id, hint))

    def note(self, node_id: str, text: str) -> TurnStep:
        """A person's note under a question; see ``Exploration.note``."""
        require_id(node_id, "node_id")
        require_text(text, "text")
        with self._idle():
            return TurnStep.of(self._store.add_note(self._graph_id, node_id, text))

    def turns(self) -> pd.DataFrame:
        """One row per turn, the open one last; see ``Exploration.turns``."""
        rows = [
            {**_common(t), "started_event": t["started_event"]}
            for t in self._store.list_turns(self._graph_id)
        ]
        return pd.DataFrame(rows, columns=TURN_COLUMNS)

    def heads(self) -> pd.DataFrame:
        """One row per head; see ``Exploration.heads``."""
        rows = [
            {
                **_common(t),
                "root_synthesis": t["root_synthesis"],
                **{c: t["counts"].get(c, 0) for c in HEAD_COUNTS},
            }
            for t in self._store.list_heads(self._graph_id)
        ]
        return pd.DataFrame(rows, columns=HEAD_COLUMNS)

    def _root_answered(self) -> bool:
        root = self._store.get_graph(self._graph_id)["root_node_id"]
        return bool(self._store.get_node(self._graph_id, root)["node"]["status"] != "open")

    @contextmanager
    def _idle(self) -> Iterator[None]:
        """Hold the run lock for a steering call, refusing (not waiting) while the graph runs."""
        refusal = (
            f"graph {self._graph_id} is running in this process; steer it once run() returns "
            "(pause() stops it)"
        )
        with holding(self._running, refusal, self._graph_id):
            yield


def _common(turn: TurnRecord) -> dict[str, Any]:
    return {
        "turn": turn["turn"],
        "kind": turn["kind"],
        "asked": "; ".join(_asked(r) for r in turn["requests"]),
        "head_event": turn["head_event"],
        "status": turn["status"],
        "tokens": turn["tokens"],
        "cost": turn["cost"],
    }


def _asked(request: TurnRequest) -> str:
    return asked_text(request["kind"], request["arguments"])


def asked_text(kind: str, arguments: dict[str, Any]) -> str:
    """A steering request as one line: its kind and the arguments given.

    >>> asked_text("ask", {"question": "Why?", "under": None})
    "ask(question='Why?')"
    """
    shown = ", ".join(f"{k}={v!r}" for k, v in arguments.items() if v is not None and k != "repeated")
    return f"{kind}({shown})"
