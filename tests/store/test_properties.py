"""Property tests of the graph store: a random walk of store calls, checked against the contract.

``GraphMachine`` drives one fresh ``GraphStore`` per example (in memory on DuckDB; on
PostgreSQL the test's schema, emptied before each example) through
random calls (valid and invalid) and, after every step, recomputes the rules of
DESIGN.md ("The graph contract", "Tree shape and depth", "Statuses and
transitions", rules 2-8) from ``get_snapshot()`` alone, then compares the
store's own derived queries against that independent computation.

Every call goes through ``GraphMachine.call``: a ``FractalError`` is a refusal
and must leave the snapshot and the event log exactly as they were; any other
exception is a bug and fails the test. Where the contract says clearly whether
a call must be accepted or refused, an oracle computed from the snapshot
before the call says so too, so over-refusal fails as well as over-acceptance.

Covers: vocabulary.py.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from fractal_nb import (
    FractalError,
    GraphStore,
    InvalidInputError,
    NotFoundError,
)
from fractal_nb.store.database import OWN_TABLES
from fractal_nb.vocabulary import MAX_TEXT_CHARS, weakness
from tests.conftest import Backend

# -- the contract, written out independently of fractal_nb.vocabulary ---------------------

QUESTION_STATUSES = {"open", "gated", "claimed", "answered", "synthesized", "saturated", "error"}
ANSWER_STATUSES = {"answered", "saturated"}
DONE = {"synthesized", "saturated"}
PENDING = {"open", "claimed", "gated"}
TAKES_CHILDREN = {"open", "claimed", "answered"}
GRAPH_STATUSES = {"active", "paused", "completed", "error", "budget_exhausted"}
MAX_DEPTH = {"pulse": 2, "explore": 4, "deep": 6}
BUDGETS = {
    "pulse": {"max_agents": 3, "max_depth": 2, "seed_questions": [3, 4]},
    "explore": {"max_agents": 8, "max_depth": 4, "seed_questions": [5, 7]},
    "deep": {"max_agents": 15, "max_depth": 6, "seed_questions": [8, 12]},
}
REASONS = [
    "semantic_overlap",
    "derivable",
    "actionable",
    "hollow_questions",
    "budget_exhausted",
    "error",
    "pruned",
]
GRAPH_MOVES = {  # the graph transitions this machine exercises (terminal ones excluded)
    "active": {"paused", "budget_exhausted", "completed", "error"},
    "paused": {"active", "completed"},
    "budget_exhausted": {"active", "completed"},
}
# Calls that change the graph whenever they succeed (claim, approve and recover may
# find nothing to do; their rules check the events themselves).
ALWAYS_WRITES = {
    "add_node",
    "update_node",
    "synthesize_node",
    "mark_saturated",
    "prune_branch",
    "mark_error",
    "update_graph_status",
}
WORKERS = ["w1", "w2", "w3"]
LEASE_S = 10.0
START = 1_700_000_000.0  # clock steps are multiples of 0.5, exact in floats and ISO strings
BAD_IDS: list[Any] = ["n-0000000000000000", "", "   ", None, 7]


def epoch(iso: str | None) -> float | None:
    """Store ISO timestamps back to clock seconds."""
    return None if iso is None else datetime.fromisoformat(iso).timestamp()


def parsed_metadata(value: Any) -> dict[str, Any] | None:
    """What the contract accepts as metadata (a JSON object), or None when it must refuse."""
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        return None
    try:
        parsed: dict[str, Any] = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return None
    return None if holds_nul(parsed) else parsed  # refused as text fields refuse it (issue 37)


def holds_nul(value: Any) -> bool:
    """Whether JSON ``value`` has a NUL character in a key or a string, at any depth."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(holds_nul(k) or holds_nul(v) for k, v in value.items())
    return isinstance(value, list) and any(holds_nul(v) for v in value)


def good_text(value: Any) -> bool:
    """Free text the store takes: a non-blank string without NUL, within the size limit."""
    return (
        isinstance(value, str)
        and bool(value.strip())
        and "\x00" not in value
        and len(value) <= MAX_TEXT_CHARS
    )


def good_name(value: Any) -> bool:
    """Optional actor names: None or a non-blank string without NUL of at most 300 characters."""
    return value is None or (good_text(value) and len(value) <= 300)


# -- an independent reading of a snapshot ------------------------------------------------


class View:
    """The tree of one snapshot, computed without asking the store anything else."""

    def __init__(self, snapshot: dict[str, Any], events: list[dict[str, Any]]) -> None:
        self.snap = snapshot
        self.events = events
        self.nodes: list[dict[str, Any]] = snapshot["nodes"]
        self.by_id = {n["node_id"]: n for n in self.nodes}
        self.children: dict[str, list[str]] = defaultdict(list)
        for n in self.nodes:
            if n["parent_id"] is not None:
                self.children[n["parent_id"]].append(n["node_id"])
        self.status = snapshot["status"]

    def get(self, node_id: Any) -> dict[str, Any] | None:
        return self.by_id.get(node_id) if isinstance(node_id, str) else None

    def questions(self) -> list[dict[str, Any]]:
        return [n for n in self.nodes if n["node_type"] == "question"]

    def question_of(self, node: dict[str, Any]) -> dict[str, Any]:
        """A question itself, or the question an answer answers."""
        return node if node["node_type"] == "question" else self.by_id[node["parent_id"]]

    def parent_question(self, q: dict[str, Any]) -> dict[str, Any]:
        """The question a (non-root) question hangs under, directly or through an answer."""
        return self.question_of(self.by_id[q["parent_id"]])

    def in_saturated_branch(self, q: dict[str, Any]) -> bool:
        """Whether a question above ``q`` is saturated (a pruned branch)."""
        while q["parent_id"] is not None:
            q = self.parent_question(q)
            if q["status"] == "saturated":
                return True
        return False

    def sub_questions(self, qid: str) -> list[dict[str, Any]]:
        subs = []
        for c in self.children[qid]:
            child = self.by_id[c]
            if child["node_type"] == "question":
                subs.append(child)
            else:
                subs.extend(self.by_id[g] for g in self.children[c])
        return subs

    def descendants(self, node_id: str) -> list[str]:
        out, stack = [], list(self.children[node_id])
        while stack:
            nid = stack.pop()
            out.append(nid)
            stack.extend(self.children[nid])
        return out

    def ready(self) -> list[dict[str, Any]]:
        return [
            q
            for q in self.questions()
            if q["status"] == "answered"
            and (subs := self.sub_questions(q["node_id"]))
            and all(s["status"] in DONE for s in subs)
        ]

    def claimable(self, now: float) -> list[dict[str, Any]]:
        """Open questions below the root, and claims whose lease ran out (rule 5)."""
        return [
            q
            for q in self.questions()
            if q["depth"] > 0
            and (
                q["status"] == "open"
                or (q["status"] == "claimed" and epoch(q["claimed_at"]) + LEASE_S <= now)  # type: ignore[operator]
            )
        ]

    def graph_done(self) -> bool:
        return not any(q["status"] in PENDING for q in self.questions())

    def linked(self, a: str, b: str, edge_type: str) -> bool:
        return any(
            e["edge_type"] == edge_type and {e["from_node"], e["to_node"]} == {a, b}
            for e in self.snap["edges"]
        )


@dataclass
class Outcome:
    """What one call did: its result (None when refused) and the state around it."""

    result: Any
    error: FractalError | None
    before: View
    after: View
    new_events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None


# -- strategies --------------------------------------------------------------------------

TEXTS = ["Why do cities grow?", "Because of trade.", "What trade?", "x"]
BAD_TEXTS = ["", "   ", None, 3]
OWNERS = [None, None, "w1", "w2", "w3"]
GOOD_METADATA: list[Any] = [
    None,
    None,
    {"source": "test"},
    {"score": 0.5, "tags": ["a", "b"], "nested": {"k": None}},
    '{"from": "json string"}',
    "{}",
]
BAD_METADATA: list[Any] = [
    "[1, 2]",  # JSON, but not an object
    "not json at all",
    5,
    ["a"],
    {1: "int key"},
    {"x": float("nan")},
    {"x": {1, 2}},
]
FLAWS = [None, None, None, None, "kind", "text", "owner", "metadata", "parent"]


class GraphMachine(RuleBasedStateMachine):
    """Random store calls on one graph, with every contract rule checked after each step."""

    backend: Backend | None = None  # set by test_graph_machine: where each example's store lives

    def __init__(self) -> None:
        super().__init__()
        self.now = START
        assert self.backend is not None, "run by test_graph_machine, which names the backend"
        self.store = emptied_store(self.backend, clock=lambda: self.now, lease_s=LEASE_S)
        # A second graph in the same store: its ids are "foreign" to the graph under
        # test, and nothing done to the graph under test may touch it.
        foreign = self.store.create_graph("A foreign graph", "explore", "autonomous")
        self.foreign_gid = foreign["graph_id"]
        answer = self.store.add_node(self.foreign_gid, foreign["root_node_id"], "answer", "Elsewhere.")
        self.foreign_ids = [foreign["root_node_id"], answer["node_id"]]
        self.foreign_state = self._state(self.foreign_gid)
        self.gid = ""  # set by create(); self.view stays None until then
        self.view: View | None = None
        self.checked: tuple[float, dict[str, Any]] | None = None
        self.checked_links: dict[str, Any] | None = None
        self.checked_ready: dict[str, Any] | None = None
        self.plain: set[str] = set()  # questions claimed with holder=None (a plain lease)
        self.synth: dict[str, tuple[str, float]] = {}  # synthesis claims: node -> (worker, claimed at)

    def teardown(self) -> None:
        try:
            if self.view is not None:
                assert self._state(self.foreign_gid) == self.foreign_state, "foreign graph changed"
                everything = self.store.get_events(self.gid)["events"]
                assert everything == self.view.events, "the event log was rewritten"
                self._finish()
        finally:
            self.store.close()

    def _finish(self) -> None:
        """Complete the graph: terminal, so every write and every way back is refused."""
        goal = "completed" if self.now % 1 == 0 else "error"
        out = self.call(
            "update_graph_status",
            self.store.update_graph_status,
            self.gid,
            goal,
            "done",
            expect_ok=True,
        )
        assert out.after.status == goal and out.after.nodes == out.before.nodes
        claim = self.call("claim_work", self.store.claim_work, self.gid, "w1", expect_ok=True)
        assert claim.result["node_id"] is None and claim.result["graph_done"] is True
        assert claim.after.snap == claim.before.snap and not claim.new_events
        refused = [
            ("resume_graph", self.store.resume_graph, ()),
            # error -> active is an explicit resume (vocabulary.GRAPH_TRANSITIONS); error -> paused is not
            (
                "update_graph_status",
                self.store.update_graph_status,
                ("active" if goal == "completed" else "paused",),
            ),
            ("recover_stuck", self.store.recover_stuck, (0,)),
            ("add_node", self.store.add_node, (self.root, "answer", "Late.")),
        ]
        name, fn, args = refused[len(self.created) % len(refused)]  # one, to keep the run short
        self.call(name, fn, self.gid, *args, expect_ok=False)

    # -- setup ---------------------------------------------------------------------------

    @initialize(
        data=st.data(),
        intensity=st.sampled_from(["pulse", "explore", "deep"]),
        checkpoint=st.sampled_from(["autonomous", "depth:1", "depth:2"]),
        seeds=st.sampled_from([0, 1, 2, 3, 3]),
    )
    def create(self, data: st.DataObject, intensity: str, checkpoint: str, seeds: int) -> None:
        """Create the graph; unless ``seeds`` is 0, run a seed phase and grow a random tree."""
        if intensity == "pulse" and checkpoint == "depth:2":  # no question sits at depth 2 in pulse
            with pytest.raises(InvalidInputError, match="would never gate"):
                self.store.create_graph("Why do cities grow?", intensity, checkpoint)
            checkpoint = "depth:1"
        g = self.store.create_graph("Why do cities grow?", intensity, checkpoint, metadata={"t": 1})
        assert g["intensity"] == intensity and g["checkpoint_mode"] == checkpoint
        assert g["budget"] == BUDGETS[intensity] and g["status"] == "active"
        self.gid, self.root = g["graph_id"], g["root_node_id"]
        self.max_depth = MAX_DEPTH[intensity]
        self.every = int(checkpoint.split(":")[1]) if checkpoint.startswith("depth:") else None
        self.created = [self.root]  # node ids in the order the store handed them out
        self.view = View(*self._state(self.gid))
        assert [n["node_id"] for n in self.view.nodes] == [self.root]
        assert self.view.snap["checkpoint_mode"] == checkpoint
        assert self.view.snap["metadata"] == {"t": 1}
        assert self.view.events, "create_graph logged nothing"
        if not seeds:
            return
        # The seed phase (the root's answer, seed questions under it), then some
        # questions answered and decomposed further, so deep rules have material.
        frontier = [(self.root, 0)]
        while frontier and len(self.created) < 16:
            qid, depth = frontier.pop(0)
            answer = self.store.add_node(self.gid, qid, "answer", "An answer.")
            self.created.append(answer["node_id"])
            width = seeds if depth == 0 else data.draw(st.integers(0, 2), label="width")
            for i in range(width if depth + 1 < self.max_depth else 0):
                q = self.store.add_node(self.gid, answer["node_id"], "question", f"Q{depth + 1}.{i}")
                assert q["status"] == ("gated" if self.gates(depth + 1) else "open"), q
                self.created.append(q["node_id"])
                if q["status"] == "open" and data.draw(st.booleans(), label="answer it?"):
                    frontier.append((q["node_id"], depth + 1))
        self.view = View(*self._state(self.gid))

    # -- plumbing ------------------------------------------------------------------------

    def _state(self, gid: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        return self.store.get_snapshot(gid), self.store.get_events(gid)["events"]

    def _read(self) -> View:
        """The graph now: a fresh snapshot, and the events logged since the last read.

        Reading only new events keeps each step cheap; teardown reads the whole log
        once and checks it against what was gathered here (nothing rewritten).
        """
        assert self.view is not None
        last = self.view.events[-1]["event_id"] if self.view.events else 0
        fresh = self.store.get_events(self.gid, since=last)["events"]
        return View(self.store.get_snapshot(self.gid), self.view.events + fresh)

    def gates(self, depth: int) -> bool:
        return self.every is not None and depth > 0 and depth % self.every == 0

    def call(self, name: str, fn: Any, *args: Any, expect_ok: bool | None = None, **kw: Any) -> Outcome:
        """Run one store call; a refusal must change nothing; the caller checks the rest."""
        assert self.view is not None
        before = self.view
        note(f"{name}{args[1:] if args else ''} {kw or ''} -> expect_ok={expect_ok}")
        try:
            result = fn(*args, **kw)
        except FractalError as exc:
            after = self._read()
            assert after.snap == before.snap, f"refused {name} ({exc}) changed the snapshot"
            assert after.events == before.events, f"refused {name} ({exc}) logged events"
            assert str(exc).strip(), f"{name} refused without a message"
            assert expect_ok is not True, f"{name} was refused but the contract accepts it: {exc!r}"
            note(f"  refused: {type(exc).__name__}: {exc}")
            return Outcome(None, exc, before, after)
        # Not a FractalError: any other exception propagates and fails the test.
        after = self._read()
        assert expect_ok is not False, f"{name} was accepted but the contract refuses it: {result!r}"
        assert isinstance(result, dict), f"{name} returned {type(result).__name__}, not a dict"
        json.dumps(result)  # JSON-ready
        n = len(before.events)
        assert after.events[:n] == before.events, f"{name} rewrote past events"
        new_events = after.events[n:]
        if after.snap != before.snap or name in ALWAYS_WRITES:
            assert new_events, f"{name} succeeded but logged no event"
        for e in new_events:
            assert e["graph_id"] == self.gid and (e["node_id"] is None or e["node_id"] in after.by_id)
        self.view = after
        return Outcome(result, None, before, after, new_events)

    def pick(self, data: st.DataObject, pool: list[str] | None = None, bad: bool = True) -> Any:
        """A node id: from ``pool`` (default: every node), now and then (``bad``) an invalid one."""
        assert self.view is not None
        ids = [n["node_id"] for n in self.view.nodes] if pool is None else pool
        if not ids or (bad and data.draw(st.integers(0, 7), label="invalid?") == 0):
            return self.bad_id(data)
        return data.draw(st.sampled_from(ids), label="node")

    def below_root(self, data: st.DataObject) -> list[str] | None:
        """Every node but the root, or (one time in six) all: saturating the root ends the walk."""
        assert self.view is not None
        if data.draw(st.integers(0, 5), label="root too?") == 0:
            return None
        return [n["node_id"] for n in self.view.nodes[1:]]

    def bad_id(self, data: st.DataObject) -> Any:
        """An id that names no node of this graph: unknown, blank, not a string, or foreign."""
        return data.draw(st.sampled_from(BAD_IDS + self.foreign_ids), label="bad id")

    def unchanged_except(self, out: Outcome, changed: set[str]) -> None:
        """Every node not in ``changed`` is exactly as before; nodes are only ever added."""
        for n in out.before.nodes:
            if n["node_id"] not in changed:
                assert out.after.by_id[n["node_id"]] == n, f"node {n['node_id']} changed unexpectedly"

    @property
    def active(self) -> bool:
        assert self.view is not None
        return self.view.status == "active"

    # -- rules: adding nodes -------------------------------------------------------------

    @rule(data=st.data(), kind=st.sampled_from(["answer", "question"]), flaw=st.sampled_from(FLAWS))
    def add_node(self, data: st.DataObject, kind: str, flaw: str | None) -> None:
        """Add under any node (or a bad id), with at most one bad argument."""
        parent_id = self.pick(data, bad=False) if flaw != "parent" else self.bad_id(data)
        self._add(data, parent_id, kind, flaw)

    @rule(data=st.data(), kind=st.sampled_from(["answer", "question", "question"]))
    def grow(self, data: st.DataObject, kind: str) -> None:
        """Add under a parent that can take the child, so the tree grows deep."""
        v = self.view
        assert v is not None
        pool = [
            n["node_id"]
            for n in v.nodes
            if v.question_of(n)["status"] in TAKES_CHILDREN
            and (kind == "question" or n["node_type"] == "question")
            and (kind == "answer" or v.question_of(n)["depth"] + 1 < self.max_depth)
            and n["status"] != "saturated"
        ]
        self._add(data, self.pick(data, pool, bad=False), kind, None)

    def _add(
        self, data: st.DataObject, parent_id: Any, kind: str, flaw: str | None, owner: Any = ...
    ) -> Outcome:
        v = self.view
        assert v is not None
        kind = "bogus" if flaw == "kind" else kind
        text = data.draw(st.sampled_from(BAD_TEXTS if flaw == "text" else TEXTS), label="text")
        if flaw == "owner":
            owner = ""
        elif owner is ...:
            owner = data.draw(st.sampled_from(OWNERS), label="owner")
        metadata = data.draw(
            st.sampled_from(BAD_METADATA if flaw == "metadata" else GOOD_METADATA), label="metadata"
        )
        meta = parsed_metadata(metadata)
        ok = (
            self.active
            and kind in ("answer", "question")
            and good_text(text)
            and good_name(owner)
            and meta is not None
        )
        parent = v.get(parent_id)
        if parent is None:
            ok = False
        elif ok:
            if parent["node_type"] == "answer" and (kind == "answer" or parent["status"] == "saturated"):
                ok = False
            else:
                q = v.question_of(parent)
                depth = q["depth"] + (1 if kind == "question" else 0)
                ok = (
                    # a question under a synthesized question's answer reopens it (boundary questions),
                    # unless a question above it is saturated (a pruned branch stays closed)
                    (
                        q["status"] in TAKES_CHILDREN
                        or (
                            kind == "question"
                            and q["status"] == "synthesized"
                            and not v.in_saturated_branch(q)
                        )
                    )
                    and not (q["status"] == "claimed" and owner and q["owner"] != owner)
                    and not (kind == "question" and depth >= self.max_depth)
                )
        return self._checked_add(parent_id, kind, text, owner, metadata, meta, ok)

    def _checked_add(
        self,
        parent_id: Any,
        kind: str,
        text: Any,
        owner: Any,
        metadata: Any,
        meta: dict[str, Any] | None,
        ok: bool,
    ) -> Outcome:
        out = self.call(
            "add_node",
            self.store.add_node,
            self.gid,
            parent_id,
            kind,
            text,
            owner=owner,
            metadata=metadata,
            expect_ok=ok,
        )
        if not out.ok:
            return out
        r = out.result
        new = out.after.get(r["node_id"])
        assert new is not None and r["node_id"] not in out.before.by_id
        self.created.append(r["node_id"])
        parent = out.before.by_id[parent_id]
        q = out.before.question_of(parent)
        depth = q["depth"] + (1 if kind == "question" else 0)
        status = "answered" if kind == "answer" else ("gated" if self.gates(depth) else "open")
        assert r == {
            "node_id": new["node_id"],
            "graph_id": self.gid,
            "parent_id": parent_id,
            "depth": depth,
            "node_type": kind,
            "status": status,
        }
        assert (new["parent_id"], new["depth"], new["node_type"], new["status"]) == (
            parent_id,
            depth,
            kind,
            status,
        )
        assert new["text"] == text and new["owner"] == owner and new["metadata"] == meta
        # Rule 2: an answer, or a sub-question directly under a question, answers that question.
        q_after = out.after.by_id[q["node_id"]]
        changed = {q["node_id"]}
        if q["status"] in ("open", "claimed"):
            assert q_after["status"] == "answered", f"rule 2: {q['status']} question not answered"
        elif q["status"] == "synthesized":  # reopened, with every synthesized question above it
            up = q
            while up is not None and up["status"] == "synthesized":
                after = out.after.by_id[up["node_id"]]
                assert after["status"] == "answered" and "synthesis" not in after["metadata"]
                changed.add(up["node_id"])
                parent = out.before.get(up["parent_id"]) if up["parent_id"] else None
                up = out.before.question_of(parent) if parent is not None else None
        else:
            assert q_after["status"] == q["status"]
        self.unchanged_except(out, changed)
        assert any(e["kind"] == "node_added" and e["node_id"] == new["node_id"] for e in out.new_events)
        return out

    # -- rules: the work queue -----------------------------------------------------------

    @rule(
        worker=st.sampled_from([*WORKERS, ""]),
        wait=st.sampled_from([0.0, LEASE_S - 0.5, LEASE_S]),
        plain=st.booleans(),
    )
    def claim_work(self, worker: str, wait: float, plain: bool) -> None:
        """Claim (held by this open store, or a plain lease), then maybe let the lease run (rule 5)."""
        self._claim(worker, plain=plain)
        self.now += wait

    @rule(worker=st.sampled_from(WORKERS))
    def claim_synthesis(self, worker: str) -> None:
        """The store hands the deepest ready question no one holds to one worker at a time."""
        v = self.view
        assert v is not None
        was_active = self.active
        live = {n: held for n, held in self.synth.items() if held[1] + LEASE_S > self.now}
        candidates = sorted(
            (q for q in v.ready() if q["node_id"] not in live), key=lambda q: (-q["depth"], q["seq"])
        )
        out = self.call("claim_synthesis", self.store.claim_synthesis, self.gid, worker, expect_ok=True)
        assert out.after.snap == out.before.snap, "a synthesis claim changed the graph"
        if not was_active:
            assert out.result["node_id"] is None and not out.new_events
            return
        self.synth = live  # expired synthesis claims were dropped
        if not candidates:
            assert out.result["node_id"] is None and not out.new_events
            return
        nid = out.result["node_id"]
        assert nid == candidates[0]["node_id"], "not the deepest ready question no one holds"
        assert [e["kind"] for e in out.new_events] == ["synthesis_claimed"]
        self.synth[nid] = (worker, self.now)

    @rule(data=st.data(), worker=st.sampled_from(WORKERS))
    def submit_synthesis(self, data: st.DataObject, worker: str) -> None:
        """Only the worker holding a synthesis may write it (and only while it may be synthesized)."""
        v = self.view
        assert v is not None
        nid = self.pick(data, list(self.synth), bad=False) if self.synth else self.root
        node = v.get(nid)
        holds = nid in self.synth and self.synth[nid][0] == worker
        ok = (
            holds
            and self.active
            and node is not None
            and node["status"] == "answered"
            and all(q["status"] in DONE for q in v.sub_questions(nid))
        )
        out = self.call(
            "submit_synthesis",
            lambda: self.store.submit_synthesis(self.gid, nid, "A held synthesis.", worker_id=worker),
            expect_ok=ok,
        )
        if out.ok:
            assert out.after.by_id[nid]["status"] == "synthesized"
            self.unchanged_except(out, {nid})
            self.synth.pop(nid)

    @rule(
        data=st.data(),
        worker=st.sampled_from(WORKERS),
        subs=st.integers(0, 2),
        finish=st.booleans(),
    )
    def work(self, data: st.DataObject, worker: str, subs: int, finish: bool) -> None:
        """What a worker does: claim, answer as the owner, decompose, synthesize a leaf."""
        out = self._claim(worker)
        if not out.ok or out.result["node_id"] is None:
            return
        nid = out.result["node_id"]
        answer = self._add(data, nid, "answer", None, owner=worker)
        if answer.ok:
            for _ in range(subs):
                self._add(data, answer.result["node_id"], "question", None, owner=worker)
        if finish or not subs:
            self._synthesize(nid, "A leaf synthesis.")

    def _claim(self, worker: str, *, plain: bool = False) -> Outcome:
        assert self.view is not None
        was_active = self.active
        candidates = {q["node_id"] for q in self.view.claimable(self.now)}
        holder = None if plain else "store"
        out = self.call(
            "claim_work",
            lambda *a: self.store.claim_work(*a, holder=holder),
            self.gid,
            worker,
            expect_ok=good_text(worker),
        )
        if not out.ok:
            return out
        r = out.result
        if not was_active:
            assert r["node_id"] is None and r["graph_done"] is False  # paused: not terminal
            assert out.after.snap == out.before.snap and not out.new_events
            return out
        if r["node_id"] is None:
            assert not candidates, f"claim returned nothing while {sorted(candidates)} were claimable"
            assert r["graph_done"] == out.before.graph_done(), "graph_done disagrees with the nodes"
            assert out.after.snap == out.before.snap
            return out
        nid = r["node_id"]
        (self.plain.add if plain else self.plain.discard)(nid)
        assert nid != self.root, "claim_work handed out the root"
        assert nid in candidates, f"claimed {nid}, which was not claimable"
        assert r["graph_done"] is False
        node = out.after.by_id[nid]
        assert node["status"] == "claimed" and node["owner"] == worker
        assert epoch(node["claimed_at"]) == self.now
        assert (r["text"], r["depth"], r["parent_id"], r["metadata"]) == (
            node["text"],
            node["depth"],
            node["parent_id"],
            node["metadata"],
        )
        self.unchanged_except(out, {nid})
        assert out.new_events
        return out

    def _synthesize(self, node_id: Any, text: Any) -> None:
        v = self.view
        assert v is not None
        node = v.get(node_id)
        ok = (
            self.active
            and good_text(text)
            and node is not None
            and node["node_type"] == "question"
            and node["status"] == "answered"
            and all(s["status"] in DONE for s in v.sub_questions(node_id))
        )
        out = self.call("synthesize_node", self.store.synthesize_node, self.gid, node_id, text, expect_ok=ok)
        if out.ok:
            self.synth.pop(node_id, None)  # synthesize_node drops a synthesis claim
            after = out.after.by_id[node_id]
            assert out.result == {"node_id": node_id, "status": "synthesized"}
            assert after["status"] == "synthesized"
            # The weak mark is read off the children at every write (docs/architecture/engine.md,
            # "Facts, assumptions, unknowns").
            weak = [
                {"node_id": c["node_id"], "reason": reason.value}
                for c in v.sub_questions(node_id)
                if (reason := weakness(c["status"], c["status_reason"], c["metadata"])) is not None
            ]
            kept = {k: m for k, m in node["metadata"].items() if k not in ("weak", "claims")}  # type: ignore[index]
            assert {k: m for k, m in after["metadata"].items() if k != "weak"} == {**kept, "synthesis": text}
            assert sorted(after["metadata"].get("weak", []), key=str) == sorted(weak, key=str)
            self.unchanged_except(out, {node_id})

    @rule(data=st.data(), text=st.sampled_from(TEXTS + BAD_TEXTS[:2]))
    def synthesize_any(self, data: st.DataObject, text: Any) -> None:
        self._synthesize(self.pick(data), text)

    @rule(data=st.data())
    def synthesize_candidate(self, data: st.DataObject) -> None:
        """Synthesize what is ready, or an answered leaf (what a worker does at once)."""
        v = self.view
        assert v is not None
        pool = [q["node_id"] for q in v.ready()] + [
            q["node_id"]
            for q in v.questions()
            if q["status"] == "answered" and not v.sub_questions(q["node_id"])
        ]
        self._synthesize(self.pick(data, pool, bad=False), "A synthesis.")

    @rule(rounds=st.integers(1, 3))
    def harvest(self, rounds: int) -> None:
        """Synthesize what is ready, deepest first, a few rounds up the tree (rule 3's cascade)."""
        for _ in range(rounds):
            assert self.view is not None
            ready = sorted(self.view.ready(), key=lambda q: (-q["depth"], q["seq"]))
            if not ready:
                return
            self._synthesize(ready[0]["node_id"], "A synthesis of the parts.")

    @rule(
        older=st.sampled_from([None, None, 0, 5, 20, -1, True, "5"]),
        include_errors=st.booleans(),
        worker=st.sampled_from([None, None, "w1", "w2", ""]),
    )
    def recover_stuck(self, older: Any, include_errors: bool, worker: Any) -> None:
        v = self.view
        assert v is not None
        good_older = older is None or (
            isinstance(older, int | float) and not isinstance(older, bool) and older >= 0
        )
        ok = good_older and good_name(worker)
        expected: set[str] = set()
        # A question saturated as failed reopens unless a node above it stays saturated (rule 4),
        # read from the top down: under a failed question that reopens, it reopens too.
        for q in sorted(v.questions(), key=lambda q: q["depth"]):
            if q["status"] == "claimed":
                at = epoch(q["claimed_at"])
                assert at is not None
                if worker is not None and q["owner"] != worker:
                    continue
                if older is not None:
                    # A claim of a live holder (this open store) goes only for a named worker.
                    live = q["node_id"] not in self.plain and worker is None
                    if good_older and at <= self.now - older and not live:
                        expected.add(q["node_id"])
                elif worker is not None or at + LEASE_S <= self.now:
                    expected.add(q["node_id"])
            elif include_errors and q["status"] == "error":
                expected.add(q["node_id"])
            elif include_errors and q["status"] == "saturated" and q["status_reason"] == "error":
                up, blocked = q, False
                while up["parent_id"] is not None and not blocked:
                    up = v.by_id[up["parent_id"]]
                    blocked = up["status"] == "saturated" and up["node_id"] not in expected
                if not blocked:
                    expected.add(q["node_id"])
        out = self.call(
            "recover_stuck",
            self.store.recover_stuck,
            self.gid,
            older,
            include_errors=include_errors,
            worker_id=worker,
            expect_ok=ok,
        )
        if not out.ok:
            return
        assert set(out.result["recovered"]) == expected
        if worker is not None:  # that worker's synthesis claims go too
            self.synth = {n: held for n, held in self.synth.items() if held[0] != worker}
        assert out.result["count"] == len(expected) == len(out.result["recovered"])
        for nid in expected:
            node = out.after.by_id[nid]
            assert node["status"] == "open" and node["claimed_at"] is None
        # A question saturated as failed reopens the syntheses written over it (the weak mark's recovery).
        reopened = {
            n["node_id"]
            for n in out.before.nodes
            if n["status"] == "synthesized" and out.after.by_id[n["node_id"]]["status"] == "answered"
        }
        self.unchanged_except(out, expected | reopened)
        assert bool(out.new_events) == bool(expected)

    @rule(seconds=st.sampled_from([0.5, 3.0, 9.5, 10.0, 30.0]))
    def advance_clock(self, seconds: float) -> None:
        self.now += seconds

    # -- rules: saturation, gates, errors --------------------------------------------------

    def _saturate(self, node_id: Any, reason: str, prune: bool) -> None:
        v = self.view
        assert v is not None
        node = v.get(node_id)
        ok = (
            self.active
            and reason in REASONS
            and node is not None
            and node["status"] != "saturated"
            and not (node["node_type"] == "question" and node["status"] in DONE)
            and node_id != self.root  # the root and its answer: the exploration's result
            and not (node["node_type"] == "answer" and node["parent_id"] == self.root)
        )
        if prune:
            out = self.call("prune_branch", self.store.prune_branch, self.gid, node_id, expect_ok=ok)
        else:
            out = self.call(
                "mark_saturated", self.store.mark_saturated, self.gid, node_id, reason, expect_ok=ok
            )
        if not out.ok:
            return
        assert node is not None
        head = out.after.by_id[node_id]
        assert head["status"] == "saturated" and head["status_reason"] == reason
        # Rule 4: every unfinished question below takes the same reason, as inherited.
        cascade = [
            d
            for d in v.descendants(node_id)
            if v.by_id[d]["node_type"] == "question" and v.by_id[d]["status"] not in DONE
        ]
        for d in cascade:
            after = out.after.by_id[d]
            assert after["status"] == "saturated", f"cascade missed {d}"
            assert after["status_reason"] == reason and after["inherited_from"] == node_id
        assert set(out.result["cascaded"]) == set(cascade)
        assert out.result["status"] == "saturated" and out.result["reason"] == reason
        self.unchanged_except(out, {node_id, *cascade})

    @rule(data=st.data(), reason=st.sampled_from([*REASONS, "bogus"]))
    def mark_saturated(self, data: st.DataObject, reason: str) -> None:
        self._saturate(self.pick(data, self.below_root(data)), reason, prune=False)

    @rule(data=st.data())
    def prune_branch(self, data: st.DataObject) -> None:
        self._saturate(self.pick(data, self.below_root(data)), "pruned", prune=True)

    @rule(data=st.data(), how=st.sampled_from(["all", "none", "gated", "any", "not a list"]))
    def approve_gate(self, data: st.DataObject, how: str) -> None:
        v = self.view
        assert v is not None
        gated = [q["node_id"] for q in v.questions() if q["status"] == "gated"]
        ids: Any
        if how == "all":
            ids, expected = None, gated
        elif how == "none":
            ids, expected = [], []
        elif how == "gated":
            ids = data.draw(st.lists(st.sampled_from(gated), max_size=3)) if gated else []
            expected = list(dict.fromkeys(ids))
        elif how == "any":
            ids = [self.pick(data)]
            expected = ids
        else:
            ids, expected = gated[0] if gated else "n-x", []
        ok = self.active and (
            ids is None
            or (isinstance(ids, list) and all((n := v.get(i)) and n["status"] == "gated" for i in ids))
        )
        out = self.call("approve_gate", self.store.approve_gate, self.gid, ids, expect_ok=ok)
        if not out.ok:
            return
        assert set(out.result["approved"]) == set(expected) and out.result["count"] == len(expected)
        for nid in expected:
            assert out.after.by_id[nid]["status"] == "open"
        self.unchanged_except(out, set(expected))
        assert bool(out.new_events) == bool(expected)

    @rule(data=st.data(), message=st.sampled_from(["boom", "boom", ""]))
    def mark_error(self, data: st.DataObject, message: str) -> None:
        v = self.view
        assert v is not None
        node_id = self.pick(data, [q["node_id"] for q in v.questions()] if data.draw(st.booleans()) else None)
        node = v.get(node_id)
        ok = (
            self.active
            and good_text(message)
            and node is not None
            and node["node_type"] == "question"
            and node["status"] in {"open", "claimed", "answered"}
        )
        out = self.call("mark_error", self.store.mark_error, self.gid, node_id, message, expect_ok=ok)
        if out.ok:
            after = out.after.by_id[node_id]
            assert after["status"] == "error" and after["status_reason"] == message
            self.unchanged_except(out, {node_id})

    # -- rules: metadata and links -------------------------------------------------------

    @rule(data=st.data())
    def update_node(self, data: st.DataObject) -> None:
        v = self.view
        assert v is not None
        live = [n["node_id"] for n in v.nodes if "saturated" not in (n["status"], v.question_of(n)["status"])]
        node_id = self.pick(data, live if data.draw(st.booleans()) else None)
        valid = ["note", "converge", "contradict", "both", "json"]
        invalid = [
            "list json",
            "not json",
            "int",
            "empty",
            "link not a list",
            "self link",
            "insight not text",
        ]
        form = data.draw(st.sampled_from(valid if data.draw(st.integers(0, 2)) else invalid), label="form")

        others = [n["node_id"] for n in v.nodes if n["node_id"] != node_id]

        def targets() -> list[Any]:
            return [self.pick(data, others) for _ in range(data.draw(st.integers(1, 3), label="links"))]

        meta: Any
        if form == "note":
            meta = {"note": data.draw(st.sampled_from(["a", "b", 1, None]))}
        elif form == "converge":
            meta = {
                "convergence_with": targets(),
                "convergence_insight": data.draw(st.sampled_from(["same root cause", "", None])),
            }
        elif form == "contradict":
            meta = {"contradiction_with": targets(), "contradiction_tension": "they disagree"}
        elif form == "both":
            meta = {"convergence_with": targets(), "contradiction_with": targets()}
        elif form == "json":
            meta = '{"note": "from json"}'
        elif form == "list json":
            meta = "[1, 2]"
        elif form == "not json":
            meta = "not json"
        elif form == "int":
            meta = 5
        elif form == "empty":
            meta = {}
        elif form == "link not a list":
            meta = {"convergence_with": "n-x"}
        elif form == "self link":
            meta = {"contradiction_with": [node_id]}
        else:
            meta = {"convergence_with": targets(), "convergence_insight": 3}
        parsed = parsed_metadata(meta)
        node = v.get(node_id)
        if parsed == {}:  # nothing to merge: a no-op on any node that exists, whatever the graph's status
            try:
                result = self.store.update_node(self.gid, node_id, meta)
            except FractalError:
                assert node is None, "update_node with {} refused on a node that exists"
            else:
                assert node is not None and result["metadata"] == node["metadata"]
            after = self._read()
            assert after.snap == v.snap and after.events == v.events, "update_node with {} changed something"
            return
        links: list[tuple[str, str, dict[str, Any]]] = []
        ok = self.active and bool(parsed) and node is not None
        if ok:
            assert parsed is not None and node is not None
            q = v.question_of(node)
            ok = node["status"] != "saturated" and q["status"] != "saturated"
            for key, edge_type, text_key, edge_key in (
                ("convergence_with", "convergence", "convergence_insight", "insight"),
                ("contradiction_with", "contradiction", "contradiction_tension", "tension"),
            ):
                if key not in parsed:
                    continue
                tlist, text = parsed[key], parsed.get(text_key)
                if not isinstance(tlist, list) or not all(isinstance(t, str) for t in tlist):
                    ok = False
                    continue
                if text is not None and not isinstance(text, str):
                    ok = False
                for t in dict.fromkeys(tlist):
                    if t == node_id or t not in v.by_id:
                        ok = False
                    links.append((edge_type, t, {edge_key: text} if text else {}))
        out = self.call("update_node", self.store.update_node, self.gid, node_id, meta, expect_ok=ok)
        if not out.ok:
            return
        assert node is not None and parsed is not None
        merged = {**node["metadata"], **parsed}
        assert out.result["metadata"] == merged == out.after.by_id[node_id]["metadata"]
        fresh = [(t, o, m) for (t, o, m) in links if not v.linked(node_id, o, t)]
        assert out.result["edges_created"] == len(fresh)
        new_edges = out.after.snap["edges"][len(v.snap["edges"]) :]
        assert out.after.snap["edges"][: len(v.snap["edges"])] == v.snap["edges"]
        assert [(e["edge_type"], e["to_node"], e["metadata"]) for e in new_edges] == fresh
        assert all(e["from_node"] == node_id for e in new_edges)
        self.unchanged_except(out, {node_id})

    # -- rules: the graph's own status, wrong graph ids ----------------------------------------

    @rule(
        data=st.data(),
        goal=st.sampled_from(["paused", "budget_exhausted", "active"]),
        back=st.sampled_from(["resume", "update"]),
    )
    def graph_status(self, data: st.DataObject, goal: str, back: str) -> None:
        """Leave ``active`` (or try to), probe the writes a non-active graph refuses, come back."""
        current = self.view.status  # type: ignore[union-attr]
        assert current == "active"  # every step that leaves it comes back within the step
        out = self.call("resume_graph", self.store.resume_graph, self.gid, expect_ok=True)
        assert out.result == out.after.snap and out.after.snap == out.before.snap
        ok = goal in GRAPH_MOVES[current]
        out = self.call("update_graph_status", self.store.update_graph_status, self.gid, goal, expect_ok=ok)
        if not out.ok:
            return
        assert out.result == {"graph_id": self.gid, "status": goal, "previous_status": current}
        assert out.after.status == goal and out.after.nodes == out.before.nodes
        # A claim claims nothing and the graph is not done; every write is refused.
        self._claim(data.draw(st.sampled_from(WORKERS)))
        write = data.draw(
            st.sampled_from(["add", "saturate", "synthesize", "approve", "update", "error", "self"]),
            label="write while not active",
        )
        if write == "add":
            self._add(data, self.pick(data, bad=False), "answer", None)
        elif write == "saturate":
            self._saturate(self.pick(data, bad=False), "derivable", prune=False)
        elif write == "synthesize":
            self._synthesize(self.pick(data, bad=False), "A synthesis.")
        elif write == "approve":
            self.call("approve_gate", self.store.approve_gate, self.gid, None, expect_ok=False)
        elif write == "update":
            self.call(
                "update_node",
                self.store.update_node,
                self.gid,
                self.root,
                {"k": 1},
                expect_ok=False,
            )
        elif write == "error":
            self.call("mark_error", self.store.mark_error, self.gid, self.root, "boom", expect_ok=False)
        else:  # a move to itself is not in the table
            self.call(
                "update_graph_status",
                self.store.update_graph_status,
                self.gid,
                goal,
                expect_ok=False,
            )
        if goal == "budget_exhausted":  # terminal for resume (store.md, "The graph contract")
            self.call("resume_graph", self.store.resume_graph, self.gid, expect_ok=False)
            self.call(
                "update_graph_status", self.store.update_graph_status, self.gid, "active", expect_ok=False
            )
            out = self.call("new_budget", self.store.new_budget, self.gid, {}, expect_ok=True)  # a new turn
            assert out.after.status == "active" and out.after.nodes == out.before.nodes
            assert out.result["kind"] == "budget"
        elif back == "resume":
            out = self.call("resume_graph", self.store.resume_graph, self.gid, expect_ok=True)
            assert out.result == out.after.snap
        else:
            out = self.call(
                "update_graph_status",
                self.store.update_graph_status,
                self.gid,
                "active",
                expect_ok=True,
            )
            assert out.result["previous_status"] == goal
        assert out.after.status == "active" and out.after.nodes == out.before.nodes

    @rule(data=st.data(), which=st.sampled_from(["missing", "foreign"]))
    def wrong_graph(self, data: st.DataObject, which: str) -> None:
        """A node of this graph named under another graph id is not found there."""
        gid = "g-0000000000000000" if which == "missing" else self.foreign_gid
        node_id = self.pick(data, bad=False)
        out = self.call("add_node", self.store.add_node, gid, node_id, "question", "Where?", expect_ok=False)
        assert isinstance(out.error, NotFoundError), out.error

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def tree_shape(self) -> None:
        v = self.view
        if v is None:
            return
        ids = [n["node_id"] for n in v.nodes]
        assert len(ids) == len(set(ids)), "a node appears twice"
        assert ids == self.created, "snapshot order is not creation order"
        seqs = [n["seq"] for n in v.nodes]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "seq not increasing"
        assert v.status in GRAPH_STATUSES
        root = v.nodes[0]
        assert root["node_id"] == v.snap["root_node_id"] == self.root
        assert (root["depth"], root["parent_id"], root["node_type"]) == (0, None, "question")
        assert root["branch_id"] is None
        for n in v.nodes:
            assert n["graph_id"] == self.gid
            assert isinstance(n["metadata"], dict)
            if n["node_type"] == "question":
                assert n["status"] in QUESTION_STATUSES, n
                assert n["depth"] < self.max_depth, f"question deeper than budget: {n}"
            else:
                assert n["node_type"] == "answer" and n["status"] in ANSWER_STATUSES, n
            if n is root:
                continue
            parent = v.by_id[n["parent_id"]]
            assert parent["seq"] < n["seq"]
            if n["node_type"] == "answer":
                assert parent["node_type"] == "question", "an answer under an answer"
                assert n["depth"] == parent["depth"]
                assert n["branch_id"] == parent["branch_id"]
            else:
                pq = v.parent_question(n)
                assert n["depth"] == pq["depth"] + 1, f"depth {n['depth']} under {pq['depth']}"
                expected_branch = n["node_id"] if n["depth"] == 1 else pq["branch_id"]
                assert n["branch_id"] == expected_branch
            if n["status"] == "gated":
                assert self.gates(n["depth"]), f"gated at depth {n['depth']} in {self.every}"
                assert not v.children[n["node_id"]], "a gated question has children"
            if n["status"] == "claimed":
                assert n["owner"] and n["claimed_at"] is not None, "claim without owner/lease"

    @invariant()
    def statuses_and_cascades(self) -> None:
        v = self.view
        if v is None:
            return
        for q in v.questions():
            subs = v.sub_questions(q["node_id"])
            if q["status"] in ("answered", "synthesized"):
                assert v.children[q["node_id"]], f"{q['status']} question without an answer"
            if q["status"] == "synthesized":
                assert "synthesis" in q["metadata"], "synthesized without a synthesis"
                assert all(s["status"] in DONE for s in subs), "synthesized over open sub-questions"
        for n in v.nodes:
            if n["status"] == "saturated":
                for d in v.descendants(n["node_id"]):
                    dn = v.by_id[d]
                    if dn["node_type"] == "question":
                        assert dn["status"] in DONE, f"{d} is {dn['status']} under saturated {n['node_id']}"

    @invariant()
    def derived_queries(self) -> None:
        v = self.view
        if v is None:
            return
        # Read queries are pure functions of the graph (and the clock): ask them again
        # only when either moved; DuckDB's per-statement cost dominates this test.
        if self.checked_ready != v.snap:
            self.checked_ready = v.snap
            # Rule 3: ready to synthesize, deepest first, then creation order.
            ready = self.store.get_ready_to_synthesize(self.gid)["ready_nodes"]
            expected = sorted(v.ready(), key=lambda q: (-q["depth"], q["seq"]))
            assert [n["node_id"] for n in ready] == [q["node_id"] for q in expected]
        if self.checked == (self.now, v.snap):
            return
        self.checked = (self.now, v.snap)
        # Claimable work and open questions agree with the statuses and the clock.
        claimable = self.store.get_claimable_work(self.gid)["claimable"]
        assert sorted(n["node_id"] for n in claimable) == sorted(q["node_id"] for q in v.claimable(self.now))
        opened = self.store.get_open_questions(self.gid)["open_questions"]
        assert [n["node_id"] for n in opened] == [
            q["node_id"] for q in v.questions() if q["status"] == "open"
        ]

    @invariant()
    def links_and_branches(self) -> None:
        v = self.view
        if v is None:
            return
        tree = [e for e in v.snap["edges"] if e["edge_type"] == "parent_child"]
        assert sorted((e["from_node"], e["to_node"]) for e in tree) == sorted(
            (n["parent_id"], n["node_id"]) for n in v.nodes[1:]
        )
        seen: set[tuple[str, frozenset[str]]] = set()
        components: dict[str, set[str]] = {}
        for e in v.snap["edges"]:
            if e["edge_type"] == "parent_child":
                continue
            assert e["edge_type"] in ("convergence", "contradiction")
            pair = frozenset((e["from_node"], e["to_node"]))
            assert len(pair) == 2 and pair <= v.by_id.keys(), f"bad link {e}"
            assert (e["edge_type"], pair) not in seen, f"doubled link {e}"
            seen.add((e["edge_type"], pair))
            if e["edge_type"] == "convergence":
                merged = set(pair).union(*(components.get(x, set()) for x in pair))
                for x in merged:
                    components[x] = merged
        # Rule 8: convergence clusters are the connected components, in creation order.
        conv_edges = [e for e in v.snap["edges"] if e["edge_type"] == "convergence"]
        clusters = {frozenset(c) for c in components.values()}
        expected = []
        for c in sorted(clusters, key=lambda c: min(v.by_id[x]["seq"] for x in c)):
            insights = [
                e["metadata"]["insight"]
                for e in conv_edges
                if e["from_node"] in c and e["metadata"].get("insight")
            ]
            expected.append(
                {
                    "nodes": sorted(c, key=lambda x: v.by_id[x]["seq"]),
                    "insight": "; ".join(dict.fromkeys(insights)),
                }
            )
        if self.checked_links == v.snap:
            return
        self.checked_links = v.snap
        assert self.store.query_convergence(self.gid)["convergence_points"] == expected
        contradictions = [
            {"nodes": [e["from_node"], e["to_node"]], "tension": e["metadata"].get("tension", "")}
            for e in v.snap["edges"]
            if e["edge_type"] == "contradiction"
        ]
        assert self.store.query_contradictions(self.gid)["contradictions"] == contradictions
        # Saturation status per seed-question branch.
        status = self.store.get_saturation_status(self.gid)
        branches = [q for q in v.questions() if q["depth"] == 1]
        done = {
            b["node_id"]: all(q["status"] in DONE for q in v.questions() if q["branch_id"] == b["node_id"])
            for b in branches
        }
        assert [(b["node_id"], b["done"]) for b in status["branches"]] == list(done.items())
        assert status["all_saturated"] == (bool(done) and all(done.values()))
        assert status["all_complete"] == (all(done.values()) and v.nodes[0]["status"] in DONE)

    @invariant()
    def event_log(self) -> None:
        v = self.view
        if v is None:
            return
        ids = [e["event_id"] for e in v.events]
        assert all(a < b for a, b in zip(ids, ids[1:], strict=False)), "event ids not increasing"
        assert all(e["graph_id"] == self.gid for e in v.events)


def emptied_store(backend: Backend, **kw: Any) -> GraphStore:
    """A store with nothing in it: a new in-memory one on DuckDB, the test's schema emptied on PostgreSQL."""
    if backend.url is not None:
        import psycopg  # noqa: PLC0415 - the [postgres] extra (the backend fixture skips without it)

        tables = ", ".join(sorted(OWN_TABLES - {"store_info"}))
        with psycopg.connect(backend.url, autocommit=True) as admin:
            admin.execute(f"TRUNCATE {tables} RESTART IDENTITY")
    return backend.open(**kw)


def test_graph_machine(backend: Backend) -> None:
    """The random walk of store calls, on each backend: every example starts from an empty store."""
    backend.open().close()  # the store's tables, made once (each example empties them)
    GraphMachine.backend = backend
    try:
        run_state_machine_as_test(
            GraphMachine,
            settings=settings(
                max_examples=40,
                stateful_step_count=25,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow],
            ),
        )
    finally:
        GraphMachine.backend = None


# -- plain properties: what the door lets in ----------------------------------------------


JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
METADATA_VALUES = st.one_of(
    st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=4),  # valid objects
    st.builds(json.dumps, st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=3)),
    st.builds(json.dumps, JSON_VALUES),  # JSON text, mostly not an object
    JSON_VALUES,
    st.text(max_size=10),
    st.dictionaries(st.integers(), st.integers(), min_size=1, max_size=2),
    st.dictionaries(
        st.text(max_size=3),
        st.sampled_from([math.nan, math.inf, -math.inf]),
        min_size=1,
        max_size=2,
    ),
    st.dictionaries(st.text(max_size=3), st.sets(st.integers(), max_size=2), min_size=1, max_size=2),
    st.sampled_from([b"{}", ("a", 1), object(), 1.5, True]),
)
CHECKPOINT_VALUES = st.one_of(
    st.sampled_from(
        [
            "autonomous",
            "convergence",
            "interactive",
            "depth:1",
            "depth:2",
            "depth:12",
            "depth:01",
            "depth:0",
            "depth:-1",
            "depth:",
            "depth",
            "depth:1.5",
            "depth: 1",
            "depth:1 ",
            " autonomous",
            "Autonomous",
            "AUTONOMOUS",
            "depth:1:2",
            "breadth:2",
            "",
            "depth:0x2",
        ]
    ),
    st.builds(lambda n: f"depth:{n}", st.integers(-3, 10**12)),
    st.builds(lambda s: "depth:" + s, st.text(st.characters(categories=("Nd", "No", "Nl")), max_size=3)),
    st.text(max_size=12),
    st.none(),
    st.integers(),
    st.booleans(),
    st.lists(st.text(max_size=3), max_size=2),
)


def _expected_checkpoint(value: Any) -> str | None | bool:
    """The canonical mode of an ASCII value for a pulse graph; None: refused; True: either is fine.

    Pulse has questions at depths 0-1, so ``depth:N`` gates something only for N = 1.
    """
    if not isinstance(value, str):
        return None
    if value in ("autonomous", "convergence", "interactive"):
        return value
    prefix, _, number = value.partition(":")
    if prefix != "depth" or not number:
        return None
    if number.isascii():
        return f"depth:{int(number)}" if number.isdigit() and len(number) <= 9 and int(number) == 1 else None
    return True  # non-ASCII decimal digits: reading them as a number or refusing are both fine


@pytest.fixture
def shared_store(backend: Backend) -> Iterator[GraphStore]:
    """One store for every example of a plain property; each example makes its own graphs."""
    with backend.open() as store:
        yield store


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(checkpoint=CHECKPOINT_VALUES, metadata=METADATA_VALUES)
def test_door_accepts_or_refuses_with_invalid_input(
    shared_store: GraphStore, checkpoint: Any, metadata: Any
) -> None:
    """Checkpoint strings and metadata are accepted as the contract says or refused cleanly."""
    store = shared_store
    # checkpoint_mode at create_graph
    want = _expected_checkpoint(checkpoint)
    try:
        g = store.create_graph("Seed?", "pulse", checkpoint)
    except InvalidInputError as exc:
        assert want is None or want is True, f"{checkpoint!r} refused: {exc}"
    else:
        assert want is not None, f"{checkpoint!r} accepted as {g['checkpoint_mode']!r}"
        mode = g["checkpoint_mode"]
        if want is not True:
            assert mode == want
        assert mode in ("autonomous", "convergence", "interactive") or (
            mode.startswith("depth:") and mode[6:].isascii() and int(mode[6:]) >= 1
        )
        assert store.get_snapshot(g["graph_id"])["checkpoint_mode"] == mode

    # metadata wherever it is taken: create_graph, add_node, update_node
    parsed = parsed_metadata(metadata)
    try:
        g = store.create_graph("Seed?", "pulse", "autonomous", metadata=metadata)
    except InvalidInputError:
        assert parsed is None, f"valid metadata {metadata!r} refused"
        g = store.create_graph("Seed?", "pulse", "autonomous")
    else:
        assert parsed is not None, f"bad metadata {metadata!r} accepted"
        assert store.get_snapshot(g["graph_id"])["metadata"] == parsed
    gid, root = g["graph_id"], g["root_node_id"]

    before = store.get_snapshot(gid), store.get_events(gid)
    try:
        node_id = store.add_node(gid, root, "answer", "An answer.", metadata=metadata)["node_id"]
    except InvalidInputError:
        assert parsed is None, f"valid metadata {metadata!r} refused by add_node"
        assert (store.get_snapshot(gid), store.get_events(gid)) == before
        node_id = store.add_node(gid, root, "answer", "An answer.")["node_id"]
    else:
        assert parsed is not None, f"bad metadata {metadata!r} accepted by add_node"
        stored = next(n for n in store.get_snapshot(gid)["nodes"] if n["node_id"] == node_id)
        assert stored["metadata"] == parsed

    before = store.get_snapshot(gid), store.get_events(gid)
    try:
        result = store.update_node(gid, node_id, metadata)
    except InvalidInputError:
        assert not parsed, f"valid metadata {metadata!r} refused by update_node"
        assert (store.get_snapshot(gid), store.get_events(gid)) == before
    else:
        assert parsed is not None, f"bad metadata {metadata!r} accepted by update_node"
        if not parsed:  # {}: a no-op
            assert (store.get_snapshot(gid), store.get_events(gid)) == before
        previous = next(n for n in before[0]["nodes"] if n["node_id"] == node_id)["metadata"]
        assert result["metadata"] == {**previous, **parsed} and result["edges_created"] == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.one_of(st.text(max_size=10), st.none(), st.integers()),
    name=st.one_of(st.text(max_size=6), st.none()),
)
def test_free_text_and_names_round_trip_or_are_refused(
    shared_store: GraphStore, text: Any, name: Any
) -> None:
    """Seed, node text, owner and worker names: stored exactly or refused (InvalidInputError)."""
    store = shared_store
    try:
        g = store.create_graph(text, "explore", "autonomous")
    except InvalidInputError:
        assert not good_text(text)
        g = store.create_graph("Seed?", "explore", "autonomous")
    else:
        assert good_text(text) and store.get_snapshot(g["graph_id"])["seed"] == text
    gid = g["graph_id"]
    try:
        a = store.add_node(gid, g["root_node_id"], "answer", text, owner=name)
    except InvalidInputError:
        assert not (good_text(text) and good_name(name))
        a = store.add_node(gid, g["root_node_id"], "answer", "An answer.")
    else:
        assert good_text(text) and good_name(name)
        node = store.get_snapshot(gid)["nodes"][-1]
        assert (node["text"], node["owner"]) == (text, name)
    store.add_node(gid, a["node_id"], "question", "A question?")
    try:
        claim = store.claim_work(gid, name)
    except InvalidInputError:
        assert not good_text(name)
    else:
        assert good_text(name) and claim["node_id"] is not None


# -- regressions: inputs these properties found refused with the wrong error ---------------


@pytest.mark.parametrize("mode", ["depth:²", "depth:¹", "depth:1²"])
def test_checkpoint_with_non_decimal_digit_is_refused(fresh_store: GraphStore, mode: str) -> None:
    """'²'.isdigit() is true but int('²') fails: a bare ValueError once escaped here."""
    with pytest.raises(InvalidInputError):
        fresh_store.create_graph("Seed?", "pulse", mode)


@pytest.mark.parametrize("where", ["seed", "text", "owner", "worker_id", "parent_id"])
def test_lone_surrogate_is_refused_with_invalid_input(fresh_store: GraphStore, where: str) -> None:
    """A lone surrogate cannot be stored as UTF-8: DuckDB's own error once escaped here."""
    bad = "\ud800"
    store = fresh_store
    g = store.create_graph("Seed?", "explore", "autonomous")
    gid, root = g["graph_id"], g["root_node_id"]
    calls = {
        "seed": lambda: store.create_graph(bad, "explore", "autonomous"),
        "text": lambda: store.add_node(gid, root, "answer", bad),
        "owner": lambda: store.add_node(gid, root, "answer", "An answer.", owner=bad),
        "worker_id": lambda: store.claim_work(gid, bad),
        "parent_id": lambda: store.add_node(gid, bad, "answer", "An answer."),
    }
    before = store.get_snapshot(gid), store.get_events(gid)
    with pytest.raises(InvalidInputError):
        calls[where]()
    assert (store.get_snapshot(gid), store.get_events(gid)) == before
