"""The control panel drives the facade from background threads and reports every outcome.

Covers: views/export_tab.py, views/gates_tab.py, views/panel_layout.py, views/status_rows.py.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.views import ExplorationView
from tests.engine.test_runs import FAST


@pytest.fixture
def gated() -> Iterator[Exploration]:
    with Exploration.create(
        "Why do cities grow?", intensity="pulse", checkpoint="depth:1", llm=SimulatedLLM(seed=2), clock=FAST
    ) as ex:
        yield ex


def settle(view: ExplorationView) -> None:
    """Wait for the background job, then do what the kernel task would do."""
    if view._job is not None:
        view._job.join(timeout=60)
    view.refresh()


def test_step_then_gate_approval_then_run_to_the_end(gated: Exploration) -> None:
    view = gated.view()
    assert (
        view.status_rows.counts.value.count("1 open") == 1
        and view.gates.gate_note.value == "No gated questions."
    )
    view.step_button.click()
    assert view._job is not None and view._job.name == "step", "the click returns; work is in a thread"
    settle(view)
    assert "1 node(s) processed" in view.message.value
    assert len(view.gates.gate_list.options) >= 3 and not view.gates.approve_all_button.disabled
    # Only gated work left: Step and Run say why they wait, and the Gates tab is shown.
    assert view.step_button.disabled and view.run_button.disabled
    assert (
        "Waiting at 3 gate(s)" in view.status_rows.guide.value
        or "Waiting at 4 gate(s)" in view.status_rows.guide.value
    )
    assert view.tabs.selected_index == 0
    # Choosing a gate selects it in the graph; the Inspector offers Approve for it.
    view.gates.gate_list.value = (view.gates.gate_list.options[-1][1],)
    view.refresh()
    assert (
        view.network.selected == view.gates.gate_list.options[-1][1] and not view.approve_node_button.disabled
    )
    view.approve_node_button.click()
    settle(view)
    assert "approved 1 gated question(s)" in view.message.value and not view.step_button.disabled
    view.gates.gate_list.value = (view.gates.gate_list.options[0][1],)
    view.gates.approve_button.click()
    settle(view)
    assert "approved 1 gated question(s)" in view.message.value
    view.gates.approve_all_button.click()
    settle(view)
    assert view.gates.gate_list.options == () and view.gates.approve_all_button.disabled
    view.run_button.click()
    settle(view)
    assert "run: all_complete" in view.message.value
    counts = view.network.feed.counts()
    assert (
        view.status_rows.progress.value
        == view.status_rows.progress.max
        == counts["synthesized"] + counts["saturated"]
    )
    assert view.run_button.disabled and view.pause_button.disabled, "nothing is left to run"
    assert "Nothing is left to explore: Harvest" in view.status_rows.guide.value
    view.report_button.click()
    settle(view)
    assert "Synthesis chain" in view.result.value and view.tabs.selected_index == 2
    assert gated.status == "active", "a report changes nothing"
    view.harvest_button.click()
    settle(view)
    assert gated.status == "completed" and "the result is in the Result tab" in view.message.value
    assert view.harvest_button.disabled and "This exploration is completed" in view.status_rows.guide.value
    assert "model calls" in view.status_rows.totals.value and "tokens" in view.status_rows.totals.value
    assert "ExplorationView of" in repr(view), "a saved notebook shows a sentence, not the widget tree"


def test_step_n_processes_n_nodes_and_pause_stops_it(gated: Exploration) -> None:
    gated.step(1)
    gated.approve()
    view = gated.view()
    view.step_count.value = 2  # of 3 or 4 seed questions: one is left for the held job below
    view.step_n_button.click()
    settle(view)
    assert "2 node(s) processed" in view.message.value
    assert len(gated.llm_calls()) >= 3

    slow, entered = threading.Event(), threading.Event()
    original = gated.step

    def held_step(n: int = 1):  # type: ignore[no-untyped-def]
        entered.set()
        slow.wait(5)
        return original(n)

    gated.step = held_step  # type: ignore[method-assign]
    view.step_count.value = 50
    view.step_n_button.click()
    view.refresh()
    assert view.step_button.disabled and not view.pause_button.disabled
    view.step_button.click()  # busy: refused with a message, nothing started
    view.refresh()
    assert "busy" in view.message.value
    assert entered.wait(5), "the job is inside its first step"
    view.pause_button.click()
    slow.set()
    settle(view)
    assert "(paused)" in view.message.value and "1 node(s) processed" in view.message.value


def test_inspector_shows_the_selected_node_and_prunes_its_branch(gated: Exploration) -> None:
    gated.step(1)
    view = gated.view()
    gate = view.gates.gate_list.options[0][1]
    view.network.selected = gate
    view.refresh()
    assert "gated" in view.inspector.value and not view.prune_branch_button.disabled
    root = gated.nodes().node_id[0]
    view.network.selected = root
    view.refresh()
    assert "LLM calls (" in view.inspector.value and "<td>seed</td>" in view.inspector.value
    view.network.selected = gate
    view.prune_branch_button.click()
    settle(view)
    assert "pruned the branch" in view.message.value
    assert gate not in dict(view.gates.gate_list.options).values()
    assert gated.nodes().set_index("node_id").status[gate] == "saturated"
    # Pruned is shown as pruned, not as a settled (saturated) question (issue 38): the live fold and
    # the store's whole-graph fold agree, and the counts say it.
    live = {q["id"]: q["status"] for q in view.network.feed.snapshot()["questions"]}
    fresh = {q["id"]: q["status"] for q in gated.view().network.feed.snapshot()["questions"]}
    assert live[gate] == fresh[gate] == "pruned"
    counts = view.network.feed.counts()
    assert counts["pruned"] == 1 and counts["saturated"] == 0 and "1 pruned" in view.status_rows.counts.value


def test_inspector_escapes_model_text() -> None:
    hostile = "<script>window.__pwned = 1</script>"
    with Exploration.create(hostile, intensity="pulse", llm=SimulatedLLM(), clock=FAST) as ex:
        ex.step(1)
        view = ex.view()
        view.network.selected = ex.nodes().node_id[0]
        view.refresh()
        assert "<script>" not in view.inspector.value and "&lt;script&gt;" in view.inspector.value


def test_export_to_a_variable_and_files(gated: Exploration, tmp_path: Path) -> None:
    gated.step(1)
    gated.approve()
    gated.run(progress=False)
    view = gated.view()
    view.exports.export_name.value = "found"
    view.exports.export_path.value = str(tmp_path / "syntheses.parquet")
    view.exports.export_button.click()
    view.refresh()
    import __main__

    frame = __main__.__dict__.pop("found")
    assert isinstance(frame, pd.DataFrame) and frame is view.exports.exported is view.exported
    assert len(frame) == len(gated.syntheses()) >= 4  # the root and its 3 or 4 seed questions
    assert pd.read_parquet(tmp_path / "syntheses.parquet").equals(frame)
    view.exports.export_name.value = ""
    view.exports.export_path.value = str(tmp_path / "syntheses.csv")
    view.exports.export_button.click()
    assert len(pd.read_csv(tmp_path / "syntheses.csv")) == len(frame)


def test_a_published_view_exports_to_the_browser_only(
    gated: Exploration, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In Voila (found by VOILA_KERNEL_ID) the Export tab writes nothing on the server (issue 38)."""
    gated.step(1)
    monkeypatch.setenv("VOILA_KERNEL_ID", "k-1")
    view = gated.view()
    assert view.published and not gated.view(published=False).published
    export = view.tabs.children[view.tabs.titles.index("Export")]
    assert view.exports.downloads in export.children
    assert not {view.exports.export_name, view.exports.export_path, view.exports.export_button} & set(
        export.children
    )
    assert "nothing is written on the server" in export.children[-1].value
    view.exports.export_name.value, view.exports.export_path.value = "leaked", str(tmp_path / "leak.csv")
    view.exports.export_button.click()  # a click that got through all the same is refused
    settle(view)
    assert "this page is published" in view.message.value and list(tmp_path.iterdir()) == []
    import __main__

    assert "leaked" not in __main__.__dict__ and view.exports.exported is None
    monkeypatch.delenv("VOILA_KERNEL_ID")
    assert not gated.view().published and gated.view(published=True).published


@pytest.mark.parametrize(
    ("name", "path", "error"),
    [
        ("1abc", "", "not a Python variable name"),
        ("class", "", "not a Python variable name"),
        ("ok", "out.xlsx", "must end in .csv or .parquet"),
    ],
)
def test_bad_export_input_is_reported_and_writes_nothing(
    gated: Exploration, tmp_path: Path, name: str, path: str, error: str
) -> None:
    view = gated.view()
    view.exports.export_name.value = name
    view.exports.export_path.value = str(tmp_path / path) if path else ""
    view.exports.export_button.click()
    view.refresh()
    assert error in view.message.value and "--jp-error-color1" in view.message.value
    assert list(tmp_path.iterdir()) == [] and view.exports.exported is None


def test_buttons_with_nothing_selected_explain_themselves(gated: Exploration) -> None:
    gated.step(1)
    view = gated.view()
    before = gated.events()
    for button, text in (
        (view.gates.approve_button, "select gated questions to approve"),
        (view.gates.prune_gate_button, "select gated questions to prune"),
        (view.prune_branch_button, "click a node in the graph first"),
    ):
        button.click()
        view.refresh()
        assert text in view.message.value
    assert gated.events().equals(before)


def test_a_failing_model_shows_in_the_panel_and_leaves_the_node_recoverable() -> None:
    with Exploration.create("Why?", intensity="pulse", llm=SimulatedLLM(failure_rate=1.0), clock=FAST) as ex:
        view = ex.view()
        view.step_button.click()
        settle(view)
        assert "error" in view.message.value and "failed" in view.message.value
        assert set(ex.nodes().status) <= {"open", "error"}


def test_a_run_stopped_by_its_circuit_breaker_offers_a_new_budget_which_goes_on_as_a_turn() -> None:
    # One explore worker stops at max_depth x 3 = 12 nodes: the run ends budget_exhausted with work left.
    with Exploration.create("Why?", intensity="explore", llm=SimulatedLLM(seed=3), clock=FAST) as ex:
        view = ex.view()
        view.workers.value = 1
        view.run_button.click()
        settle(view)
        assert (
            ex.status == "budget_exhausted"
            and "run: budget_exhausted (circuit breaker)" in view.message.value
        )
        # budget_exhausted is terminal for resume (seed 001): Run offers the new budget, a turn of its own.
        assert view.run_button.description == "New budget" and not view.run_button.disabled
        assert view.step_button.disabled and view.step_n_button.disabled, "a step is no new budget"
        assert (
            "stopped at its budget (circuit breaker)" in view.status_rows.guide.value
            and "New budget opens a new turn under the same limits" in view.status_rows.guide.value
        )
        for _ in range(20):  # each click is a new turn and one more run of one worker, as a visitor clicks
            view.run_button.click()
            settle(view)
            assert "error" not in view.message.value
            if ex.status != "budget_exhausted":
                break
        assert "run: all_complete" in view.message.value and view.run_button.description == "Run"
        assert "Nothing is left to explore" in view.status_rows.guide.value
        turns = ex.turns()
        assert list(turns["kind"]) == ["seed"] + ["budget"] * (len(turns) - 1) and len(turns) > 1
        assert set(turns["status"].iloc[:-1]) == {"budget_exhausted"}, "each stopped turn ended in a head"


def test_an_engine_failure_offers_resume_which_runs_again_once_the_cause_is_gone() -> None:
    from tests.engine.test_runs import FixableBackend

    llm = FixableBackend(seed=3)
    with Exploration.create("Why?", intensity="pulse", llm=llm, clock=FAST) as ex:
        view = ex.view()
        view.run_button.click()
        settle(view)
        assert ex.status == "error" and "backend bug" in view.message.value
        assert view.run_button.description == "Resume" and not view.run_button.disabled
        assert "(every worker crashed: RuntimeError: backend bug)" in view.status_rows.guide.value
        llm.fixed = True  # the cause is gone: Resume is the explicit act
        view.run_button.click()
        settle(view)
        assert ex.status == "active" and "run: all_complete" in view.message.value
        assert view.run_button.description == "Run"


def test_a_graph_paused_by_its_model_says_why_when_reopened(tmp_path: Path) -> None:
    """The stored reason of a pause (a model outage) shows where the person looks (issue 38)."""
    from fractal_nb import OpenAILLM
    from tests.local_port import free_port

    path = tmp_path / "outage.duckdb"
    down = OpenAILLM("m", base_url=f"http://127.0.0.1:{free_port()}/v1", api_key="x", max_retries=0)
    with down, Exploration.create("Why?", intensity="pulse", llm=down, path=path, clock=FAST) as ex:
        assert ex.run(progress=False) == "model_unavailable"
        graph_id = ex.graph_id
    with Exploration.open(path, graph_id, llm=SimulatedLLM(seed=3)) as ex:
        view = ex.view()
        assert ex.status == "paused" and str(ex.status_reason).startswith("model unavailable: ")
        assert "Paused (model unavailable: cannot reach the model server at http://127.0.0.1:" in (
            view.status_rows.guide.value
        )
        view.close()


def test_a_click_on_a_node_brings_the_inspector_forward(gated: Exploration) -> None:
    """On a finished graph the Result tab is in front; a node the reader clicks shows (issue 38)."""
    gated.step(1)
    view = gated.view()
    seeds = gated.nodes().query("depth == 1 and node_type == 'question'")["node_id"].tolist()
    view.gates.gate_list.value = (seeds[0],)  # chosen in the Gates list: that tab stays in front
    view.tabs.selected_index = view.tabs.titles.index("Gates")
    view.refresh()
    assert view.tabs.selected_index == view.tabs.titles.index("Gates")
    view.gates.approve_all_button.click()
    settle(view)
    gated.run(progress=False)
    view.harvest_button.click()  # the panel's harvest shows its result in front
    settle(view)
    assert view.tabs.selected_index == view.tabs.titles.index("Result")
    view.network.selected = seeds[1]  # the page's click
    view.refresh()
    assert view.tabs.selected_index == view.tabs.titles.index("Inspector")
    assert "Question:" in view.inspector.value
    view.close()


def test_a_spent_token_budget_disables_run_and_says_how_to_go_on() -> None:
    with Exploration.create("Why?", intensity="pulse", llm=SimulatedLLM(seed=3), clock=FAST) as ex:
        ex.run(progress=False, max_tokens=1_000)
        view = ex.view()
        assert ex.budget_reached() is not None and ex.budget_reached() == ex.status_reason
        assert view.run_button.disabled and view.step_button.disabled and not view.harvest_button.disabled
        assert (
            "token budget of 1,000 reached" in view.status_rows.guide.value
            and "max_tokens" in view.status_rows.guide.value
        )
        ex.run(progress=False, max_tokens=10**9)  # raised in code, the panel follows
        view.refresh()
        assert ex.budget_reached() is None and "token budget" not in view.status_rows.guide.value
        assert "Nothing is left to explore" in view.status_rows.guide.value


def test_failures_show_in_the_counts_the_inspector_and_a_degraded_warning() -> None:
    from fractal_nb import GraphStore
    from tests.views.failing_graph import HOSTILE, failing_graph

    store = GraphStore()
    built = failing_graph(store)
    with Exploration(store, built["graph_id"], SimulatedLLM(), clock=FAST) as ex:
        view = ex.view()
        assert (
            ">2 failed</b>" in view.status_rows.counts.value
            and "1 weak synthesis(es)" in view.status_rows.counts.value
        )
        view.network.selected = built["failed"]
        view.refresh()
        assert "question · failed (RateLimitError" in view.inspector.value
        assert "<b>Failed:</b> RateLimitError: 429 Too Many Requests &lt;img" in view.inspector.value
        view.network.selected = built["weak"]
        view.refresh()
        assert "<b>Weak synthesis:</b>" in view.inspector.value
        assert view.warning.value == "", "an active graph's result is not in yet"
        ex.harvest(finish=True)  # from code: the Result tab and the warning follow the graph
        view.refresh()
        assert "Degraded result:" in view.warning.value and "2 question(s) failed" in view.result.value
        result = ex.preview()
        # One line above the tree: the first reason, and how many more the Result tab lists (issue 38).
        assert html.escape(result.degraded_reasons[0][:200]) in view.warning.value
        assert f"{len(result.degraded_reasons) - 1} more in the Result tab" in view.warning.value
        # The weak syntheses fold away, each a link that selects its node.
        assert "<details class='fractal-weak'>" in view.result.value
        assert f'data-fractal-node="{built["weak"]}"' in view.result.value
        assert view.result.value == result._repr_html_() and "failed: Which loads" in view.result.value
        assert HOSTILE not in view.result.value + view.inspector.value + view.warning.value
        view.close()


def test_the_degraded_warning_goes_when_the_graph_runs_again() -> None:
    from fractal_nb import GraphStore
    from tests.views.failing_graph import failing_graph

    store = GraphStore()
    built = failing_graph(store)
    with Exploration(store, built["graph_id"], SimulatedLLM(), clock=FAST) as ex:
        view = ex.view()
        store.update_graph_status(ex.graph_id, "paused", reason="paused")  # a run stopped
        view.refresh()
        assert "Degraded result:" in view.warning.value
        store.resume_graph(ex.graph_id)  # running again (here, or in another process)
        view.refresh()
        assert view.warning.value == "", "the last result's warning stays only while it is the result"
        view.close()
