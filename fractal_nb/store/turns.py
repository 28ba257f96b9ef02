"""Turns and heads: later stretches of work on a graph, each re-opening only what it needs.

A plain class composed by :class:`~fractal_nb.store.GraphStore` (docs/architecture.md, "Turns
and heads"): the store's core (rows, events, status moves), the children step that
inserts its questions and the graph lifecycle that reopens a completed graph are passed
in. Every query is scoped by ``graph_id``. A steering request (ask, deepen, widen,
redecompose, note) joins the open turn or opens the next one — a completed graph goes
back to ``active`` here and nowhere else — and writes its nodes and reopenings in one
transaction with it: a refused request changes nothing. ``end_turn`` (at harvest) makes
the head.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..checks import optional_text, require_count, require_id, require_text, shown
from ..errors import InvalidInputError, StateError
from ..text import normalize
from ..vocabulary import (
    DONE_QUESTION,
    GraphStatus,
    NodeStatus,
    NodeType,
    SaturationReason,
    TurnKind,
)
from .base import StoreCore, new_id
from .records import TurnRecord, TurnRequest
from .rows import GraphRow, NodeRow

if TYPE_CHECKING:
    from .children import Children
    from .graphs import GraphLifecycle

MAX_LEVELS = 4  # deepen(levels): at most this many levels past the intensity's depth
MAX_WIDEN = 12  # widen(n): at most this many new seed questions in one request
# A question whose saturation is a person's or a turn's: no turn reopens it (prune is the person's "no").
_CLOSED = (SaturationReason.PRUNED, SaturationReason.SUPERSEDED)


class Turns:
    """The turns of the graphs in one store; ``GraphStore`` delegates its turn calls here.

    Examples
    --------
    >>> from fractal_nb.store import GraphStore
    >>> store = GraphStore()
    >>> g = store.create_graph("Why do cities grow?", "pulse")
    >>> [(t["turn"], t["kind"], t["head_event"]) for t in store.list_turns(g["graph_id"])]
    [(1, 'seed', None)]
    """

    def __init__(self, core: StoreCore, children: Children, graphs: GraphLifecycle) -> None:
        self._core = core
        self._db = core.db
        self._children = children
        self._graphs = graphs

    # -- opening and ending -------------------------------------------------------------

    def open_seed(self, graph_id: str) -> None:
        """Turn 1 (the seed) of a graph just created, in its transaction."""
        self._insert(graph_id, 1, TurnKind.SEED, self._first_event(graph_id))

    def open_turn(self, graph: GraphRow, kind: TurnKind) -> int:
        """The open turn's number, or a new turn's: a completed graph goes back to ``active``.

        Call inside the write transaction of the request that joins it.
        """
        row = self._db.fetchone(
            "SELECT turn FROM turns WHERE graph_id = ? AND head_event IS NULL", [graph.graph_id]
        )
        if row is not None:
            return int(row[0])
        last = self._db.fetchone("SELECT max(turn) FROM turns WHERE graph_id = ?", [graph.graph_id])
        if last is None or last[0] is None:  # a graph from a file older than turns: its seed turn first
            self._insert(graph.graph_id, 1, TurnKind.SEED, self._first_event(graph.graph_id))
            if graph.status != GraphStatus.COMPLETED:
                return 1  # still being worked on: the request joins the seed turn
            self._write_head(graph, 1, cost=None)  # completed: that was the seed's head
            last = (1,)
        turn = int(last[0]) + 1
        if graph.status == GraphStatus.COMPLETED:  # a head, not a tomb: the only way back to active
            self._graphs.change_status(
                graph.graph_id, graph.status, GraphStatus.ACTIVE, f"turn {turn}: {kind.value}"
            )
        now = self._core.clock()
        self._core.log(graph.graph_id, None, "turn_started", None, {"turn": turn, "kind": kind.value}, now)
        self._insert(graph.graph_id, turn, kind, self._last_event(graph.graph_id))
        return turn

    def end_turn(self, graph_id: str, *, cost: float | None = None) -> TurnRecord | None:
        """End the open turn in a head (at harvest, after the graph is completed); None if none is open.

        A graph from a file older than turns gets its seed turn here, ended at once.
        """
        gid = require_id(graph_id, "graph_id")
        with self._db.write():
            graph = self._core.graph(gid)
            row = self._db.fetchone("SELECT turn FROM turns WHERE graph_id = ? AND head_event IS NULL", [gid])
            if row is None:
                if self._db.fetchone("SELECT 1 FROM turns WHERE graph_id = ?", [gid]) is not None:
                    return None
                self._insert(gid, 1, TurnKind.SEED, self._first_event(gid))
                turn = 1
            else:
                turn = int(row[0])
            self._write_head(graph, turn, cost=cost)
        return next(t for t in self.list_turns(gid) if t["turn"] == turn)

    def _write_head(self, graph: GraphRow, turn: int, *, cost: float | None) -> None:
        """End ``turn`` in a head: a ``head`` event, then the graph as it is now (caller's transaction)."""
        gid = graph.graph_id
        now = self._core.clock()
        self._core.log(gid, None, "head", None, {"turn": turn, "status": graph.status}, now)
        nodes = self._core.nodes("graph_id = ?", [gid])
        root = next(n for n in nodes if n.node_id == graph.root_node_id)
        tokens = self._db.fetchone(
            "SELECT coalesce(sum(prompt_tokens + completion_tokens), 0) FROM llm_calls "
            "WHERE graph_id = ? AND outcome <> 'cached'",
            [gid],
        )
        self._db.execute(
            "UPDATE turns SET head_event = ?, status = ?, root_synthesis = ?, counts = ?, tokens = ?, "
            "cost = ?, ended_at = ? WHERE graph_id = ? AND turn = ?",
            [
                self._last_event(gid),
                graph.status,
                root.metadata.get("synthesis"),
                json.dumps(head_counts(nodes)),
                int(tokens[0]) if tokens else 0,
                cost,
                now,
                gid,
                turn,
            ],
        )

    def list_turns(self, graph_id: str) -> list[TurnRecord]:
        """The graph's turns in order, the open one (``head_event`` None) last."""
        gid = self._core.known_graph(graph_id).graph_id
        rows = self._db.fetchall(
            "SELECT turn, kind, requests, started_event, head_event, status, root_synthesis, counts, "
            "tokens, cost, created_at, ended_at FROM turns WHERE graph_id = ? ORDER BY turn",
            [gid],
        )
        return [
            {
                "graph_id": gid,
                "turn": turn,
                "kind": kind,
                "requests": json.loads(requests),
                "started_event": started,
                "head_event": head,
                "status": status,
                "root_synthesis": synthesis,
                "counts": json.loads(counts) if counts else {},
                "tokens": tokens,
                "cost": cost,
                "created_at": created,
                "ended_at": ended,
            }
            for (
                turn,
                kind,
                requests,
                started,
                head,
                status,
                synthesis,
                counts,
                tokens,
                cost,
                created,
                ended,
            ) in rows
        ]

    # -- steering requests ----------------------------------------------------------------

    def ask(
        self, graph_id: str, question: str, under: str | None = None, *, kind: TurnKind = TurnKind.ASK
    ) -> TurnRequest:
        """A follow-up question under the root's answer, or under a question's current answer or an answer.

        Asked once per graph (rule 10): a repeat of a current question is refused. ``kind``
        ``attach``: the narrower question a fork was made for (``Exploration.attach``).
        """
        if kind not in (TurnKind.ASK, TurnKind.ATTACH):
            raise InvalidInputError(f"kind must be 'ask' or 'attach', not {shown(kind)}")
        text = require_text(question, "question")
        with self._db.write():
            graph = self._steerable(graph_id)
            target = self._core.node(
                graph.graph_id, under if under is not None else graph.root_node_id, "under"
            )
            self._require_current(target)
            if target.node_type == NodeType.NOTE:
                raise InvalidInputError(
                    f"node {target.node_id} is a note; ask under a question or an answer",
                    graph_id=graph.graph_id,
                    node_id=target.node_id,
                )
            answer = target if target.node_type == NodeType.ANSWER else self._current_answer(target)
            asked = self._children.asked(graph.graph_id, [normalize(text)])
            if asked:
                raise StateError(
                    f"question {text!r} is asked already in graph {graph.graph_id} (node "
                    f"{next(iter(asked.values()))}); a question is asked once per graph (rule 10)",
                    graph_id=graph.graph_id,
                )
            turn = self.open_turn(graph, kind)
            owner = self._core.node(graph.graph_id, answer.question_id or "", "under")
            self._revive(owner, turn)
            added = self._children.add(
                self._core.graph(graph.graph_id), answer, NodeType.QUESTION, [(text, {"turn": turn})], None
            )
            created = [n.node_id for n in added]
            return self._record(graph.graph_id, turn, kind, {"question": text, "under": under}, created, [])

    def widen(self, graph_id: str, questions: Sequence[str], n: int | None = None) -> TurnRequest:
        """New seed questions under the root's answer (the root reopens); repeats of current ones left out.

        ``n``: how many the person asked for (recorded with the request; default: as many as given).
        """
        if not isinstance(questions, list | tuple) or not questions:
            raise InvalidInputError(
                f"questions must be a non-empty list of question texts, not {shown(questions)}"
            )
        if len(questions) > MAX_WIDEN:
            raise InvalidInputError(
                f"questions holds {len(questions):,} questions; a widening adds at most {MAX_WIDEN} "
                "(docs/store.md, Limits)"
            )
        texts = [require_text(q, f"questions[{i}]") for i, q in enumerate(questions)]
        with self._db.write():
            graph = self._steerable(graph_id)
            root = self._core.node(graph.graph_id, graph.root_node_id)
            answer = self._current_answer(root)
            asked = self._children.asked(graph.graph_id, [normalize(t) for t in texts])
            fresh: dict[str, str] = {}
            for text in texts:
                if normalize(text) not in asked:
                    fresh.setdefault(normalize(text), text)
            if not fresh:
                raise StateError(
                    f"each proposed seed question is in graph {graph.graph_id} already: nothing to widen",
                    graph_id=graph.graph_id,
                )
            turn = self.open_turn(graph, TurnKind.WIDEN)
            added = self._children.add(
                self._core.graph(graph.graph_id),
                answer,
                NodeType.QUESTION,
                [(t, {"turn": turn, "widened": True}) for t in fresh.values()],
                None,
            )
            created = [n.node_id for n in added]
            repeated = [t for t in texts if normalize(t) in asked]
            return self._record(
                graph.graph_id,
                turn,
                TurnKind.WIDEN,
                {"n": n if n is not None else len(texts), "repeated": repeated},
                created,
                [],
            )

    def deepen(self, graph_id: str, node_id: str, levels: int = 1) -> TurnRequest:
        """Let the branch under a question go ``levels`` past the depth for this turn; its bottom reopens.

        The leaf questions of the branch at the old bottom (synthesized, their
        answers cut by depth) go back to open, their old answers superseded.
        """
        levels = require_count(levels, "levels", minimum=1, maximum=MAX_LEVELS)
        with self._db.write():
            graph = self._steerable(graph_id)
            question = self._question(graph, node_id)
            ceiling = self._core.depth_ceiling(graph, question, self._base(graph))
            below = [question, *self._current_below(question)]
            parents = {n.question_id for n in below if n.node_type == NodeType.QUESTION}
            bottom = [
                q
                for q in below
                if q.node_type == NodeType.QUESTION
                and q.depth == ceiling - 1
                and q.status == NodeStatus.SYNTHESIZED
                and q.node_id not in parents
            ]
            turn = self.open_turn(graph, TurnKind.DEEPEN)
            self._db.execute(
                "INSERT INTO depth_allowances (graph_id, node_id, turn, levels) VALUES (?, ?, ?, ?)",
                [graph.graph_id, question.node_id, turn, ceiling - self._base(graph) + levels],
            )
            for leaf in bottom:
                self._redo(leaf, turn, {})
            reopened = [q.node_id for q in bottom]
            request = self._record(
                graph.graph_id,
                turn,
                TurnKind.DEEPEN,
                {"node_id": question.node_id, "levels": levels},
                [],
                reopened,
            )
            self._db.execute(  # the request's event: a fork made before it has no such allowance
                "UPDATE depth_allowances SET made_at = (SELECT max(event_id) FROM events WHERE "
                "graph_id = ? AND kind = 'turn_request') "
                "WHERE graph_id = ? AND node_id = ? AND turn = ? AND made_at IS NULL",
                [graph.graph_id, graph.graph_id, question.node_id, turn],
            )
            return request

    def redecompose(self, graph_id: str, node_id: str, hint: str | None = None) -> TurnRequest:
        """Answer a question again with a new decomposition; its old answer and sub-tree are superseded."""
        hint = optional_text(hint, "hint")
        with self._db.write():
            graph = self._steerable(graph_id)
            question = self._question(graph, node_id)
            if question.node_id == graph.root_node_id:
                raise InvalidInputError(
                    f"node {question.node_id} is the root: its decomposition is the seed plan; widen() adds "
                    "seed questions, and a seed question can be redecomposed",
                    graph_id=graph.graph_id,
                    node_id=question.node_id,
                )
            if question.status in (NodeStatus.OPEN, NodeStatus.CLAIMED, NodeStatus.GATED):
                raise StateError(
                    f"question {question.node_id} is {question.status!r}: no decomposition to replace yet",
                    graph_id=graph.graph_id,
                    node_id=question.node_id,
                )
            turn = self.open_turn(graph, TurnKind.REDECOMPOSE)
            avoid = [
                n.text
                for n in self._current_below(question)
                if n.node_type == NodeType.QUESTION and n.question_id == question.node_id
            ]
            self._redo(question, turn, {"redecompose": {"hint": hint, "avoid": avoid}})
            return self._record(
                graph.graph_id,
                turn,
                TurnKind.REDECOMPOSE,
                {"node_id": question.node_id, "hint": hint},
                [],
                [question.node_id],
            )

    def add_note(self, graph_id: str, node_id: str, text: str) -> TurnRequest:
        """A person's evidence or correction under a question; the syntheses above it reopen."""
        text = require_text(text, "text")
        with self._db.write():
            graph = self._steerable(graph_id)
            question = self._question(graph, node_id)
            self._children.check_room(question, 1)  # a note is one of the question's children (issue 37)
            turn = self.open_turn(graph, TurnKind.NOTE)
            now = self._core.clock()
            note_id = new_id("n")
            self._db.execute(
                "INSERT INTO nodes (node_id, graph_id, seq, parent_id, question_id, branch_id, path, "
                "node_type, text, depth, status, metadata, created_at, updated_at) "
                "VALUES (?, ?, nextval('node_seq'), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    note_id,
                    graph.graph_id,
                    question.node_id,
                    question.node_id,
                    question.node_id if question.depth == 1 else question.branch_id,
                    "/".join([*question.ancestors, question.node_id]),
                    NodeType.NOTE.value,
                    text,
                    question.depth,
                    NodeStatus.ANSWERED.value,
                    json.dumps({"turn": turn}),
                    now,
                    now,
                ],
            )
            payload = {
                "node_type": "note",
                "parent_id": question.node_id,
                "depth": question.depth,
                "status": "answered",
            }
            self._core.log(graph.graph_id, note_id, "node_added", None, payload, now)
            reopened = self._revive(question, turn)
            return self._record(
                graph.graph_id, turn, TurnKind.NOTE, {"node_id": question.node_id}, [note_id], reopened
            )

    # -- the depth allowance ------------------------------------------------------------------

    # -- internals ------------------------------------------------------------------------------

    def _base(self, graph: GraphRow) -> int:
        return self._core.budget(graph).max_depth

    def _steerable(self, graph_id: object) -> GraphRow:
        graph = self._core.graph(graph_id)
        if graph.chained:  # a level's sub-goals are Eval's calls alone (store/chain.py)
            raise StateError(
                f"graph {graph.graph_id} is a thinkon chain: it takes no turns (ask, widen, deepen, "
                "redecompose, note); explore the follow-up as a new exploration",
                graph_id=graph.graph_id,
            )
        if graph.status == GraphStatus.ERROR:
            raise StateError(
                f"graph {graph.graph_id} is 'error' ({graph.status_reason}): a failure stopped it; resume it "
                "(run(resume=True)) before steering it",
                graph_id=graph.graph_id,
            )
        return graph

    def _question(self, graph: GraphRow, node_id: object) -> NodeRow:
        node = self._core.node(graph.graph_id, node_id)
        if node.node_type != NodeType.QUESTION:
            raise InvalidInputError(
                f"node {node.node_id} is {'an' if node.node_type == 'answer' else 'a'} {node.node_type}; "
                f"this needs a question (its question is {node.question_id})",
                graph_id=graph.graph_id,
                node_id=node.node_id,
            )
        self._require_current(node)
        return node

    def _require_current(self, node: NodeRow) -> None:
        if node.superseded_turn is not None or node.status_reason == SaturationReason.PRUNED:
            why = f"superseded in turn {node.superseded_turn}" if node.superseded_turn else "pruned"
            raise StateError(
                f"node {node.node_id} is {why}: not current; steer a current node",
                graph_id=node.graph_id,
                node_id=node.node_id,
            )

    def _current_answer(self, question: NodeRow) -> NodeRow:
        answers = self._core.nodes(
            "graph_id = ? AND question_id = ? AND node_type = 'answer' AND superseded_turn IS NULL",
            [question.graph_id, question.node_id],
        )
        if not answers:
            raise StateError(
                f"question {question.node_id} is {question.status!r} with no answer yet; ask under it once "
                "it is answered",
                graph_id=question.graph_id,
                node_id=question.node_id,
            )
        return answers[-1]

    def _current_below(self, question: NodeRow) -> list[NodeRow]:
        ids = self._core.descendants(question.graph_id, question.node_id)
        if not ids:
            return []
        marks = ", ".join("?" for _ in ids)
        return self._core.nodes(
            f"graph_id = ? AND node_id IN ({marks}) AND superseded_turn IS NULL", [question.graph_id, *ids]
        )

    def _revive(self, question: NodeRow, turn: int) -> list[str]:
        """Reopen a finished question (and the syntheses above it) so new material below it is synthesized.

        A synthesized question goes back to answered (rule 11's path); one a worker
        saturated with a verdict goes back to answered too (a turn's move).
        """
        if question.status == NodeStatus.SYNTHESIZED:
            self._core.reopen_synthesis(question, None, self._core.clock())
            return [question.node_id]
        if question.status == NodeStatus.SATURATED and question.status_reason not in (
            *_CLOSED,
            SaturationReason.BUDGET_EXHAUSTED,
            SaturationReason.ERROR,
        ):
            meta = question.metadata
            stale = meta.pop("synthesis", None)
            self._core.set_status(
                question,
                NodeStatus.ANSWERED,
                self._core.clock(),
                actor=None,
                kind="reopened",
                metadata=meta,
                payload={"synthesis": stale, "turn": turn},
                turn=True,
            )
            self._reopen_above(question)
            return [question.node_id]
        if question.status == NodeStatus.SATURATED:
            raise StateError(
                f"question {question.node_id} is saturated ({question.status_reason}); redecompose() "
                "it first",
                graph_id=question.graph_id,
                node_id=question.node_id,
            )
        return []

    def _reopen_above(self, question: NodeRow) -> None:
        if question.question_id is None:
            return
        parent = self._core.node(question.graph_id, question.question_id)
        if parent.status == NodeStatus.SYNTHESIZED:
            self._core.reopen_synthesis(parent, None, self._core.clock())

    def _redo(self, question: NodeRow, turn: int, marks: dict[str, Any]) -> None:
        """Supersede what hangs under ``question`` (its own notes kept) and send it back to open."""
        now = self._core.clock()
        below = [
            n
            for n in self._current_below(question)
            if not (n.node_type == NodeType.NOTE and n.parent_id == question.node_id)
        ]
        moved = [
            n
            for n in below
            if (n.node_type == NodeType.QUESTION and n.status not in DONE_QUESTION)
            or (n.node_type != NodeType.QUESTION and n.status == NodeStatus.ANSWERED)
        ]
        self._core.set_statuses(
            moved,
            NodeStatus.SATURATED,
            now,
            reason=SaturationReason.SUPERSEDED,
            inherited_from=question.node_id,
            kind="superseded",
            payload={"turn": turn},
        )
        # Finished ones keep their status; the mark is an event all the same.
        moved_ids = {n.node_id for n in moved}
        kept: list[tuple[str | None, str, str | None, dict[str, Any]]] = [
            (n.node_id, "superseded", None, {"turn": turn, "status": n.status})
            for n in below
            if n.node_id not in moved_ids
        ]
        self._core.log_many(question.graph_id, kept, now)
        if below:
            ids = [n.node_id for n in below]
            placeholders = ", ".join("?" for _ in ids)
            self._db.execute(
                f"UPDATE nodes SET superseded_turn = ? WHERE graph_id = ? AND node_id IN ({placeholders})",
                [turn, question.graph_id, *ids],
            )
            self._db.execute(
                f"DELETE FROM synthesis_claims WHERE graph_id = ? AND node_id IN ({placeholders})",
                [question.graph_id, *ids],
            )
        meta = {
            k: v
            for k, v in question.metadata.items()
            if k not in ("synthesis", "saturation_reason", "redecompose")
        }
        stale = question.metadata.get("synthesis")
        self._core.set_status(
            question,
            NodeStatus.OPEN,
            now,
            actor=None,
            kind="reopened",
            metadata={**meta, **marks},
            columns={"owner": None, "claimed_at": None, "lease_s": None, "holder": None},
            payload={"synthesis": stale, "turn": turn, "superseded": [n.node_id for n in below]},
            turn=True,
        )
        self._reopen_above(question)

    def _record(
        self,
        graph_id: str,
        turn: int,
        kind: TurnKind,
        arguments: dict[str, Any],
        created: list[str],
        reopened: list[str],
    ) -> TurnRequest:
        request: TurnRequest = {
            "turn": turn,
            "kind": kind.value,
            "arguments": arguments,
            "created": created,
            "reopened": reopened,
        }
        row = self._db.fetchone(
            "SELECT requests FROM turns WHERE graph_id = ? AND turn = ?", [graph_id, turn]
        )
        requests = [*json.loads(row[0] if row else "[]"), request]
        self._db.execute(
            "UPDATE turns SET requests = ? WHERE graph_id = ? AND turn = ?",
            [json.dumps(requests), graph_id, turn],
        )
        self._core.log(graph_id, None, "turn_request", None, dict(request), self._core.clock())
        return request

    def _insert(self, graph_id: str, turn: int, kind: TurnKind, started: int) -> None:
        self._db.execute(
            "INSERT INTO turns (graph_id, turn, kind, requests, started_event, created_at) "
            "VALUES (?, ?, ?, '[]', ?, ?)",
            [graph_id, turn, kind.value, started, self._core.clock()],
        )

    def _last_event(self, graph_id: str) -> int:
        row = self._db.fetchone("SELECT max(event_id) FROM events WHERE graph_id = ?", [graph_id])
        return int(row[0]) if row and row[0] is not None else 0

    def _first_event(self, graph_id: str) -> int:
        row = self._db.fetchone("SELECT min(event_id) FROM events WHERE graph_id = ?", [graph_id])
        return int(row[0]) if row and row[0] is not None else 0


def head_counts(nodes: Sequence[NodeRow]) -> dict[str, int]:
    """A head's counts: current questions by status, and the notes and superseded nodes."""
    counts: dict[str, int] = {status.value: 0 for status in NodeStatus if status != NodeStatus.ANSWERED}
    counts[NodeStatus.ANSWERED.value] = 0
    for node in nodes:
        if node.superseded_turn is None and node.node_type == NodeType.QUESTION:
            counts[node.status] += 1
    counts["notes"] = sum(n.node_type == NodeType.NOTE and n.superseded_turn is None for n in nodes)
    counts["superseded"] = sum(n.superseded_turn is not None for n in nodes)
    return counts
