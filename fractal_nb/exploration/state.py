"""``ex.state()``: where a long exploration stands, read from the stored state alone.

The completion standard of docs/architecture/facade.md, "The state of an exploration": from the
graph's rows, its turns and its history (no model call, nothing replayed), what the current
line of work is; which branches were explored and why; which values are verified (a citation
the store checked says it), stated (a fact on the model's own word), assumed, missing or
failed, with their node ids; which head resume would use; which earlier heads are worth
attaching from; and which deterministic checks support the final value.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from ..engine import checked_by, current, gap_rows, same_fact
from ..errors import NotFoundError
from ..text import clip, normalize, one_line
from ..vocabulary import (
    DEFAULT_STRATEGY,
    ClaimKind,
    GapKind,
    GraphStatus,
    NodeStatus,
    NodeType,
    SaturationReason,
)
from .steering import asked_text

if TYPE_CHECKING:
    from ..store import Store
    from ..store.records import LineageRecord, NodeRecord, TurnRecord

# verified: a fact a citation the store verified supports; stated: a fact on the model's own word.
ValueKind = Literal["verified", "stated", "assumed", "missing", "failed"]
VALUE_KINDS: tuple[ValueKind, ...] = ("verified", "stated", "assumed", "missing", "failed")
# Gap kinds (engine/gaps.py gap_rows) that say a value is missing rather than failed.
_MISSING_GAPS = frozenset(
    {
        GapKind.UNEXPLORED,
        GapKind.GATED,
        GapKind.HELD,
        GapKind.BLOCKED,
        GapKind.WAITING,
        GapKind.PRUNED,
        GapKind.UNKNOWN,
    }
)
# Saturation reasons a worker gives when a question is settled: done, not a gap.
_SETTLED = frozenset(
    {
        SaturationReason.SEMANTIC_OVERLAP,
        SaturationReason.DERIVABLE,
        SaturationReason.ACTIONABLE,
        SaturationReason.HOLLOW_QUESTIONS,
    }
)


class StateValue(TypedDict):
    """One value of the exploration: a fact that rests on a support, an assumption, a gap or a failure."""

    kind: ValueKind
    text: str
    node_id: str  # the question whose synthesis, answer or gap holds it
    detail: str  # a fact's support, a gap's reason, a failure's error


class Branch(TypedDict):
    """A line of questions and why it exists: the seed plan, a turn's request, or a worker's proxy signal."""

    node_id: str
    question: str
    depth: int
    origin: str  # "seed plan", "ask", "widen", "redecompose", "deepen", "note", "forked"
    turn: int | None  # the turn that made it (None: the seed plan or a worker)
    why: str
    status: str
    superseded_turn: int | None  # set: a later turn replaced it (kept, not current)


class HeadState(TypedDict):
    """A head (a turn's end) and whether it is sound ground to attach from."""

    turn: int
    head_event: int
    status: str | None
    root_synthesis: str | None
    tokens: int | None
    worth_attaching: bool
    why: str


class Check(TypedDict):
    """A deterministic check on the stored state and what it found."""

    name: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class ExplorationState:
    """Where an exploration stands: the answers to the six questions of its completion standard.

    ``to_dict()`` is the JSON the CLI prints (``fractal-nb state FILE --json``);
    ``_repr_html_`` the notebook's view, every text escaped.

    Examples
    --------
    >>> from fractal_nb import Exploration, SimulatedLLM
    >>> ex = Exploration.create("Why do cities grow?", intensity="pulse", llm=SimulatedLLM())
    >>> _ = ex.run(progress=False)
    >>> _ = ex.harvest()
    >>> state = ex.state()
    >>> state.current_head["turn"], state.open_turn, state.resume_from.startswith("head 1")
    (1, None, True)
    >>> all(check["passed"] for check in state.checks)
    True
    """

    graph_id: str
    seed: str
    status: str
    line_of_work: list[str]
    current_head: HeadState | None
    open_turn: int | None
    resume_from: str
    branches: list[Branch]
    values: list[StateValue]
    attach_from: list[HeadState]
    checks: list[Check]
    strategy: str = DEFAULT_STRATEGY.value
    """How the graph thinks: ``fractal`` or ``tracks`` (docs/architecture/engine.md, "Tracks")."""

    def to_dict(self) -> dict[str, Any]:
        """The state as JSON-ready data."""
        return asdict(self)

    def counts(self) -> dict[str, int]:
        """Values by kind: verified, stated, assumed, missing, failed."""
        return {kind: sum(v["kind"] == kind for v in self.values) for kind in VALUE_KINDS}

    def __repr__(self) -> str:
        counts = ", ".join(f"{n} {kind}" for kind, n in self.counts().items())
        failed = sum(not c["passed"] for c in self.checks)
        return (
            f"<ExplorationState {self.graph_id} {self.status}"
            f"{'' if self.strategy == 'fractal' else f' ({self.strategy})'}: {self.resume_from}; {counts}; "
            f"{len(self.checks) - failed}/{len(self.checks)} checks pass>"
        )

    def _repr_html_(self) -> str:
        e = html.escape
        parts = [
            f"<div class='fractal-state'><h4>State of {e(self.graph_id)}: {e(self.status)}</h4>",
            f"<p><b>Seed:</b> {e(self.seed)}</p>",
            f"<p><b>Strategy:</b> {e(self.strategy)}</p>" if self.strategy != DEFAULT_STRATEGY else "",
            "<p><b>Line of work</b></p><ol>",
            *(f"<li>{e(step)}</li>" for step in self.line_of_work),
            "</ol>",
            f"<p><b>Resume uses:</b> {e(self.resume_from)}</p>",
            "<p><b>Branches</b></p><ul>",
            *(
                f"<li>{e(b['question'])} <i>({e(b['origin'])}: {e(b['why'])}; {e(b['status'])}"
                f"{'; superseded in turn ' + str(b['superseded_turn']) if b['superseded_turn'] else ''})</i>"
                f" <code>{e(b['node_id'])}</code></li>"
                for b in self.branches
            ),
            "</ul>",
        ]
        for kind in VALUE_KINDS:
            rows = [v for v in self.values if v["kind"] == kind]
            parts.append(f"<p><b>{kind.capitalize()} ({len(rows)})</b></p><ul>")
            parts.extend(
                f"<li>{e(v['text'])}{' — ' + e(v['detail']) if v['detail'] else ''} "
                f"<code>{e(v['node_id'])}</code></li>"
                for v in rows
            )
            parts.append("</ul>")
        parts.append("<p><b>Heads to attach from</b></p><ul>")
        parts.extend(
            f"<li>head {h['turn']} (event {h['head_event']}): {'worth it' if h['worth_attaching'] else 'not'}"
            f" — {e(h['why'])}</li>"
            for h in self.attach_from
        )
        parts.append("</ul><p><b>Checks</b></p><ul>")
        parts.extend(
            f"<li>{'✓' if c['passed'] else '✗'} {e(c['name'])}: {e(c['detail'])}</li>" for c in self.checks
        )
        parts.append("</ul></div>")
        return "".join(parts)


def exploration_state(store: Store, graph_id: str) -> ExplorationState:
    """The state of ``graph_id`` in ``store``, read without the model."""
    graph = store.get_graph(graph_id)
    snapshot = store.get_snapshot(graph_id)
    nodes = snapshot["nodes"]
    turns = store.list_turns(graph_id)
    family = store.get_lineage(graph_id)
    heads = [t for t in turns if t["head_event"] is not None]
    open_turn = next((t for t in turns if t["head_event"] is None), None)
    return ExplorationState(
        graph_id=graph_id,
        seed=graph["seed"],
        status=graph["status"],
        line_of_work=list(_line_of_work(graph_id, turns, family)),
        current_head=_head(store, _holder(store, graph_id, heads[-1], family), heads[-1]) if heads else None,
        open_turn=open_turn["turn"] if open_turn else None,
        resume_from=_resume_from(graph["status"], heads, open_turn),
        branches=_branches(nodes, turns),
        values=_values(nodes),
        attach_from=[_head(store, _holder(store, graph_id, h, family), h) for h in heads[:-1]],
        checks=_checks(graph["root_node_id"], nodes),
        strategy=str(graph["metadata"].get("strategy", DEFAULT_STRATEGY)),
    )


def _line_of_work(
    graph_id: str, turns: Sequence[TurnRecord], family: Sequence[LineageRecord]
) -> Iterator[str]:
    me = next((g for g in family if g["graph_id"] == graph_id), None)
    if me is not None and me["forked_from"] is not None:
        yield f"forked from {me['forked_from']} at its event {me['forked_at']}"
    for t in turns:
        asked = "; ".join(asked_text(r["kind"], r["arguments"]) for r in t["requests"]) or t["kind"]
        end = f"head at event {t['head_event']} ({t['status']})" if t["head_event"] is not None else "open"
        yield f"turn {t['turn']} ({t['kind']}): {asked} -> {end}"


def _resume_from(status: str, heads: Sequence[TurnRecord], open_turn: TurnRecord | None) -> str:
    if open_turn is not None:
        since = f"head {heads[-1]['turn']} (event {heads[-1]['head_event']})" if heads else "the seed"
        return f"turn {open_turn['turn']} is open since {since}: run() continues it" + (
            # Terminal for resume (docs/architecture/store.md, "The graph contract"): a new turn goes on.
            " once new_budget() opens a new turn: the graph is budget_exhausted, terminal for resume"
            if status == GraphStatus.BUDGET_EXHAUSTED
            else " (run(resume=True): the graph is " + status + ")"
            if status in _NEEDS_RESUME
            else ""
        )
    if not heads:
        return "no head yet: run() works the seed turn"
    last = heads[-1]
    return f"head {last['turn']} (event {last['head_event']}), the current head: a new turn continues from it"


_NEEDS_RESUME = frozenset({GraphStatus.ERROR, GraphStatus.PAUSED})


def _holder(
    store: Store, graph_id: str, head: TurnRecord, family: Sequence[LineageRecord]
) -> tuple[str, int]:
    """Where ``head``'s state is read: a fork's own events, or its source's for an earlier head.

    The head a fork was made at is the fork's first (``forked``) event; an earlier one is
    read in the source (and its source, up the lineage).
    """
    by_id = {g["graph_id"]: g for g in family}
    at = head["head_event"]
    assert at is not None
    me = by_id.get(graph_id)
    if me is not None and me["forked_from"] is not None and at == me["forked_at"]:
        first = store.get_events(graph_id, limit=1)["events"]
        if first and first[0]["kind"] == "forked":
            return graph_id, int(first[0]["event_id"])
    while me is not None and me["forked_from"] is not None and me["forked_at"] is not None:
        if at > me["forked_at"]:
            break
        graph_id, me = me["forked_from"], by_id.get(me["forked_from"])
    return graph_id, at


def _head(store: Store, where: tuple[str, int], turn: TurnRecord) -> HeadState:
    head_event = turn["head_event"]
    assert head_event is not None
    graph_id, event = where
    try:
        then = store.get_state_at(graph_id, event)["nodes"]
    except NotFoundError:  # made in a source graph deleted since (its forks keep their own rows)
        return {
            "turn": turn["turn"],
            "head_event": head_event,
            "status": turn["status"],
            "root_synthesis": turn["root_synthesis"],
            "tokens": turn["tokens"],
            "worth_attaching": False,
            "why": f"made in graph {graph_id}, deleted since: its state cannot be read",
        }
    mine = current(then)
    root = next(n for n in mine if n["depth"] == 0 and n["node_type"] == NodeType.QUESTION)
    failed = [g for g in gap_rows(mine) if g["kind"] in (GapKind.FAILED, GapKind.SYNTHESIS_FAILED)]
    weak = root["metadata"].get("weak") or []
    reasons = []
    if root["status"] != NodeStatus.SYNTHESIZED:
        reasons.append("its root has no synthesis")
    if failed:
        reasons.append(f"{len(failed)} failed")
    if weak:
        reasons.append(f"its root synthesis is weak ({len(weak)} unsound sub-questions)")
    return {
        "turn": turn["turn"],
        "head_event": head_event,
        "status": turn["status"],
        "root_synthesis": turn["root_synthesis"],
        "tokens": turn["tokens"],
        "worth_attaching": not reasons,
        "why": "; ".join(reasons) if reasons else "a synthesized root on sound sub-questions, nothing failed",
    }


def _branches(nodes: Sequence[NodeRecord], turns: Sequence[TurnRecord]) -> list[Branch]:
    made: dict[
        str, tuple[str, int | None, str]
    ] = {}  # node id -> (origin, turn, why) from the turns' requests
    for t in turns:
        for r in t["requests"]:
            why = asked_text(r["kind"], r["arguments"])
            for node_id in [*r["created"], *r["reopened"]]:
                made.setdefault(node_id, (r["kind"], t["turn"], why))
    out: list[Branch] = []
    for n in nodes:
        if n["node_type"] != NodeType.QUESTION or n["depth"] == 0:
            continue
        origin, turn, why = made.get(n["node_id"], ("", None, ""))
        if not origin and n["depth"] != 1:
            continue  # a worker's sub-question: part of its branch, not a branch of its own
        if not origin:
            origin, why = "seed plan", str(n["metadata"].get("proxy_signal") or "the seed's decomposition")
        out.append(
            {
                "node_id": n["node_id"],
                "question": n["text"],
                "depth": n["depth"],
                "origin": origin,
                "turn": turn,
                "why": why,
                "status": n["status"],
                "superseded_turn": n.get("superseded_turn"),
            }
        )
    return out


def _values(nodes: list[NodeRecord]) -> list[StateValue]:
    mine = current(nodes)
    by_id = {n["node_id"]: n for n in nodes}
    out: list[StateValue] = []
    seen: set[tuple[str, str]] = set()
    for n in mine:  # creation order: the root first, then down the tree
        if n["node_type"] != NodeType.QUESTION or n["status"] != NodeStatus.SYNTHESIZED:
            continue
        for claim in n["metadata"].get("claims") or []:
            kind: ValueKind | None = None
            detail = claim["support"]
            if claim["kind"] == ClaimKind.FACT and _stated_fact(by_id, claim):
                kind, detail = _checked(claim, by_id)
            elif claim["kind"] == ClaimKind.FACT:  # written past the engine's grounding (a store call)
                kind, detail = "assumed", "stated as a fact, but no source states it as one"
            elif claim["kind"] == ClaimKind.ASSUMPTION:
                kind = "assumed"
            key = (str(kind), normalize(claim["text"]))
            if kind is None or key in seen:
                continue  # unknowns are gaps (below); a value carried up is listed once
            seen.add(key)
            out.append({"kind": kind, "text": claim["text"], "node_id": n["node_id"], "detail": detail})
    for gap in gap_rows(mine):
        kind = "missing" if gap["kind"] in _MISSING_GAPS else "failed"
        if gap["kind"] == GapKind.UNKNOWN:  # what a claim says is not known, under the question that named it
            text, detail = gap["detail"], f"unknown, named under: {gap['question']}"
        else:
            text, detail = gap["question"], f"{gap['kind']}: {gap['detail']}"
        out.append({"kind": kind, "text": text, "node_id": gap["node_id"], "detail": detail})
    for n in mine:
        weak = n["metadata"].get("weak") if n["status"] == NodeStatus.SYNTHESIZED else None
        if weak and not n["metadata"].get("synthesis_failed"):  # a joined one is a gap already
            under = ", ".join(f"{w['reason']}: {w['node_id']}" for w in weak)
            out.append(
                {"kind": "failed", "text": n["text"], "node_id": n["node_id"], "detail": f"weak ({under})"}
            )
    return out


def _checks(root_id: str, nodes: list[NodeRecord]) -> list[Check]:
    mine = current(nodes)
    by_id = {n["node_id"]: n for n in nodes}
    root = by_id[root_id]
    gaps = {g["node_id"] for g in gap_rows(mine)}
    unaccounted = [
        n["node_id"]
        for n in mine
        if n["node_type"] == NodeType.QUESTION
        and n["status"] != NodeStatus.SYNTHESIZED
        and not (n["status"] == NodeStatus.SATURATED and n["status_reason"] in _SETTLED)
        and n["node_id"] not in gaps
    ]
    facts = [
        (n, c)
        for n in mine
        if n["node_type"] == NodeType.QUESTION
        for c in n["metadata"].get("claims") or []
        if c["kind"] == ClaimKind.FACT
    ]
    unsupported = [n["node_id"] for n, c in facts if not c["support"].strip()]
    promoted = [n["node_id"] for n, c in facts if not _stated_fact(by_id, c)]
    weak = root["metadata"].get("weak") or []
    claimed = [n["node_id"] for n in mine if n["status"] == NodeStatus.CLAIMED]
    checks: list[Check] = [
        _check("every question is answered or a gap", not unaccounted, unaccounted, "current questions"),
        _check("nothing is held by a worker", not claimed, claimed, "questions"),
        {
            "name": "the root is synthesized",
            "passed": root["status"] == NodeStatus.SYNTHESIZED,
            "detail": f"root {root_id} is {root['status']}",
        },
        _check(
            "the root's synthesis rests on sound sub-questions",
            not weak,
            [w["node_id"] for w in weak],
            "unsound",
        ),
        _check("every fact names its support", not unsupported, unsupported, "facts without support under"),
        _check(
            "no assumption was promoted to a fact",
            not promoted,
            promoted,
            "facts with no stated source under",
        ),
    ]
    return checks


def _check(name: str, passed: bool, ids: Sequence[str], what: str) -> Check:
    return {
        "name": name,
        "passed": passed,
        "detail": f"{len(ids)} {what}" + (f": {', '.join(ids[:10])}" if ids else ""),
    }


def _checked(claim: Any, by_id: dict[str, NodeRecord]) -> tuple[ValueKind, str]:
    """``verified`` with the citation that supports the fact, else ``stated`` with the model's support."""
    citation = checked_by(claim, by_id)
    if citation is None:
        return "stated", f"no verified citation; the model's own support: {claim['support']}"
    lines = f"L{citation.get('line_start')}-L{citation.get('line_end')}"
    return (
        "verified",
        f"cites {citation.get('source')}:{lines}: {clip(one_line(str(citation.get('quote'))), 120)}",
    )


def _stated_fact(by_id: dict[str, NodeRecord], claim: Any) -> bool:
    """Whether the claim's source node states it as a fact (engine/grounding.py's own test)."""
    source = by_id.get(str(claim.get("source")))
    if source is None:
        return False
    return any(
        c["kind"] == ClaimKind.FACT and same_fact(claim["text"], c["text"])
        for c in source["metadata"].get("claims") or []
    )


def state_json(state: ExplorationState) -> str:
    """The state as one JSON document (the CLI's ``state --json``)."""
    return json.dumps(state.to_dict(), indent=2, ensure_ascii=False)
