"""A refused steering call changes nothing (docs/architecture/store.md, "Turns and heads").

The store opens the turn, writes the note and logs its events before it finds the
question it would reopen cannot be: the transaction must leave no trace of any of it.

Covers: exploration/steering.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from fractal_nb import Exploration, SimulatedLLM, StateError
from tests.conftest import Backend
from tests.llm.fake_openai import FakeOpenAI

pytestmark = pytest.mark.both_backends


def test_a_note_on_a_budget_cut_question_is_refused_and_changes_nothing(backend: Backend) -> None:
    with Exploration.create(
        "Why do cities grow?", intensity="pulse", llm=SimulatedLLM(), max_tokens=2500, path=backend.target
    ) as ex:
        ex.run(max_workers=1, progress=False)
        ex.harvest()
        cut = ex.nodes().query("node_type == 'question' and status_reason == 'budget_exhausted'")
        assert len(cut) >= 1, "the budget cuts at least one seed question"
        last = int(ex.events()["event_id"].max())
        before = (ex.nodes(), ex.edges(), ex.turns(), ex.at(last).nodes())
        status = ex.status
        with pytest.raises(StateError, match=r"saturated \(budget_exhausted\); redecompose\(\) it first"):
            ex.note(str(cut["node_id"].iloc[0]), "A census says so.")
        assert int(ex.events()["event_id"].max()) == last
        after = (ex.nodes(), ex.edges(), ex.turns(), ex.at(last).nodes())
        for old, new in zip(before, after, strict=True):
            pd.testing.assert_frame_equal(old, new)
        assert ex.status == status == "completed"
        assert ex.heads()["turn"].tolist() == [1]


def stored(backend: Backend, graph_id: str) -> tuple[Any, ...]:
    """The graph as the store holds it (and on DuckDB the file's bytes)."""
    with backend.open(backend.lasting, read_only=True) as store:
        held = store.get_snapshot(graph_id), store.get_events(graph_id), store.get_llm_calls(graph_id)
    return (*held, Path(backend.lasting).read_bytes() if backend.url is None else None)


def test_a_read_only_exploration_refuses_each_steering_call_before_the_model(backend: Backend) -> None:
    """widen() asks the model first: on a read-only store it must not (a paid call, never recorded)."""
    path = backend.lasting
    with Exploration.create("Why do cities grow?", intensity="pulse", llm=SimulatedLLM(), path=path) as ex:
        ex.run(max_workers=1, progress=False)
        ex.harvest()
        seed = str(ex.nodes().query("depth == 1 and node_type == 'question'")["node_id"].iloc[0])
    before = stored(backend, ex.graph_id)
    with FakeOpenAI("ok") as server:
        with Exploration.open(path, llm=server.llm(), read_only=True) as ro:
            for call in (
                lambda: ro.widen(2),
                lambda: ro.ask("What about the rivers?"),
                lambda: ro.deepen(seed),
                lambda: ro.redecompose(seed),
                lambda: ro.note(seed, "A census says so."),
            ):
                with pytest.raises(StateError, match="read_only=True: it is read, never changed"):
                    call()
        assert server.requests == []
    assert stored(backend, ex.graph_id) == before
