"""Limits that hold: merged metadata, bounded limits and offsets, checked durations, reasons and id lists,
sub-questions per answer and children per node.

Each refused call raises a FractalError whose message says what is allowed, and
changes nothing (nodes, edges, events, graphs, claims of either kind).

Covers: checks.py, store/children.py, vocabulary.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from fractal_nb import GraphStore, InvalidInputError
from fractal_nb.vocabulary import MAX_CHILDREN, MAX_METADATA_BYTES, MAX_SUB_QUESTIONS, MAX_TEXT_CHARS
from tests.conftest import FakeClock, make_tree

BIG = "x" * 600_000  # four of these were 2.4 MB of one node's metadata


@dataclass
class Scene:
    """A graph with a claimed question, a question ready to synthesize and a lease that has run out."""

    store: GraphStore
    graph_id: str
    root: str
    seed: str  # holds 600k characters of metadata, as the graph does
    claimed: str  # claimed by w1, its lease past
    ready: str  # answered, its only sub-question synthesized: ready to synthesize


@pytest.fixture
def scene(fresh_store: GraphStore, clock: FakeClock) -> Scene:
    tree = make_tree(fresh_store, seeds=3)
    store, gid = fresh_store, tree.graph_id
    store.update_node(gid, tree.seeds[0], {"notes": BIG})
    answer = tree.answer(tree.seeds[1])
    below = tree.ask(answer, "A narrower question")
    tree.answer(below)
    store.synthesize_node(gid, below, "A leaf's synthesis.")
    store.update_graph_metadata(gid, {"notes": BIG})
    claimed = store.claim_work(gid, "w1", holder=None)["node_id"]
    assert claimed is not None
    clock.advance(3600)  # the claim's lease (60 s) has run out: a valid recover_stuck would take it
    assert store.get_ready_to_synthesize(gid)["count"] == 1
    return Scene(store, gid, tree.root, tree.seeds[0], claimed, tree.seeds[1])


def state(store: GraphStore, graph_id: str) -> tuple[Any, ...]:
    """Everything a refused call must leave as it was."""
    return (
        store.get_snapshot(graph_id),
        store.get_events(graph_id)["events"],
        store.list_graphs(),
        store._db.fetchall("SELECT * FROM synthesis_claims ORDER BY node_id"),
        store._db.fetchall("SELECT * FROM holders ORDER BY holder_id"),
        store.get_llm_calls(graph_id),
    )


Call = Callable[[Scene], object]
COUNT = r"must be an integer from 0 to 9,223,372,036,854,775,807, not "
LIMIT = r"limit must be None \(all of them\) or an integer from 0 to 9,223,372,036,854,775,807, not "
REFUSED: list[tuple[str, Call, str]] = [
    # -- metadata: the limit holds for what a node or graph keeps, after the merge
    (
        "node metadata merged past the limit",
        lambda s: s.store.update_node(s.graph_id, s.seed, {"more": BIG}),
        r"the metadata of node n-\w+ would be 1,200,0\d\d characters as JSON after this update "
        r"\(it holds 600,0\d\d\); the limit is 1,000,000 in all",
    ),
    (
        "graph metadata merged past the limit",
        lambda s: s.store.update_graph_metadata(s.graph_id, {"more": BIG}),
        r"the metadata of graph g-\w+ would be 1,200,0\d\d characters .* the limit is 1,000,000 in all",
    ),
    (
        "answer metadata and links merged past the limit",
        lambda s: s.store.submit_answer(
            s.graph_id,
            s.claimed,
            "An answer.",
            owner="w1",
            metadata={"notes": "y" * 990_000},
            links={"convergence_with": [s.seed], "convergence_insight": "z" * 20_000},
        ),
        r"the metadata of node n-\w+ would be 1,010,\d{3} characters .* the limit is 1,000,000 in all",
    ),
    # -- event limits and offsets: bounded integers, no bools
    (
        "events limit 2**70",
        lambda s: s.store.get_events(s.graph_id, limit=2**70),
        LIMIT + "1180591620717411303424",
    ),
    (
        "events limit 2**63",
        lambda s: s.store.get_events(s.graph_id, limit=2**63),
        LIMIT + "9223372036854775808",
    ),
    ("events limit -1", lambda s: s.store.get_events(s.graph_id, limit=-1), LIMIT + "-1"),
    ("events limit True", lambda s: s.store.get_events(s.graph_id, limit=True), LIMIT + "True"),
    ("events limit 2.0", lambda s: s.store.get_events(s.graph_id, limit=2.0), LIMIT + "2.0"),
    ("events limit text", lambda s: s.store.get_events(s.graph_id, limit="5"), LIMIT + "'5'"),
    ("events limit 10**5000", lambda s: s.store.get_events(s.graph_id, limit=10**5000), "16610 bits"),
    ("events since 2**63", lambda s: s.store.get_events(s.graph_id, since=2**63), "since " + COUNT),
    ("events since None", lambda s: s.store.get_events(s.graph_id, since=None), "since " + COUNT + "None"),
    ("changes since 2**70", lambda s: s.store.get_changes(s.graph_id, since=2**70), "since " + COUNT),
    ("changes since -1", lambda s: s.store.get_changes(s.graph_id, since=-1), "since " + COUNT),
    (
        "context limit 2**70",
        lambda s: s.store.get_context(s.graph_id, s.claimed, limit=2**70),
        "limit " + COUNT,
    ),
    (
        "context candidates True",
        lambda s: s.store.get_context(s.graph_id, s.claimed, candidates=True),
        "candidates " + COUNT,
    ),
    # -- durations: finite seconds
    *[
        (
            f"recover older_than_s {name}",
            (lambda v: lambda s: s.store.recover_stuck(s.graph_id, older_than_s=v))(value),
            r"older_than_s must be None \(claims past their lease\) or a finite number of seconds >= 0",
        )
        for name, value in [
            ("inf", float("inf")),
            ("nan", float("nan")),
            ("10**400", 10**400),
            ("-1", -1),
            ("True", True),
        ]
    ],
    (
        "release max_failures 0",
        lambda s: s.store.release_claim(s.graph_id, s.claimed, "w1", "failed", max_failures=0),
        "max_failures must be an integer from 1 to",
    ),
    (
        "release max_failures True",
        lambda s: s.store.release_claim(s.graph_id, s.claimed, "w1", "failed", max_failures=True),
        "max_failures must be an integer from 1 to",
    ),
    # -- a graph's reason: text within the limit
    (
        "reason with NUL",
        lambda s: s.store.update_graph_status(s.graph_id, "paused", "stop\x00here"),
        r"reason contains a NUL character",
    ),
    (
        "reason not Unicode",
        lambda s: s.store.update_graph_status(s.graph_id, "paused", "stop\ud800"),
        "reason is not valid Unicode text",
    ),
    (
        "reason too long",
        lambda s: s.store.update_graph_status(s.graph_id, "paused", "r" * (MAX_TEXT_CHARS + 1)),
        "reason is 100,001 characters; the limit is 100,000",
    ),
    # -- lists
    (
        "sub_questions a number",
        lambda s: s.store.submit_answer(s.graph_id, s.claimed, "An answer.", owner="w1", sub_questions=5),
        "sub_questions must be a list of question texts .* or None; not 5",
    ),
    (
        "sub_questions a string",
        lambda s: s.store.add_answer(s.graph_id, s.claimed, "An answer.", sub_questions="Why?"),
        "sub_questions must be a list of question texts .* or None; not 'Why\\?'",
    ),
    # -- sub-questions per answer (issue 37: 100,001 in one call held the write lock for 251 s)
    (
        "sub_questions one past the bound",
        lambda s: s.store.submit_answer(
            s.graph_id,
            s.claimed,
            "An answer.",
            owner="w1",
            sub_questions=[f"Which part {i} matters?" for i in range(MAX_SUB_QUESTIONS + 1)],
        ),
        "sub_questions holds 13 questions; an answer asks at most 12",
    ),
    (
        "sub_questions 100,001",
        lambda s: s.store.add_answer(
            s.graph_id, s.claimed, "An answer.", sub_questions=[f"Part {i}?" for i in range(100_001)]
        ),
        "sub_questions holds 100,001 questions; an answer asks at most 12",
    ),
    (
        "widen past its bound",
        lambda s: s.store.widen(s.graph_id, [f"Which side {i} matters?" for i in range(13)]),
        "questions holds 13 questions; a widening adds at most 12",
    ),
    (
        "skip not a list",
        lambda s: s.store.claim_synthesis(s.graph_id, "w2", skip=5),
        "skip must be a list of node ids or None, not 5",
    ),
    (
        "skip a string",
        lambda s: s.store.claim_synthesis(s.graph_id, "w2", skip="abc"),
        "skip must be a list of node ids or None, not 'abc'",
    ),
    (
        "skip too long",
        lambda s: s.store.claim_synthesis(s.graph_id, "w2", skip=["n-x"] * 100_001),
        "skip holds 100,001 ids; the limit is 100,000",
    ),
    (
        "skip with a non-id",
        lambda s: s.store.claim_synthesis(s.graph_id, "w2", skip=["n-x", 7]),
        r"skip\[1\] must be a non-empty string id",
    ),
]


@pytest.mark.parametrize(("name", "call", "message"), REFUSED, ids=[r[0] for r in REFUSED])
def test_a_call_past_a_limit_is_refused_clearly_and_changes_nothing(
    scene: Scene, name: str, call: Call, message: str
) -> None:
    before = state(scene.store, scene.graph_id)
    with pytest.raises(InvalidInputError, match=message):
        call(scene)
    assert state(scene.store, scene.graph_id) == before


def test_the_scene_takes_the_valid_calls_next_to_each_refused_one(scene: Scene) -> None:
    """The refusals above are the limits', not the scene's: the same calls in bounds do their work."""
    store, gid = scene.store, scene.graph_id
    assert len(store.get_events(gid, limit=2**63 - 1)["events"]) == len(store.get_events(gid)["events"])
    assert store.get_events(gid, since=2**63 - 1)["events"] == []
    assert (
        store.get_context(gid, scene.claimed, limit=10**9, candidates=0)["node"]["node_id"] == scene.claimed
    )
    assert store.recover_stuck(gid, older_than_s=1e308)["recovered"] == []
    assert store.recover_stuck(gid, older_than_s=60)["recovered"] == [scene.claimed]
    assert store.claim_synthesis(gid, "w2", skip=["n-x"] * 1000)["node_id"] == scene.ready
    store.update_graph_status(gid, "paused", "r" * MAX_TEXT_CHARS)
    assert store.get_graph(gid)["status_reason"] == "r" * MAX_TEXT_CHARS


def test_four_big_updates_keep_a_node_within_the_metadata_limit(fresh_store: GraphStore) -> None:
    tree = make_tree(fresh_store)
    store, gid, node = fresh_store, tree.graph_id, tree.seeds[0]
    accepted = 0
    for i in range(4):
        try:
            store.update_node(gid, node, {f"part{i}": BIG})
            accepted += 1
        except InvalidInputError as refused:
            assert "the limit is 1,000,000 in all" in str(refused)
    stored = tree.node(node)["metadata"]
    assert accepted == 1 and list(stored) == ["part0"]
    assert len(json.dumps(stored)) <= MAX_METADATA_BYTES
    # A merge that shrinks what the node keeps, or fills it to the limit exactly, is taken.
    store.update_node(gid, node, {"part0": "short"})
    room = MAX_METADATA_BYTES - len(json.dumps({"part0": "short", "part1": ""}))
    store.update_node(gid, node, {"part1": "y" * room})
    assert len(json.dumps(tree.node(node)["metadata"])) == MAX_METADATA_BYTES
    with pytest.raises(InvalidInputError, match=r"would be 1,000,013 characters .* \(it holds 1,000,000\)"):
        store.update_node(gid, node, {"part2": ""})


@pytest.mark.parametrize("value", ["maybe", 1, None, {"a": 1}, [True]])
def test_a_feed_key_written_with_another_type_does_not_break_the_feed(
    fresh_store: GraphStore, value: object
) -> None:
    # synthesis_failed is read in SQL for the live view; an outside client may write anything there.
    store = fresh_store
    graph = store.create_graph("Why?", "pulse")
    gid, root = graph["graph_id"], graph["root_node_id"]
    store.update_node(gid, root, {"synthesis_failed": value})
    [node] = [n for n in store.get_changes(gid)["nodes"] if n["node_id"] == root]
    assert node["synthesis_failed"] is False
    store.update_node(gid, root, {"synthesis_failed": True})
    [node] = [n for n in store.get_changes(gid)["nodes"] if n["node_id"] == root]
    assert node["synthesis_failed"] is True


# -- children per node (issue 37: a model proposing 10,000 sub-questions made 10,001 children) -----------


@dataclass
class Full:
    """A graph whose root answer holds ``MAX_CHILDREN`` seed questions, one of them claimed, and a question
    holding ``MAX_CHILDREN`` sub-questions asked directly under it."""

    store: GraphStore
    graph_id: str
    root_answer: str
    claimed: str  # a seed question claimed by w1
    crowded: str  # a seed question with MAX_CHILDREN sub-questions directly under it


@pytest.fixture
def full(fresh_store: GraphStore) -> Full:
    tree = make_tree(fresh_store, seeds=MAX_CHILDREN)
    store, gid = fresh_store, tree.graph_id
    claimed = store.claim_work(gid, "w1", holder=None)["node_id"]
    assert claimed == tree.seeds[0]
    crowded = tree.seeds[1]
    with store.batch():
        for i in range(MAX_CHILDREN):
            tree.ask(crowded, f"Which detail {i} of it matters?")
    return Full(store, gid, tree.root_answer, claimed, crowded)


def full_state(full: Full) -> tuple[Any, ...]:
    """Everything a refused call must leave as it was, a graph's turns included."""
    return (
        full.store.get_snapshot(full.graph_id),
        full.store.get_events(full.graph_id)["events"],
        full.store.list_graphs(),
        full.store.list_turns(full.graph_id),
    )


PAST = f"has {MAX_CHILDREN} children; 1 more would pass the limit of {MAX_CHILDREN} per node"
CROWDED: list[tuple[str, Callable[[Full], object], str]] = [
    (
        "a question under a full answer",
        lambda f: f.store.add_node(f.graph_id, f.root_answer, "question", "One more seed question?"),
        f"answer n-\\w+ {PAST}",
    ),
    (
        "an answer under a full question",
        lambda f: f.store.add_node(f.graph_id, f.crowded, "answer", "Its answer."),
        f"question n-\\w+ {PAST}",
    ),
    ("a turn's question under a full answer", lambda f: f.store.ask(f.graph_id, "One more?"), PAST),
    ("a widening of a full root answer", lambda f: f.store.widen(f.graph_id, ["A new side?"]), PAST),
    ("a note under a full question", lambda f: f.store.add_note(f.graph_id, f.crowded, "Evidence."), PAST),
]


@pytest.mark.parametrize(("name", "call", "message"), CROWDED, ids=[r[0] for r in CROWDED])
def test_a_node_takes_at_most_max_children_and_a_refusal_changes_nothing(
    full: Full, name: str, call: Callable[[Full], object], message: str
) -> None:
    before = full_state(full)
    with pytest.raises(InvalidInputError, match=message):
        call(full)
    assert full_state(full) == before


def test_a_boundary_question_with_no_room_is_left_out_and_the_answer_lands(full: Full) -> None:
    written = full.store.submit_answer(
        full.graph_id,
        full.claimed,
        "An answer that meets the seed plan.",
        owner="w1",
        boundary={"text": "Where do the two meet?", "converging_with": full.root_answer},
    )
    assert written["boundary"] is None and written["status"] == "synthesized"
    texts = [n["text"] for n in full.store.get_snapshot(full.graph_id)["nodes"]]
    assert "Where do the two meet?" not in texts


def test_children_a_turn_superseded_leave_room(full: Full) -> None:
    """The bound counts a node's current children: a redecomposition's superseded ones are history."""
    with pytest.raises(InvalidInputError, match=PAST):
        full.store.add_node(full.graph_id, full.crowded, "answer", "A new decomposition.")
    full.store.redecompose(full.graph_id, full.crowded)
    answer = full.store.add_node(full.graph_id, full.crowded, "answer", "A new decomposition.")["node_id"]
    below = [n for n in full.store.get_snapshot(full.graph_id)["nodes"] if n["parent_id"] == full.crowded]
    assert len(below) == MAX_CHILDREN + 1
    assert [n["node_id"] for n in below if n["superseded_turn"] is None] == [answer]
