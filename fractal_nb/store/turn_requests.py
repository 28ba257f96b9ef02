"""The steering requests on a graph: ask, widen, deepen, redecompose and note.

A plain class composed by :class:`~fractal_nb.store.GraphStore` (docs/architecture/store.md, "Turns
and heads"): the store's core, the children step that inserts its questions, the turns it
joins or opens (store/turns.py) and the reopening of what it changes (store/reopening.py)
are passed in. Every query is scoped by ``graph_id``. A request checks its node, joins the
open turn or opens the next one, and writes its nodes and reopenings in one transaction with
it: a refused request changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..checks import optional_text, require_count, require_text, shown
from ..errors import InvalidInputError, StateError
from ..text import normalize
from ..vocabulary import GraphStatus, NodeStatus, NodeType, SaturationReason, TurnKind
from .base import StoreCore, new_id
from .records import TurnRequest
from .rows import GraphRow, NodeRow

if TYPE_CHECKING:
    from .children import Children
    from .reopening import Reopening
    from .turns import Turns

MAX_LEVELS = 4  # deepen(levels): at most this many levels past the intensity's depth
MAX_WIDEN = 12  # widen(n): at most this many new seed questions in one request


class TurnRequests:
    """The steering requests of the graphs in one store; ``GraphStore`` delegates them here."""

    def __init__(self, core: StoreCore, children: Children, turns: Turns, reopening: Reopening) -> None:
        self._core = core
        self._db = core.db
        self._children = children
        self._turns = turns
        self._reopening = reopening

    def ask(self, graph_id: str, question: str, under: str | None = None) -> TurnRequest:
        """A follow-up question under the root's answer, or under a question's current answer or an answer.

        Asked once per graph (rule 10): a repeat of a current question is refused.
        """
        return self._asked(graph_id, question, under, TurnKind.ASK)

    def attach(self, graph_id: str, question: str, under: str | None = None) -> TurnRequest:
        """The narrower question a fork was made for (``Exploration.attach``), asked as :meth:`ask` asks."""
        return self._asked(graph_id, question, under, TurnKind.ATTACH)

    def _asked(self, graph_id: str, question: str, under: str | None, kind: TurnKind) -> TurnRequest:
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
            turn = self._turns.open_turn(graph, kind)
            owner = self._core.node(graph.graph_id, answer.question_id or "", "under")
            self._reopening.revive(owner, turn)
            added = self._children.add(
                self._core.graph(graph.graph_id), answer, NodeType.QUESTION, [(text, {"turn": turn})], None
            )
            created = [n.node_id for n in added]
            return self._turns.record(
                graph.graph_id, turn, kind, {"question": text, "under": under}, created, []
            )

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
            turn = self._turns.open_turn(graph, TurnKind.WIDEN)
            added = self._children.add(
                self._core.graph(graph.graph_id),
                answer,
                NodeType.QUESTION,
                [(t, {"turn": turn, "widened": True}) for t in fresh.values()],
                None,
            )
            created = [n.node_id for n in added]
            repeated = [t for t in texts if normalize(t) in asked]
            return self._turns.record(
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
            below = [question, *self._reopening.current_below(question)]
            parents = {n.question_id for n in below if n.node_type == NodeType.QUESTION}
            bottom = [
                q
                for q in below
                if q.node_type == NodeType.QUESTION
                and q.depth == ceiling - 1
                and q.status == NodeStatus.SYNTHESIZED
                and q.node_id not in parents
            ]
            turn = self._turns.open_turn(graph, TurnKind.DEEPEN)
            self._db.execute(
                "INSERT INTO depth_allowances (graph_id, node_id, turn, levels) VALUES (?, ?, ?, ?)",
                [graph.graph_id, question.node_id, turn, ceiling - self._base(graph) + levels],
            )
            for leaf in bottom:
                self._reopening.redo(leaf, turn, {})
            reopened = [q.node_id for q in bottom]
            request = self._turns.record(
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
            turn = self._turns.open_turn(graph, TurnKind.REDECOMPOSE)
            avoid = [
                n.text
                for n in self._reopening.current_below(question)
                if n.node_type == NodeType.QUESTION and n.question_id == question.node_id
            ]
            self._reopening.redo(question, turn, {"redecompose": {"hint": hint, "avoid": avoid}})
            return self._turns.record(
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
            turn = self._turns.open_turn(graph, TurnKind.NOTE)
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
            reopened = self._reopening.revive(question, turn)
            return self._turns.record(
                graph.graph_id, turn, TurnKind.NOTE, {"node_id": question.node_id}, [note_id], reopened
            )

    # -- checks ------------------------------------------------------------------------

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
