"""Turns meet history (docs/architecture/store.md, "Turns and heads", "History and forks").

Every head replays as it was made; a fork at a head starts from that head and takes turns of
its own without moving its source, nor its source it.
"""

from __future__ import annotations

import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

from fractal_nb import Exploration, SimulatedLLM, StateError
from tests.conftest import Backend
from tests.test_history import same_as, table_rows

pytestmark = pytest.mark.both_backends


def test_at_every_head_equals_the_state_when_it_was_made(backend: Backend) -> None:
    with Exploration.create(
        "Why do cities grow?", intensity="pulse", llm=SimulatedLLM(seed=5), path=backend.lasting
    ) as ex:
        seen: list[tuple[pd.DataFrame, pd.DataFrame]] = []
        ex.run(progress=False)
        ex.harvest()
        seen.append((ex.nodes(), ex.edges()))
        seed_q = ex.nodes().query("depth == 1 and node_type == 'question'")["node_id"].iloc[0]
        for steer in (
            lambda: ex.ask("What part does the climate play in how cities grow?"),
            lambda: ex.note(seed_q, "Local records show the river port came first."),
            lambda: ex.redecompose(seed_q, hint="Start from the money."),
        ):
            steer()
            ex.run(progress=False)
            ex.harvest()
            seen.append((ex.nodes(), ex.edges()))
        heads = ex.heads()
        assert heads["turn"].tolist() == [1, 2, 3, 4]
        for head_event, (nodes, edges) in zip(heads["head_event"], seen, strict=True):
            then = ex.at(int(head_event))
            assert then.status == "completed"
            assert_frame_equal(then.nodes(), nodes)
            assert_frame_equal(then.edges(), edges)


def test_a_fork_at_a_head_takes_its_own_turns_and_leaves_the_source_alone(backend: Backend) -> None:
    with Exploration.create(
        "Why do cities grow?", intensity="pulse", llm=SimulatedLLM(seed=5), path=backend.lasting
    ) as ex:
        ex.run(progress=False)
        ex.harvest()
        first = ex.heads().iloc[0]
        at_head = (ex.nodes(), ex.edges())
        ex.ask("What part does the climate play in how cities grow?")
        ex.run(progress=False)
        ex.harvest()
        source = table_rows(ex)
        fork = ex.fork(at=first)
        try:
            assert table_rows(ex) == source, "forking changed the source"
            same_as(fork, *at_head)
            assert fork.status == "completed"
            mine = fork.heads()
            assert mine[["turn", "head_event"]].values.tolist() == [[1, first["head_event"]]]
            step = fork.ask("Which cities shrank, and why?")
            assert step.turn == 2
            fork.run(progress=False)
            fork.harvest()
            assert fork.heads()["turn"].tolist() == [1, 2]
            assert table_rows(ex) == source, "the fork's turn moved the source"
            assert "Which cities shrank, and why?" in fork.nodes()["text"].tolist()
            assert "Which cities shrank, and why?" not in ex.nodes()["text"].tolist()
        finally:
            fork.close()


def test_a_fork_inside_a_turn_has_that_turn_open(backend: Backend) -> None:
    with Exploration.create(
        "Why do cities grow?", intensity="pulse", llm=SimulatedLLM(seed=5), path=backend.lasting
    ) as ex:
        ex.run(progress=False)
        ex.harvest()
        step = ex.ask("What part does the climate play in how cities grow?")
        asked_at = int(ex.events()["event_id"].max())
        ex.run(progress=False)
        ex.harvest()
        fork = ex.fork(at=asked_at)
        try:
            turns = fork.turns()
            assert turns["turn"].tolist() == [1, 2]
            assert pd.isna(turns["head_event"].iloc[1]), "the turn had no head yet at the fork point"
            asked = fork.nodes().set_index("text").loc["What part does the climate play in how cities grow?"]
            assert asked["status"] == "open" and asked["node_id"] not in step.created
            fork.run(progress=False)
            fork.harvest()
            assert fork.heads()["turn"].tolist() == [1, 2]
        finally:
            fork.close()


def test_attach_forks_at_a_head_with_a_narrower_turn_and_a_refusal_leaves_no_fork(backend: Backend) -> None:
    path = backend.lasting
    with Exploration.create(
        "Why do cities grow?", intensity="pulse", llm=SimulatedLLM(seed=5), path=path
    ) as ex:
        ex.run(progress=False)
        ex.harvest()
        source = table_rows(ex)
        head = ex.heads().iloc[0]
        seed_question = ex.nodes().query("depth == 1 and node_type == 'question'")["text"].iloc[0]
        with pytest.raises(StateError, match="asked already"):
            ex.attach(head, seed_question)
        assert Exploration.family(path)["graph_id"].tolist() == [ex.graph_id], "a refused attach left a fork"
        narrow = ex.attach(head, "Which harbour cities grew fastest?")
        try:
            assert narrow.turns()[["turn", "kind"]].values.tolist() == [[1, "seed"], [2, "attach"]]
            narrow.run(progress=False)
            narrow.harvest()
            assert narrow.heads()["turn"].tolist() == [1, 2]
            assert narrow.lineage()["forked_from"].tolist() == [None, ex.graph_id]
            assert table_rows(ex) == source, "attach moved the source"
        finally:
            narrow.close()


def test_a_fork_holds_only_the_requests_and_allowances_made_by_its_event(backend: Backend) -> None:
    path = backend.lasting
    with Exploration.create(
        "Why do cities grow?", intensity="pulse", llm=SimulatedLLM(seed=5), path=path
    ) as ex:
        ex.run(progress=False)
        ex.harvest()
        ex.ask("What part does the climate play in how cities grow?")
        asked_at = int(ex.events()["event_id"].max())
        seed_q = ex.nodes().query("depth == 1 and node_type == 'question'")["node_id"].iloc[0]
        ex.deepen(seed_q, levels=2)  # joins turn 2 after the fork point
        fork = ex.fork(at=asked_at)
        try:
            assert fork.turns()["asked"].iloc[1] == ex.turns()["asked"].iloc[1].split("; ")[0]
            allowances = fork.store._db.fetchall(  # noqa: SLF001 - the fork's own rows
                "SELECT count(*) FROM depth_allowances WHERE graph_id = ?", [fork.graph_id]
            )
            assert allowances == [(0,)], "the deepen came after the fork's event"
        finally:
            fork.close()
