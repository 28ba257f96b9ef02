"""Steering from the panel, the Turns tab and the history slider.

views/steering_panel.py and views/history_slider.py, driven as a person clicks.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.views import ExplorationView
from fractal_nb.views.graph_feed import snapshot_at
from tests.engine.test_runs import FAST
from tests.views.test_control_panel import settle
from tests.views.test_network_widget import HOSTILE, capture


@pytest.fixture
def harvested() -> Iterator[Exploration]:
    with Exploration.create(
        "Why do cities grow?", intensity="pulse", llm=SimulatedLLM(seed=2), clock=FAST
    ) as ex:
        ex.run(progress=False)
        ex.harvest(finish=True)
        yield ex


def click(view: ExplorationView, button: Any) -> None:
    button.click()
    settle(view)


def test_ask_on_a_harvested_graph_opens_a_turn_and_run_works_again(harvested: Exploration) -> None:
    view = harvested.view()
    assert view.run_button.disabled and "completed" in view.status_rows.guide.value
    view.steering.ask_text.value = "What about ports?"
    click(view, view.steering.ask_button)
    assert "ask: turn 2: asked under the root · 1 node(s) created" in view.message.value
    assert view.steering.ask_text.value == "", "the box is ready for the next question"
    assert harvested.status == "active" and not view.run_button.disabled, "Run works again"
    click(view, view.run_button)
    assert "run: all_complete" in view.message.value
    click(view, view.harvest_button)
    assert harvested.status == "completed"
    assert view.steering.heads_table.value.count('<tr class="fractal-record">') == 2, "two heads"
    assert [b.description for b in view.steering.fork_bar.children] == [
        "Fork here: head 1",
        "Fork here: head 2",
    ]
    assert [t for t, _ in view.history.heads] == [1, 2]
    view.close()


def test_a_refused_steering_call_says_why_and_changes_nothing(harvested: Exploration) -> None:
    view = harvested.view()
    before = harvested.turns()
    view.steering.ask_text.value = "Why do cities grow?"  # the seed again: refused (rule 10)
    click(view, view.steering.ask_button)
    assert "error: ask failed:" in view.message.value
    assert view.steering.ask_text.value == "Why do cities grow?", "a refused question stays to be edited"
    assert harvested.turns().equals(before) and harvested.status == "completed"
    view.steering.ask_text.value = " "
    click(view, view.steering.ask_button)
    assert "type a follow-up question first" in view.message.value
    view.steering.ask_under.value = "selected"
    view.steering.ask_text.value = "Under what?"
    click(view, view.steering.ask_button)
    assert "click a question in the graph first" in view.message.value
    assert harvested.turns().equals(before)
    view.close()


def test_inspector_deepens_redecomposes_and_notes_the_selected_question(harvested: Exploration) -> None:
    view = harvested.view()
    steer = view.steering
    assert steer.deepen_button.disabled and "Click a question" in steer.inspector_note.value
    nodes = harvested.nodes()
    seed = nodes[(nodes.node_type == "question") & (nodes.depth == 1)].node_id.iloc[0]
    view.network.selected = seed
    view.refresh()
    assert not steer.deepen_button.disabled and steer.inspector_note.value == ""
    root = nodes.node_id.iloc[0]  # a pulse goes one level deep: a follow-up goes under the root question
    view.network.selected = root
    view.refresh()
    steer.ask_under.value = "selected"
    steer.ask_text.value = "Which region first?"
    click(view, steer.ask_button)
    assert f"ask: turn 2: asked under {root} · 1 node(s) created" in view.message.value
    view.network.selected = seed
    view.refresh()
    steer.note_text.value = HOSTILE
    click(view, steer.note_button)
    assert "note: turn 2: noted · 1 node(s) created" in view.message.value
    assert "<img" not in view.message.value
    steer.levels.value = 2
    click(view, steer.deepen_button)
    assert "deepen: turn 2: deepened 2 level(s)" in view.message.value and steer.note_text.value == ""
    steer.hint.value = "by <b>region</b>"
    click(view, steer.redecompose_button)
    assert "redecompose: turn 2: redecomposed with a hint" in view.message.value
    kinds = harvested.turns().kind.tolist()
    assert len(kinds) == 2 and "note" in view.steering.turns_table.value
    assert "<b>region</b>" not in steer.turns_table.value, "asked text reaches the table escaped"
    view.close()


def test_widen_asks_the_model_for_more_seed_questions(harvested: Exploration) -> None:
    view = harvested.view()
    view.steering.widen_count.value = 2
    click(view, view.steering.widen_button)
    assert "widen: turn 2: widened by 2" in view.message.value
    assert not view.run_button.disabled
    view.close()


def test_steering_waits_while_a_job_runs_and_when_the_graph_is_in_error() -> None:
    from tests.engine.test_runs import FixableBackend

    with Exploration.create("Why?", intensity="pulse", llm=FixableBackend(seed=3), clock=FAST) as ex:
        view = ex.view()
        click(view, view.run_button)
        assert ex.status == "error"
        assert view.steering.ask_button.disabled and view.steering.widen_button.disabled
        assert "in error: Resume" in view.steering.steer_note.value
        view.steering.show_controls(True, "active")
        assert view.steering.ask_button.disabled and "while the job runs" in view.steering.steer_note.value
        view.close()


def test_fork_here_says_where_the_fork_is_and_how_to_open_it(tmp_path: Path) -> None:
    path = tmp_path / "g.duckdb"
    with Exploration.create(
        "Why do cities grow?", intensity="pulse", llm=SimulatedLLM(seed=2), clock=FAST, path=path
    ) as ex:
        ex.run(progress=False)
        ex.harvest(finish=True)
        view = ex.view()
        assert "No forks yet: Fork here makes a new graph" in view.steering.fork_list.value
        click(view, view.steering.fork_bar.children[0])
        fork = view.steering.forks[-1]
        assert f"into graph {fork.graph_id} in {path}: Exploration.open(" in view.message.value
        assert fork.lineage()["forked_from"].tolist() == [None, ex.graph_id]
        # The Turns tab lists the fork at once, where it came from, and how to open it (issue 38).
        forks = view.steering.fork_list.value
        head = int(ex.heads()["head_event"].iloc[0])
        assert f"<li>{ex.graph_id} (this graph): the original · completed</li>" in forks
        assert (
            f"<li>{fork.graph_id}: forked from this graph at event {head} (head 1) · completed</li>" in forks
        )
        assert "graph_id=..., llm=...) opens one" in forks
        assert ex.status == "completed", "the source never changes"
        fork.close()
        view.close()


def test_a_forks_view_keeps_its_sources_heads_but_cannot_jump_or_fork_at_them(harvested: Exploration) -> None:
    harvested.ask("What about ports?")
    harvested.run(progress=False)
    harvested.harvest(finish=True)
    fork = harvested.fork(at=harvested.heads().iloc[1])
    view = fork.view()
    assert [t for t, _ in view.history.heads] == [1, 2], "the fork keeps the heads it was made from"
    assert all(b.disabled for b in view.history.head_bar.children)
    assert all(b.disabled for b in view.steering.fork_bar.children)
    assert "source" in view.history.head_bar.children[0].tooltip and "▲" not in view.history.marks.value
    fork.ask("And rivers?")
    fork.run(progress=False)
    fork.harvest(finish=True)
    view.refresh()
    assert [b.disabled for b in view.history.head_bar.children] == [True, True, False]
    assert [b.disabled for b in view.steering.fork_bar.children] == [True, True, False]
    view.history.jump(view.history.heads[2][1])
    assert view.network.past is not None and view.network.past["past"].endswith("head 3)")
    view.close()


def test_the_slider_jumps_to_a_head_through_a_past_snapshot_and_live_returns(harvested: Exploration) -> None:
    harvested.ask("What about ports?")
    harvested.run(progress=False)
    harvested.harvest(finish=True)
    view = harvested.view()
    sent = capture(view.network)
    history = view.history
    (turn1, head1), (_, head2) = history.heads
    assert turn1 == 1 and history.slider.value == history.slider.max == len(history.events) - 1
    history.jump(head1)
    assert [b.button_style for b in history.head_bar.children] == ["info", ""], "the head shown is marked"
    past = sent[-1]
    then = harvested.at(head1)
    assert past["type"] == "snapshot" and past["past"] == f"event {head1} (turn 1, head 1)"
    assert (
        past["seq"] == head1
        and past["counts"]["total"] == len(then.nodes()) < view.network.feed.counts()["total"]
    )
    assert not history.live_button.disabled and "showing the past" in history.position.value
    # The store moves on: the feed follows it, the view keeps the past (no delta sent).
    harvested.ask("And rivers?")
    view.refresh()
    assert sent[-1] is past and history.showing_past
    history.play.playing = True  # a replay going on: Live stops it
    history.live()
    assert sent[-1]["type"] == "snapshot" and sent[-1]["past"] is None and not history.play.playing
    assert sent[-1]["counts"]["total"] == len(harvested.nodes()) and history.live_button.disabled
    # A reader's move: the slider's end is live, any other position the past.
    history.slider.value = 0
    assert sent[-1]["past"] is not None and sent[-1]["counts"]["total"] == 1
    history.slider.value = history.slider.max
    assert sent[-1]["past"] is None
    assert head2 in history.events and "head 2 ▲" in history.marks.value
    view.close()


def test_a_run_refreshing_the_slider_never_moves_the_view_into_the_past(harvested: Exploration) -> None:
    """Play and the slider are linked in the kernel: the page never echoes a value the kernel set.

    A page link (``jslink``) answered each of the kernel's placements with the same value, as
    if the reader had moved the slider; one that arrived after the next refresh put the live
    view in the past mid-run (issue 38). Now only the reader's moves (or a replay's frames)
    come back, and the view's "Back to live" returns from the past in one click.
    """
    view = harvested.view()
    sent = capture(view.network)
    history = view.history
    for question in ("What about ports?", "And rivers?"):  # a run's refreshes move the slider's end
        harvested.ask(question)
        view.refresh()
        assert history.slider.value == history.slider.max == history.play.value == history.play.max
        assert not history.showing_past and sent[-1]["type"] == "delta"
    # A replay's frame: the slider follows Play, the view shows that event; its end is live.
    history.play.value = 0
    assert history.slider.value == 0 and history.showing_past and sent[-1]["past"] is not None
    # The view's own "Back to live" (the Voila app shows no slider): the present, the slider at its end.
    view.network._on_view_message(view.network, {"type": "live"}, [])
    assert not history.showing_past and sent[-1]["type"] == "snapshot" and sent[-1]["past"] is None
    assert history.slider.value == history.slider.max and history.live_button.disabled
    history.slider.value = 1  # a reader's move: Play follows it, to replay from there
    assert history.play.value == 1 and history.showing_past
    history.play.value = history.play.max
    assert not history.showing_past and history.slider.value == history.slider.max
    view.close()


def test_a_past_snapshot_is_what_the_feed_gave_at_that_event(harvested: Exploration) -> None:
    """snapshot_at folds the state at an event as get_changes gives the live graph: one renderer."""
    view = harvested.view()
    head = int(harvested.heads().head_event.iloc[0])
    live = view.network.feed.snapshot()
    past = snapshot_at(harvested.store.get_state_at(harvested.graph_id, head), "head 1")
    assert past["questions"] == live["questions"] and past["links"] == live["links"]
    assert past["counts"] == live["counts"] and past["status"] == live["status"]
    view.close()


def test_a_file_older_than_its_history_says_so_on_the_slider(tmp_path: Path) -> None:
    import duckdb

    path = tmp_path / "old.duckdb"
    with Exploration.create("Why do cities grow?", intensity="pulse", llm=SimulatedLLM(), path=path) as ex:
        ex.run(progress=False)
        graph_id = ex.graph_id
    with duckdb.connect(str(path)) as con:  # as a version without history left it (tests/test_history.py)
        for table in ("node_history", "graph_history", "history_baselines", "lineage", "fork_nodes"):
            con.execute(f"DROP TABLE {table}")
    with Exploration.open(path, graph_id, llm=SimulatedLLM()) as ex:
        view = ex.view()
        view.history.slider.value = 0
        assert view.network.past is None, "the view keeps the live graph"
        assert "history starts at event" in view.history.position.value
        view.close()


def test_a_view_that_opens_while_the_past_shows_gets_the_past(harvested: Exploration) -> None:
    view = harvested.view()
    sent = capture(view.network)
    view.history.jump(view.history.events[3])
    view.network._on_view_message(view.network, {"type": "hello", "need_vis": False}, [])
    assert sent[-1]["past"] is not None and sent[-1] is view.network.past
    view.close()
