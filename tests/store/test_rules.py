"""The nine rules the reference implementation broke (DESIGN.md), one section each.

Rule 1 (atomic claims) under real threads lives in test_concurrency.py.

Covers: store/answer.py, store/children.py, store/claim.py, store/graphs.py, store/holders.py,
store/in_process.py, store/links.py, store/stops.py, store/synthesis.py, vocabulary.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from fractal_nb import (
    BudgetError,
    GraphStore,
    InvalidInputError,
    InvalidTransitionError,
    NotFoundError,
    StateError,
)
from fractal_nb.store.holders import HOLDER_LEASE_S
from tests.conftest import Backend, FakeClock, Tree, make_tree

# -- rule 2: adding an answer (or a first sub-question) answers the question ----------


def test_answer_moves_open_question_to_answered(tree: Tree) -> None:
    q = tree.seeds[0]
    assert tree.status(q) == "open"
    tree.answer(q)
    assert tree.status(q) == "answered"


def test_answer_moves_claimed_question_to_answered(tree: Tree) -> None:
    claimed = tree.store.claim_work(tree.graph_id, "w1")["node_id"]
    assert tree.status(claimed) == "claimed"
    tree.answer(claimed, owner="w1")
    assert tree.status(claimed) == "answered"


def test_question_directly_under_question_answers_the_parent(tree: Tree) -> None:
    q = tree.seeds[0]
    child = tree.ask(q, "A sub-question hung directly under a question")
    assert tree.status(q) == "answered"
    assert tree.node(child)["depth"] == 2


def test_root_answered_by_seed_phase(tree: Tree) -> None:
    assert tree.status(tree.root) == "answered"


# -- rule 3: ready to synthesize, refusals, cascade to the root --------------------------


def _ready(tree: Tree) -> list[str]:
    return [n["node_id"] for n in tree.store.get_ready_to_synthesize(tree.graph_id)["ready_nodes"]]


def test_answered_leaf_is_not_ready_but_can_be_synthesized(tree: Tree) -> None:
    q = tree.seeds[0]
    tree.answer(q, "leaf answer")
    assert q not in _ready(tree)
    assert tree.store.synthesize_node(tree.graph_id, q, "leaf answer")["status"] == "synthesized"
    assert tree.node(q)["metadata"]["synthesis"] == "leaf answer"


def test_synthesize_refused_while_a_sub_question_is_pending(tree: Tree) -> None:
    q = tree.seeds[0]
    ans = tree.answer(q)
    sub = tree.ask(ans, "sub")
    before = tree.store.get_snapshot(tree.graph_id)
    with pytest.raises(StateError, match=sub):
        tree.store.synthesize_node(tree.graph_id, q, "too early")
    assert tree.store.get_snapshot(tree.graph_id) == before


def test_synthesize_refused_for_unanswered_question(tree: Tree) -> None:
    with pytest.raises(StateError, match="no answer yet"):
        tree.store.synthesize_node(tree.graph_id, tree.seeds[0], "nothing to synthesize")


def test_ready_counts_sub_questions_under_any_answer_and_directly(tree: Tree) -> None:
    q = tree.seeds[0]
    a1, a2 = tree.answer(q, "first"), tree.answer(q, "second")
    subs = [tree.ask(a1, "under first"), tree.ask(a2, "under second"), tree.ask(q, "direct")]
    for sub in subs[:-1]:
        tree.answer(sub)
        tree.store.synthesize_node(tree.graph_id, sub, "done")
        assert q not in _ready(tree)
    tree.store.mark_saturated(tree.graph_id, subs[-1], "derivable")
    assert q in _ready(tree)


def test_cascade_runs_deepest_first_and_reaches_root(fresh_store: GraphStore) -> None:
    t = make_tree(fresh_store, "explore", seeds=2)
    # Build depth 1 -> 2 -> 3 under the first seed, leaves elsewhere.
    chain = [t.seeds[0]]
    for level in range(2):
        chain.append(t.ask(t.answer(chain[-1]), f"level {level + 2}"))
    t.answer(chain[-1], "deepest leaf")
    fresh_store.synthesize_node(t.graph_id, chain[-1], "deepest leaf")
    t.answer(t.seeds[1], "other leaf")
    fresh_store.synthesize_node(t.graph_id, t.seeds[1], "other leaf")
    order = []
    while ready := _ready(t):
        depths = [t.node(n)["depth"] for n in ready]
        assert depths == sorted(depths, reverse=True)
        fresh_store.synthesize_node(t.graph_id, ready[0], f"synthesis of {ready[0]}")
        order.append(ready[0])
    assert order == [chain[1], chain[0], t.root]
    assert t.status(t.root) == "synthesized"


# -- rule 11 against a held synthesis: a question asked below it meanwhile reopens it -------


def _held_synthesis(tree: Tree) -> tuple[str, str, str]:
    """The first seed answered with one synthesized sub-question, its synthesis claimed by w1:
    (the seed, its answer, the sub-question)."""
    q = tree.seeds[0]
    ans = tree.answer(q)
    sub = tree.ask(ans, "sub")
    tree.answer(sub, "sub answer")
    tree.store.synthesize_node(tree.graph_id, sub, "sub synthesis")
    assert tree.store.claim_synthesis(tree.graph_id, "w1")["node_id"] == q
    return q, ans, sub


def _events(tree: Tree, node_id: str) -> list[dict[str, Any]]:
    return [e for e in tree.store.get_events(tree.graph_id)["events"] if e["node_id"] == node_id]


@pytest.mark.parametrize("where", ["beside", "below"])
def test_a_question_asked_below_a_held_synthesis_reopens_it_and_the_synthesis_is_kept(
    tree: Tree, where: str
) -> None:
    """The paid call is never discarded: the held synthesis lands, then the new question reopens it."""
    g = tree.graph_id
    q, ans, sub = _held_synthesis(tree)
    if where == "beside":  # a question under the held question's answer
        added = tree.ask(ans, "asked while the synthesis was written")
        unfinished = added
    else:  # a question deeper down, reopening the synthesized sub-question
        sub_answer = next(n["node_id"] for n in tree.store.get_snapshot(g)["nodes"] if n["parent_id"] == sub)
        added = tree.ask(sub_answer, "asked while the synthesis was written")
        unfinished = sub
    assert tree.status(q) == "answered"
    written = tree.store.submit_synthesis(g, q, "the held synthesis", worker_id="w1")
    assert written == {"node_id": q, "status": "answered"}
    kinds = [e["kind"] for e in _events(tree, q)]
    assert kinds[-3:] == ["synthesis_claimed", "synthesized", "reopened"]
    reopened = _events(tree, q)[-1]["payload"]
    assert reopened["synthesis"] == "the held synthesis" and reopened["asked_meanwhile"] == [unfinished]
    assert tree.status(q) == "answered" and "synthesis" not in tree.node(q)["metadata"]
    assert tree.store.claim_synthesis(g, "w2")["node_id"] is None, "not ready again yet, claim dropped"
    # Once the new question is done, the cascade synthesizes the question again, for anyone.
    tree.answer(added, "new answer")
    tree.store.synthesize_node(g, added, "new synthesis")
    if where == "below":
        assert tree.store.claim_synthesis(g, "w2")["node_id"] == sub
        tree.store.submit_synthesis(g, sub, "sub synthesis again", worker_id="w2")
    assert tree.store.claim_synthesis(g, "w2")["node_id"] == q
    assert tree.store.submit_synthesis(g, q, "again", worker_id="w2")["status"] == "synthesized"


def test_a_question_asked_and_finished_below_a_held_synthesis_still_reopens_it(tree: Tree) -> None:
    """A synthesis written without a finding that landed meanwhile is no final synthesis."""
    g = tree.graph_id
    q, ans, _ = _held_synthesis(tree)
    added = tree.ask(ans, "asked and finished while the synthesis was written")
    tree.answer(added, "new answer")
    tree.store.synthesize_node(g, added, "new synthesis")
    written = tree.store.submit_synthesis(g, q, "the held synthesis", worker_id="w1")
    assert written == {"node_id": q, "status": "answered"}, "the stale synthesis must not stand"
    assert _events(tree, q)[-1]["payload"]["asked_meanwhile"] == [added]
    assert tree.store.claim_synthesis(g, "w2")["node_id"] == q  # ready again, with the new finding
    assert tree.store.submit_synthesis(g, q, "again", worker_id="w2")["status"] == "synthesized"


def test_a_held_synthesis_whose_question_was_saturated_meanwhile_is_still_refused(tree: Tree) -> None:
    g = tree.graph_id
    q, _, _ = _held_synthesis(tree)
    tree.store.mark_saturated(g, q, "derivable")
    with pytest.raises(StateError):
        tree.store.submit_synthesis(g, q, "too late", worker_id="w1")
    assert tree.status(q) == "saturated"


# -- rule 4: saturation cascades; a claim holder's next write is refused ------------------


def test_saturation_cascades_to_unfinished_descendants(tree: Tree) -> None:
    q = tree.seeds[0]
    ans = tree.answer(q)
    done, pending = tree.ask(ans, "done"), tree.ask(ans, "pending")
    tree.answer(done)
    tree.store.synthesize_node(tree.graph_id, done, "kept")
    deeper = tree.ask(tree.answer(pending), "deeper")
    result = tree.store.mark_saturated(tree.graph_id, q, "actionable")
    assert result["cascaded"] == [pending, deeper]
    assert tree.status(done) == "synthesized"
    for node_id in (q, pending, deeper):
        node = tree.node(node_id)
        assert node["status"] == "saturated" and node["status_reason"] == "actionable"
    assert tree.node(deeper)["inherited_from"] == q
    assert tree.node(q)["inherited_from"] is None


def test_worker_holding_claim_in_pruned_branch_is_refused(tree: Tree) -> None:
    claim = tree.store.claim_work(tree.graph_id, "w1")["node_id"]
    tree.store.prune_branch(tree.graph_id, claim)
    assert tree.status(claim) == "saturated"
    assert tree.node(claim)["status_reason"] == "pruned"
    with pytest.raises(StateError, match="saturated"):
        tree.answer(claim, owner="w1")
    with pytest.raises(InvalidTransitionError):
        tree.store.synthesize_node(tree.graph_id, claim, "late")


def test_pruned_branch_lets_parent_synthesize(tree: Tree) -> None:
    for q in tree.seeds[1:]:
        tree.answer(q)
        tree.store.synthesize_node(tree.graph_id, q, "done")
    tree.store.prune_branch(tree.graph_id, tree.seeds[0])
    assert _ready(tree) == [tree.root]


def test_saturating_an_answer_stops_its_sub_questions(tree: Tree) -> None:
    ans = tree.answer(tree.seeds[0])
    sub = tree.ask(ans)
    tree.store.mark_saturated(tree.graph_id, ans, "hollow_questions")
    assert tree.status(sub) == "saturated"
    with pytest.raises(StateError, match="saturated"):
        tree.ask(ans, "more")


# -- rule 5: stuck claims recover ---------------------------------------------------------


def test_expired_lease_is_claimable_again(tree: Tree, clock: FakeClock) -> None:
    first = tree.store.claim_work(tree.graph_id, "crashed")["node_id"]
    others = [tree.store.claim_work(tree.graph_id, f"w{i}")["node_id"] for i in range(2)]
    assert first not in others
    assert tree.store.claim_work(tree.graph_id, "w9")["node_id"] is None
    clock.advance(61)
    taken = tree.store.claim_work(tree.graph_id, "w9")
    assert taken["node_id"] == first
    with pytest.raises(StateError, match="claimed by 'w9'"):
        tree.answer(first, owner="crashed")


def test_recover_stuck_returns_old_claims_to_open(tree: Tree, clock: FakeClock) -> None:
    # Plain leases (holder=None, as an MCP agent that sends no holder makes them).
    old = tree.store.claim_work(tree.graph_id, "w1", holder=None)["node_id"]
    clock.advance(30)
    young = tree.store.claim_work(tree.graph_id, "w2", holder=None)["node_id"]
    assert tree.store.recover_stuck(tree.graph_id)["recovered"] == []  # nothing past its lease
    result = tree.store.recover_stuck(tree.graph_id, older_than_s=30)
    assert result["recovered"] == [old]
    assert tree.status(old) == "open" and tree.status(young) == "claimed"


def test_recover_stuck_takes_old_plain_leases_beside_a_live_holders_claims(
    tree: Tree, clock: FakeClock
) -> None:
    # A claim with no holder beside one held by this live store: SQL's NOT IN never matches NULL,
    # so the plain lease used to be skipped whenever a live holder had claims in the graph.
    plain = tree.store.claim_work(tree.graph_id, "agent", holder=None)["node_id"]
    held = tree.store.claim_work(tree.graph_id, "w1")["node_id"]
    clock.advance(30)
    assert tree.store.recover_stuck(tree.graph_id, older_than_s=30)["recovered"] == [plain]
    assert tree.status(plain) == "open" and tree.status(held) == "claimed"


def test_a_live_holders_claims_are_never_recovered_and_its_heartbeat_renews_them(
    tree: Tree, clock: FakeClock
) -> None:
    held = tree.store.claim_work(tree.graph_id, "w1")["node_id"]  # held by this open store
    clock.advance(50)
    assert tree.store.recover_stuck(tree.graph_id, older_than_s=0)["recovered"] == []
    beat = tree.store.heartbeat(tree.store.holder["holder_id"])
    assert beat["renewed"] == 1 and beat["lease_s"] == 60
    clock.advance(50)  # 100 s after the claim, 50 s after the renewal: the lease of 60 s holds
    assert tree.store.recover_stuck(tree.graph_id)["recovered"] == []
    assert tree.store.get_claimable_work(tree.graph_id)["count"] == len(tree.seeds) - 1
    clock.advance(11)  # a holder that stops beating loses the claim when the lease runs out
    assert held in [n["node_id"] for n in tree.store.get_claimable_work(tree.graph_id)["claimable"]]


def test_another_process_holds_a_short_lease_its_heartbeat_renews(tree: Tree, clock: FakeClock) -> None:
    """A remote worker's claims (a holder on another host: never known gone) come back within
    HOLDER_LEASE_S of its last heartbeat, not the store's lease (60 s here, 300 s by default)."""
    remote = {"holder_id": "far/7/abc", "host": "far-away", "pid": 7, "proc_start": None, "label": "w"}
    g = tree.graph_id
    claim = tree.store.claim_work(g, "remote", holder=remote)
    assert claim["lease_s"] == HOLDER_LEASE_S < tree.store.lease_s
    tree.answer(claim["node_id"])  # a ready question's synthesis, held the same way
    sub = tree.ask(tree.store.get_snapshot(g)["nodes"][-1]["node_id"], "sub")
    tree.answer(sub)
    tree.store.synthesize_node(g, sub, "done")
    synthesis = tree.store.claim_synthesis(g, "remote", holder=remote)
    assert synthesis["node_id"] == claim["node_id"] and synthesis["lease_s"] == HOLDER_LEASE_S
    held = tree.store.claim_work(g, "remote", holder=remote)["node_id"]
    assert tree.store.heartbeat(tree.store.holder["holder_id"])["lease_s"] == tree.store.lease_s
    clock.advance(HOLDER_LEASE_S - 1)
    assert tree.store.heartbeat(remote["holder_id"]) == {
        "holder_id": remote["holder_id"],
        "renewed": 1,
        "lease_s": HOLDER_LEASE_S,
    }
    clock.advance(HOLDER_LEASE_S - 1)  # renewed: still held
    claimable = [n["node_id"] for n in tree.store.get_claimable_work(g)["claimable"]]
    assert held not in claimable
    assert tree.store.claim_synthesis(g, "other")["node_id"] is None
    clock.advance(1)  # silent for a whole short lease: back, though the store's lease has not run out
    claimable = [n["node_id"] for n in tree.store.get_claimable_work(g)["claimable"]]
    assert held in claimable
    assert tree.store.claim_synthesis(g, "other")["node_id"] == claim["node_id"]


def test_claims_of_a_closed_store_in_this_process_come_back_at_once(backend: Backend) -> None:
    with backend.open(backend.lasting) as first:
        t = make_tree(first)
        held = first.claim_work(t.graph_id, "w1")["node_id"]
        with backend.open(backend.lasting) as second:  # the same store, still open in this process
            assert second.recover_stuck(t.graph_id)["recovered"] == []
            first.close()  # its holder is gone: no lease to wait out
            assert second.recover_stuck(t.graph_id)["recovered"] == [held]
            assert second.claim_work(t.graph_id, "w2")["node_id"] == held


def test_recover_stuck_by_worker_and_errors(tree: Tree) -> None:
    mine = tree.store.claim_work(tree.graph_id, "w1")["node_id"]
    tree.store.mark_error(tree.graph_id, tree.seeds[2], "LLM call failed")
    assert tree.store.recover_stuck(tree.graph_id, worker_id="w1")["recovered"] == [mine]
    assert tree.status(tree.seeds[2]) == "error"
    assert tree.store.recover_stuck(tree.graph_id, include_errors=True)["recovered"] == [tree.seeds[2]]
    assert tree.status(tree.seeds[2]) == "open"


def test_stuck_node_does_not_block_graph_done_forever(tree: Tree, clock: FakeClock) -> None:
    stuck = tree.store.claim_work(tree.graph_id, "crashed")["node_id"]
    for _ in range(2):
        q = tree.store.claim_work(tree.graph_id, "w1")["node_id"]
        tree.answer(q, owner="w1")
        tree.store.synthesize_node(tree.graph_id, q, "done")
    assert tree.store.claim_work(tree.graph_id, "w1") == {
        "node_id": None,
        "graph_done": False,
        "graph_status": "active",
    }
    clock.advance(120)
    rescued = tree.store.claim_work(tree.graph_id, "w1")["node_id"]
    assert rescued == stuck
    tree.answer(rescued, owner="w1")
    tree.store.synthesize_node(tree.graph_id, rescued, "done")
    assert tree.store.claim_work(tree.graph_id, "w1")["graph_done"] is True


# -- rule 6: status transitions follow the table --------------------------------------------


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        (["paused", "active"], True),
        (["paused", "completed"], True),
        (["budget_exhausted", "completed"], True),
        (["error"], True),
        (["paused", "budget_exhausted"], False),
        (["paused", "error"], False),
        (["completed", "active"], False),
        (["error", "active"], True),  # an explicit resume after an engine failure
        (["error", "paused"], False),
        (["error", "completed"], False),
        (["completed", "paused"], False),
        (["active"], False),
    ],
)
def test_graph_status_transitions(fresh_store: GraphStore, path: list[str], allowed: bool) -> None:
    g = fresh_store.create_graph("seed", "pulse", "autonomous")["graph_id"]
    *setup, last = path
    for status in setup:
        fresh_store.update_graph_status(g, status)
    if allowed:
        result = fresh_store.update_graph_status(g, last, reason="test")
        assert result["status"] == last
    else:
        with pytest.raises(InvalidTransitionError, match="may go to"):
            fresh_store.update_graph_status(g, last)


def test_resume_graph(fresh_store: GraphStore) -> None:
    g = fresh_store.create_graph("seed", "pulse", "autonomous")["graph_id"]
    assert fresh_store.resume_graph(g)["status"] == "active"
    fresh_store.update_graph_status(g, "paused")
    snap = fresh_store.resume_graph(g)
    assert snap["status"] == "active" and snap["nodes"][0]["depth"] == 0
    fresh_store.update_graph_status(g, "budget_exhausted")  # terminal for resume: test_budget_turns.py
    with pytest.raises(InvalidTransitionError, match="terminal for a resume.*new_budget"):
        fresh_store.resume_graph(g)
    fresh_store.update_graph_status(g, "completed")
    with pytest.raises(InvalidTransitionError, match="terminal"):
        fresh_store.resume_graph(g)


@pytest.mark.parametrize("status", ["paused", "budget_exhausted", "completed", "error"])
def test_writes_need_active_graph_and_claims_say_why(fresh_store: GraphStore, status: str) -> None:
    t = make_tree(fresh_store)
    fresh_store.update_graph_status(t.graph_id, status)
    before = fresh_store.get_snapshot(t.graph_id)
    writes = [
        lambda: t.answer(t.seeds[0]),
        lambda: fresh_store.update_node(t.graph_id, t.seeds[0], {"k": 1}),
        lambda: fresh_store.mark_saturated(t.graph_id, t.seeds[0], "derivable"),
        lambda: fresh_store.synthesize_node(t.graph_id, t.root, "x"),
        lambda: fresh_store.approve_gate(t.graph_id),
    ]
    if status != "budget_exhausted":  # a prune spends nothing: it cuts one (test_budget_turns.py)
        writes.append(lambda: fresh_store.prune_branch(t.graph_id, t.seeds[0]))
    for write in writes:
        with pytest.raises(StateError, match=f"is '{status}'"):
            write()
    claim = fresh_store.claim_work(t.graph_id, "w1")
    assert claim == {"node_id": None, "graph_status": status, "graph_done": status in ("completed", "error")}
    assert fresh_store.get_snapshot(t.graph_id) == before


def test_question_transitions_refused(tree: Tree) -> None:
    q = tree.seeds[0]
    tree.answer(q)
    tree.store.synthesize_node(tree.graph_id, q, "done")
    with pytest.raises(InvalidTransitionError, match="it may become: answered"):  # only by a new question
        tree.store.mark_saturated(tree.graph_id, q, "derivable")
    with pytest.raises(InvalidTransitionError):
        tree.store.synthesize_node(tree.graph_id, q, "again")
    with pytest.raises(StateError, match="finished"):
        tree.answer(q)


# -- gates (depth:N) --------------------------------------------------------------------


def test_depth_gates_hold_for_every_client(fresh_store: GraphStore) -> None:
    t = make_tree(fresh_store, "deep", "depth:2", seeds=1)
    assert t.status(t.seeds[0]) == "open"
    assert fresh_store.claim_work(t.graph_id, "w1")["node_id"] == t.seeds[0]
    level2 = t.ask(t.answer(t.seeds[0], owner="w1"))
    assert t.status(level2) == "gated"
    assert fresh_store.claim_work(t.graph_id, "w2") == {
        "node_id": None,
        "graph_done": False,
        "graph_status": "active",
    }
    with pytest.raises(StateError, match="approve its gate"):
        t.answer(level2)
    assert fresh_store.approve_gate(t.graph_id, [level2])["approved"] == [level2]
    assert fresh_store.claim_work(t.graph_id, "w2")["node_id"] == level2
    level3 = t.ask(t.answer(level2, owner="w2"))
    assert t.status(level3) == "open"
    with pytest.raises(StateError, match="not gated"):
        fresh_store.approve_gate(t.graph_id, [level3])
    level4 = t.ask(t.answer(level3))
    assert t.status(level4) == "gated"
    assert fresh_store.approve_gate(t.graph_id)["approved"] == [level4]


def test_gates_survive_reopening_the_store(backend: Backend) -> None:
    with backend.open(backend.lasting) as store:
        t = make_tree(store, "pulse", "depth:1", seeds=2)
    with backend.open(backend.lasting) as store:
        statuses = [n["status"] for n in store.get_snapshot(t.graph_id)["nodes"] if n["depth"] == 1]
        assert statuses == ["gated", "gated"]
        assert store.approve_gate(t.graph_id)["count"] == 2


# -- rule 7: bad metadata never stored ---------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        "[1, 2]",
        "not json",
        '"a string"',
        "42",
        42,
        [1],
        "null",
        {1: "x"},
        {"x": float("nan")},
        {"x": object()},
    ],
)
def test_bad_metadata_refused_everywhere(tree: Tree, bad: object) -> None:
    before = tree.store.get_snapshot(tree.graph_id)
    graphs_before = tree.store.get_events(tree.graph_id)["last_event_id"]
    calls = [
        lambda: tree.store.create_graph("seed", "pulse", "autonomous", metadata=bad),
        lambda: tree.store.add_node(tree.graph_id, tree.seeds[0], "answer", "a", metadata=bad),
        lambda: tree.store.update_node(tree.graph_id, tree.seeds[0], bad),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(InvalidInputError, match="metadata"):
            call()
    assert tree.store.get_snapshot(tree.graph_id) == before
    assert tree.store.get_events(tree.graph_id)["last_event_id"] == graphs_before


def test_metadata_as_json_string_and_shallow_merge(tree: Tree) -> None:
    q = tree.seeds[0]
    tree.store.update_node(tree.graph_id, q, '{"a": {"x": 1}, "b": 2}')
    result = tree.store.update_node(tree.graph_id, q, {"a": {"y": 2}})
    assert result["metadata"] == {"a": {"y": 2}, "b": 2}
    assert tree.node(q)["metadata"] == {"a": {"y": 2}, "b": 2}


# -- edges from metadata, idempotent ---------------------------------------------------------


def test_link_metadata_creates_edges_once(tree: Tree) -> None:
    a, b, c = (tree.answer(q, f"answer {i}") for i, q in enumerate(tree.seeds))
    meta = {"convergence_with": [b], "convergence_insight": "both say trade"}
    assert tree.store.update_node(tree.graph_id, a, meta)["edges_created"] == 1
    assert tree.store.update_node(tree.graph_id, a, meta)["edges_created"] == 0
    assert tree.store.update_node(tree.graph_id, b, {"convergence_with": [a]})["edges_created"] == 0
    result = tree.store.update_node(
        tree.graph_id, c, {"contradiction_with": [a], "contradiction_tension": "trade vs. land"}
    )
    assert result["edges_created"] == 1
    links = [e for e in tree.store.get_snapshot(tree.graph_id)["edges"] if e["edge_type"] != "parent_child"]
    assert [(e["from_node"], e["to_node"], e["edge_type"]) for e in links] == [
        (a, b, "convergence"),
        (c, a, "contradiction"),
    ]
    assert tree.store.query_contradictions(tree.graph_id)["contradictions"] == [
        {"nodes": [c, a], "tension": "trade vs. land"}
    ]


def test_link_to_unknown_node_changes_nothing(tree: Tree) -> None:
    a = tree.answer(tree.seeds[0])
    before = tree.store.get_snapshot(tree.graph_id)
    with pytest.raises(NotFoundError, match="n-missing"):
        tree.store.update_node(tree.graph_id, a, {"note": "x", "convergence_with": ["n-missing"]})
    assert tree.store.get_snapshot(tree.graph_id) == before


# -- rule 8: deterministic outputs --------------------------------------------------------


def _linked_graph(store: GraphStore) -> Tree:
    t = make_tree(store, seeds=3)
    answers = [t.answer(q, f"answer {i}") for i, q in enumerate(t.seeds)]
    extra = t.answer(t.seeds[0], "second answer")
    store.update_node(
        t.graph_id, answers[2], {"convergence_with": [answers[1]], "convergence_insight": "second"}
    )
    store.update_node(
        t.graph_id, answers[1], {"convergence_with": [answers[0]], "convergence_insight": "first"}
    )
    store.update_node(t.graph_id, extra, {"convergence_with": [answers[0]]})
    return t


def test_convergence_clusters_are_deterministic(fresh_store: GraphStore) -> None:
    t = _linked_graph(fresh_store)
    result = fresh_store.query_convergence(t.graph_id)
    assert result["count"] == 1
    cluster = result["convergence_points"][0]
    snapshot_order = [n["node_id"] for n in fresh_store.get_snapshot(t.graph_id)["nodes"]]
    assert cluster["nodes"] == sorted(cluster["nodes"], key=snapshot_order.index)
    assert cluster["insight"] == "second; first"
    assert all(fresh_store.query_convergence(t.graph_id) == result for _ in range(3))


def test_snapshot_is_in_creation_order_and_stable(fresh_store: GraphStore) -> None:
    t = _linked_graph(fresh_store)
    snap = fresh_store.get_snapshot(t.graph_id)
    seqs = [n["seq"] for n in snap["nodes"]]
    assert seqs == sorted(seqs)
    position = {n["node_id"]: i for i, n in enumerate(snap["nodes"])}
    children = [position[e["to_node"]] for e in snap["edges"] if e["edge_type"] == "parent_child"]
    assert children == sorted(children) == list(range(1, len(snap["nodes"])))
    kinds = [e["edge_type"] for e in snap["edges"]]
    assert kinds[-3:] == ["convergence"] * 3  # links were made after every node
    assert fresh_store.get_snapshot(t.graph_id) == snap


# -- rule 9: errors say what is allowed ------------------------------------------------------


def test_depth_refusal_names_depth_and_budget(fresh_store: GraphStore) -> None:
    t = make_tree(fresh_store, "pulse")
    ans = t.answer(t.seeds[0])
    with pytest.raises(BudgetError, match="depth 2.*'pulse' has max_depth 2.*0-1"):
        t.ask(ans)
    assert t.answer(t.seeds[1], "answers are never refused for depth")


def test_unknown_ids_are_named(tree: Tree) -> None:
    with pytest.raises(NotFoundError, match="g-nope"):
        tree.store.get_snapshot("g-nope")
    with pytest.raises(NotFoundError, match="n-nope"):
        tree.store.add_node(tree.graph_id, "n-nope", "answer", "x")
    with pytest.raises(NotFoundError) as info:
        tree.store.get_branch(tree.graph_id, "n-gone")
    assert info.value.node_id == "n-gone" and info.value.graph_id == tree.graph_id


@pytest.mark.parametrize(
    ("call", "listing"),
    [
        (lambda s: s.create_graph("x", "medium", "autonomous"), "deep, explore, pulse"),
        (lambda s: s.create_graph("x", "pulse", "depth:0"), "depth:N"),
        (lambda s: s.create_graph("x", "pulse", "sometimes"), "autonomous, convergence, interactive"),
    ],
)
def test_bad_values_list_the_valid_ones(fresh_store: GraphStore, call, listing: str) -> None:
    with pytest.raises(InvalidInputError, match=listing):
        call(fresh_store)


def test_bad_node_type_and_reason_list_valid_ones(tree: Tree) -> None:
    with pytest.raises(InvalidInputError, match="answer, question"):
        tree.store.add_node(tree.graph_id, tree.seeds[0], "comment", "x")
    with pytest.raises(InvalidInputError, match="actionable, blocked, budget_exhausted, derivable"):
        tree.store.mark_saturated(tree.graph_id, tree.seeds[0], "bored")
    with pytest.raises(InvalidInputError, match="active, budget_exhausted, completed"):
        tree.store.update_graph_status(tree.graph_id, "finished")


def test_a_gate_cannot_be_bypassed_through_error_recovery(fresh_store: GraphStore) -> None:
    t = make_tree(fresh_store, "pulse", "depth:1", seeds=1)
    with pytest.raises(InvalidTransitionError, match="'gated' and cannot become 'error'"):
        fresh_store.mark_error(t.graph_id, t.seeds[0], "boom")
    assert fresh_store.recover_stuck(t.graph_id, include_errors=True)["count"] == 0
    assert fresh_store.claim_work(t.graph_id, "w1")["node_id"] is None


def test_a_pruned_branch_takes_no_boundary_question_under_a_synthesized_question(tree: Tree) -> None:
    """Found by the state machine: a question under a synthesized question reopens it (rule 11),
    but not inside a saturated branch, where it would leave open work under a pruned question."""
    store, gid = tree.store, tree.graph_id
    a0 = tree.answer(tree.seeds[0])
    q1 = tree.ask(a0, "Which part?")
    a1 = tree.answer(q1)
    q2 = tree.ask(a1, "Which detail?")
    a2 = tree.answer(q2, "A leaf.")
    store.synthesize_node(gid, q2, "The detail, synthesized.")
    tree.ask(a1, "Which other detail?")
    store.prune_branch(gid, q1)  # q1 and its open question saturate; q2 stays synthesized
    before = store.get_snapshot(gid)
    with pytest.raises(StateError, match=f"in the branch of {q1}, saturated"):
        store.add_node(gid, a2, "question", "A boundary question in a pruned branch?")
    assert store.get_snapshot(gid) == before
