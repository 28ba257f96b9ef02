"""A whole graph's question items as the store folds them in SQL equal the items the Python fold gives.

``GraphStore.get_question_items`` (store/question_items.py) writes the items, links and
counts of a whole graph in SQL; ``QuestionTree`` folds deltas in Python (and the history
slider's past). Both must give the same items on every shape of graph: failures and weak
syntheses, citations and tracks, notes, links, long and hostile text, marks an outside
client wrote, a run of the simulator and a deep run-shaped graph.

Covers: views/question_tree.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fractal_nb import Exploration, GraphStore, SimulatedLLM
from fractal_nb.errors import NotFoundError
from fractal_nb.views.graph_feed import GraphFeed, snapshot_of
from fractal_nb.views.html_export import render_html
from tests.conftest import Backend
from tests.engine.test_runs import FAST
from tests.graph_builder import grow_graph, run_shaped_graph
from tests.views.cited_graph import cited_graph
from tests.views.failing_graph import failing_graph

pytestmark = pytest.mark.both_backends


def assert_same_folds(store: GraphStore, graph_id: str) -> None:
    items = store.get_question_items(graph_id)
    python = snapshot_of(store.get_changes(graph_id))
    questions = json.loads(items["questions"])
    assert [q["id"] for q in questions] == [q["id"] for q in python["questions"]], "creation order"
    for sql, folded in zip(questions, python["questions"], strict=True):
        assert sql == folded, {k: (sql.get(k), folded.get(k)) for k in folded if sql.get(k) != folded[k]}
    assert json.loads(items["links"]) == python["links"]
    assert items["counts"] == python["counts"]
    assert (items["question_count"], items["link_count"]) == (len(questions), len(python["links"]))
    assert (items["status"], items["last_event_id"]) == (python["status"], python["seq"])


def test_failures_weak_syntheses_and_hostile_text_fold_alike(fresh_store: GraphStore) -> None:
    built = failing_graph(fresh_store)
    assert_same_folds(fresh_store, built["graph_id"])
    assert fresh_store.get_question_items(built["graph_id"])["counts"]["failed"] == 2


def test_citations_tracks_and_support_fold_alike(backend: Backend, tmp_path: Path) -> None:
    store = backend.open()
    built = cited_graph(store, tmp_path / "root")
    assert_same_folds(store, built["graph_id"])
    items = store.get_question_items(built["graph_id"])
    assert items["cited"] and items["counts"]["unsupported"] >= 1
    plain = store.create_graph("Why?", "pulse", "autonomous")["graph_id"]
    assert not store.get_question_items(plain)["cited"] and not store.carries_evidence(plain)


def test_notes_links_long_text_and_marks_an_outside_client_wrote_fold_alike(fresh_store: GraphStore) -> None:
    g = fresh_store.create_graph("[simulated] Why do tides turn?", "explore", "autonomous")
    gid, root = g["graph_id"], g["root_node_id"]
    first = fresh_store.add_answer(gid, root, "x" * 2500, sub_questions=["Why the moon?", "Why twice?"])
    moon, twice = (q["node_id"] for q in first["sub_questions"])
    a_moon = fresh_store.submit_answer(gid, moon, "Its mass.")["answer"]["node_id"]
    a_twice = fresh_store.submit_answer(gid, twice, "Two bulges.")["answer"]["node_id"]
    fresh_store.update_node(gid, a_moon, {"convergence_with": [a_twice], "convergence_insight": "same cause"})
    fresh_store.update_node(gid, a_twice, {"contradiction_with": [a_moon], "contradiction_tension": "not so"})
    fresh_store.add_note(gid, moon, "<b>A person</b> says: by river.")
    fresh_store.update_node(gid, moon, {"weak": [{"node_id": "n-1", "reason": "budget_exhausted"}, 7, {}]})
    fresh_store.update_node(gid, twice, {"weak": "not a list", "synthesis": "ü" * 2001, "track": {"x": 1}})
    fresh_store.update_node(gid, a_twice, {"support": "unsupported"})
    assert_same_folds(fresh_store, gid)
    questions = {q["id"]: q for q in json.loads(fresh_store.get_question_items(gid)["questions"])}
    assert questions[moon]["weak_reasons"] == ["budget exhausted: n-1", "None: None"]
    assert len(questions[twice]["synthesis"]) == 2000 and questions[twice]["synthesis"].endswith("…")
    assert len(questions[root]["answers"][0]["text"]) == 2000


@pytest.mark.parametrize("intensity", ["explore", "deep"])
def test_a_simulated_run_folds_alike(backend: Backend, intensity: str) -> None:
    store = backend.open()
    g = store.create_graph("Should a mid-sized city build a tram line?", intensity, "autonomous")
    with Exploration(store, g["graph_id"], SimulatedLLM(), clock=FAST) as ex:
        ex.run()
        assert_same_folds(store, ex.graph_id)


def test_run_shaped_and_grown_graphs_fold_alike(fresh_store: GraphStore) -> None:
    assert_same_folds(fresh_store, run_shaped_graph(fresh_store, 150))
    assert_same_folds(fresh_store, grow_graph(fresh_store, 300))
    only_root = fresh_store.create_graph("Why?", "pulse", "autonomous")["graph_id"]
    assert_same_folds(fresh_store, only_root)
    assert fresh_store.get_question_items(only_root)["links"] == "[]"


def test_the_live_snapshot_takes_the_stores_items_and_deltas_fold_onto_them(fresh_store: GraphStore) -> None:
    g = fresh_store.create_graph("Why?", "explore", "autonomous")
    gid, root = g["graph_id"], g["root_node_id"]
    sub = fresh_store.add_answer(gid, root, "Because.", sub_questions=["How?"])["sub_questions"][0]["node_id"]
    feed = GraphFeed(fresh_store, gid)
    snapshot = feed.snapshot()
    assert snapshot["questions"] == json.loads(fresh_store.get_question_items(gid)["questions"])
    answer = fresh_store.submit_answer(gid, sub, "By rivers.")["answer"]["node_id"]
    delta = feed.delta()
    assert delta is not None
    assert {q["id"]: q for q in delta["questions"]}[sub]["answers"] == [{"id": answer, "text": "By rivers."}]
    assert feed.counts() == snapshot_of(fresh_store.get_changes(gid))["counts"]


def test_the_page_carries_the_stores_json_escaped(fresh_store: GraphStore) -> None:
    g = fresh_store.create_graph("Why </script><!-- ?", "pulse", "autonomous")
    page = render_html(fresh_store.get_question_items(g["graph_id"]), heading="h")
    data = page.split('id="fractal-data">', 1)[1].split("</script>", 1)[0]
    assert "</" not in data and "<!--" not in data
    message = json.loads(data)
    assert message["type"] == "snapshot" and message["questions"][0]["text"] == "Why </script><!-- ?"


def test_an_unknown_graph_is_refused(fresh_store: GraphStore) -> None:
    with pytest.raises(NotFoundError):
        fresh_store.get_question_items("g-nope")
    with pytest.raises(NotFoundError):
        fresh_store.carries_evidence("g-nope")
