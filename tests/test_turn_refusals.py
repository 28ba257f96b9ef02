"""A refused steering call changes nothing (docs/architecture.md, "Turns and heads").

The store opens the turn, writes the note and logs its events before it finds the
question it would reopen cannot be: the transaction must leave no trace of any of it.
"""

from __future__ import annotations

import pandas as pd
import pytest

from fractal_nb import Exploration, SimulatedLLM, StateError


def test_a_note_on_a_budget_cut_question_is_refused_and_changes_nothing() -> None:
    with Exploration.create(
        "Why do cities grow?", intensity="pulse", llm=SimulatedLLM(), max_tokens=2500
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
