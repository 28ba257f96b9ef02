"""Steering and history in Voila, in a real browser.

A harvested graph takes an Ask from the panel, runs and is harvested again: two heads;
the history slider goes back to head 1 and Live returns.

Screenshots go to ``$FRACTAL_NB_SCREENSHOTS`` (default ``screenshots/``) for a person to look at.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from fractal_nb import Exploration, SimulatedLLM
from tests.browser.conftest import guarded_page
from tests.browser.test_voila_app import attr, button, json_counts, voila, wait_for
from tests.browser.tree_checks import contrast, low_contrast, low_text_contrast, screenshot

pytestmark = pytest.mark.browser

# A harvested exploration (head 1), its node count shown beside the panel for the test to read.
HARVESTED_APP = """\
import ipywidgets as widgets
from fractal_nb import Exploration, SimulatedLLM

ex = Exploration.create("Why do some cities grow faster than others?", intensity="pulse",
                        llm=SimulatedLLM(seed=4))
ex.run(progress=False)
ex.harvest(finish=True)
widgets.VBox([widgets.Label(f"head 1 holds {len(ex.nodes())} nodes"), ex.view(height="380px")])
"""
# Each header cell of the Turns tab's tables: its text and its right edge on the page.
HEADERS = """() => [...document.querySelectorAll('table.fractal-turns th')]
    .map((th) => [th.innerText.trim(), th.getBoundingClientRect().right])"""
# The Inspector's text: whether its own box holds it, and, its scrolling box scrolled to the end, whether
# its foot is in view (issue 42: laid out as tall as the box, the rest of a long answer cut).
INSPECTOR_TEXT = """() => {
    const text = [...document.querySelectorAll('.widget-tab-contents .widget-html-content')]
        .find((e) => e.offsetParent && e.textContent.includes('Question:'));
    let box = text.parentElement;
    while (box && !['auto', 'scroll'].includes(getComputedStyle(box).overflowY)) box = box.parentElement;
    box.scrollTop = box.scrollHeight;
    const [t, b] = [text.getBoundingClientRect(), box.getBoundingClientRect()];
    return { scrollHeight: text.scrollHeight, clientHeight: text.clientHeight,
             foot: t.bottom, end: b.bottom };
}"""
# The panel's message once the click's job ended.
MESSAGE = """(prefix) => [...document.querySelectorAll('.widget-html-content')]
    .map((e) => e.textContent).find((t) => t.startsWith(prefix) && !t.includes('working')) || null"""


def outcome(tab: Any, prefix: str) -> str:
    """The panel's message starting with ``prefix`` (the job's outcome), once it shows."""
    return str(tab.wait_for_function(MESSAGE, arg=prefix, timeout=120_000).json_value())


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_ask_run_harvest_then_replay_to_head_one_and_back(browser: Any, tmp_path: Path, theme: str) -> None:
    # A tall page: the slider, the head buttons and the Turns tab show in one screenshot.
    with (
        guarded_page(browser, viewport={"width": 1280, "height": 1500}) as (tab, traffic),
        voila(tmp_path, HARVESTED_APP, theme=theme) as url,
    ):
        tab.goto(url, timeout=90_000)
        wait_for(tab, "el.dataset.drawn === '1'", timeout_s=90)
        head1 = int(re.search(r"head 1 holds (\d+) nodes", tab.content()).group(1))  # type: ignore[union-attr]
        assert attr(tab, "node-count") == str(head1) and attr(tab, "status") == "completed"
        assert button(tab, "Run").is_disabled()

        tab.get_by_placeholder("A follow-up question…").fill("What do <b>ports</b> add?")
        button(tab, "Ask").click()
        assert outcome(tab, "ask: ").startswith("ask: turn 2: asked under the root · 1 node(s) created")
        wait_for(tab, "el.dataset.status === 'active'")
        enabled_run = tab.locator("button.widget-button:not([disabled])", has_text=re.compile(r"^\s*Run\s*$"))
        enabled_run.wait_for(timeout=30_000)  # Run works again: the graph is active with a new turn
        button(tab, "Run").click()
        assert outcome(tab, "run: ").startswith("run: all_complete")
        button(tab, "Harvest").click()
        outcome(tab, "harvest: ")
        wait_for(tab, "el.dataset.status === 'completed'")
        total = int(attr(tab, "node-count"))
        assert total > head1

        tab.locator(".lm-TabBar-tabLabel", has_text="Turns").click()
        fork_buttons = tab.locator("button.widget-button", has_text="Fork here")
        fork_buttons.nth(1).wait_for(timeout=30_000)
        assert fork_buttons.count() == 2, "two heads"
        assert tab.locator("table.fractal-turns").nth(1).locator("tbody tr.fractal-record").count() == 2
        # Each table's header reads whole inside the tab (issue 42: clipped at the tab's right edge).
        page = tab.locator(".widget-tab-contents .widget-vbox:visible").first.bounding_box()
        headers = tab.evaluate(HEADERS)
        assert headers and all(text for text, _ in headers), f"a header cell is empty: {headers}"
        assert all(right <= page["x"] + page["width"] + 1 for _, right in headers), (headers, page)
        assert "<b>ports</b>" not in tab.locator("table.fractal-turns").nth(0).inner_html()
        assert (
            "ask(question='What do <b>ports</b> add?')"
            in tab.locator("table.fractal-turns").nth(0).inner_text()
        )
        screenshot(tab, f"steering-{theme}-turns")

        button(tab, "Head 1").click()
        wait_for(tab, f"el.dataset.past === '1' && el.dataset.nodeCount === '{head1}'")
        assert "Showing the past: event" in tab.locator(".fractal-past").inner_text()
        assert "head 1" in tab.locator(".fractal-past").inner_text()
        assert low_contrast(tab) == {}, f"{theme}: text under 4.5:1"
        screenshot(tab, f"steering-{theme}-head-1")

        # One click back from the note above the tree (the Voila app shows no slider to find Live on).
        tab.locator(".fractal-past-live").click()
        wait_for(tab, f"el.dataset.past === '0' && el.dataset.nodeCount === '{total}'")
        assert tab.locator(".fractal-past").is_hidden() and button(tab, "Live").is_disabled()
        button(tab, "Head 1").click()
        wait_for(tab, "el.dataset.past === '1'")
        button(tab, "Live").click()
        wait_for(tab, f"el.dataset.past === '0' && el.dataset.nodeCount === '{total}'")
        assert tab.locator(".fractal-past").is_hidden()

        # Replay: Play runs the slider from the first event; each frame is a past snapshot, the end is live.
        tab.locator(".widget-play button").first.click()
        wait_for(tab, "el.dataset.past === '1'")
        wait_for(tab, f"el.dataset.past === '0' && el.dataset.nodeCount === '{total}'", timeout_s=120)
        assert tab.evaluate("() => window.__pwned") is None
        assert traffic.aborted == [] and traffic.failed == [] and traffic.errors == []


# A harvested exploration with one answered seed question named for the test to select.
ANSWERED_APP = """\
import ipywidgets as widgets
from fractal_nb import Exploration, SimulatedLLM

ex = Exploration.create("Why do some cities grow faster than others?", intensity="pulse",
                        llm=SimulatedLLM(seed=4))
ex.run(progress=False)
ex.harvest(finish=True)
seeds = ex.nodes().query("node_type == 'question' and depth == 1 and status == 'synthesized'")
widgets.VBox([widgets.Label(f"answered {seeds['node_id'].iloc[0]}"), ex.view(height="380px")])
"""
ACTIONS = ("Approve", "Prune branch", "Deepen", "Redecompose", "Note")


def shown(tab: Any, label: str) -> Any:
    """The button labelled ``label`` in the tab on show (the Gates tab has an Approve of its own)."""
    return button(tab, label).locator("visible=true")


# Bring a node where a reader clicks it, as a reader does: when it is the selection, Zoom to selection
# (the view stops following the fit and keeps the selected question in place however the tree is laid
# out again); else the fitted view, which a harvested graph's tree keeps until it changes. Then listen
# for the canvas's own click, which the view selects from. Issue 42: the test moved the view behind its
# back (vis-network's focus), so a redraw after Redecompose put the fit back and the click landed
# beside the node; and it waited for a selection the node already had, true before the click was read.
CLICK_AT = """(id) => {
    const el = document.querySelector('.fractal-network'), net = el.visNetwork;
    window.__clicked = null;
    net.once('click', (params) => { window.__clicked = params.nodes.map(String); });
    const p = net.canvasToDOM(net.getPositions([id])[id]);
    const box = el.querySelector('canvas').getBoundingClientRect();
    return { x: box.left + p.x, y: box.top + p.y }; }"""


def click_node(tab: Any, node_id: str) -> None:
    """Click ``node_id`` on the canvas, as a reader does, and wait for the view to select it."""
    if attr(tab, "selected") == node_id:
        tab.locator(".fractal-toolbar button", has_text="Zoom to selection").click()
        wait_for(tab, "el.dataset.follow === '0'")
    at = tab.evaluate(CLICK_AT, node_id)
    tab.mouse.click(at["x"], at["y"])
    clicked = tab.wait_for_function("() => window.__clicked", timeout=30_000).json_value()
    assert clicked == [node_id], f"the click reached {clicked}, not {node_id}"
    wait_for(tab, f"el.dataset.selected === '{node_id}'")


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_an_answered_question_can_be_steered_from_the_inspector(
    browser: Any, tmp_path: Path, theme: str
) -> None:
    """Every Inspector action stays on screen and clickable under a long answered node (issue 38)."""
    with (
        guarded_page(browser, viewport={"width": 1400, "height": 900}) as (tab, traffic),
        voila(tmp_path, ANSWERED_APP, theme=theme) as url,
    ):
        tab.goto(url, timeout=90_000)
        wait_for(tab, "el.dataset.drawn === '1'", timeout_s=90)
        target = re.search(r"answered (n-[0-9a-f]+)", tab.content()).group(1)  # type: ignore[union-attr]
        click_node(tab, target)
        tab.get_by_text("Inspector", exact=True).click()
        tab.locator(".widget-html", has_text="Question:").filter(has_text="LLM calls").first.wait_for(
            timeout=30_000
        )
        page = tab.locator(".widget-tab-contents .widget-vbox:visible").first.bounding_box()
        for label in ACTIONS:  # each on screen, inside the tab, tall enough to click
            box = shown(tab, label).bounding_box()
            assert box is not None and box["height"] >= 20, f"{label} is squashed: {box}"
            assert page["y"] <= box["y"] and box["y"] + box["height"] <= page["y"] + page["height"] + 1
            assert box["x"] + box["width"] <= page["x"] + page["width"] + 1, f"{label} is cut off"
        # Text wraps to the column: nothing in the tab is wider than the tab.
        wide = tab.evaluate(
            """(right) => [...document.querySelectorAll('.widget-tab-contents .widget-html-content')]
            .filter((e) => e.offsetParent && e.getBoundingClientRect().right > right + 1).length""",
            page["x"] + page["width"],
        )
        assert wide == 0, f"{wide} text block(s) run past the tab's right edge"
        text = tab.evaluate(INSPECTOR_TEXT)
        assert text["scrollHeight"] <= text["clientHeight"] + 1, f"the text overflows its own box: {text}"
        assert text["foot"] <= text["end"] + 1, f"scrolled to its end, the text's foot is cut: {text}"
        # Run and Pause: their text at 4.5:1 or more on their colour (issue 42: 4.1:1 and 2.7:1).
        for label in ("Run", "Pause"):
            colours = button(tab, label).evaluate(
                "(b) => [getComputedStyle(b).color, getComputedStyle(b).backgroundColor]"
            )
            assert contrast(*colours) >= 4.5, f"{theme}: {label} {colours} at {contrast(*colours):.2f}:1"
        screenshot(tab, f"inspector-{theme}-answered")

        tab.get_by_placeholder("Your evidence or correction…").fill("Ports <b>matter</b> too.")
        shown(tab, "Note").click()
        assert outcome(tab, "note: ").startswith("note: turn ")
        click_node(tab, target)
        shown(tab, "Deepen").click()
        assert outcome(tab, "deepen: ").startswith("deepen: turn ")
        click_node(tab, target)
        shown(tab, "Redecompose").click()
        assert outcome(tab, "redecompose: ").startswith("redecompose: turn ")
        click_node(tab, target)
        shown(tab, "Prune branch").click()
        assert outcome(tab, "pruned the branch under ").startswith(f"pruned the branch under {target}")
        screenshot(tab, f"inspector-{theme}-after-steering")
        assert low_contrast(tab) == {}, f"{theme}: text under 4.5:1"
        assert tab.evaluate("() => window.__pwned") is None
        assert traffic.aborted == [] and traffic.failed == [] and traffic.errors == []


# A harvested exploration in a file, so the test reads the fork back from it once Voila is gone. The file
# is the kernel's own, named on the page: Voila starts a second kernel on the notebook, which must not find
# it locked.
FILED_APP = """\
import os
import ipywidgets as widgets
from fractal_nb import Exploration, SimulatedLLM

ex = Exploration.create("Why do some cities grow faster than others?", intensity="pulse",
                        llm=SimulatedLLM(seed=4), path=f"fork-{os.getpid()}.duckdb")
ex.run(progress=False)
ex.harvest(finish=True)
widgets.VBox([widgets.Label(f"head 1 holds {len(ex.nodes())} nodes in {os.path.basename(ex.store.path)}"),
              ex.view(height="380px")])
"""
IN_FILE = re.compile(r"head 1 holds (\d+) nodes in ([\w-]+\.duckdb)")


def test_fork_here_in_the_turns_tab_shows_the_fork(browser: Any, tmp_path: Path) -> None:
    """Fork here makes a new graph, and the Turns tab lists it where the person pressed (issue 38)."""
    with (
        guarded_page(browser, viewport={"width": 1400, "height": 900}) as (tab, traffic),
        voila(tmp_path, FILED_APP) as url,
    ):
        tab.goto(url, timeout=90_000)
        wait_for(tab, "el.dataset.drawn === '1'", timeout_s=90)
        shown_file = IN_FILE.search(tab.content())
        assert shown_file is not None
        head1, file = int(shown_file.group(1)), tmp_path / shown_file.group(2)
        tab.locator(".lm-TabBar-tabLabel", has_text="Turns").click()
        assert "No forks yet" in tab.locator(".widget-tab-contents").inner_text()
        shown(tab, "Fork here: head 1").click()
        said = outcome(tab, "fork: ")
        fork_id = re.search(r"into graph (g-[0-9a-f]+) in ", said).group(1)  # type: ignore[union-attr]
        assert said.startswith("fork: forked head 1 (event ") and "the Turns tab lists it under Forks" in said
        # The Forks list: the fork, forked from this graph at head 1's event, on screen in the tab.
        listed = tab.locator(".fractal-forks li", has_text=fork_id)
        listed.wait_for(timeout=30_000)
        listed.scroll_into_view_if_needed()
        page = tab.locator(".widget-tab-contents .widget-vbox:visible").first.bounding_box()
        box = listed.bounding_box()
        assert box is not None and page["y"] <= box["y"] <= page["y"] + page["height"] - box["height"]
        assert box["x"] + box["width"] <= page["x"] + page["width"] + 1, "the line is cut off"
        head_event = re.search(r"forked head 1 \(event (\d+)\)", said).group(1)  # type: ignore[union-attr]
        assert (
            listed.inner_text()
            == f"{fork_id}: forked from this graph at event {head_event} (head 1) · completed"
        )
        this = tab.locator(".fractal-forks li", has_text="(this graph)").inner_text()
        graph_id = this.split(" ")[0]
        assert this == f"{graph_id} (this graph): the original · completed"
        screenshot(tab, "turns-fork-light")
        assert tab.evaluate("() => window.__pwned") is None
        assert traffic.aborted == [] and traffic.failed == [] and traffic.errors == []
    # The store holds the fork: forked from the graph at the head's event, with head 1's nodes.
    family = Exploration.family(file, read_only=True).set_index("graph_id")
    assert family.loc[fork_id, "forked_from"] == graph_id
    assert str(family.loc[fork_id, "forked_at"]) == head_event
    with Exploration.open(file, fork_id, read_only=True) as fork:
        assert len(fork.nodes()) == head1 and fork.status == "completed"


# Seed questions behind a depth:1 gate, longer than the 90 characters the old list cut them to.
GATES_SEED = (  # the simulator's questions on it are long: they wrap in the Gates list
    "Should a city build a light rail line from the station to the university campus and the new harbour "
    "district?"
)
GATED_APP = f"""\
import os
import ipywidgets as widgets
from fractal_nb import Exploration, SimulatedLLM

ex = Exploration.create({GATES_SEED!r}, intensity="pulse", checkpoint="depth:1",
                        llm=SimulatedLLM(seed=2), path=f"gates-{{os.getpid()}}.duckdb")
ex.step(1)
widgets.VBox([widgets.Label(f"kept in {{os.path.basename(ex.store.path)}}"), ex.view(height="420px")])
"""
# Each gated question's text block in the Gates list: its text, and whether it runs past the tab or is cut.
GATE_ROWS = """(right) => [...document.querySelectorAll('.fractal-gate-list .widget-html-content')]
    .map((e) => ({ text: e.textContent, past: e.getBoundingClientRect().right > right + 1,
                   cut: e.scrollWidth > e.clientWidth, height: e.getBoundingClientRect().height }))"""


def gate_rows(tab: Any, texts: list[str]) -> list[dict[str, Any]]:
    """The Gates list as the page shows it, a row per gated question, once it lists ``texts``."""
    tab.wait_for_function(
        """(texts) => JSON.stringify([...document.querySelectorAll('.fractal-gate-list .widget-html-content')]
            .map((e) => e.textContent)) === JSON.stringify(texts)""",
        arg=texts,
        timeout=30_000,
    )
    page = tab.locator(".widget-tab-contents .widget-vbox:visible").first.bounding_box()
    return list(tab.evaluate(GATE_ROWS, page["x"] + page["width"]))


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_a_gate_is_read_whole_then_approved_and_another_pruned_from_the_list(
    browser: Any, tmp_path: Path, theme: str
) -> None:
    """The Gates list shows each question whole (issue 38: cut at ~45 characters); Approve runs one."""
    with Exploration.create(
        GATES_SEED, intensity="pulse", checkpoint="depth:1", llm=SimulatedLLM(seed=2)
    ) as ex:
        ex.step(1)
        questions = ex.gates["text"].tolist()  # the simulator asks the app's questions, in its order
    assert max(map(len, questions)) > 90
    with (
        guarded_page(browser, viewport={"width": 1400, "height": 900}) as (tab, traffic),
        voila(tmp_path, GATED_APP, theme=theme) as url,
    ):
        tab.goto(url, timeout=90_000)
        wait_for(
            tab, f"el.dataset.drawn === '1' && el.dataset.gatedCount === '{len(questions)}'", timeout_s=90
        )
        file = tmp_path / re.search(r"kept in ([\w-]+\.duckdb)", tab.content()).group(1)  # type: ignore[union-attr]
        tab.locator(".lm-TabBar-tabLabel", has_text="Gates").click()
        rows = gate_rows(tab, questions)  # every gated question, whole, in order
        assert not any(r["past"] or r["cut"] for r in rows), f"a question runs past the tab: {rows}"
        assert any(r["height"] > 30 for r in rows), "a long question wraps onto more lines"
        assert low_text_contrast(tab, ".fractal-gate-list .widget-html-content") == []
        screenshot(tab, f"gates-{theme}-list")

        # Tick the first and Approve it: it opens, leaves the list, and Step answers it.
        approved, pruned = questions[0], questions[1]
        tab.locator(".fractal-gate-list input[type=checkbox]").first.check()
        wait_for(tab, "el.dataset.selected.startsWith('n-')")  # the tree selects the ticked question
        screenshot(tab, f"gates-{theme}-ticked")
        shown(tab, "Approve").click()
        assert outcome(tab, "approved ").startswith("approved 1 gated question(s)")
        wait_for(tab, f"el.dataset.gatedCount === '{len(questions) - 1}'")
        gate_rows(tab, questions[1:])
        assert json_counts(tab)["open"] == 1

        # Tick the next and Prune it: the counts say it is pruned, and the list holds the rest.
        tab.locator(".fractal-gate-list input[type=checkbox]").first.check()
        shown(tab, "Prune").click()
        assert outcome(tab, "pruned ").startswith("pruned 1 gated question(s)")
        wait_for(tab, f"el.dataset.gatedCount === '{len(questions) - 2}'")
        gate_rows(tab, questions[2:])
        tab.get_by_text(re.compile(r"\b1 pruned\b")).first.wait_for(timeout=30_000)
        button(tab, "Step").click()
        assert outcome(tab, "step: ").startswith("step: 1 node(s) processed")
        screenshot(tab, f"gates-{theme}-after")
        assert low_contrast(tab) == {}, f"{theme}: text under 4.5:1"
        assert tab.evaluate("() => window.__pwned") is None
        assert traffic.aborted == [] and traffic.failed == [] and traffic.errors == []
    # The store agrees: the approved question was answered, the pruned one is pruned, the rest wait.
    with Exploration.open(file, read_only=True) as ex:
        nodes = ex.nodes().set_index("text")
        assert nodes.loc[approved, "status"] in ("answered", "synthesized")
        assert (nodes.loc[pruned, "status"], nodes.loc[pruned, "status_reason"]) == ("saturated", "pruned")
        assert nodes.loc[questions[2:], "status"].eq("gated").all()
