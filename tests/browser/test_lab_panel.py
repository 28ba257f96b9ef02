"""The exploration panel in a real JupyterLab at 1400 x 900, light and dark (issue 27, "A panel that fits").

A notebook's one cell builds a run-shaped graph of 150 questions and shows ``ex.view()``; the test runs
it in Lab and measures what a person sees: the controls, the tree and the tab in use on one screen, the
tab with content chosen, the Result tab in view when Report fills it, the tree fitted again when the
outline is hidden, disabled buttons that look disabled, and one status line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from tests.browser.conftest import guarded_page
from tests.browser.test_lab_links import jupyter_lab
from tests.browser.tree_checks import NETWORK, boxes, frame, outside, readable, screenshot, seeds_unlabelled

pytestmark = pytest.mark.browser

REPO = Path(__file__).parents[2]
CELL = f"""\
import sys
sys.path.insert(0, {str(REPO)!r})
from fractal_nb import Exploration, GraphStore, SimulatedLLM
from tests.graph_builder import run_shaped_graph

store = GraphStore()
ex = Exploration(store, run_shaped_graph(store, 150, seed=150), SimulatedLLM())
ex.view()
"""
THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}


def rect(tab: Any, selector: str) -> dict[str, float]:
    return dict(tab.locator(selector).first.evaluate("(e) => e.getBoundingClientRect().toJSON()"))


def on_screen(box: dict[str, float], view: dict[str, float]) -> bool:
    """Whether ``box`` is wholly inside ``view`` (the notebook's visible area, below Lab's toolbars)."""
    inside = all(box[side] >= view[side] for side in ("top", "left"))
    return inside and all(box[side] <= view[side] for side in ("bottom", "right")) and box["height"] > 0


# The tab pages shown whose content is wider than the page (cut off, or a sideways scroll).
CLIPPED = """() => [...document.querySelectorAll('.fractal-panel .jupyter-widget-TabPanel-tabContents > *')]
    .filter((page) => page.offsetParent && page.scrollWidth > page.clientWidth + 1)
    .map((page) => [page.scrollWidth, page.clientWidth])"""
KERNEL_IDLE = "Python 3 (ipykernel) | Idle"  # Lab's status bar, once the notebook's own kernel is connected


def run_the_cell(tab: Any, console: list[str]) -> None:
    """Run the notebook's one cell in its kernel and wait for the tree to be drawn, or fail saying why.

    Shift+Enter before the notebook's kernel is connected is Lab's race, not the panel's: the run is
    dropped (the cell stays ``[ ]``) or Lab starts a second kernel and kills the first while widgets
    are on their way. So the cell runs once the status bar shows the kernel idle; a failure then says
    which it is: a cell that never ran, or a panel never drawn, with what the cell shows (a traceback,
    "Loading widget...") and what the console said.
    """
    tab.wait_for_function(
        "(idle) => document.querySelector('#jp-main-statusbar')"
        "?.innerText.replace(/\\s+/g, ' ').includes(idle)",
        arg=KERNEL_IDLE,
        timeout=120_000,
    )
    cell = tab.locator(".jp-Notebook .jp-Cell").first
    cell.locator(".cm-content").click()
    tab.keyboard.press("Shift+Enter")
    prompt = cell.locator(".jp-InputPrompt")
    try:  # [1] once it ran ([*] while it runs; [ ] still: the run was dropped)
        tab.wait_for_function(
            "(e) => /\\[[0-9]+\\]/.test(e.innerText)", arg=prompt.element_handle(), timeout=120_000
        )
    except Exception as exc:
        raise AssertionError(f"the cell never ran (its prompt: {prompt.inner_text()!r}): {console}") from exc
    output = cell.locator(".jp-OutputArea-output")
    for _ in range(120):  # the widgets' models, their scripts, vis-network, the first frame
        if tab.locator(".jp-Dialog").count():
            raise AssertionError(f"Lab asks: {tab.locator('.jp-Dialog').inner_text()}")
        if tab.evaluate(f"() => document.querySelector('{NETWORK}')?.dataset.drawn === '1'"):
            return
        tab.wait_for_timeout(500)
    shown = [text[:2000] for text in output.all_inner_texts()]
    said = [line for line in console if not line.startswith(("debug", "info"))]
    raise AssertionError(f"the panel never drew its tree; the cell shows {shown}; the console: {said}")


@pytest.mark.slow
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_panel_fits_a_screen_in_jupyterlab(browser: Any, tmp_path: Path, theme: str) -> None:
    root, runtime, settings = tmp_path / "work", tmp_path / "runtime", tmp_path / "settings"
    for folder in (root, runtime, settings / "@jupyterlab" / "apputils-extension"):
        folder.mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "themes.jupyterlab-settings").write_text(
        json.dumps({"theme": THEMES[theme]})
    )

    # No news toast over the panel's corner: it asks the first time Lab opens, and a person answers once.
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false"})
    )
    notebook = new_notebook(cells=[new_code_cell(CELL)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, root / "panel.ipynb")
    with (
        jupyter_lab(root, runtime, settings) as (url, _pid),
        guarded_page(browser, viewport={"width": 1400, "height": 900}) as (tab, traffic),
    ):
        console: list[str] = []
        tab.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
        tab.goto(f"{url}lab/tree/panel.ipynb", timeout=120_000)
        try:
            run_the_cell(tab, console)
        finally:
            screenshot(tab, f"lab-panel-{theme}-opened")
        tab.locator(".fractal-panel").first.evaluate("(e) => e.scrollIntoView({block: 'start'})")
        tab.wait_for_timeout(300)
        view = rect(
            tab, ".jp-NotebookPanel-notebook"
        )  # what the notebook shows between its toolbar and the status bar
        step, canvas = rect(tab, ".fractal-panel .widget-button"), rect(tab, f"{NETWORK} .fractal-canvas")
        tabs = rect(tab, ".fractal-panel .widget-tab")  # the tab bar and the tab in use
        fits = {
            name: on_screen(box, view) for name, box in (("step", step), ("canvas", canvas), ("tabs", tabs))
        }
        assert all(fits.values()), (fits, view, step, canvas, tabs)
        current = tab.locator(".fractal-panel .widget-tab .lm-TabBar-tab.lm-mod-current")
        assert current.inner_text().strip() == "Inspector", "no gates: the tab with content, not Gates"
        assert tab.evaluate(CLIPPED) == [], "the tab in use is as wide as its column: nothing cut off"
        screenshot(tab, f"lab-panel-{theme}")
        fitted = frame(tab)
        assert readable(fitted) == [] and seeds_unlabelled(fitted) == 0 and outside(boxes(tab)) == [], fitted
        # One status line, never two that disagree.
        assert tab.locator(".fractal-panel .fractal-graph-status").count() == 0
        assert tab.locator(".fractal-panel .fractal-status").count() == 1
        pause = tab.locator(".fractal-panel button", has_text="Pause").first
        assert pause.is_disabled()
        assert float(pause.evaluate("(e) => getComputedStyle(e).opacity")) <= 0.5, "disabled looks disabled"
        screenshot(tab, f"lab-panel-{theme}")

        # The Outline beside the tree or not (a view under 900 px opens without it): each time the canvas
        # changes width, the tree is laid out and fitted again; with the outline hidden, the seeds read.
        outline = tab.locator(f"{NETWORK} .fractal-toolbar button", has_text="Outline")
        for _ in range(2):  # shown and hidden again, or hidden and shown again
            before = rect(tab, f"{NETWORK} .fractal-canvas")["width"]
            hiding = outline.get_attribute("aria-pressed") == "true"
            outline.click()
            tab.wait_for_function(
                f"([w, wider]) => {{ const now = document.querySelector('{NETWORK} .fractal-canvas')"
                ".getBoundingClientRect().width; return wider ? now > w + 50 : now < w - 50; }",
                arg=[before, hiding],
            )
            tab.wait_for_timeout(300)
            refitted = frame(tab)
            assert outside(boxes(tab)) == [] and readable(refitted) == [], refitted
            assert max(refitted["use"]["x"], refitted["use"]["y"]) >= 0.9, "fitted to the new canvas"
            if hiding:
                assert seeds_unlabelled(refitted) == 0, refitted

        # Report fills the Result tab, which comes forward, in view beside the tree.
        tab.locator(".fractal-panel button", has_text="Report").first.click()
        result = tab.locator(".fractal-panel .fractal-result").first
        result.wait_for(timeout=60_000)
        tab.wait_for_function(
            "() => document.querySelector('.fractal-panel .widget-tab .lm-TabBar-tab.lm-mod-current')"
            "?.innerText.trim() === 'Result'",
            timeout=10_000,
        )
        heading = rect(tab, ".fractal-panel .fractal-result h3")
        assert on_screen(heading, view), (heading, view)
        screenshot(tab, f"lab-panel-{theme}-result")
        assert traffic.aborted == [] and traffic.errors == []
        assert [line for line in console if line.startswith("error")] == []
