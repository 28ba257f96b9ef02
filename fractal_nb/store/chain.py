"""A thinkon chain's writes: a level's plan, its call of a sub-goal, its return into the parent's ``done``.

One level is one question node; its state ``{goal, parent, todo, done}`` is the
question's text, the level above, and ``metadata["thinkon"]`` (``phase``,
``todo``, ``done``) (docs/architecture/engine.md, "Thinkon"). The rules live here, so an
outside agent over MCP cannot break them either:

- ``todo`` is written only by :meth:`ThinkonWrites.thinkon_plan`, Think's one
  write, and only in the ``think`` phase: Eval's writes take no plan.
- A return lands in the parent's ``done`` in the transaction that returns the
  child (the strong invariant): the parent's next Eval always sees it, and a
  killed run resumes with it.
- One chain: at most one level is open or claimed at a time (the one whose step
  is next); the levels above it wait ``answered``.
- ``spent_s``: each write adds the seconds the step that made it ran (the run's clock)
  to the level's state, and a return adds the level's whole ``spent_s`` to its parent's,
  so a level's ``spent_s`` is its steps' and its returned sub-goals' running time: what
  the engine's per-Solve limit reads (engine/strategies/thinkon_time.py).

The plan is the level's answer node and a sub-goal hangs under it, so every face
that draws questions and answers draws a chain too.
"""

from __future__ import annotations

import json
from typing import Any

from ..checks import require_id, require_seconds, require_text
from ..errors import StateError
from ..vocabulary import (
    NodeStatus,
    NodeType,
    SaturationReason,
    ThinkonOutcome,
    ThinkonPhase,
    parse_choice,
)
from .base import StoreCore
from .children import Children
from .claim import NO_LEASE
from .records import DoneEntry, ThinkonLevel
from .rows import GraphRow, NodeRow

KEY = "thinkon"
"""The metadata key of a level's state."""
_NO_HOLDER = {"owner": None, **NO_LEASE}


def require_chain(graph: GraphRow) -> GraphRow:
    """``graph``, or StateError: the chain's writes and reads are for thinkon graphs only."""
    if not graph.chained:
        raise StateError(
            f"graph {graph.graph_id} is no thinkon chain: its questions are not levels",
            graph_id=graph.graph_id,
        )
    return graph


def level_state(meta: dict[str, Any]) -> dict[str, Any]:
    """A level's ``{phase, todo, done, spent_s}`` from its metadata (a new level's when it has none)."""
    state = meta.get(KEY)
    state = state if isinstance(state, dict) else {}
    done = state.get("done")
    spent = state.get("spent_s")
    return {
        "phase": str(state.get("phase") or ThinkonPhase.THINK),
        "todo": state.get("todo") if isinstance(state.get("todo"), str) else None,
        "done": [d for d in done if isinstance(d, dict)] if isinstance(done, list) else [],
        "spent_s": float(spent) if isinstance(spent, int | float) and not isinstance(spent, bool) else 0.0,
    }


class ThinkonWrites:
    """The writes of a thinkon chain, each one transaction (module docstring)."""

    def __init__(self, core: StoreCore, children: Children) -> None:
        self._core = core
        self._db = core.db
        self._children = children

    def thinkon_level(self, graph_id: str, node_id: str) -> ThinkonLevel:
        """A level's state: goal, the level above, phase, plan and done."""
        graph = require_chain(self._core.graph(graph_id))
        with self._db.read():
            return self._level(graph.graph_id, self._core.node(graph.graph_id, node_id))

    def thinkon_chain(self, graph_id: str) -> list[ThinkonLevel]:
        """The levels that have not returned, root first: the chain as it stands (the last acts next)."""
        graph = require_chain(self._core.graph(graph_id))
        with self._db.read():
            nodes = self._core.nodes(
                "graph_id = ? AND node_type = 'question' AND status NOT IN ('synthesized', 'saturated')",
                [graph.graph_id],
            )
            return [self._level(graph.graph_id, n) for n in sorted(nodes, key=lambda n: n.depth)]

    def thinkon_plan(
        self, graph_id: str, node_id: str, todo: str, *, worker_id: str, spent_s: float = 0.0
    ) -> ThinkonLevel:
        """Think's plan: written to the level's ``todo`` (and as its answer); the level's Eval is next."""
        todo = require_text(todo, "todo")
        spent_s = require_seconds(spent_s, "spent_s")
        with self._db.write():
            graph, level = self._acting(graph_id, node_id, worker_id, ThinkonPhase.THINK)
            now = self._core.clock()
            self._children.add(graph, level, NodeType.ANSWER, [(todo, {KEY: "plan"})], worker_id)
            state = level_state(level.metadata)
            state |= {"phase": ThinkonPhase.EVAL.value, "todo": todo, "spent_s": state["spent_s"] + spent_s}
            self._open(
                self._core.node(graph.graph_id, level.node_id),
                state,
                worker_id,
                now,
                "thinkon_planned",
                {"todo": todo},
            )
            return self._level(graph.graph_id, self._core.node(graph.graph_id, level.node_id))

    def thinkon_call(
        self, graph_id: str, node_id: str, goal: str, *, worker_id: str, spent_s: float = 0.0
    ) -> ThinkonLevel:
        """Eval's call: a sub-goal, a new level under this one's plan; this level waits for its return.

        Returns the new level. A sub-goal past the depth budget is refused (BudgetError):
        the engine returns the level's state instead (docs/architecture/engine.md, "Thinkon").
        """
        goal = require_text(goal, "goal")
        spent_s = require_seconds(spent_s, "spent_s")
        with self._db.write():
            graph, level = self._acting(graph_id, node_id, worker_id, ThinkonPhase.EVAL)
            plan = self._plan_of(level)
            fresh: dict[str, Any] = {KEY: {"phase": ThinkonPhase.THINK.value, "todo": None, "done": []}}
            (child,) = self._children.add(
                graph, plan, NodeType.QUESTION, [(goal, fresh)], worker_id, question=level
            )
            if spent_s:  # the Eval's time is the level's own
                state = level_state(level.metadata)
                state["spent_s"] += spent_s
                self._db.execute(
                    "UPDATE nodes SET metadata = ? WHERE node_id = ?",
                    [json.dumps({**level.metadata, KEY: state}), level.node_id],
                )
            self._core.log(
                graph.graph_id,
                level.node_id,
                "thinkon_called",
                worker_id,
                {"child": child.node_id, "goal": goal},
                self._core.clock(),
            )
            return self._level(graph.graph_id, child)

    def thinkon_return(
        self,
        graph_id: str,
        node_id: str,
        result: str,
        *,
        worker_id: str,
        outcome: ThinkonOutcome | str = ThinkonOutcome.RETURNED,
        reason: str | None = None,
        spent_s: float = 0.0,
    ) -> ThinkonLevel | None:
        """A level's return: its result (its synthesis), appended to the parent's ``done`` at once.

        ``outcome``: ``returned`` (Think or Eval returned it), ``failed`` (no valid reply:
        the level is saturated as ``error`` with ``reason``), ``cut`` (a limit returned the
        level's state: saturated ``budget_exhausted``, ``reason`` the limit). A ``cut`` may
        return a level nobody holds (open or gated) or another worker's (the chain unwinding).
        The parent must wait for this level: answered, its return not in ``done`` yet.
        Returns the parent's level, open for its next Eval, or None for the root.
        ``spent_s``: the step's time; the level's whole ``spent_s`` is added to its parent's.
        """
        result = require_text(result, "result")
        spent_s = require_seconds(spent_s, "spent_s")
        how = parse_choice(ThinkonOutcome, outcome, "outcome")
        if how != ThinkonOutcome.RETURNED:
            reason = require_text(reason, "reason")
        with self._db.write():
            graph, level = self._acting(graph_id, node_id, worker_id, None, unheld=how == ThinkonOutcome.CUT)
            now = self._core.clock()
            state = level_state(level.metadata)
            state["spent_s"] += spent_s
            if state["todo"] is None and how == ThinkonOutcome.RETURNED:  # Think returned at once: its answer
                self._children.add(graph, level, NodeType.ANSWER, [(result, {KEY: "result"})], worker_id)
                level = self._core.node(graph.graph_id, level.node_id)
            meta = _returned(level.metadata, state, result, how, reason)
            self._core.set_status(
                level,
                NodeStatus.SYNTHESIZED if how == ThinkonOutcome.RETURNED else NodeStatus.SATURATED,
                now,
                actor=worker_id,
                kind="thinkon_returned",
                reason={
                    ThinkonOutcome.RETURNED: None,
                    ThinkonOutcome.FAILED: SaturationReason.ERROR,
                    ThinkonOutcome.CUT: SaturationReason.BUDGET_EXHAUSTED,
                }[how],
                # synthesized only from answered; saturated straight from where it is
                through=NodeStatus.ANSWERED
                if how == ThinkonOutcome.RETURNED and level.status != NodeStatus.ANSWERED
                else None,
                metadata=meta,
                columns=_NO_HOLDER,
                payload={"outcome": how.value},
            )
            if level.question_id is None:  # the root: the chain's result
                return None
            return self._append_done(graph, level, result, how, worker_id, now, state["spent_s"])

    # -- internals ----------------------------------------------------------------

    def _append_done(
        self,
        graph: GraphRow,
        level: NodeRow,
        result: str,
        how: ThinkonOutcome,
        worker_id: str,
        now: float,
        spent_s: float,
    ) -> ThinkonLevel:
        """A level's return appended to its parent's ``done`` (its time to the parent's); the parent, open."""
        assert level.question_id is not None, "the root has no parent to return to"
        above = self._core.node(graph.graph_id, level.question_id)
        parent_state = level_state(above.metadata)
        if above.status != NodeStatus.ANSWERED or any(
            d.get("node_id") == level.node_id for d in parent_state["done"]
        ):  # a parent waits answered for its one sub-goal in flight, and takes its return once
            raise StateError(
                f"level {above.node_id} is {above.status!r} and does not wait for {level.node_id}; "
                "nothing was written",
                graph_id=graph.graph_id,
                node_id=level.node_id,
            )
        entry: DoneEntry = {
            "node_id": level.node_id,
            "goal": level.text,
            "result": result,
            "outcome": how.value,
        }
        parent_state["done"] = [*parent_state["done"], entry]
        parent_state["spent_s"] += spent_s
        payload = {"child": level.node_id, "index": len(parent_state["done"]) - 1, "outcome": how.value}
        self._open(above, parent_state, worker_id, now, "done_appended", payload)
        return self._level(graph.graph_id, self._core.node(graph.graph_id, above.node_id))

    def _open(
        self,
        level: NodeRow,
        state: dict[str, Any],
        actor: str,
        now: float,
        kind: str,
        payload: dict[str, Any],
    ) -> None:
        """An answered level opens for its next step (``CHAIN_TRANSITIONS``), with ``state``, unheld."""
        self._core.set_status(
            level,
            NodeStatus.OPEN,
            now,
            actor=actor,
            kind=kind,
            metadata={**level.metadata, KEY: state},
            columns=_NO_HOLDER,
            payload=payload,
            chain=True,
        )

    def _acting(
        self, graph_id: str, node_id: str, worker_id: str, phase: ThinkonPhase | None, *, unheld: bool = False
    ) -> tuple[GraphRow, NodeRow]:
        """The active graph and the level ``worker_id`` holds (``unheld``: or an open one nobody holds)."""
        worker = require_id(worker_id, "worker_id")
        graph, level = self._core.active_node(graph_id, node_id)
        require_chain(graph)
        if level.node_type != NodeType.QUESTION:
            raise StateError(f"node {level.node_id} is an answer, not a level", node_id=level.node_id)
        held = level.status == NodeStatus.CLAIMED and level.owner == worker
        # A cut may return a level nobody holds, or a worker's (the harvest finishing the graph: that
        # worker's own write is refused then).
        movable = (NodeStatus.OPEN, NodeStatus.GATED, NodeStatus.CLAIMED)
        if not (held or (unheld and level.status in movable)):
            raise StateError(
                f"level {level.node_id} is {level.status!r}"
                + (f" (held by {level.owner!r})" if level.owner else "")
                + f"; {worker!r} must claim it first (claim_work)",
                graph_id=graph.graph_id,
                node_id=level.node_id,
            )
        now_phase = level_state(level.metadata)["phase"]
        if now_phase == ThinkonPhase.RETURNED:
            raise StateError(
                f"level {level.node_id} has returned already", graph_id=graph.graph_id, node_id=level.node_id
            )
        if phase is not None and now_phase != phase:
            raise StateError(
                f"level {level.node_id} waits for its {now_phase}, not its {phase.value}: "
                + (
                    "a plan is written only by Think, a level's first step"
                    if phase == ThinkonPhase.THINK
                    else "a level calls sub-goals only once Think wrote its plan"
                ),
                graph_id=graph.graph_id,
                node_id=level.node_id,
            )
        return graph, level

    def _plan_of(self, level: NodeRow) -> NodeRow:
        """The level's plan (its answer node), under which its sub-goals hang."""
        plans = self._core.nodes(
            "graph_id = ? AND parent_id = ? AND node_type = 'answer'", [level.graph_id, level.node_id]
        )
        if not plans:
            raise StateError(f"level {level.node_id} has no plan", node_id=level.node_id)
        return plans[-1]

    def _level(self, graph_id: str, node: NodeRow) -> ThinkonLevel:
        state = level_state(node.metadata)
        above = self._core.node(graph_id, node.question_id) if node.question_id else None
        return {
            "node_id": node.node_id,
            "graph_id": graph_id,
            "goal": node.text,
            "parent_id": above.node_id if above else None,
            "parent_goal": above.text if above else None,
            "depth": node.depth,
            "status": node.status,
            "phase": state["phase"],
            "todo": state["todo"],
            "spent_s": state["spent_s"],
            "done": [
                {
                    "node_id": str(d.get("node_id")),
                    "goal": str(d.get("goal", "")),
                    "result": str(d.get("result", "")),
                    "outcome": str(d.get("outcome", ThinkonOutcome.RETURNED)),
                }
                for d in state["done"]
            ],
        }


def _returned(
    metadata: dict[str, Any], state: dict[str, Any], result: str, how: ThinkonOutcome, reason: str | None
) -> dict[str, Any]:
    """A returning level's metadata: its result as its synthesis, its state returned, why it stopped short."""
    meta: dict[str, Any] = {**metadata, "synthesis": result, KEY: {**state, "phase": "returned"}}
    meta[KEY]["outcome"] = how.value
    if how == ThinkonOutcome.FAILED:
        meta["last_error"] = reason
    elif how == ThinkonOutcome.CUT:
        meta |= {"budget_exhausted": True, "budget_reason": reason}
    return meta
