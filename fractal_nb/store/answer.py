"""The answer step: what a worker writes for a claimed question, in one transaction.

An answer with its sub-questions (or, for a leaf, its synthesis at once), its
links, the boundary question of a convergence and the model calls behind it
(:meth:`Answers.submit_answer`); :meth:`Answers.add_node` and
:meth:`Answers.add_answer` are the contract's smaller writes. Nodes are
inserted by :class:`~fractal_nb.store.children.Children`, metadata and edges
written by :class:`~fractal_nb.store.links.Links`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from enum import StrEnum
from typing import Any

from ..checks import merged_metadata, optional_name, require_flag, require_id, require_text, shown
from ..errors import FractalError, InvalidInputError
from ..text import normalize
from ..vocabulary import (
    MAX_SUB_QUESTIONS,
    JsonArgument,
    NodeStatus,
    NodeType,
    SaturationReason,
    parse_choice,
    parse_metadata,
    track_of,
)
from .base import Event, StoreCore
from .children import Children, Items
from .citations import CitationCheck
from .links import Link, Links
from .llm_log import LLMLog
from .records import AddedNode, AnswerSubmitted, AnswerWritten, CallRows, RepeatedQuestion
from .rows import GraphRow, NodeRow
from .synthesis import Synthesis


class _ADDABLE(StrEnum):
    """The node types add_node takes (a note comes from a turn: store/turn_requests.py)."""

    QUESTION = NodeType.QUESTION.value
    ANSWER = NodeType.ANSWER.value


class Answers:
    """Adding answers and questions: a worker's whole answer, or one node at a time."""

    def __init__(
        self,
        core: StoreCore,
        children: Children,
        links: Links,
        citations: CitationCheck,
        calls: LLMLog,
        synthesis: Synthesis,
    ) -> None:
        self._core = core
        self._db = core.db
        self._children = children
        self._links = links
        self._citations = citations
        self._calls = calls
        self._synthesis = synthesis

    def add_node(
        self,
        graph_id: str,
        parent_id: str,
        node_type: str,
        text: str,
        owner: str | None = None,
        metadata: JsonArgument | None = None,
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
            graph, parent, held = self._core.active_parent(graph_id, parent_id, "parent_id")
            node = self._children.add(graph, parent, kind, [(text, meta)], owner, held=held)[0]
        return _added(node)

    def add_answer(
        self,
        graph_id: str,
        question_id: str,
        text: str,
        *,
        owner: str | None = None,
        metadata: JsonArgument | None = None,
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
            graph, question = self._core.active_node(graph_id, question_id, "question_id")
            return self._write(graph, question, text, owner, meta, subs, synthesize, verdict)[0]

    def _write(
        self,
        graph: GraphRow,
        question: NodeRow,
        text: str,
        owner: str | None,
        meta: dict[str, Any],
        subs: Items,
        synthesize: bool,
        verdict: SaturationReason | None,
    ) -> tuple[AnswerWritten, NodeRow]:
        """:meth:`add_answer`'s writes, its arguments checked: the result and the answer's row."""
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
        # is never a leaf: its synthesis is its findings (docs/architecture/engine.md, "Tracks").
        leaf = (
            synthesize
            and not subs
            and question.status in (NodeStatus.OPEN, NodeStatus.CLAIMED)
            and track_of(question.metadata) is None
        )
        saturated = verdict if leaf else None
        answer = self._children.add(
            graph,
            question,
            NodeType.ANSWER,
            [(text, meta)],
            owner,
            synthesis=text if leaf else None,
            saturation=saturated,
        )[0]
        status = (
            (NodeStatus.SATURATED if saturated else NodeStatus.SYNTHESIZED) if leaf else NodeStatus.ANSWERED
        )
        children = (
            self._children.add(
                graph,
                answer,
                NodeType.QUESTION,
                subs,
                owner,
                question=replace(question, status=status),
                parent_is_new=True,
            )
            if subs
            else []
        )
        written: AnswerWritten = {
            "answer": _added(answer),
            "sub_questions": [_added(c) for c in children],
            "status": status.value,
            "status_reason": saturated and saturated.value,
        }
        return written, answer

    def submit_answer(
        self,
        graph_id: str,
        question_id: str,
        text: str,
        *,
        owner: str | None = None,
        metadata: JsonArgument | None = None,
        sub_questions: Sequence[str | dict[str, Any]] | None = None,
        links: JsonArgument | None = None,
        calls: CallRows | None = None,
        saturation: str | None = None,
        boundary: JsonArgument | None = None,
        claim_next: bool = False,
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

        ``claim_next=True``: when the answer finished its question (a leaf) and that was
        the last unfinished sub-question of the question above, that question's synthesis
        is claimed for ``owner`` in the same transaction, under the holder of this
        question's claim, and returned as ``next_synthesis`` (a ``claim_synthesis``
        result; ``node_id`` None when none): the cascade's first step
        (docs/architecture/engine.md, "The cascade").
        """
        text = require_text(text, "text")
        owner = optional_name(owner, "owner")
        require_flag(claim_next, "claim_next")
        parsed = _sub_questions(sub_questions)
        meta = parse_metadata(metadata)
        gid = require_id(graph_id, "graph_id")
        link_meta = parse_metadata(links) if links else {}
        b_text, b_other = _boundary(boundary)
        verdict = None if saturation is None else parse_choice(SaturationReason, saturation, "saturation")
        with self._db.write():
            graph, question = self._core.active_node(gid, question_id, "question_id")
            other, beside = self._boundary_place(graph, question, b_other)
            if beside:
                parsed.append((b_text, {"boundary": True, "converging_nodes": [None, b_other]}))
            fresh, repeated = self._new_questions(gid, parsed)
            if repeated:
                meta = {**meta, "repeated_questions": repeated}
                if not fresh and verdict is None:  # it only rephrased what the graph asks already
                    verdict = SaturationReason.SEMANTIC_OVERLAP
            # The answer's links (the worker's own answer: its question may be saturated already) go in its
            # metadata as it is inserted, their targets checked first; a new node has no edge to double.
            wanted = self._links.targets(gid, link_meta)
            written, answer = self._write(
                graph, question, text, owner, {**meta, **link_meta}, fresh, True, verdict
            )
            if link_meta:  # the limit holds after the merge: past it, the whole write rolls back
                kept = {k: v for k, v in answer.metadata.items() if k not in link_meta}
                merged_metadata(kept, link_meta, f"node {answer.node_id}")
            answer_id = answer.node_id
            # Beside the new answer, the boundary question was the last sub-question asked, if it was new.
            added = (
                written["sub_questions"][-1]["node_id"]
                if beside and fresh and fresh[-1][1].get("boundary")
                else None
            )
            boundary_id = self._place_boundary(gid, answer_id, b_text, other, beside, added, owner)
            created = self._add_links(gid, answer_id, link_meta, wanted)
            if calls:
                self._calls.land(calls, gid, known=[question.node_id, answer_id])
            result = _submitted(written, created, repeated, boundary_id)
            if claim_next:  # the cascade's first step, from the question this answer finished (a leaf)
                result["next_synthesis"] = self._synthesis.claim_above(
                    replace(question, status=written["status"]), owner, lambda: self._holder(question.node_id)
                )
        return result

    def _new_questions(self, graph_id: str, parsed: Items) -> tuple[Items, list[RepeatedQuestion]]:
        """The sub-questions new to the graph, and those it asks already (or twice in this very answer)."""
        asked = self._children.asked(graph_id, [normalize(t) for t, _ in parsed])
        fresh: Items = []
        repeated: list[RepeatedQuestion] = []
        for sub_text, sub_meta in parsed:
            key = normalize(sub_text)
            if key in asked:  # None: twice in this very answer
                repeated.append({"text": sub_text, "asked_at": asked[key]})
            else:
                asked[key] = None
                fresh.append((sub_text, sub_meta))
        return fresh, repeated

    def _add_links(self, graph_id: str, answer_id: str, link_meta: dict[str, Any], wanted: list[Link]) -> int:
        """The answer's links as edges, logged as update_node logs a merge (the keys, then each edge)."""
        if not link_meta:
            return 0
        updated: Event = (answer_id, "metadata_updated", None, {"keys": sorted(link_meta)})
        return self._links.add_edges(graph_id, answer_id, wanted, self._core.clock(), updated)

    def _holder(self, node_id: str) -> str | None:
        """The holder of a question's claim (the claim that answered it)."""
        row = self._db.fetchone("SELECT holder FROM nodes WHERE node_id = ?", [node_id])
        return None if row is None else row[0]

    def _boundary_place(
        self, graph: GraphRow, question: NodeRow, other_id: str | None
    ) -> tuple[NodeRow | None, bool]:
        """Where :meth:`submit_answer`'s boundary question goes.

        (the other answer, or None when it is left out; whether it hangs beside the
        new answer rather than under the other one).
        """
        if other_id is None:
            return None, False
        other = self._core.node(graph.graph_id, other_id)
        if other.node_type != NodeType.ANSWER:
            raise InvalidInputError(
                f"boundary.converging_with must be an answer's id; {other.node_id} is a {other.node_type}",
                graph_id=graph.graph_id,
                node_id=other.node_id,
            )
        if other.depth < question.depth:  # the other answer is shallower: under it
            return other, False
        if question.depth + 1 < self._core.budget(graph).max_depth:
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
                self._links.merge(
                    graph_id, self._core.node(graph_id, added), {"converging_nodes": converging}
                )
            return added
        if self._children.asked(graph_id, [normalize(text)]):
            return None
        try:
            placed = self._children.add(
                self._core.known_graph(graph_id),  # its intensity and checkpoint mode: static fields
                other,
                NodeType.QUESTION,
                [(text, {"boundary": True, "converging_nodes": converging})],
                owner,
            )
        except FractalError:  # the other branch cannot take it (its depth budget, saturated): left out
            return None
        return placed[0].node_id


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


def _submitted(
    written: AnswerWritten, created: int, repeated: list[RepeatedQuestion], boundary_id: str | None
) -> AnswerSubmitted:
    """submit_answer's result: add_answer's, with the edges created, the repeats left out, the boundary."""
    return {
        "answer": written["answer"],
        "sub_questions": written["sub_questions"],
        "status": written["status"],
        "status_reason": written["status_reason"],
        "edges_created": created,
        "repeated": repeated,
        "boundary": boundary_id,
    }


def _sub_questions(value: object) -> list[tuple[str, dict[str, Any]]]:
    """An answer's sub-questions (None: none): a list of texts or ``{"text", "metadata"}`` objects.

    At most ``MAX_SUB_QUESTIONS``, refused before the write lock is taken (issue 37: 100,001 in one
    call held it for 251 s).
    """
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise InvalidInputError(
            f"sub_questions must be a list of question texts or {{'text': ..., 'metadata': {{...}}}} "
            f"objects, or None; not {shown(value)}"
        )
    if len(value) > MAX_SUB_QUESTIONS:
        raise InvalidInputError(
            f"sub_questions holds {len(value):,} questions; an answer asks at most {MAX_SUB_QUESTIONS} "
            "(docs/store.md, Limits): keep the ones that matter most, or ask the rest below them"
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
