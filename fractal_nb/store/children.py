"""Adding nodes under a node: the one place a node is inserted, checked before the first write.

:class:`Children` is what every write that grows the tree calls: a worker's answer
(store/answer.py), a turn's questions (store/turn_requests.py), a chain's plan, call and
return (store/chain.py). Its steps read in order: where the children go (the
parent and the question it belongs to may take them), how deep they sit and in
which status, the rows, one INSERT with one event INSERT, then the question
they answer moves (answered, or a leaf's synthesis at once).
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import BudgetError, InvalidInputError, StateError
from ..text import normalize
from ..vocabulary import MAX_CHILDREN, TAKES_CHILDREN, NodeStatus, NodeType, SaturationReason
from .base import CHILDREN_COUNT, Event, StoreCore, new_id
from .dialect import Per
from .rows import GraphRow, NodeRow

Items = list[tuple[str, dict[str, Any]]]  # the children to add: (text, metadata) each
# The node first asked in a group of questions (PostgreSQL has no first(); DuckDB takes array_agg's
# form 1.1x as long).
_FIRST_ASKED = Per(duckdb="first(node_id ORDER BY seq)", postgresql="(array_agg(node_id ORDER BY seq))[1]")


class Children:
    """Checks and inserts children of one kind under a node.

    See docs/architecture/store.md, "The graph contract".
    """

    def __init__(self, core: StoreCore) -> None:
        self._core = core
        self._db = core.db
        self._first_asked = _FIRST_ASKED(self._db.dialect)

    def add(
        self,
        graph: GraphRow,
        parent: NodeRow,
        kind: NodeType,
        items: Items,
        owner: str | None,
        *,
        question: NodeRow | None = None,
        synthesis: str | None = None,
        saturation: SaturationReason | None = None,
        parent_is_new: bool = False,
        held: int | None = None,
    ) -> list[NodeRow]:
        """Check and insert nodes of one kind under ``parent`` (one INSERT; their events with the question's).

        ``question`` is the question ``parent`` belongs to when the caller already
        holds it; ``synthesis`` synthesizes that question in the same update that
        marks it answered (a leaf), ``saturated`` with ``saturation`` when given.
        ``parent_is_new``: ``parent`` was inserted in this transaction, so it has no
        children to count (:meth:`check_room`); ``held``: its children, counted in this
        transaction (``StoreCore.active_parent``). Everything is checked before the
        first write. Call inside a write transaction.
        """
        question, reopen = self._question_taking(graph, parent, kind, owner, question)
        self.check_room(parent, len(items), parent_is_new=parent_is_new, held=held)
        depth, status = self._depth_and_status(graph, question, kind)
        now = self._core.clock()
        if reopen:  # under a synthesized question's answer (a boundary question)
            question = self._core.reopen_synthesis(question, owner, now)
        nodes = [
            self._row(graph, parent, question, kind, text, meta, owner, depth, status, now)
            for text, meta in items
        ]
        added = self._insert(nodes, kind, owner, now)
        self._answer(question, kind, nodes, owner, now, synthesis, saturation, added)
        return nodes

    def check_room(
        self, parent: NodeRow, adding: int, *, parent_is_new: bool = False, held: int | None = None
    ) -> None:
        """Refuse ``adding`` children that would take ``parent`` past ``MAX_CHILDREN`` (issue 37).

        Its current children count (answers, sub-questions, notes); those a turn
        superseded are its history, not its children now. A node inserted in this
        transaction (``parent_is_new``) has none; ``held`` is the count when the caller
        read it in this transaction.
        """
        if parent_is_new:
            held = 0
        elif held is None:
            row = self._db.fetchone(CHILDREN_COUNT, [parent.graph_id, parent.node_id])
            held = int(row[0]) if row else 0
        if held + adding > MAX_CHILDREN:
            raise InvalidInputError(
                f"{parent.node_type} {parent.node_id} has {held:,} children; {adding:,} more would pass the "
                f"limit of {MAX_CHILDREN} per node (docs/store.md, Limits): ask further questions below its "
                "children instead",
                graph_id=parent.graph_id,
                node_id=parent.node_id,
            )

    def asked(self, graph_id: str, keys: list[str]) -> dict[str, str | None]:
        """The first question of the graph asked under each of ``keys`` (question_key), by key."""
        if not keys:
            return {}
        marks = ", ".join("?" for _ in keys)
        rows = self._db.fetchall(
            f"SELECT question_key, {self._first_asked} FROM nodes WHERE graph_id = ? "
            f"AND node_type = 'question' AND superseded_turn IS NULL AND question_key IN ({marks}) "
            "GROUP BY question_key",
            [graph_id, *keys],
        )
        return {key: node_id for key, node_id in rows}

    # -- the steps of add ----------------------------------------------------------------

    def _question_taking(
        self, graph: GraphRow, parent: NodeRow, kind: NodeType, owner: str | None, question: NodeRow | None
    ) -> tuple[NodeRow, bool]:
        """The question the children answer or ask under, and whether they reopen its synthesis.

        Refused: an answer under an answer, children of a saturated answer, a
        question that takes no more children (gated, failed, finished) or is
        claimed by another worker. A question under a synthesized question's
        answer (a boundary question) reopens it instead.
        """
        if parent.node_type == NodeType.ANSWER:
            if kind == NodeType.ANSWER:
                raise InvalidInputError(
                    f"node {parent.node_id} is an answer; an answer's children are questions "
                    f"(add another answer under question {parent.question_id} instead)",
                    graph_id=graph.graph_id,
                    node_id=parent.node_id,
                )
            if parent.status == NodeStatus.SATURATED:
                raise StateError(
                    f"answer {parent.node_id} is saturated ({parent.status_reason}); "
                    "it takes no more sub-questions",
                    graph_id=graph.graph_id,
                    node_id=parent.node_id,
                )
        question = question or self._core.question_of(parent)
        reopen = kind == NodeType.QUESTION and question.status == NodeStatus.SYNTHESIZED
        if not reopen:
            _check_takes_children(question, owner)
        elif question.ancestors:
            # A synthesized question in a saturated (pruned) branch stays closed (rule 4).
            marks = ", ".join("?" for _ in question.ancestors)
            above = self._db.fetchone(
                f"SELECT node_id, status_reason FROM nodes WHERE graph_id = ? AND node_id IN ({marks}) "
                "AND status = 'saturated' ORDER BY seq LIMIT 1",
                [graph.graph_id, *question.ancestors],
            )
            if above is not None:
                raise StateError(
                    f"question {question.node_id} is in the branch of {above[0]}, saturated ({above[1]}); "
                    "a saturated branch takes no new questions",
                    graph_id=graph.graph_id,
                    node_id=question.node_id,
                )
        return question, reopen

    def _depth_and_status(self, graph: GraphRow, question: NodeRow, kind: NodeType) -> tuple[int, NodeStatus]:
        """The children's depth (a budget past it is refused) and the status they start in."""
        depth = question.depth + (1 if kind == NodeType.QUESTION else 0)
        budget = self._core.budget(graph)
        if (
            kind == NodeType.QUESTION
            and depth >= budget.max_depth
            and depth
            >= self._core.depth_ceiling(graph, question, depth)  # a deepened branch (store/turn_requests.py)
        ):
            raise BudgetError(
                f"a question at depth {depth} exceeds the budget of graph {graph.graph_id}: "
                f"intensity {graph.intensity!r} has max_depth {budget.max_depth}, so questions "
                f"may sit at depths 0-{budget.max_depth - 1}; answer {question.node_id} "
                "without sub-questions or mark it saturated (budget_exhausted)",
                graph_id=graph.graph_id,
                node_id=question.node_id,
            )
        if kind == NodeType.ANSWER:
            return depth, NodeStatus.ANSWERED
        return depth, NodeStatus.GATED if self._core.checkpoint(graph).gates(depth) else NodeStatus.OPEN

    @staticmethod
    def _row(
        graph: GraphRow,
        parent: NodeRow,
        question: NodeRow,
        kind: NodeType,
        text: str,
        meta: dict[str, Any],
        owner: str | None,
        depth: int,
        status: NodeStatus,
        now: float,
    ) -> NodeRow:
        """A new node's row: a seed question starts its own branch, any other node joins its question's."""
        node_id = new_id("n")
        return NodeRow(
            node_id=node_id,
            graph_id=graph.graph_id,
            parent_id=parent.node_id,
            node_type=kind.value,
            text=text,
            depth=depth,
            status=status.value,
            status_reason=None,
            inherited_from=None,
            owner=owner,
            claimed_at=None,
            lease_s=None,
            metadata_json=json.dumps(meta),
            created_at=now,
            updated_at=now,
            seq=-1,  # the sequence's, given by the INSERT
            branch_id=node_id if kind == NodeType.QUESTION and depth == 1 else question.branch_id,
            question_id=question.node_id,
            path="/".join([*question.ancestors, question.node_id]),
        )

    def _insert(self, nodes: list[NodeRow], kind: NodeType, owner: str | None, now: float) -> list[Event]:
        """The rows in one INSERT; their ``node_added`` events, for :meth:`_answer` to log."""
        if not nodes:
            return []
        rows = ", ".join("(?, ?, nextval('node_seq'), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" for _ in nodes)
        self._db.execute(
            "INSERT INTO nodes (node_id, graph_id, seq, parent_id, question_id, branch_id, path, "
            "node_type, text, question_key, depth, status, owner, metadata, created_at, updated_at) "
            f"VALUES {rows}",
            [
                v
                for n in nodes
                for v in (
                    n.node_id,
                    n.graph_id,
                    n.parent_id,
                    n.question_id,
                    n.branch_id,
                    n.path,
                    n.node_type,
                    n.text,
                    normalize(n.text) if kind == NodeType.QUESTION else None,
                    n.depth,
                    n.status,
                    n.owner,
                    n.metadata_json,
                    now,
                    now,
                )
            ],
        )
        first = nodes[0]
        payload = {
            "node_type": kind.value,
            "parent_id": first.parent_id,
            "depth": first.depth,
            "status": first.status,
        }
        return [(n.node_id, "node_added", owner, payload) for n in nodes]

    def _answer(
        self,
        question: NodeRow,
        kind: NodeType,
        nodes: list[NodeRow],
        owner: str | None,
        now: float,
        synthesis: str | None,
        saturation: SaturationReason | None,
        added: list[Event],
    ) -> None:
        """The question the children belong to: answered, or (a leaf) synthesized or saturated at once.

        The children's ``node_added`` events (``added``) go in the same INSERT as its status change.
        """
        if synthesis is not None:  # open/claimed -> answered -> synthesized (or saturated), in one update
            target = NodeStatus.SATURATED if saturation else NodeStatus.SYNTHESIZED
            self._core.set_status(
                question,
                target,
                now,
                actor=owner,
                kind="saturated" if saturation else "synthesized",
                reason=saturation,
                through=None if question.status == NodeStatus.ANSWERED else NodeStatus.ANSWERED,
                metadata={**question.metadata, "synthesis": synthesis, **_leaf_claims(kind, nodes)},
                before=added,
            )
        elif question.status in (NodeStatus.OPEN, NodeStatus.CLAIMED):
            self._core.set_status(question, NodeStatus.ANSWERED, now, actor=owner, before=added)
        elif added:
            self._core.log_many(question.graph_id, added, now)


def _check_takes_children(question: NodeRow, owner: str | None) -> None:
    """Refuse children for a question that takes none now, or that another worker holds."""
    if question.status not in TAKES_CHILDREN:
        hint = {
            NodeStatus.GATED: "approve its gate first",
            NodeStatus.ERROR: "recover it first (recover_stuck with include_errors)",
        }.get(NodeStatus(question.status), "it is finished")
        reason = f" ({question.status_reason})" if question.status_reason else ""
        raise StateError(
            f"question {question.node_id} is {question.status!r}{reason}; it takes no more "
            f"answers or sub-questions: {hint}",
            graph_id=question.graph_id,
            node_id=question.node_id,
        )
    if question.status == NodeStatus.CLAIMED and owner and question.owner != owner:
        raise StateError(
            f"question {question.node_id} is claimed by {question.owner!r}, not {owner!r} "
            "(a lease that ran out may have been taken over)",
            graph_id=question.graph_id,
            node_id=question.node_id,
        )


def _leaf_claims(kind: NodeType, nodes: list[NodeRow]) -> dict[str, Any]:
    """A leaf's synthesis is its answer: the answer's claims, carried up with it (``source`` the answer)."""
    if kind != NodeType.ANSWER or not nodes:
        return {}
    claims = nodes[0].metadata.get("claims")
    return {"claims": [{**c, "source": nodes[0].node_id} for c in claims]} if claims else {}
