"""The live view in Voila, in a real browser: the app steps and runs, gates get approved, the tree reads.

Screenshots go to ``$FRACTAL_NB_SCREENSHOTS`` (default ``screenshots/``) for a person to look at.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from tests.browser.tree_checks import (
    NETWORK,
    boxes,
    contrast,
    frame,
    low_contrast,
    low_text_contrast,
    outside,
    overlapping,
    readable,
    screenshot,
    seeds_unlabelled,
)
from tests.local_port import free_port

pytestmark = pytest.mark.browser

APP = """\
from fractal_nb import Exploration, SimulatedLLM

ex = Exploration.create("Why do some cities grow faster than others?", intensity="pulse",
                        checkpoint="depth:1", llm=SimulatedLLM(seed=4, latency_s=0.05))
ex.view(height="420px")
"""
# The panel's message once a run ended ("run: all_complete: ...", "run: budget_exhausted ...",
# "error: run failed: ..."), or null.
RUN_MESSAGE = """() => [...document.querySelectorAll('.widget-html-content')]
    .map((e) => e.textContent).find((t) => /^(error: )?run( failed)?: (?!working)/.test(t)) || null"""
# Records every past the view shows (data-past turning "1", with what the note says) from now on.
WATCH_PAST = f"""() => {{
    const el = document.querySelector('{NETWORK}');
    window.fractalPastSeen = [];
    new MutationObserver(() => {{
        const note = el.querySelector('.fractal-past');
        if (el.dataset.past === '1') window.fractalPastSeen.push(note.textContent);
    }}).observe(el, {{ attributes: true, attributeFilter: ['data-past'] }});
}}"""
REPO = Path(__file__).parents[2]
# The app's template and config, as binder/start puts them first: Voila's lab template without its CDN links.
APP_JUPYTER = REPO / "binder" / "jupyter"

# A finished explore run of about 200 nodes, as a notebook that demonstrates one shows it.
GROWN_APP = """\
from fractal_nb import Exploration, SimulatedLLM

ex = Exploration.create("Why do some cities grow faster than others?", intensity="explore",
                        llm=SimulatedLLM(seed=4, branching=2.3, link_rate=0.3))
ex.run(progress=False)
ex.view(height="560px")
"""


BIG_APP = """\
from collections import deque
from fractal_nb import GraphStore
from fractal_nb.views import NetworkWidget

store = GraphStore()
g = store.create_graph("How far does it scale?", "deep", "autonomous")
questions, count = deque([g["root_node_id"]]), 1
with store.batch():
    while count < 5000:
        result = store.add_answer(g["graph_id"], questions.popleft(), f"answer {count}",
                                  sub_questions=[f"question {count}.{i}" for i in range(8)])
        questions.extend(q["node_id"] for q in result["sub_questions"])
        count += 9
NetworkWidget(store, g["graph_id"], height="500px")
"""


@contextmanager
def voila(folder: Path, code: str | Path, theme: str = "light") -> Iterator[str]:
    """Voila serving a notebook (a path, or one cell of ``code``) on 127.0.0.1; yields its URL."""
    if isinstance(code, Path):
        notebook = nbformat.read(code, as_version=4)
    else:
        notebook = new_notebook(cells=[new_code_cell(code)])
        notebook.metadata["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3",
            "language": "python",
        }
    nbformat.write(notebook, folder / "app.ipynb")
    command = [sys.executable, "-m", "voila", "app.ipynb", "--show_tracebacks=True", f"--theme={theme}"]
    env = {
        **os.environ,
        "JUPYTER_PATH": os.pathsep.join([str(APP_JUPYTER), os.environ.get("JUPYTER_PATH", "")]),
        "JUPYTER_CONFIG_PATH": os.pathsep.join([str(APP_JUPYTER), os.environ.get("JUPYTER_CONFIG_PATH", "")]),
    }
    with served(lambda port: [*command, *voila_on(port)], folder, env, folder / "voila.log") as url:
        yield url


def voila_on(port: int) -> list[str]:
    return ["--no-browser", f"--port={port}", "--Voila.ip=127.0.0.1"]


# Started as a person would, with no Jupyter paths set: `voila <notebook>` (the command, in a folder),
# or Binder's way, binder/start before a Jupyter server whose Voila renders the notebook.
PLAIN_ENV = {k: v for k, v in os.environ.items() if k not in ("JUPYTER_PATH", "JUPYTER_CONFIG_PATH")}
BIN = Path(sys.executable).parent


@contextmanager
def plain_voila(folder: Path, notebook: str, log: Path) -> Iterator[str]:
    """``voila <notebook>`` run in ``folder``; yields the app's URL."""
    with served(lambda port: [str(BIN / "voila"), notebook, *voila_on(port)], folder, PLAIN_ENV, log) as url:
        yield url


@contextmanager
def binder_server(log: Path) -> Iterator[str]:
    """``binder/start jupyter server`` in the repository; yields the URL of the app as Binder links it."""

    def command(port: int) -> list[str]:
        return [
            *(str(REPO / "binder" / "start"), str(BIN / "jupyter"), "server", "--no-browser"),
            *(f"--port={port}", "--ServerApp.ip=127.0.0.1", "--ServerApp.port_retries=0"),
            *("--IdentityProvider.token=", "--ServerApp.password=", "--ServerApp.allow_root=True"),
        ]

    with served(command, REPO, PLAIN_ENV, log, ready="api") as url:
        yield f"{url}voila/render/notebooks/app.ipynb"


@contextmanager
def served(
    command: Callable[[int], list[str]], folder: Path, env: dict[str, str], log_path: Path, ready: str = ""
) -> Iterator[str]:
    """``command(port)`` run in ``folder`` on a free port of 127.0.0.1 until ``ready`` answers; its URL."""
    port = free_port()
    log = log_path.open("w")
    server = subprocess.Popen(
        command(port),
        cwd=folder,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**env, "PYTHONUNBUFFERED": "1"},
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}{ready}", timeout=2).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the server did not start:\n" + log_path.read_text()) from None
                time.sleep(0.3)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=20)
        log.close()


def button(tab: Any, label: str) -> Any:
    """An ipywidgets button by its exact label (its icon is an empty <i>)."""
    return tab.locator("button.widget-button", has_text=re.compile(rf"^\s*{re.escape(label)}\s*$"))


def run_to_the_end(tab: Any, label: str, runs: int = 10) -> None:
    """Click ``label`` (Run or New budget), then New budget after each run the circuit breaker stopped.

    Each step waits for the run's own outcome message; the buttons' state arrives
    after it, so the next click waits for New budget to be there and enabled.
    """
    for _ in range(runs):
        before = tab.evaluate(RUN_MESSAGE)
        button(tab, label).click()
        outcome = tab.wait_for_function(  # this run's own outcome, not the last one's
            f"(before) => {{ const now = ({RUN_MESSAGE})(); return now && now !== before && now; }}",
            arg=before,
            timeout=120_000,
        ).json_value()
        if outcome.startswith("run: all_complete"):
            return
        assert outcome.startswith("run: budget_exhausted (circuit breaker)"), f"{label}: {outcome}"
        label = "New budget"  # budget_exhausted is terminal for resume: a new turn goes on
    raise AssertionError(f"not complete after {runs} runs")


def attr(tab: Any, name: str) -> str:
    return str(tab.get_attribute(NETWORK, f"data-{name}"))


def wait_for(tab: Any, condition: str, timeout_s: float = 60) -> None:
    tab.wait_for_function(
        f"() => {{ const el = document.querySelector('{NETWORK}'); return el && ({condition}); }}",
        timeout=timeout_s * 1000,
    )


def test_step_run_and_approve_in_voila(page: tuple[Any, Any], tmp_path: Path) -> None:
    tab, traffic = page
    with voila(tmp_path, APP) as url:
        drive_the_app(tab, url)
    assert traffic.aborted == [], "nothing is asked of a CDN"
    assert traffic.failed == [] and traffic.errors == []


def drive_the_app(tab: Any, url: str) -> None:
    tab.goto(url, timeout=90_000)
    wait_for(tab, "el.dataset.drawn === '1'", timeout_s=90)
    assert attr(tab, "node-count") == "1" and attr(tab, "status") == "active"

    # A click selects, and Python's inspector then shows the node.
    at = tab.evaluate(f"""() => {{
        const el = document.querySelector('{NETWORK}'), net = el.visNetwork;
        const id = Object.keys(net.getPositions())[0];
        const p = net.canvasToDOM(net.getPositions([id])[id]);
        const box = el.querySelector('canvas').getBoundingClientRect();
        return {{x: box.left + p.x, y: box.top + p.y}}; }}""")
    tab.mouse.click(at["x"], at["y"])
    wait_for(tab, "el.dataset.selected.startsWith('n-')")
    tab.get_by_text("Inspector", exact=True).click()
    # Wait on the Inspector itself (the outline beside the graph shows the same question first).
    inspector = tab.locator(".widget-html", has_text="Question:")
    inspector.filter(has_text="Why do some cities grow faster than others?").wait_for(timeout=30_000)
    assert inspector.count() == 1

    button(tab, "Step").click()
    wait_for(tab, "Number(el.dataset.nodeCount) > 1 && Number(el.dataset.gatedCount) > 0")
    after_step = int(attr(tab, "node-count"))
    assert int(attr(tab, "gated-count")) >= 3, "the seed questions wait behind the depth:1 gate"
    # Only gated work is left: the panel says where to go, beside the buttons, and Step waits.
    tab.wait_for_selector("text=Waiting at", timeout=30_000)
    assert button(tab, "Step").is_disabled()

    tab.get_by_text("Gates", exact=True).click()
    button(tab, "Approve all").click()
    wait_for(tab, "el.dataset.gatedCount === '0'")
    tab.locator(".fractal-toolbar button", has_text="+").click()  # the reader zooms: the view stops following
    scale = tab.evaluate(f"() => document.querySelector('{NETWORK}').visNetwork.getScale()")

    button(tab, "Run").click()
    wait_for(tab, f"Number(el.dataset.nodeCount) > {after_step + 2}")
    wait_for(
        tab,
        "JSON.parse(el.dataset.counts).open === 0 && JSON.parse(el.dataset.counts).claimed === 0",
        timeout_s=120,
    )
    counts = json_counts(tab)
    assert counts["synthesized"] > 0 and counts["total"] > after_step

    drawn = tab.evaluate(f"() => document.querySelector('{NETWORK} canvas').width")
    assert drawn > 0
    assert tab.evaluate(f"() => document.querySelector('{NETWORK}').visNetwork.getScale()") == scale, (
        "updates keep the reader's zoom"
    )
    tab.locator(".fractal-toolbar button", has_text="Fit").click()
    assert outside(boxes(tab)) == [], "after Fit every node is in view"


def test_five_thousand_nodes_draw_with_physics_off(page: tuple[Any, Any], tmp_path: Path) -> None:
    tab, traffic = page
    with voila(tmp_path, BIG_APP) as url:
        tab.goto(url, timeout=120_000)
        wait_for(tab, "el.dataset.drawn === '1'", timeout_s=120)
        assert int(attr(tab, "node-count")) >= 5000
        simulated = tab.evaluate(
            f"() => document.querySelector('{NETWORK}').visNetwork.physics.options.enabled"
        )
        assert simulated is False, "laid out once, not simulated: the page stays responsive"
        assert int(attr(tab, "visible-count")) <= 601, "it opens closed below what keeps it readable"
        opening = frame(tab)
        assert opening["labels"] and readable(opening) == [] and opening["bare"] == 0
        tab.locator(".fractal-toolbar button", has_text="Expand all").click()
        wait_for(tab, "Number(el.dataset.visibleCount) > 4000")
        positions = tab.evaluate(f"""() => {{
            const net = document.querySelector('{NETWORK}').visNetwork;
            const all = Object.values(net.getPositions());
            return {{count: all.length, distinct: new Set(all.map((p) => p.x + ',' + p.y)).size}}; }}""")
        assert positions["count"] == positions["distinct"], "every question has a place of its own"
        everything = frame(tab)
        assert readable(everything) == [] and everything["bare"] == 0, "labels or dots, never empty boxes"
    assert traffic.aborted == [] and traffic.errors == []


# A tree that grows under the view after it was laid out: four
# seed questions, a few levels below two of them; Grow gives the other two six questions each.
GROWING_APP = """\
import ipywidgets as widgets
from fractal_nb import GraphStore
from fractal_nb.views import NetworkWidget

store = GraphStore()
g = store.create_graph("How does it grow?", "deep", "autonomous")
gid = g["graph_id"]
seeds = store.add_answer(gid, g["root_node_id"], "a", sub_questions=[f"seed {i}" for i in range(4)])
seed_ids = [q["node_id"] for q in seeds["sub_questions"]]
below = store.add_answer(gid, seed_ids[0], "b", sub_questions=["first 0", "first 1"])
store.add_answer(gid, seed_ids[1], "c", sub_questions=["second 0", "second 1"])
first = below["sub_questions"][0]["node_id"]
store.add_answer(gid, first, "d", sub_questions=[f"third {i}" for i in range(4)])
view = NetworkWidget(store, gid, height="480px")
grow = widgets.Button(description="Grow")
@grow.on_click
def _(_):
    for seed in seed_ids[2:]:
        store.add_answer(gid, seed, "e", sub_questions=[f"{seed} {i}" for i in range(6)])
    view.refresh()
widgets.VBox([grow, view])
"""


def test_a_growing_tree_stays_readable(page: tuple[Any, Any], tmp_path: Path) -> None:
    """Questions added under the view: it lays the tree out again, every label drawn still reads."""
    tab, traffic = page
    with voila(tmp_path, GROWING_APP) as url:
        tab.goto(url, timeout=90_000)
        wait_for(tab, "el.dataset.drawn === '1'", timeout_s=90)
        opening = frame(tab)
        assert readable(opening) == [] and attr(tab, "visible-count") == "13", "every question drawn"
        button(tab, "Grow").click()
        wait_for(tab, "el.dataset.nodeCount === '31'")
        grown = boxes(tab)
        assert outside(grown) == [] and overlapping(grown) == []
        drawn = frame(tab)
        assert readable(drawn) == [] and attr(tab, "visible-count") == "25", "grown, still every question"
        seeds = {label["id"] for label in drawn["labels"] if label["depth"] == 1}
        assert len(seeds) == 4, "the seed questions read"
    assert traffic.aborted == [] and traffic.errors == []


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_app_notebook_steps_and_runs_and_follows_the_tree(
    page: tuple[Any, Any], tmp_path: Path, theme: str
) -> None:
    """notebooks/app.ipynb, the Voila entry: a fresh exploration the visitor steps and runs."""
    tab, traffic = page
    with voila(tmp_path, REPO / "notebooks" / "app.ipynb", theme=theme) as url:
        tab.goto(url, timeout=90_000)
        wait_for(tab, "el.dataset.drawn === '1'", timeout_s=90)
        button(tab, "Step").click()
        wait_for(tab, "Number(el.dataset.nodeCount) > 2")
        screenshot(tab, f"voila-app-{theme}-after-step")
        # The view stays live through the run: it never shows the past unless the reader asks
        # (a page link between Play and the slider echoed the kernel's placements as the
        # reader's moves, and the view froze in "Showing the past" mid-run: issue 38).
        tab.evaluate(WATCH_PAST)
        # Each worker stops after max_depth x 3 nodes (the circuit breaker): a run may end
        # budget_exhausted with questions left; Run then reads New budget, and the visitor goes on.
        run_to_the_end(tab, "Run")
        tab.wait_for_selector("text=Nothing is left to explore", timeout=30_000)
        assert tab.evaluate("() => window.fractalPastSeen") == [], "the view went into the past mid-run"
        assert attr(tab, "past") == "0" and tab.locator(".fractal-past").is_hidden()
        assert attr(tab, "follow") == "1"
        after_run = boxes(tab)
        assert outside(after_run) == [], "the view followed the run: every node is in view"
        drawn = frame(tab)
        assert overlapping(after_run) == [] and readable(drawn) == [], "labels read at the fitted zoom"
        assert seeds_unlabelled(drawn) == 0, "the seed questions are labelled"
        assert low_contrast(tab) == {}
        screenshot(tab, f"voila-app-{theme}-after-run")
        button(tab, "Harvest").click()
        tab.wait_for_selector("text=This exploration is completed", timeout=60_000)
        assert button(tab, "Run").is_disabled()
        # A published page saves to the reader's browser only: no file box for the server's disk,
        # no variable in its kernel (issue 38).
        tab.locator(".lm-TabBar-tabLabel", has_text="Export").click()
        tab.wait_for_selector("text=This page is published", timeout=30_000)
        assert tab.get_by_placeholder("syntheses.csv or .parquet").count() == 0
        assert button(tab, "Export syntheses").count() == 0
    assert traffic.aborted == [] and traffic.errors == []


# One worker stops at max_depth x 3 = 12 nodes (the circuit breaker): each run ends budget_exhausted.
ONE_WORKER_APP = """\
from fractal_nb import Exploration, SimulatedLLM

ex = Exploration.create("Why do some cities grow faster than others?", intensity="explore",
                        llm=SimulatedLLM(seed=7, latency_s=0.01))
view = ex.view(height="420px")
view.workers.value = 1
view
"""


def test_a_run_stopped_at_its_circuit_breaker_goes_on_by_a_new_budget_from_the_panel(
    page: tuple[Any, Any], tmp_path: Path
) -> None:
    tab, traffic = page
    with voila(tmp_path, ONE_WORKER_APP) as url:
        tab.goto(url, timeout=90_000)
        wait_for(tab, "el.dataset.drawn === '1'", timeout_s=90)
        button(tab, "Run").click()
        tab.wait_for_selector("text=New budget opens a new turn under the same limits", timeout=120_000)
        assert tab.get_by_text("run: budget_exhausted (circuit breaker)").count() == 1
        assert button(tab, "New budget").is_enabled() and button(tab, "Run").count() == 0
        screenshot(tab, "voila-resume-light")
        run_to_the_end(tab, "New budget")  # each click is a new turn and one more run of one worker
        tab.wait_for_selector("text=Nothing is left to explore", timeout=30_000)
        assert button(tab, "Run").is_disabled()
    assert traffic.aborted == [] and traffic.errors == []


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_two_hundred_nodes_read_as_a_tree(page: tuple[Any, Any], tmp_path: Path, theme: str) -> None:
    tab, traffic = page
    with voila(tmp_path, GROWN_APP, theme=theme) as url:
        tab.goto(url, timeout=120_000)
        wait_for(tab, "el.dataset.drawn === '1'", timeout_s=120)
        total = int(attr(tab, "node-count"))
        assert total >= 150, "about 200 nodes"
        opening = boxes(tab)
        drawn = frame(tab)
        assert outside(opening) == [] and overlapping(opening) == [] and readable(drawn) == []
        assert seeds_unlabelled(drawn) == 0 and drawn["bare"] == 0, "the seed questions are labelled"
        assert low_contrast(tab) == {}, f"{theme}: text under 4.5:1"
        screenshot(tab, f"voila-200-{theme}")
        tab.locator(".fractal-toolbar button", has_text="Expand all").click()
        everything = boxes(tab)
        assert len(everything["boxes"]) == total - json_counts(tab)["answers"], "one node per question"
        assert outside(everything) == [] and overlapping(everything) == []
        screenshot(tab, f"voila-200-{theme}-expanded")
        # Themes switch in place: the canvas repaints with the other palette at once.
        other, before = "true" if theme == "dark" else "false", attr(tab, "palette")
        tab.evaluate(f"() => {{ document.body.dataset.jpThemeLight = '{other}'; }}")
        wait_for(
            tab,
            f"el.dataset.palette !== '{before}' && "
            "el.dataset.palette === getComputedStyle(el).getPropertyValue('--fractal-open-fill').trim()",
        )
        assert low_contrast(tab) == {}
    assert traffic.aborted == [] and traffic.errors == []


def json_counts(tab: Any) -> dict[str, int]:
    return dict(tab.evaluate(f"() => JSON.parse(document.querySelector('{NETWORK}').dataset.counts)"))


# A harvested graph with failures (tests/views/failing_graph.py): two failed questions, and a model that
# fails every call at the harvest, so the root's synthesis is joined (a weak root) and the result degraded.
FAILING_APP = f"""\
import sys
sys.path.insert(0, {str(REPO)!r})
from fractal_nb import Exploration, GraphStore, SimulatedLLM
from tests.views.failing_graph import failing_graph

store = GraphStore()
built = failing_graph(store)
ex = Exploration(store, built["graph_id"], SimulatedLLM(failure_rate=1.0))
ex.harvest(finish=True)
ex.view(height="420px")
"""


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_failures_are_visible_in_the_app(page: tuple[Any, Any], tmp_path: Path, theme: str) -> None:
    tab, traffic = page
    with voila(tmp_path, FAILING_APP, theme=theme) as url:
        tab.goto(url, timeout=90_000)
        wait_for(tab, "el.dataset.drawn === '1'", timeout_s=90)
        warning = tab.locator(".fractal-degraded-warning")
        warning.wait_for(timeout=30_000)
        assert "2 question(s) failed" in warning.inner_text()
        assert tab.locator(f"{NETWORK} .fractal-legend .fractal-failed").inner_text() == "failed 2"
        assert "weak synthesis" in tab.locator(f"{NETWORK} .fractal-legend .fractal-weak").inner_text()
        tab.locator(f"{NETWORK} .fractal-toolbar select").nth(0).select_option("failed")
        assert attr(tab, "found") == "2", "the filter finds the failed questions"
        chosen = tab.locator(f"{NETWORK} .fractal-toolbar select").nth(1)
        chosen.select_option(chosen.locator("option").nth(1).get_attribute("value"))
        tab.get_by_text("Inspector", exact=True).click()
        inspector = tab.locator(".widget-html", has=tab.locator("p.fractal-failed-note"))
        inspector.wait_for(timeout=30_000)
        assert "Failed: RateLimitError: 429 Too Many Requests <img" in inspector.inner_text()
        assert low_contrast(tab) == {}, f"{theme}: text under 4.5:1"
        screenshot(tab, f"voila-failed-{theme}")
        tab.get_by_text("Result", exact=True).click()
        result = tab.locator(".fractal-result")
        result.wait_for(timeout=30_000)
        assert "failed: Which loads matter most?" in result.inner_text()
        screenshot(tab, f"voila-failed-{theme}-result")
        assert tab.evaluate("() => window.__pwned") is None
    assert traffic.aborted == [] and traffic.failed == [] and traffic.errors == []


CITED_APP = f"""\
import sys
sys.path.insert(0, {str(REPO)!r})
from pathlib import Path
from fractal_nb import Exploration, GraphStore, SimulatedLLM
from tests.views.cited_graph import cited_graph

store = GraphStore()
built = cited_graph(store, Path.cwd() / "root")
ex = Exploration(store, built["graph_id"], SimulatedLLM())
ex.view(height="360px")
"""
INSPECTOR_EVIDENCE = (
    ".fractal-badge, .fractal-quote, .fractal-lines, .fractal-cite-name, .fractal-cite-detail"
)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_inspector_shows_citations_with_their_quoted_lines(
    page: tuple[Any, Any], tmp_path: Path, theme: str
) -> None:
    tab, traffic = page
    with voila(tmp_path, CITED_APP, theme=theme) as url:
        tab.goto(url, timeout=90_000)
        wait_for(tab, "el.dataset.drawn === '1'", timeout_s=90)
        legend = tab.locator(f"{NETWORK} .fractal-legend .fractal-unsupported")
        assert legend.inner_text() == "✗ unsupported answers 2"
        tab.locator(f"{NETWORK} .fractal-toolbar select").nth(0).select_option("unsupported")
        chosen = tab.locator(f"{NETWORK} .fractal-toolbar select").nth(1)
        chosen.select_option(chosen.locator("option").nth(1).get_attribute("value"))  # the root
        tab.get_by_text("Inspector", exact=True).click()
        inspector = tab.locator(".widget-html", has=tab.locator(".fractal-citations"))
        inspector.wait_for(timeout=30_000)
        citations = inspector.locator(".fractal-citation")
        assert citations.count() == 4
        first = citations.nth(0)
        assert first.locator("code").inner_text() == "notes/bridges.md:L2-L3"
        assert first.locator(".fractal-badge").inner_text() == "verified"
        assert "2  Most failures start at the bearings," in first.locator("pre").inner_text()
        misquoted = citations.nth(1)
        assert misquoted.locator(".fractal-badge").inner_text() == "misquoted"
        assert (
            misquoted.locator("blockquote").inner_text()
            == 'Bridges never fail <img src=x onerror="window.__pwned=1">'
        )
        assert inspector.locator("a").count() == 0, "Voila is no JupyterLab: the path is shown, not linked"
        assert inspector.locator(".fractal-unsupported").inner_text() == "unsupported"
        assert low_contrast(tab) == {}, f"{theme}: text under 4.5:1"
        assert low_text_contrast(tab, INSPECTOR_EVIDENCE) == [], f"{theme}: citations under 4.5:1"
        inspector.scroll_into_view_if_needed()
        screenshot(tab, f"voila-inspector-citations-{theme}")
        assert tab.evaluate("() => window.__pwned") is None
    assert traffic.aborted == [] and traffic.failed == [] and traffic.errors == []


# A deep run's shape at 150 questions (tests/graph_builder.run_shaped_graph), in the panel.
SHAPED_APP = f"""\
import sys
sys.path.insert(0, {str(REPO)!r})
from fractal_nb import Exploration, GraphStore, SimulatedLLM
from tests.graph_builder import run_shaped_graph

store = GraphStore()
ex = Exploration(store, run_shaped_graph(store, 150, seed=150), SimulatedLLM())
ex.view()
"""


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_a_150_question_tree_reads_in_the_app(page: tuple[Any, Any], tmp_path: Path, theme: str) -> None:
    tab, traffic = page
    with voila(tmp_path, SHAPED_APP, theme=theme) as url:
        tab.goto(url, timeout=90_000)
        wait_for(tab, "el.dataset.drawn === '1'", timeout_s=90)
        drawn = frame(tab)
        assert readable(drawn) == [] and drawn["bare"] == 0 and seeds_unlabelled(drawn) == 0
        assert len(drawn["labels"]) + drawn["dots"] == 150, "every question drawn"
        assert max(drawn["use"]["x"], drawn["use"]["y"]) >= 0.9
        assert outside(boxes(tab)) == [] and low_contrast(tab) == {}
        screenshot(tab, f"voila-150-{theme}")
    assert traffic.aborted == [] and traffic.errors == []


# How the page looks: the body's theme attribute, JupyterLab's page colour, the view's palette (its open
# questions' fill, network.js) and its background, and an icon's font (Font Awesome, from Voila's bundle).
LOOKS = f"""() => {{
    const el = document.querySelector('{NETWORK}');
    const icon = document.querySelector('button.widget-button i.fa');
    const rgb = (value) => {{  // any CSS colour as the browser's rgb(...)
        const probe = document.createElement('span');
        probe.style.color = value;
        document.body.appendChild(probe);
        const colour = getComputedStyle(probe).color;
        probe.remove();
        return colour;
    }};
    return {{
        light: document.body.dataset.jpThemeLight,
        page: rgb(getComputedStyle(document.body).getPropertyValue('--jp-layout-color0').trim()),
        view: rgb(getComputedStyle(el).getPropertyValue('--fractal-bg').trim()),
        palette: el.dataset.palette,
        icon: icon ? getComputedStyle(icon).fontFamily : null,
    }};
}}"""
DARK_OPEN_FILL, LIGHT_OPEN_FILL = "#24303d", "#e7eef7"  # network.css: an open question's fill


def luminance(colour: str) -> float:
    """The relative luminance of an ``rgb(...)`` colour, 0 black to 1 white."""
    return (contrast(colour, "rgb(0, 0, 0)") - 1) * 0.05  # contrast against black is (L + 0.05) / 0.05


CDN_HOSTS = ("cdn.jsdelivr.net", "cdnjs.cloudflare.com", "unpkg.com")  # what Voila's templates name


@pytest.mark.parametrize("way", ["root", "notebooks", "binder"])
def test_every_way_of_starting_the_app_asks_nothing_of_a_cdn(browser: Any, tmp_path: Path, way: str) -> None:
    """Issue 38: `voila notebooks/app.ipynb` (from the root), `voila app.ipynb` (beside it), no
    binder/start, and Binder's way (binder/start, a Jupyter server's Voila): the page names no CDN,
    every request it makes goes to this machine, and the icons still draw."""
    from tests.browser.conftest import guarded_page

    log = tmp_path / "server.log"
    app = {
        "root": lambda: plain_voila(REPO, "notebooks/app.ipynb", log),
        "notebooks": lambda: plain_voila(REPO / "notebooks", "app.ipynb", log),
        "binder": lambda: binder_server(log),
    }[way]
    requested: list[str] = []
    with app() as url, guarded_page(browser) as (tab, traffic):
        tab.on("request", lambda request: requested.append(request.url))
        tab.goto(url, timeout=90_000)
        wait_for(tab, "el.dataset.drawn === '1'", timeout_s=90)
        tab.evaluate("() => document.fonts.ready.then(() => true)")
        looks, page = tab.evaluate(LOOKS), tab.content()
    elsewhere = [u for u in requested if urllib.parse.urlparse(u).hostname not in ("127.0.0.1", "localhost")]
    assert elsewhere == [] and traffic.aborted == [], "nothing is asked of a CDN"
    assert [host for host in CDN_HOSTS if host in page] == [], "nothing on the page names one"
    assert len(requested) > 10, "the page, its scripts, styles and fonts were all seen"
    assert looks["icon"] and "Font Awesome" in looks["icon"], "the icons draw from Voila's own bundle"
    assert traffic.failed == [] and traffic.errors == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_app_follows_the_readers_colour_preference(browser: Any, tmp_path: Path, scheme: str) -> None:
    """Issue 38: the app (plain `voila`, no --theme) is dark for a reader who prefers dark, page and
    view, and light for one who prefers light; it follows a change of preference in place."""
    from tests.browser.conftest import guarded_page

    options = {"viewport": {"width": 1400, "height": 900}, "color_scheme": scheme}
    log = tmp_path / "voila.log"
    with plain_voila(REPO / "notebooks", "app.ipynb", log) as url, guarded_page(browser, **options) as opened:
        tab, traffic = opened
        tab.goto(url, timeout=90_000)
        wait_for(tab, "el.dataset.drawn === '1'", timeout_s=90)
        button(tab, "Step").click()
        wait_for(tab, "Number(el.dataset.nodeCount) > 2")
        looks = tab.evaluate(LOOKS)
        dark = scheme == "dark"
        assert looks["light"] == ("false" if dark else "true")
        assert (luminance(looks["page"]) < 0.1) == dark and (luminance(looks["view"]) < 0.1) == dark
        assert looks["palette"] == (DARK_OPEN_FILL if dark else LIGHT_OPEN_FILL), "the canvas's palette"
        assert low_contrast(tab) == {}, f"{scheme}: text under 4.5:1"
        screenshot(tab, f"voila-app-plain-{scheme}")
        other = "light" if dark else "dark"
        tab.emulate_media(color_scheme=other)  # the reader changes their preference: the page follows
        wait_for(tab, f"el.dataset.palette === '{LIGHT_OPEN_FILL if dark else DARK_OPEN_FILL}'")
        switched = tab.evaluate(LOOKS)
        assert switched["light"] == ("true" if dark else "false")
        assert (luminance(switched["page"]) < 0.1) == (not dark)
        assert low_contrast(tab) == {}, f"{other}: text under 4.5:1"
        assert traffic.aborted == [] and traffic.failed == [] and traffic.errors == []
