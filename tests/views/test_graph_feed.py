"""The live feed: deltas from the event log add up to the graph, under real worker threads.

Covers: views/question_tree.py.
"""

from __future__ import annotations

import threading

import pytest

from fractal_nb import Exploration, GraphStore, InvalidInputError, NotFoundError, SimulatedLLM
from fractal_nb.views.graph_feed import GraphFeed
from tests.conftest import Backend
from tests.engine.test_runs import FAST
from tests.graph_builder import grow_graph

pytestmark = pytest.mark.both_backends


def test_get_changes_since_zero_is_everything_and_later_only_what_moved(fresh_store: GraphStore) -> None:
    g = fresh_store.create_graph("Why do tides turn?", "pulse", "autonomous")
    full = fresh_store.get_changes(g["graph_id"])
    assert [n["node_id"] for n in full["nodes"]] == [g["root_node_id"]] and full["links"] == []
    last = full["last_event_id"]
    answer = fresh_store.add_node(g["graph_id"], g["root_node_id"], "answer", "The moon.")
    changes = fresh_store.get_changes(g["graph_id"], since=last)
    # the answer is new, and the root it answers moved to 'answered'
    assert [(n["node_id"], n["status"]) for n in changes["nodes"]] == [
        (g["root_node_id"], "answered"),
        (answer["node_id"], "answered"),
    ]
    assert changes["last_event_id"] > last and changes["since"] == last
    quiet = fresh_store.get_changes(g["graph_id"], since=changes["last_event_id"])
    assert quiet["nodes"] == [] and quiet["last_event_id"] == changes["last_event_id"]


@pytest.mark.parametrize("since", [-1, 1.5, True, "3"])
def test_get_changes_refuses_a_bad_since(fresh_store: GraphStore, since: object) -> None:
    g = fresh_store.create_graph("Why?", "pulse", "autonomous")
    with pytest.raises(InvalidInputError, match="since"):
        fresh_store.get_changes(g["graph_id"], since=since)  # type: ignore[arg-type]
    with pytest.raises(NotFoundError):
        fresh_store.get_changes("g-missing")


def test_get_node_and_node_calls(fresh_store: GraphStore) -> None:
    g = fresh_store.create_graph("Why do tides turn?", "pulse", "autonomous")
    a = fresh_store.add_node(g["graph_id"], g["root_node_id"], "answer", "The moon.")
    details = fresh_store.get_node(g["graph_id"], g["root_node_id"])
    assert details["node"]["node_id"] == g["root_node_id"]
    assert [c["node_id"] for c in details["children"]] == [a["node_id"]]
    with pytest.raises(NotFoundError):
        fresh_store.get_node(g["graph_id"], "n-missing")
    with pytest.raises(InvalidInputError):
        fresh_store.get_llm_calls(g["graph_id"], node_id="")


def test_deltas_polled_during_a_threaded_run_add_up_to_the_final_graph(backend: Backend) -> None:
    """A poller thread applies deltas while 4 workers write: nothing missed, nothing stale."""
    with Exploration.create(
        "Why do cities grow?",
        intensity="explore",
        llm=SimulatedLLM(seed=5, link_rate=0.4),
        clock=FAST,
        path=backend.target,
    ) as ex:
        feed = GraphFeed(ex.store, ex.graph_id)
        nodes: dict[str, dict] = {}
        edges: dict[str, dict] = {}
        done = threading.Event()
        seen_deltas = []

        def poll() -> None:
            while not done.is_set():
                delta = feed.delta()
                if delta is not None:
                    assert delta["since"] <= delta["seq"]
                    seen_deltas.append(delta["seq"])
                    nodes.update({q["id"]: q for q in delta["questions"]})
                    edges.update({link["id"]: link for link in delta["links"]})

        poller = threading.Thread(target=poll)
        poller.start()
        try:
            assert ex.run(4, progress=False) in ("all_complete", "budget_exhausted")
        finally:
            done.set()
            poller.join()
        last = feed.delta()
        if last is not None:
            nodes.update({q["id"]: q for q in last["questions"]})
            edges.update({link["id"]: link for link in last["links"]})
        snapshot = GraphFeed(ex.store, ex.graph_id).snapshot()
        assert len(seen_deltas) > 3, "the run was watched while it grew"
        assert seen_deltas == sorted(seen_deltas)
        assert (nodes, edges) == (
            {q["id"]: q for q in snapshot["questions"]},
            {link["id"]: link for link in snapshot["links"]},
        )
        assert snapshot["links"], "links are fed too"
        counts = feed.counts()
        assert counts["total"] == len(ex.nodes()) and counts["synthesized"] > 0
        # One item per question, each answer folded into its question, none lost.
        answers = [a["id"] for q in snapshot["questions"] for a in q["answers"]]
        frame = ex.nodes()
        assert len(snapshot["questions"]) == (frame.node_type == "question").sum()
        assert sorted(answers) == sorted(frame[frame.node_type == "answer"].node_id)


def test_questions_hang_under_questions_and_links_join_questions(fresh_store: GraphStore) -> None:
    g = fresh_store.create_graph(
        "[simulated] Why do tides turn twice a day in most places?", "explore", "autonomous"
    )
    gid, root = g["graph_id"], g["root_node_id"]
    first = fresh_store.add_answer(
        gid, root, "The moon pulls.", sub_questions=["Why the moon?", "Why twice?"]
    )
    moon, twice = (q["node_id"] for q in first["sub_questions"])
    a_moon = fresh_store.submit_answer(gid, moon, "Its mass.")["answer"]["node_id"]
    a_twice = fresh_store.submit_answer(gid, twice, "Two bulges.")["answer"]["node_id"]
    fresh_store.update_node(gid, a_moon, {"convergence_with": [a_twice], "convergence_insight": "same cause"})
    snapshot = GraphFeed(fresh_store, gid).snapshot()
    items = {q["id"]: q for q in snapshot["questions"]}
    assert set(items) == {root, moon, twice}
    assert items[moon]["parent"] == root and items[moon]["via"] == first["answer"]["node_id"]
    assert items[root]["root"] and items[root]["answers"] == [
        {"id": first["answer"]["node_id"], "text": "The moon pulls."}
    ]
    assert items[moon]["synthesis"] == "Its mass."  # a leaf: its answer is its synthesis
    [link] = snapshot["links"]
    assert (link["from_question"], link["to_question"], link["note"]) == (moon, twice, "same cause")
    assert (link["from_node"], link["to_node"]) == (a_moon, a_twice)


def test_a_delta_refolds_the_question_its_new_answer_belongs_to(fresh_store: GraphStore) -> None:
    g = fresh_store.create_graph("Why?", "explore", "autonomous")
    feed = GraphFeed(fresh_store, g["graph_id"])
    feed.snapshot()
    sub = fresh_store.add_answer(g["graph_id"], g["root_node_id"], "Because.", sub_questions=["How?"])
    delta = feed.delta()
    assert delta is not None
    by_id = {q["id"]: q for q in delta["questions"]}
    assert by_id[g["root_node_id"]]["answers"][0]["text"] == "Because."
    assert by_id[sub["sub_questions"][0]["node_id"]]["parent"] == g["root_node_id"]
    assert feed.delta() is None


def test_a_big_snapshot_is_one_item_per_question(fresh_store: GraphStore) -> None:
    gid = grow_graph(fresh_store, 1010)
    snapshot = GraphFeed(fresh_store, gid).snapshot()
    assert snapshot["counts"]["total"] >= 1010
    assert len(snapshot["questions"]) == snapshot["counts"]["total"] - snapshot["counts"]["answers"]
    assert len({q["id"] for q in snapshot["questions"]}) == len(snapshot["questions"])


def test_a_touched_answer_keeps_its_place_among_its_questions_answers(fresh_store: GraphStore) -> None:
    g = fresh_store.create_graph("Why do tides turn?", "pulse", "autonomous")
    feed = GraphFeed(fresh_store, g["graph_id"])
    feed.delta()
    first = fresh_store.add_node(g["graph_id"], g["root_node_id"], "answer", "First answer.")
    fresh_store.add_node(g["graph_id"], g["root_node_id"], "answer", "Second answer.")
    feed.delta()
    fresh_store.update_node(g["graph_id"], first["node_id"], {"note": "touched"})
    (root,) = feed.delta()["questions"]  # type: ignore[index]
    snapshot = GraphFeed(fresh_store, g["graph_id"]).snapshot()["questions"][0]
    assert (
        [a["text"] for a in root["answers"]]
        == [a["text"] for a in snapshot["answers"]]
        == [
            "First answer.",
            "Second answer.",
        ]
    )


def test_failed_questions_are_failed_with_their_error_and_weak_syntheses_are_marked(
    fresh_store: GraphStore,
) -> None:
    from tests.views.failing_graph import RATE_LIMIT, TIMEOUT, failing_graph

    built = failing_graph(fresh_store)
    feed = GraphFeed(fresh_store, built["graph_id"])
    items = {q["id"]: q for q in feed.snapshot()["questions"]}
    counts = feed.counts()
    assert (counts["failed"], counts["saturated"], counts["weak"]) == (2, 0, 1), (
        "a failure is no settled branch"
    )
    assert "error" not in counts, "one word for a failure: failed"
    assert (items[built["failed"]]["status"], items[built["failed"]]["error"]) == ("failed", RATE_LIMIT)
    settled = items[built["saturated_failed"]]
    assert (settled["status"], settled["reason"], settled["error"]) == ("failed", "error", TIMEOUT)
    assert items[built["weak"]]["weak"] and items[built["weak"]]["status"] == "synthesized"
    assert not any(q["weak"] or q["error"] for q in items.values() if q["id"] not in built.values())


def test_a_note_is_part_of_its_question_in_the_feed(fresh_store: GraphStore) -> None:
    g = fresh_store.create_graph("Why?", "explore", "autonomous")
    gid, root = g["graph_id"], g["root_node_id"]
    sub = fresh_store.add_answer(gid, root, "Because.", sub_questions=["How?"])["sub_questions"][0]["node_id"]
    feed = GraphFeed(fresh_store, gid)
    feed.snapshot()
    note = fresh_store.add_note(gid, sub, "<b>A person</b> says: by river.")["created"][0]
    delta = feed.delta()
    assert delta is not None
    by_id = {q["id"]: q for q in delta["questions"]}
    assert note not in by_id  # not an item of its own: shown with its question
    assert by_id[sub]["notes"] == [{"id": note, "text": "<b>A person</b> says: by river."}]
    snapshot = GraphFeed(fresh_store, gid).snapshot()
    assert len(snapshot["questions"]) == 2
    assert {q["id"]: q for q in snapshot["questions"]}[sub]["notes"][0]["id"] == note


def test_a_synthesis_built_on_failed_or_joined_children_is_weak_in_the_feed(fresh_store: GraphStore) -> None:
    from tests.views.failing_graph import failing_graph

    built = failing_graph(fresh_store)
    gid = built["graph_id"]
    fresh_store.mark_saturated(gid, built["failed"], "error")  # as a harvest would: the root is ready
    fresh_store.synthesize_node(gid, built["root"], "Loads fail first.")
    feed = GraphFeed(fresh_store, gid)
    items = {q["id"]: q for q in feed.snapshot()["questions"]}
    root = items[built["root"]]
    assert root["weak"] and root["status"] == "synthesized"
    assert root["weak_reasons"] == [
        f"failed: {built['failed']}",
        f"failed: {built['saturated_failed']}",
        f"joined: {built['weak']}",
    ]
    assert items[built["weak"]]["weak_reasons"] == ["sub-findings joined without the model"]
    assert feed.counts()["weak"] == 2
