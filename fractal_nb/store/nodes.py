"""Node writes: add, update metadata (with edges), saturate, prune, open gates, halts, mark errors."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from enum import StrEnum
from typing import Any, cast

from ..errors import BudgetError, FractalError, InvalidInputError, StateError
from ..model import (
    DONE_QUESTION,
    TAKES_CHILDREN,
    EdgeType,
    HaltKind,
    NodeStatus,
    NodeType,
    SaturationReason,
    parse_choice,
    parse_metadata,
)
from ..text import clip, normalize
from .base import merged_metadata, new_id, optional_name, require_id, require_text, shown
from .llm_log import LLMLog
from .records import (
    AddedNode,
    AnswerSubmitted,
    AnswerWritten,
    ChoiceRecord,
    Chosen,
    GateList,
    GateRecord,
    Halted,
    HaltRecord,
    NodeUpdated,
    RepeatedQuestion,
    Saturated,
)
from .rows import GraphRow, NodeRow
from .work import NO_LEASE


class _ADDABLE(StrEnum):
    """The node types add_node takes (a note comes from a turn: store/turns.py)."""

    QUESTION = NodeType.QUESTION.value
    ANSWER = NodeType.ANSWER.value


# Metadata keys that create edges, and the key whose text becomes the edge's metadata.
_LINK_KEYS = {
    "convergence_with": (EdgeType.CONVERGENCE, "convergence_insight", "insight"),
    "contradiction_with": (EdgeType.CONTRADICTION, "contradiction_tension", "tension"),
}


class NodeWrites(LLMLog):
    """Everything that adds nodes or changes a node's status or metadata."""

    def add_node(
        self,
        graph_id: str,
        parent_id: str,
        node_type: str,
        text: str,
        owner: str | None = None,
        metadata: dict[str, Any] | str | None = None,
    ) -> AddedNode:
        """Add an answer or a sub-question under ``parent_id``.

        An answer (or a first sub-question directly under a question) moves that
        question from open/claimed to answered. A question deeper than the budget
        is refused; in a ``depth:N`` graph, questions at depth k·N start ``gated``.
        """
        if node_type == NodeType.NOTE:
            raise InvalidInputError(
                "node_type 'note' is a person's note: add it with add_note (a turn); add_node takes "
                "'question' or 'answer'"
            )
        kind = NodeType(parse_choice(_ADDABLE, node_type, "node_type").value)
        text = require_text(text, "text")
        owner = optional_name(owner, "owner")
        meta = parse_metadata(metadata)
        require_id(parent_id, "parent_id")
        with self._db.write():
            graph, parent = self._active_node(graph_id, parent_id, "parent_id")
            node = self._add_children(graph, parent, kind, [(text, meta)], owner)[0]
        return _added(node)

    def add_answer(
        self,
        graph_id: str,
        question_id: str,
        text: str,
        *,
        owner: str | None = None,
        metadata: dict[str, Any] | str | None = None,
        sub_questions: Sequence[str | dict[str, Any]] | None = None,
        synthesize: bool = False,
        saturation: str | None = None,
    ) -> AnswerWritten:
        """Add an answer and its sub-questions in one transaction (what a worker writes).

        The same rules as :meth:`add_node` for each node, in far fewer statements.
        A sub-question is its text or ``{"text": ..., "metadata": {...}}``. With
        ``synthesize=True``, no sub-questions and no earlier answer, the question is
        a leaf: its answer becomes its synthesis at once; with a ``saturation`` reason
        too (the worker's verdict that the branch needs no more questions) the leaf is
        ``saturated`` with that reason, its synthesis kept. Returns ``{"answer": <add_node result>,
        "sub_questions": [<add_node result>, ...], "status": <the question's status>,
        "status_reason": <the saturation reason or null>}``.
        """
        text = require_text(text, "text")
        owner = optional_name(owner, "owner")
        meta = parse_metadata(metadata)
        subs = _sub_questions(sub_questions)
        verdict = None if saturation is None else parse_choice(SaturationReason, saturation, "saturation")
        with self._db.write():
            graph, question = self._active_node(graph_id, question_id, "question_id")
            if question.node_type != NodeType.QUESTION:
                raise InvalidInputError(
                    f"node {question.node_id} is an answer; add_answer needs a question",
                    graph_id=graph.graph_id,
                    node_id=question.node_id,
                )
            # Its citations checked and its support set, in this transaction ("Sources and citations").
            # The root's answer is the seed's plan (a decomposition, not a claim about the sources): it is
            # judged only when it cites.
            if question.depth > 0 or "citations" in meta:
                meta = self._citations.checked_answer(graph.graph_id, meta)
            # Only a question answered for the first time is surely a leaf; one answered
            # before may have sub-questions elsewhere (synthesize_node checks those). A track
            # is never a leaf: its synthesis is its findings (docs/architecture.md, "Tracks").
            leaf = (
                synthesize
                and not subs
                and question.status in (NodeStatus.OPEN, NodeStatus.CLAIMED)
                and "track" not in question.metadata
            )
            saturated = verdict if leaf else None
            answer = self._add_children(
                graph,
                question,
                NodeType.ANSWER,
                [(text, meta)],
                owner,
                synthesis=text if leaf else None,
                saturation=saturated,
            )[0]
            status = (
                (NodeStatus.SATURATED if saturated else NodeStatus.SYNTHESIZED)
                if leaf
                else NodeStatus.ANSWERED
            )
            children = (
                self._add_children(
                    graph, answer, NodeType.QUESTION, subs, owner, question=replace(question, status=status)
                )
                if subs
                else []
            )
        return {
            "answer": _added(answer),
            "sub_questions": [_added(c) for c in children],
            "status": status.value,
            "status_reason": saturated and saturated.value,
        }

    def submit_answer(
        self,
        graph_id: str,
        question_id: str,
        text: str,
        *,
        owner: str | None = None,
        metadata: dict[str, Any] | str | None = None,
        sub_questions: Sequence[str | dict[str, Any]] | None = None,
        links: dict[str, Any] | str | None = None,
        calls: list[dict[str, Any]] | None = None,
        saturation: str | None = None,
        boundary: dict[str, Any] | str | None = None,
    ) -> AnswerSubmitted:
        """Everything a worker writes for a claimed question, in one transaction.

        The answer with its sub-questions (or, for a leaf, its synthesis), the
        answer's links (``update_node`` link keys) and the model calls behind it
        (``saturation``: the worker's verdict for a leaf, see :meth:`add_answer`):
        all of it lands, or none does. A sub-question that repeats a question
        already in the graph (compared by ``text.normalize``) is not added again:
        it is listed under ``repeated_questions`` in the answer's metadata with the
        node that asks it.

        ``boundary`` (``{"text": ..., "converging_with": <answer id>}``): the
        boundary question on a convergence with an answer of another branch. It
        hangs under the shallower of the two answers (the new one at equal depth)
        with ``{"boundary": true, "converging_nodes": [<new answer>, <other>]}``;
        under a synthesized question it reopens that synthesis (:meth:`add_node`).
        Where it cannot go (the depth budget, a saturated branch) it is left out.

        Returns :meth:`add_answer`'s result plus ``edges_created``, ``repeated``
        (those left out) and ``boundary`` (the boundary question's id, or None).
        """
        parsed = _sub_questions(sub_questions)
        meta = parse_metadata(metadata)
        gid = require_id(graph_id, "graph_id")
        b_text, b_other = _boundary(boundary)
        with self._db.write():
            other, beside = self._boundary_place(gid, question_id, b_other)
            if beside:
                parsed.append((b_text, {"boundary": True, "converging_nodes": [None, b_other]}))
            asked = self._asked(gid, [normalize(t) for t, _ in parsed])
            fresh: list[dict[str, Any]] = []
            repeated: list[RepeatedQuestion] = []
            for sub_text, sub_meta in parsed:
                key = normalize(sub_text)
                if key in asked:  # None: twice in this very answer
                    repeated.append({"text": sub_text, "asked_at": asked[key]})
                else:
                    asked[key] = None
                    fresh.append({"text": sub_text, "metadata": sub_meta})
            if repeated:
                meta = {**meta, "repeated_questions": repeated}
                if not fresh and saturation is None:  # it only rephrased what the graph asks already
                    saturation = SaturationReason.SEMANTIC_OVERLAP.value
            written = self.add_answer(
                graph_id,
                question_id,
                text,
                owner=owner,
                metadata=meta,
                sub_questions=fresh,
                synthesize=True,
                saturation=saturation,
            )
            answer_id = written["answer"]["node_id"]
            # Beside the new answer, the boundary question was the last sub-question asked, if it was new.
            added = (
                written["sub_questions"][-1]["node_id"]
                if beside and fresh and fresh[-1]["metadata"].get("boundary")
                else None
            )
            boundary_id = self._place_boundary(gid, answer_id, b_text, other, beside, added, owner)
            created = 0
            if links:  # the worker's own answer, in this transaction: its question may be saturated already
                answer = self._node(gid, answer_id)
                created = self._merge_metadata(gid, answer, parse_metadata(links))[1]
            if calls:
                self.record_llm_calls(calls)
        return {**written, "edges_created": created, "repeated": repeated, "boundary": boundary_id}

    def _boundary_place(
        self, graph_id: str, question_id: str, other_id: str | None
    ) -> tuple[NodeRow | None, bool]:
        """Where :meth:`submit_answer`'s boundary question goes.

        (the other answer, or None when it is left out; whether it hangs beside the
        new answer rather than under the other one).
        """
        if other_id is None:
            return None, False
        other = self._node(graph_id, other_id)
        if other.node_type != NodeType.ANSWER:
            raise InvalidInputError(
                f"boundary.converging_with must be an answer's id; {other.node_id} is a {other.node_type}",
                graph_id=graph_id,
                node_id=other.node_id,
            )
        question = self._node(graph_id, question_id)
        if other.depth < question.depth:  # the other answer is shallower: under it
            return other, False
        if question.depth + 1 < self._budget(self._known_graph(graph_id)).max_depth:
            return other, True
        return None, False  # no level below this one: left out

    def _place_boundary(
        self,
        graph_id: str,
        answer_id: str,
        text: str,
        other: NodeRow | None,
        beside: bool,
        added: str | None,
        owner: str | None,
    ) -> str | None:
        """Complete or add the boundary question of :meth:`submit_answer`; its id, or None.

        ``added``: the boundary question already hung beside the new answer (None:
        a repeat); its converging nodes get the new answer's id, known only now.
        """
        if other is None:
            return None
        converging = [answer_id, other.node_id]
        if beside:
            if added is not None:
                self._merge_metadata(graph_id, self._node(graph_id, added), {"converging_nodes": converging})
            return added
        if self._asked(graph_id, [normalize(text)]):
            return None
        try:
            placed = self._add_children(
                self._known_graph(graph_id),  # its intensity and checkpoint mode: static fields
                other,
                NodeType.QUESTION,
                [(text, {"boundary": True, "converging_nodes": converging})],
                owner,
            )
        except FractalError:  # the other branch cannot take it (its depth budget, saturated): left out
            return None
        return placed[0].node_id

    def _asked(self, graph_id: str, keys: list[str]) -> dict[str, str | None]:
        """The first question of the graph asked under each of ``keys`` (question_key), by key."""
        if not keys:
            return {}
        marks = ", ".join("?" for _ in keys)
        rows = self._db.fetchall(
            "SELECT question_key, first(node_id ORDER BY seq) FROM nodes WHERE graph_id = ? "
            f"AND node_type = 'question' AND superseded_turn IS NULL AND question_key IN ({marks}) "
            "GROUP BY question_key",
            [graph_id, *keys],
        )
        return {key: node_id for key, node_id in rows}

    def update_node(self, graph_id: str, node_id: str, metadata: dict[str, Any] | str) -> NodeUpdated:
        """Merge ``metadata`` into the node's (shallow); link keys create edges once.

        ``convergence_with`` / ``contradiction_with`` (lists of node ids) create
        convergence / contradiction edges carrying ``convergence_insight`` /
        ``contradiction_tension``; an edge between the same pair is never doubled.
        """
        meta = parse_metadata(metadata)
        if not meta:  # nothing to merge: a no-op, as the reference treats it
            node = self._node(self._known_graph(graph_id).graph_id, node_id)
            return {"node_id": node.node_id, "metadata": node.metadata, "edges_created": 0}
        with self._db.write():
            graph, node = self._active_node(graph_id, node_id)
            question = self._question_of(node)
            if NodeStatus.SATURATED in (node.status, question.status):
                raise StateError(
                    f"node {node.node_id} is in a saturated branch "
                    f"({question.status_reason or node.status_reason}); it takes no more writes",
                    graph_id=graph.graph_id,
                    node_id=node.node_id,
                )
            merged, created = self._merge_metadata(graph.graph_id, node, meta)
        return {"node_id": node.node_id, "metadata": merged, "edges_created": created}

    def _merge_metadata(
        self, graph_id: str, node: NodeRow, meta: dict[str, Any]
    ) -> tuple[dict[str, Any], int]:
        """Merge ``meta`` into the node's metadata and create the edges its link keys ask for."""
        links = self._link_targets(graph_id, node.node_id, meta)
        merged, text = merged_metadata(node.metadata, meta, f"node {node.node_id}")
        now = self.clock()
        self._db.execute(
            "UPDATE nodes SET metadata = ?, updated_at = ? WHERE node_id = ?",
            [text, now, node.node_id],
        )
        self._log(graph_id, node.node_id, "metadata_updated", None, {"keys": sorted(meta)}, now)
        created = 0
        for edge_type, target, edge_meta in links:
            if not self._linked(graph_id, node.node_id, target, edge_type):
                self._insert_edge(graph_id, node.node_id, target, edge_type, edge_meta, now)
                created += 1
        return merged, created

    def mark_saturated(self, graph_id: str, node_id: str, reason: str) -> Saturated:
        """Saturate a node and every unfinished question below it (the reason is inherited)."""
        why = parse_choice(SaturationReason, reason, "saturation reason")
        return self._saturate(graph_id, node_id, why, kind="saturated")

    def prune_branch(self, graph_id: str, node_id: str) -> Saturated:
        """A person's prune: saturate the node and its unfinished descendants as ``pruned``."""
        return self._saturate(graph_id, node_id, SaturationReason.PRUNED, kind="pruned")

    def approve_gate(self, graph_id: str, node_ids: list[str] | None = None) -> dict[str, Any]:
        """Open gated questions: the given ones, or every gated question when None.

        A question a worker's halt holds waits for the person's answer, not an
        approval: ``None`` leaves it gated, and naming it is refused (``choose``
        answers it, ``prune_branch`` cuts it; docs/architecture.md, "Halts").
        """
        if node_ids is not None and (
            not isinstance(node_ids, list | tuple) or not all(isinstance(n, str) for n in node_ids)
        ):
            raise InvalidInputError(f"node_ids must be a list of node ids or null, not {node_ids!r}")
        with self._db.write():
            graph = self._active_graph(graph_id)
            if node_ids is None:
                gated = [
                    n
                    for n in self._nodes("graph_id = ? AND status = ?", [graph.graph_id, NodeStatus.GATED])
                    if "halt" not in n.metadata
                ]
            else:
                gated = [self._node(graph.graph_id, n) for n in dict.fromkeys(node_ids)]
                for node in gated:
                    if node.status != NodeStatus.GATED:
                        raise StateError(
                            f"node {node.node_id} is {node.status!r}, not gated; only gated "
                            "questions can be approved",
                            graph_id=graph.graph_id,
                            node_id=node.node_id,
                        )
                    refuse_held(node.node_id, node.metadata, graph.graph_id)
            now = self.clock()
            for node in gated:
                self._set_status(node, NodeStatus.OPEN, now, actor=None, kind="gate_approved")
        approved = [n.node_id for n in gated]
        return {"graph_id": graph.graph_id, "approved": approved, "count": len(approved)}

    # -- halts (docs/architecture.md, "Halts") ----------------------------------------------

    def submit_halt(
        self,
        graph_id: str,
        node_id: str,
        halt: dict[str, Any] | str,
        *,
        owner: str,
        calls: list[dict[str, Any]] | None = None,
    ) -> Halted:
        """A worker's halt on its claimed question instead of an answer, with its call log: one transaction.

        ``halt`` is ``{kind, question, options, alternatives}`` (:func:`parse_halt`).
        ``ambiguity`` / ``confusion``: the question is held, ``gated`` with
        ``metadata["halt"]`` (event ``held``) until the person answers it with
        :meth:`choose`. ``blocked``: it is saturated as ``blocked`` with
        ``metadata["blocked"] = {blocker, alternatives}`` (event ``blocked``), a gap
        (a claimed question has nothing unfinished below it). No answer node either way.
        """
        parsed = parse_halt(halt)
        worker = require_id(owner, "owner")
        with self._db.write():
            graph, node = self._active_node(graph_id, node_id)
            if (
                node.node_type != NodeType.QUESTION
                or node.status != NodeStatus.CLAIMED
                or node.owner != worker
            ):
                raise StateError(
                    f"{node.node_type} {node.node_id} is {node.status!r} (owner {node.owner!r}); only the "
                    f"worker holding a question's claim can halt on it, not {worker!r}",
                    graph_id=graph.graph_id,
                    node_id=node.node_id,
                )
            now = self.clock()
            meta = {k: v for k, v in node.metadata.items() if k != "halt"}
            if parsed["kind"] == HaltKind.BLOCKED:
                meta["blocked"] = {"blocker": parsed["question"], "alternatives": parsed["alternatives"]}
                status = NodeStatus.SATURATED
                self._set_status(
                    node,
                    status,
                    now,
                    actor=worker,
                    reason=SaturationReason.BLOCKED,
                    kind="blocked",
                    metadata=meta,
                    columns=NO_LEASE,
                    payload={"blocker": parsed["question"]},
                )
            else:
                meta["halt"] = parsed
                status = NodeStatus.GATED
                self._set_status(
                    node,
                    status,
                    now,
                    actor=worker,
                    kind="held",
                    metadata=meta,
                    columns=NO_LEASE,
                    payload={"halt": parsed["kind"]},
                )
            if calls:
                self.record_llm_calls(calls)
        return {"node_id": node.node_id, "status": status.value, "kind": parsed["kind"]}

    def choose(self, graph_id: str, node_id: str, choice: int | str) -> Chosen:
        """The person's answer to a held question: it reopens (``open``) with ``metadata["choice"]``.

        For an ambiguity ``choice`` is an option's index (from 0), an option's text
        or a free answer; for a confusion, the clarification. The answer prompt then
        shows it (engine/primitive.py). A question that is not held, an empty choice
        or an index out of range is refused and nothing changes.
        """
        with self._db.write():
            graph, node = self._active_node(graph_id, node_id)
            halt = refuse_not_held(node.node_id, node.status, node.metadata, graph.graph_id)
            chosen: ChoiceRecord = {
                "kind": halt["kind"],
                "text": resolve_choice(halt, choice),
                "asked": halt["question"],
            }
            meta = {k: v for k, v in node.metadata.items() if k not in ("halt", "choice")}
            if isinstance(
                node.metadata.get("choice"), dict
            ):  # answered before: the earlier choices stay shown
                meta["choices_before"] = [*node.metadata.get("choices_before", []), node.metadata["choice"]]
            meta["choice"] = chosen
            self._set_status(
                node,
                NodeStatus.OPEN,
                self.clock(),
                actor=None,
                kind="chosen",
                metadata=meta,
                payload={"choice": chosen["text"]},
            )
        return {"node_id": node.node_id, "status": NodeStatus.OPEN.value, "choice": chosen}

    def list_gates(self, graph_id: str) -> GateList:
        """The gated questions in creation order, each with the halt holding it (None: a checkpoint's)."""
        graph = self._known_graph(graph_id)
        gates: list[GateRecord] = [
            {
                "node_id": n.node_id,
                "depth": n.depth,
                "text": n.text,
                "halt": n.metadata["halt"] if isinstance(n.metadata.get("halt"), dict) else None,
            }
            for n in self._nodes("graph_id = ? AND status = ?", [graph.graph_id, NodeStatus.GATED])
        ]
        held = sum(g["halt"] is not None for g in gates)
        return {"graph_id": graph.graph_id, "gates": gates, "count": len(gates), "held": held}

    def mark_error(self, graph_id: str, node_id: str, message: str) -> dict[str, Any]:
        """Mark an unfinished question as failed; ``recover_stuck(include_errors=True)`` reopens it."""
        message = require_text(message, "message")
        with self._db.write():
            graph = self._active_graph(graph_id)
            node = self._require_question(graph.graph_id, node_id)
            self._set_status(node, NodeStatus.ERROR, self.clock(), actor=node.owner, reason=message)
        return {"node_id": node.node_id, "status": NodeStatus.ERROR.value, "reason": message}

    # -- internals ----------------------------------------------------------------

    def _require_question(self, graph_id: str, node_id: object) -> NodeRow:
        node = self._node(graph_id, node_id)
        if node.node_type != NodeType.QUESTION:
            raise InvalidInputError(
                f"node {node.node_id} is an answer; this needs a question "
                f"(its question is {node.question_id})",
                graph_id=graph_id,
                node_id=node.node_id,
            )
        return node

    def _add_children(
        self,
        graph: GraphRow,
        parent: NodeRow,
        kind: NodeType,
        items: list[tuple[str, dict[str, Any]]],
        owner: str | None,
        *,
        question: NodeRow | None = None,
        synthesis: str | None = None,
        saturation: SaturationReason | None = None,
    ) -> list[NodeRow]:
        """Check and insert nodes of one kind under ``parent`` (one INSERT, one event INSERT).

        ``question`` is the question ``parent`` belongs to when the caller already
        holds it; ``synthesis`` synthesizes that question in the same update that
        marks it answered (a leaf). Everything is checked before the first write.
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
        question = question or self._question_of(parent)
        reopen = kind == NodeType.QUESTION and question.status == NodeStatus.SYNTHESIZED
        if not reopen:
            self._check_takes_children(question, owner)
        depth = question.depth + (1 if kind == NodeType.QUESTION else 0)
        budget = self._budget(graph)
        if (
            kind == NodeType.QUESTION
            and depth >= budget.max_depth
            and depth >= self._depth_ceiling(graph, question, depth)  # a deepened branch (store/turns.py)
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
            status = NodeStatus.ANSWERED
        elif self._checkpoint(graph).gates(depth):
            status = NodeStatus.GATED
        else:
            status = NodeStatus.OPEN
        now = self.clock()
        if reopen:  # under a synthesized question's answer (a boundary question): _reopen_synthesis
            question = self._reopen_synthesis(question, owner, now)
        path = "/".join([*question.ancestors, question.node_id])
        nodes = []
        for text, meta in items:
            node_id = new_id("n")
            branch = node_id if kind == NodeType.QUESTION and depth == 1 else question.branch_id
            nodes.append(
                NodeRow(
                    node_id,
                    graph.graph_id,
                    parent.node_id,
                    kind.value,
                    text,
                    depth,
                    status.value,
                    None,
                    None,
                    owner,
                    None,
                    None,
                    json.dumps(meta),
                    now,
                    now,
                    -1,
                    branch,
                    question.node_id,
                    path,
                )
            )
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
        payload = {
            "node_type": kind.value,
            "parent_id": parent.node_id,
            "depth": depth,
            "status": status.value,
        }
        self._log_many(graph.graph_id, [(n.node_id, "node_added", owner, payload) for n in nodes], now)
        if synthesis is not None:  # open/claimed -> answered -> synthesized (or saturated), in one update
            target = NodeStatus.SATURATED if saturation else NodeStatus.SYNTHESIZED
            self._set_status(
                question,
                target,
                now,
                actor=owner,
                kind="saturated" if saturation else "synthesized",
                reason=saturation,
                through=None if question.status == NodeStatus.ANSWERED else NodeStatus.ANSWERED,
                metadata={**question.metadata, "synthesis": synthesis, **_leaf_claims(kind, nodes)},
            )
        elif question.status in (NodeStatus.OPEN, NodeStatus.CLAIMED):
            self._set_status(question, NodeStatus.ANSWERED, now, actor=owner)
        return nodes

    def _check_takes_children(self, question: NodeRow, owner: str | None) -> None:
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

    def _saturate(self, graph_id: str, node_id: str, reason: SaturationReason, kind: str) -> Saturated:
        with self._db.write():
            graph = self._active_graph(graph_id)
            node = self._node(graph.graph_id, node_id)
            root_answer = node.node_type == NodeType.ANSWER and node.question_id == graph.root_node_id
            if node.node_id == graph.root_node_id or root_answer:
                what = "the root's answer" if root_answer else "the root"
                raise InvalidInputError(
                    f"node {node.node_id} is {what}: saturating or pruning it would end the exploration "
                    "with no result. To stop, pause or harvest it; to drop the work below, prune its seed "
                    "questions",
                    graph_id=graph.graph_id,
                    node_id=node.node_id,
                )
            now = self.clock()
            self._set_status(node, NodeStatus.SATURATED, now, actor=None, reason=reason, kind=kind)
            below = self._descendants(node.graph_id, node.node_id)
            cascaded = []
            if below:
                marks = ", ".join("?" for _ in below)
                for child in self._nodes(f"node_id IN ({marks}) AND node_type = 'question'", below):
                    if child.status not in DONE_QUESTION:
                        self._set_status(
                            child,
                            NodeStatus.SATURATED,
                            now,
                            actor=None,
                            reason=reason,
                            inherited_from=node.node_id,
                            kind=kind,
                        )
                        cascaded.append(child.node_id)
        return {
            "node_id": node.node_id,
            "status": NodeStatus.SATURATED.value,
            "reason": reason.value,
            "cascaded": cascaded,
        }

    def _link_targets(
        self, graph_id: str, node_id: str, meta: dict[str, Any]
    ) -> list[tuple[EdgeType, str, dict[str, Any]]]:
        """Validate link keys before anything is written; return the edges they ask for."""
        links = []
        for key, (edge_type, text_key, edge_key) in _LINK_KEYS.items():
            if key not in meta:
                continue
            targets = meta[key]
            if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
                raise InvalidInputError(f"metadata[{key!r}] must be a list of node ids, not {targets!r}")
            text = meta.get(text_key)
            if text is not None and not isinstance(text, str):
                raise InvalidInputError(f"metadata[{text_key!r}] must be a string, not {text!r}")
            for target in dict.fromkeys(targets):
                if target == node_id:
                    raise InvalidInputError(f"metadata[{key!r}] names node {node_id} itself")
                self._node(graph_id, target, f"metadata[{key!r}]")
                links.append((edge_type, target, {edge_key: text} if text else {}))
        return links

    def _linked(self, graph_id: str, a: str, b: str, edge_type: EdgeType) -> bool:
        row = self._db.fetchone(
            "SELECT 1 FROM edges WHERE graph_id = ? AND edge_type = ? AND ((from_node = ? AND to_node = ?) "
            "OR (from_node = ? AND to_node = ?))",
            [graph_id, edge_type, a, b, b, a],
        )
        return row is not None

    def _insert_edge(
        self,
        graph_id: str,
        from_node: str,
        to_node: str,
        edge_type: EdgeType,
        meta: dict[str, Any],
        now: float,
    ) -> None:
        self._db.execute(
            "INSERT INTO edges VALUES (nextval('node_seq'), ?, ?, ?, ?, ?, ?)",
            [graph_id, from_node, to_node, edge_type.value, json.dumps(meta), now],
        )
        self._log(
            graph_id,
            from_node,
            "edge_added",
            None,
            {"to_node": to_node, "edge_type": edge_type.value, **meta},
            now,
        )


def _added(node: NodeRow) -> AddedNode:
    """The add_node result for a freshly inserted node."""
    return {
        "node_id": node.node_id,
        "graph_id": node.graph_id,
        "parent_id": node.parent_id,
        "depth": node.depth,
        "node_type": node.node_type,
        "status": node.status,
    }


def _sub_questions(value: object) -> list[tuple[str, dict[str, Any]]]:
    """An answer's sub-questions (None: none): a list of texts or ``{"text", "metadata"}`` objects."""
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise InvalidInputError(
            f"sub_questions must be a list of question texts or {{'text': ..., 'metadata': {{...}}}} "
            f"objects, or None; not {shown(value)}"
        )
    return [_sub_question(item, i) for i, item in enumerate(value)]


def _sub_question(item: object, index: int) -> tuple[str, dict[str, Any]]:
    what = f"sub_questions[{index}]"
    if isinstance(item, str):
        return require_text(item, what), {}
    if isinstance(item, dict) and set(item) <= {"text", "metadata"}:
        return require_text(item.get("text"), f"{what}.text"), parse_metadata(
            item.get("metadata"), f"{what}.metadata"
        )
    raise InvalidInputError(
        f"{what} must be a question text or {{'text': ..., 'metadata': {{...}}}}, not {item!r}"
    )


def _boundary(value: object) -> tuple[str, str | None]:
    """``submit_answer``'s boundary argument: (text, the converging answer's id), or ("", None)."""
    if value is None or value == "":
        return "", None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"boundary is not valid JSON: {exc}") from None
    if not isinstance(value, dict) or set(value) != {"text", "converging_with"}:
        raise InvalidInputError(
            f"boundary must be {{'text': ..., 'converging_with': <answer id>}}, not {value!r}"
        )
    return require_text(value["text"], "boundary.text"), require_id(
        value["converging_with"], "boundary.converging_with"
    )


def _leaf_claims(kind: NodeType, nodes: list[NodeRow]) -> dict[str, Any]:
    """A leaf's synthesis is its answer: the answer's claims, carried up with it (``source`` the answer)."""
    if kind != NodeType.ANSWER or not nodes:
        return {}
    claims = nodes[0].metadata.get("claims")
    return {"claims": [{**c, "source": nodes[0].node_id} for c in claims]} if claims else {}


# -- halts (docs/architecture.md, "Halts") ---------------------------------------------------------

MAX_HALT_ITEMS = 6  # options of an ambiguity, alternatives of a blocker (llm/schemas.py MAX_HALT_OPTIONS)


def parse_halt(value: object) -> HaltRecord:
    """A halt as the store keeps it, or an InvalidInputError saying what a halt is.

    >>> parse_halt({"kind": "blocked", "question": "No data.", "alternatives": ["Ask a census office."]})
    {'kind': 'blocked', 'question': 'No data.', 'options': [], 'alternatives': ['Ask a census office.']}
    """
    shape = (
        "halt must be {kind: ambiguity|confusion|blocked, question, options: [{option, tradeoffs}] "
        "(ambiguity: at least 2), alternatives: [text] (blocked: at least 1)}"
    )
    halt = parse_metadata(value, "halt")
    if not set(halt) <= {"kind", "question", "options", "alternatives"}:
        raise InvalidInputError(f"{shape}; not the keys {sorted(halt)}")
    kind = parse_choice(HaltKind, halt.get("kind"), "halt kind")
    options, alternatives = halt.get("options") or [], halt.get("alternatives") or []
    if not isinstance(options, list) or not isinstance(alternatives, list):
        raise InvalidInputError(f"{shape}: options and alternatives are lists")
    if len(options) > MAX_HALT_ITEMS or len(alternatives) > MAX_HALT_ITEMS:
        raise InvalidInputError(
            f"a halt offers at most {MAX_HALT_ITEMS} options and {MAX_HALT_ITEMS} alternatives"
        )
    parsed: HaltRecord = {
        "kind": kind.value,
        "question": require_text(halt.get("question"), "halt.question"),
        "options": [],
        "alternatives": [],
    }
    if kind == HaltKind.AMBIGUITY:
        for i, option in enumerate(options):
            if not isinstance(option, dict) or set(option) != {"option", "tradeoffs"}:
                raise InvalidInputError(
                    f"halt.options[{i}] must be {{option, tradeoffs}}, not {shown(option)}"
                )
            parsed["options"].append(
                {
                    "option": require_text(option["option"], f"halt.options[{i}].option"),
                    "tradeoffs": require_text(option["tradeoffs"], f"halt.options[{i}].tradeoffs"),
                }
            )
        if len({normalize(o["option"]) for o in parsed["options"]}) < 2:
            raise InvalidInputError(f"{shape}: an ambiguity needs at least two distinct options")
    elif kind == HaltKind.BLOCKED:
        parsed["alternatives"] = [
            require_text(a, f"halt.alternatives[{i}]") for i, a in enumerate(alternatives)
        ]
        if not parsed["alternatives"]:
            raise InvalidInputError(f"{shape}: a blocker needs at least one suggested alternative")
    return parsed


def held_halt(metadata: dict[str, Any]) -> HaltRecord | None:
    """The halt holding a gated question (its metadata's ``halt``), or None for a checkpoint's gate."""
    halt = metadata.get("halt")
    return cast(HaltRecord, halt) if isinstance(halt, dict) else None


def refuse_held(node_id: str, metadata: dict[str, Any], graph_id: str | None = None) -> None:
    """Refuse to approve a question a halt holds: it needs the person's answer (``choose``)."""
    halt = held_halt(metadata)
    if halt is not None:
        raise StateError(
            f"question {node_id} is held by a question to the person ({halt['kind']}: "
            f"{clip(halt['question'], 120)}); approving cannot release it: answer it with choose "
            "(an option or your own text), or prune it",
            graph_id=graph_id,
            node_id=node_id,
        )


def refuse_not_held(
    node_id: str, status: str, metadata: dict[str, Any], graph_id: str | None = None
) -> HaltRecord:
    """The halt holding a question, or a StateError: only a held question takes a choice."""
    halt = held_halt(metadata)
    if status != NodeStatus.GATED or halt is None:
        what = (
            "a checkpoint's gate: approve it (approve_gate)" if status == NodeStatus.GATED else repr(status)
        )
        raise StateError(
            f"question {node_id} is {what}, not held by a question to the person; only a question a "
            "worker's halt holds (ambiguity or confusion) takes a choice",
            graph_id=graph_id,
            node_id=node_id,
        )
    return halt


def resolve_choice(halt: HaltRecord, choice: object) -> str:
    """The text of a person's ``choice`` for ``halt``, or an InvalidInputError saying what is allowed.

    >>> halt = {"kind": "ambiguity", "question": "Which?", "alternatives": [], "options": [
    ...     {"option": "Paris, France", "tradeoffs": "more data"},
    ...     {"option": "Paris, Texas", "tradeoffs": "less"}]}
    >>> resolve_choice(halt, 1), resolve_choice(halt, "the French one")
    ('Paris, Texas', 'the French one')
    """
    options = halt.get("options") or []
    allowed = "an option's index (from 0), an option's text or your own answer" if options else "your answer"
    if isinstance(choice, bool) or not isinstance(choice, int | str):
        raise InvalidInputError(f"choice must be {allowed}, not {shown(choice)}")
    if isinstance(choice, int):
        if halt["kind"] != HaltKind.AMBIGUITY:
            raise InvalidInputError(f"a {halt['kind']} takes your answer as text, not the number {choice}")
        if not 0 <= choice < len(options):
            raise InvalidInputError(
                f"choice {choice} is out of range: the options are numbered 0 to {len(options) - 1}, "
                "or give your own answer as text"
            )
        return str(options[choice]["option"])
    if not choice.strip():
        raise InvalidInputError(f"choice must be {allowed} as non-empty text, not {shown(choice)}")
    text = require_text(choice.strip(), "choice")
    return next((str(o["option"]) for o in options if normalize(o["option"]) == normalize(text)), text)
