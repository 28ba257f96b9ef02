"""Turns and heads (docs/architecture/store.md, "Turns and heads"): a harvested exploration takes later turns.

Each steering call (ask, deepen, widen, redecompose, note) opens a turn that ``run()``
works and ``harvest()`` ends in a head; superseded nodes stay in the graph but never in
the result; a refused call changes nothing.

Covers: engine/widening.py, exploration/steering.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

from fractal_nb import (
    BudgetError,
    Exploration,
    InvalidInputError,
    InvalidTransitionError,
    SimulatedLLM,
    StateError,
)
from fractal_nb.exploration.steering import HEAD_COLUMNS, TurnStep
from fractal_nb.llm.protocol import Message
from fractal_nb.results.result import FractalResult
from fractal_nb.vocabulary import NodeStatus
from tests.conftest import Backend

pytestmark = pytest.mark.both_backends


class PromptLog(SimulatedLLM):
    """The simulator, keeping the last user message of each call by role (to read what prompts held)."""

    def __init__(self) -> None:
        super().__init__(seed=3)
        self.prompts: list[tuple[str, str]] = []

    def complete(self, messages: list[Message], schema: type[Any]) -> dict[str, Any]:
        self.prompts.append((getattr(schema, "role", "?"), messages[-1]["content"]))
        return super().complete(messages, schema)


@pytest.fixture
def harvested(backend: Backend) -> Iterator[Exploration]:
    with Exploration.create(
        "Why do cities grow?", intensity="pulse", llm=PromptLog(), path=backend.target
    ) as ex:
        assert ex.run(progress=False) == "all_complete"
        assert ex.harvest().status == "completed"
        yield ex


def counts_now(ex: Exploration) -> dict[str, int]:
    """What a head must count, recounted from nodes(): current questions by status, notes, superseded."""
    nodes = ex.nodes()
    current = nodes[nodes["superseded_turn"].isna()]
    by_status = Counter(current[current["node_type"] == "question"]["status"])
    counts = {s.value: by_status.get(s.value, 0) for s in NodeStatus}
    counts["notes"] = int((current["node_type"] == "note").sum())
    counts["superseded"] = int(nodes["superseded_turn"].notna().sum())
    return counts


def finish(ex: Exploration) -> FractalResult:
    assert ex.status == "active"
    assert ex.run(progress=False) == "all_complete"
    result = ex.harvest()
    assert result.status == "completed" and ex.status == "completed"
    return result


def superseded_ids(ex: Exploration) -> set[str]:
    nodes = ex.nodes()
    return set(nodes[nodes["superseded_turn"].notna()]["node_id"])


def check_result_is_current(ex: Exploration, result: FractalResult) -> None:
    gone = superseded_ids(ex)
    assert not gone & {link.node_id for link in result.synthesis_chain}
    assert not gone & {row["node_id"] for row in result.gap_rows}
    assert not gone & set(ex.gaps()["node_id"])


def seed_questions(ex: Exploration) -> pd.DataFrame:
    nodes = ex.nodes()
    return nodes[(nodes["node_type"] == "question") & (nodes["depth"] == 1) & nodes["superseded_turn"].isna()]


def test_each_steering_call_ends_in_its_own_head(harvested: Exploration) -> None:
    ex = harvested
    llm = ex.llm
    assert isinstance(llm, PromptLog)
    expected = [counts_now(ex)]
    root = ex.store.get_graph(ex.graph_id)["root_node_id"]

    # A follow-up under the root's answer: the root reopens and is synthesized again with it.
    asked = ex.ask("What part does the climate play in how cities grow?")
    assert isinstance(asked, TurnStep) and asked.turn == 2 and asked.kind == "ask" and len(asked.created) == 1
    assert ex.status == "active"
    result = finish(ex)
    follow_up = ex.store.get_node(ex.graph_id, asked.created[0])["node"]
    assert follow_up["status"] == "synthesized" and follow_up["depth"] == 1
    assert asked.created[0] in {link.node_id for link in result.synthesis_chain}  # not the stale harvest
    assert ex.store.get_node(ex.graph_id, root)["node"]["status"] == "synthesized"
    expected.append(counts_now(ex))

    # Deepen a seed question one level past pulse's depth 2: its leaf reopens and decomposes.
    branch = seed_questions(ex)["node_id"].iloc[0]
    deepened = ex.deepen(branch, levels=1)
    assert deepened.turn == 3 and deepened.reopened == (branch,)
    result = finish(ex)
    nodes = ex.nodes()
    below = nodes[(nodes["parent_id"].isin(nodes[nodes["parent_id"] == branch]["node_id"]))]
    assert (below["node_type"] == "question").any() and below["depth"].max() == 2
    old_answers = nodes[(nodes["parent_id"] == branch) & nodes["superseded_turn"].notna()]
    assert len(old_answers) == 1 and old_answers["status_reason"].iloc[0] == "superseded"
    check_result_is_current(ex, result)
    expected.append(counts_now(ex))

    # Widen by two seed questions the graph does not ask yet.
    before = set(seed_questions(ex)["text"])
    widened = ex.widen(2)
    assert widened.turn == 4 and len(widened.created) == 2
    added = seed_questions(ex).set_index("node_id").loc[list(widened.created)]
    assert not set(added["text"]) & before
    finish(ex)
    assert ex.llm_calls()["role"].tolist().count("widen") == 1
    expected.append(counts_now(ex))

    # Redecompose the deepened seed question with a hint: its sub-tree is superseded, a new one grows
    # (deepened again in the same turn: the deepening of turn 3 held for that turn only).
    old_subs = set(
        nodes[
            (nodes["node_type"] == "question")
            & nodes["parent_id"].isin(nodes[nodes["parent_id"] == branch]["node_id"])
        ]["text"]
    )
    redone = ex.redecompose(branch, hint="Think about money first.")
    assert redone.turn == 5 and redone.reopened == (branch,)
    assert ex.store.get_node(ex.graph_id, branch)["node"]["status"] == "open"
    # Pulse's depth-1 questions are leaves: this turn lets the new decomposition go a level deeper.
    assert ex.deepen(branch) == TurnStep(5, "deepen", (), ())
    result = finish(ex)
    nodes = ex.nodes()
    answers = nodes[(nodes["parent_id"] == branch) & nodes["superseded_turn"].isna()]
    assert len(answers) == 1
    new_subs = nodes[(nodes["parent_id"] == answers["node_id"].iloc[0]) & (nodes["node_type"] == "question")]
    assert len(new_subs) >= 1 and not set(new_subs["text"]) & old_subs
    prompt = next(
        p for role, p in reversed(llm.prompts) if role == "answer" and "different decomposition" in p
    )
    assert "Think about money first." in prompt and all(text in prompt for text in old_subs)
    assert superseded_ids(ex) and (nodes[nodes["superseded_turn"] == 5]["node_type"] == "question").any()
    check_result_is_current(ex, result)
    expected.append(counts_now(ex))

    # A note on a leaf: the leaf and everything above it are synthesized again, the note read.
    leaf = new_subs["node_id"].iloc[0]
    noted = ex.note(leaf, "A person adds: land prices decide it here.")
    assert noted.turn == 6 and len(noted.created) == 1 and noted.reopened == (leaf,)
    finish(ex)
    note = ex.store.get_node(ex.graph_id, noted.created[0])["node"]
    assert note["node_type"] == "note" and note["parent_id"] == leaf
    assert ex.store.get_node(ex.graph_id, leaf)["node"]["status"] == "synthesized"
    assert any(role == "synthesize" and "land prices decide it here" in p for role, p in llm.prompts)
    expected.append(counts_now(ex))

    heads = ex.heads()
    assert list(heads.columns) == HEAD_COLUMNS
    assert heads["turn"].tolist() == [1, 2, 3, 4, 5, 6]
    assert heads["kind"].tolist() == ["seed", "ask", "deepen", "widen", "redecompose", "note"]
    assert (heads["status"] == "completed").all() and heads["head_event"].is_monotonic_increasing
    assert heads["tokens"].is_monotonic_increasing and heads["tokens"].iloc[-1] == ex.usage()["tokens"]
    for row, counts in zip(heads.to_dict("records"), expected, strict=True):
        assert {k: row[k] for k in counts if k in row} == {k: v for k, v in counts.items() if k in row}
    assert (
        heads["root_synthesis"].iloc[-1]
        == ex.store.get_node(ex.graph_id, root)["node"]["metadata"]["synthesis"]
    )
    turns = ex.turns()
    assert turns["head_event"].tolist() == heads["head_event"].tolist()
    assert (
        "redecompose(node_id=" in turns["asked"].iloc[4]
        and "Think about money first." in turns["asked"].iloc[4]
    )


def test_requests_before_the_head_join_the_open_turn(harvested: Exploration) -> None:
    ex = harvested
    first = ex.ask("What part does the climate play in how cities grow?")
    second = ex.note(seed_questions(ex)["node_id"].iloc[0], "Rivers mattered early.")
    assert first.turn == second.turn == 2
    finish(ex)
    turns = ex.turns()
    assert turns["turn"].tolist() == [1, 2] and turns["kind"].tolist() == ["seed", "ask"]
    assert turns["asked"].iloc[1].startswith("ask(") and "; note(" in turns["asked"].iloc[1]


def test_a_harvest_without_a_new_turn_reads_back(harvested: Exploration) -> None:
    ex = harvested
    calls = len(ex.llm_calls())
    again = ex.harvest()
    assert again.status == "completed" and len(ex.llm_calls()) == calls
    assert len(ex.heads()) == 1 and ex.turns()["head_event"].notna().all()


def test_a_completed_graph_goes_back_to_active_only_by_a_turn(harvested: Exploration) -> None:

    ex = harvested
    with pytest.raises(InvalidTransitionError, match="only by a new turn"):
        ex.store.update_graph_status(ex.graph_id, "active")
    with pytest.raises(InvalidTransitionError, match="terminal"):
        ex.store.resume_graph(ex.graph_id)
    with pytest.raises(StateError, match="finished"):
        ex.run(progress=False)
    assert ex.status == "completed"
    ex.ask("What part does the climate play in how cities grow?")
    assert ex.status == "active"


def state_of(ex: Exploration) -> tuple[Any, ...]:
    nodes = ex.nodes()
    return (
        ex.status,
        len(ex.events()),
        ex.turns().to_json(),
        nodes[["node_id", "status", "superseded_turn"]].to_json(),
        len(ex.llm_calls()),
    )


def test_bad_steering_is_refused_and_changes_nothing(harvested: Exploration) -> None:
    ex = harvested
    nodes = ex.nodes()
    question = seed_questions(ex)["node_id"].iloc[0]
    answer = nodes[nodes["node_type"] == "answer"]["node_id"].iloc[-1]
    root = ex.store.get_graph(ex.graph_id)["root_node_id"]
    first_question = seed_questions(ex)["text"].iloc[0]
    before = state_of(ex)
    refused: list[tuple[Any, type[Exception], str]] = [
        (lambda: ex.ask(""), InvalidInputError, "question must be a non-empty string"),
        (lambda: ex.ask(42), InvalidInputError, "question must be a non-empty string"),
        (lambda: ex.ask("Why?\x00"), InvalidInputError, "NUL"),
        (lambda: ex.ask("x" * 100_001), InvalidInputError, "limit"),
        (lambda: ex.ask(first_question), StateError, "asked once per graph"),
        (lambda: ex.ask("Which way now?", under="n-nope"), Exception, "not found"),
        (lambda: ex.ask("Which way now?", under=question), BudgetError, "exceeds the budget"),
        (lambda: ex.deepen("n-nope"), Exception, "not found"),
        (lambda: ex.deepen(answer), InvalidInputError, "needs a question"),
        (lambda: ex.deepen(question, 0), InvalidInputError, "levels must be"),
        (lambda: ex.deepen(question, 5), InvalidInputError, "levels must be"),
        (lambda: ex.deepen(question, True), InvalidInputError, "levels must be"),
        (lambda: ex.deepen(question, "2"), InvalidInputError, "levels must be"),
        (lambda: ex.widen(0), InvalidInputError, "n must be"),
        (lambda: ex.widen(13), InvalidInputError, "n must be"),
        (lambda: ex.widen(1.5), InvalidInputError, "n must be"),
        (lambda: ex.redecompose(root), InvalidInputError, "the root"),
        (lambda: ex.redecompose(answer), InvalidInputError, "needs a question"),
        (lambda: ex.redecompose(question, hint=3), InvalidInputError, "hint must be"),
        (lambda: ex.note(answer, "a fact"), InvalidInputError, "needs a question"),
        (lambda: ex.note(question, "  "), InvalidInputError, "text must be"),
        (lambda: ex.note("n-nope", "a fact"), Exception, "not found"),
    ]
    for call, error, message in refused:
        with pytest.raises(error, match=message):
            call()
        assert state_of(ex) == before, message


def test_steering_is_refused_while_running_or_in_error(harvested: Exploration) -> None:
    ex = harvested
    question = seed_questions(ex)["node_id"].iloc[0]
    ex.ask("What part does the climate play in how cities grow?")
    seen: list[str] = []

    def steer(_record: Any) -> None:
        if not seen:
            with pytest.raises(StateError, match="running"):
                ex.note(question, "too early")
            seen.append("refused")

    assert ex.run(progress=False, on_step=steer) == "all_complete" and seen == ["refused"]
    ex.harvest()
    ex.ask("Where do the new residents come from?")
    ex.store.update_graph_status(ex.graph_id, "error", reason="a failure")
    before = state_of(ex)
    for call in (
        lambda: ex.note(question, "a fact"),
        lambda: ex.ask("Who builds the housing?"),
        lambda: ex.deepen(question),
        lambda: ex.redecompose(question),
        lambda: ex.widen(1),
    ):
        with pytest.raises(StateError, match="'error'"):
            call()
        assert state_of(ex) == before
