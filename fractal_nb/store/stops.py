"""Where a question stops or waits: gates, halts and choices, saturation and prunes, errors.

A ``depth:N`` checkpoint and a worker's halt (docs/architecture/engine.md, "Halts") hold a
question ``gated`` until the person approves it or answers it (:meth:`Stops.choose`);
saturation and a prune close a branch with its unfinished questions below; a
failed question is marked ``error``, recoverable.
"""

from __future__ import annotations

from typing import Any, cast

from ..checks import require_id, require_text, shown
from ..errors import InvalidInputError, StateError
from ..text import clip, normalize
from ..vocabulary import (
    DONE_QUESTION,
    GraphStatus,
    HaltKind,
    JsonArgument,
    NodeStatus,
    NodeType,
    SaturationReason,
    parse_choice,
    parse_metadata,
)
from .base import StoreCore
from .claim import NO_LEASE
from .llm_log import LLMLog
from .records import CallRows, ChoiceRecord, Chosen, GateList, GateRecord, Halted, HaltRecord, Saturated
from .rows import NodeRow


class Stops:
    """Gates approved and listed, halts and choices, saturation and prunes, errors: one transaction each."""

    def __init__(self, core: StoreCore, calls: LLMLog) -> None:
        self._core = core
        self._db = core.db
        self._calls = calls

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
        answers it, ``prune_branch`` cuts it; docs/architecture/engine.md, "Halts").
        """
        if node_ids is not None and (
            not isinstance(node_ids, list | tuple) or not all(isinstance(n, str) for n in node_ids)
        ):
            raise InvalidInputError(f"node_ids must be a list of node ids or null, not {node_ids!r}")
        with self._db.write():
            graph = self._core.active_graph(graph_id)
            if node_ids is None:
                gated = [
                    n
                    for n in self._core.nodes(
                        "graph_id = ? AND status = ?", [graph.graph_id, NodeStatus.GATED]
                    )
                    if "halt" not in n.metadata
                ]
            else:
                gated = [self._core.node(graph.graph_id, n) for n in dict.fromkeys(node_ids)]
                for node in gated:
                    if node.status != NodeStatus.GATED:
                        raise StateError(
                            f"node {node.node_id} is {node.status!r}, not gated; only gated "
                            "questions can be approved",
                            graph_id=graph.graph_id,
                            node_id=node.node_id,
                        )
                    refuse_held(node.node_id, node.metadata, graph.graph_id)
            now = self._core.clock()
            for node in gated:
                self._core.set_status(node, NodeStatus.OPEN, now, actor=None, kind="gate_approved")
        approved = [n.node_id for n in gated]
        return {"graph_id": graph.graph_id, "approved": approved, "count": len(approved)}

    def submit_halt(
        self,
        graph_id: str,
        node_id: str,
        halt: JsonArgument,
        *,
        owner: str,
        calls: CallRows | None = None,
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
            graph, node = self._core.active_node(graph_id, node_id)
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
            now = self._core.clock()
            meta = {k: v for k, v in node.metadata.items() if k != "halt"}
            if parsed["kind"] == HaltKind.BLOCKED:
                meta["blocked"] = {"blocker": parsed["question"], "alternatives": parsed["alternatives"]}
                status = NodeStatus.SATURATED
                self._core.set_status(
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
                self._core.set_status(
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
                self._calls.land(calls, graph.graph_id, known=[node.node_id])
        return {"node_id": node.node_id, "status": status.value, "kind": parsed["kind"]}

    def choose(self, graph_id: str, node_id: str, choice: int | str) -> Chosen:
        """The person's answer to a held question: it reopens (``open``) with ``metadata["choice"]``.

        For an ambiguity ``choice`` is an option's index (from 0), an option's text
        or a free answer; for a confusion, the clarification. The answer prompt then
        shows it (engine/primitive.py). A question that is not held, an empty choice
        or an index out of range is refused and nothing changes.
        """
        with self._db.write():
            graph, node = self._core.active_node(graph_id, node_id)
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
            self._core.set_status(
                node,
                NodeStatus.OPEN,
                self._core.clock(),
                actor=None,
                kind="chosen",
                metadata=meta,
                payload={"choice": chosen["text"]},
            )
        return {"node_id": node.node_id, "status": NodeStatus.OPEN.value, "choice": chosen}

    def list_gates(self, graph_id: str) -> GateList:
        """The gated questions in creation order, each with the halt holding it (None: a checkpoint's)."""
        graph = self._core.known_graph(graph_id)
        gates: list[GateRecord] = [
            {
                "node_id": n.node_id,
                "depth": n.depth,
                "text": n.text,
                "halt": n.metadata["halt"] if isinstance(n.metadata.get("halt"), dict) else None,
            }
            for n in self._core.nodes("graph_id = ? AND status = ?", [graph.graph_id, NodeStatus.GATED])
        ]
        held = sum(g["halt"] is not None for g in gates)
        return {"graph_id": graph.graph_id, "gates": gates, "count": len(gates), "held": held}

    def mark_error(self, graph_id: str, node_id: str, message: str) -> dict[str, Any]:
        """Mark an unfinished question as failed; ``recover_stuck(include_errors=True)`` reopens it."""
        message = require_text(message, "message")
        with self._db.write():
            graph = self._core.active_graph(graph_id)
            node = self._require_question(graph.graph_id, node_id)
            self._core.set_status(
                node, NodeStatus.ERROR, self._core.clock(), actor=node.owner, reason=message
            )
        return {"node_id": node.node_id, "status": NodeStatus.ERROR.value, "reason": message}

    # -- internals ----------------------------------------------------------------

    def _require_question(self, graph_id: str, node_id: object) -> NodeRow:
        node = self._core.node(graph_id, node_id)
        if node.node_type != NodeType.QUESTION:
            raise InvalidInputError(
                f"node {node.node_id} is an answer; this needs a question "
                f"(its question is {node.question_id})",
                graph_id=graph_id,
                node_id=node.node_id,
            )
        return node

    def _saturate(self, graph_id: str, node_id: str, reason: SaturationReason, kind: str) -> Saturated:
        with self._db.write():
            graph = self._core.graph(graph_id)
            if not (kind == "pruned" and graph.status == GraphStatus.BUDGET_EXHAUSTED):
                # A person's prune also cuts a budget_exhausted graph, which stays so: it spends
                # nothing (docs/architecture/store.md, "The graph contract").
                graph = self._core.active_graph(graph_id)
            node = self._core.node(graph.graph_id, node_id)
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
            now = self._core.clock()
            self._core.set_status(node, NodeStatus.SATURATED, now, actor=None, reason=reason, kind=kind)
            below = self._core.descendants(node.graph_id, node.node_id)
            cascaded = []
            if below:
                marks = ", ".join("?" for _ in below)
                for child in self._core.nodes(f"node_id IN ({marks}) AND node_type = 'question'", below):
                    if child.status not in DONE_QUESTION:
                        self._core.set_status(
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


# -- halts (docs/architecture/engine.md, "Halts") ---------------------------------------------------------

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
