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

from tests.browser.conftest import guarded_page
from tests.browser.test_voila_app import attr, button, voila, wait_for
from tests.browser.tree_checks import low_contrast, screenshot

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
        assert tab.locator("table.fractal-turns").nth(1).locator("tbody tr").count() == 2
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


def click_node(tab: Any, node_id: str) -> None:
    """Click ``node_id`` on the canvas, as a reader does, and wait for the view to select it."""
    at = tab.evaluate(
        """(id) => {
        const el = document.querySelector('.fractal-network'), net = el.visNetwork;
        net.focus(id, { scale: net.getScale(), animation: false });
        const p = net.canvasToDOM(net.getPositions([id])[id]);
        const box = el.querySelector('canvas').getBoundingClientRect();
        return { x: box.left + p.x, y: box.top + p.y }; }""",
        node_id,
    )
    tab.mouse.click(at["x"], at["y"])
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
