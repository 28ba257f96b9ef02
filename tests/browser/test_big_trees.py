"""A big exploration reads: 40, 150 and 500 questions on the exported page, light and dark (issue 27).

Measured from what the view drew (network.js ``frame``): every label drawn renders at 11 px or more on
screen (its font times the view's own scale), the tree spans the canvas across and down, no two labels
overlap, nothing is a box without its label, zooming in over a dot labels it, Expand all draws every
question, cross-branch links stay off the tree until a question is selected, and the search finds words
in any order, case and punctuation aside.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fractal_nb import Exploration, GraphStore, SimulatedLLM
from tests.browser.conftest import guarded_page
from tests.browser.tree_checks import (
    NETWORK,
    boxes,
    frame,
    label_overlaps,
    low_contrast,
    outside,
    readable,
    screenshot,
)
from tests.graph_builder import run_shaped_graph

pytestmark = pytest.mark.browser

SIZES = (40, 150, 500)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[Path, dict[str, Any]]]:
    """Each size as an exported page, with what the test checks against (seed ids, depths, links)."""
    folder = tmp_path_factory.mktemp("big")
    built = {}
    for size in SIZES:
        store = GraphStore()
        gid = run_shaped_graph(store, size, seed=size)
        nodes = store.get_changes(gid)["nodes"]
        questions = [n for n in nodes if n["node_type"] == "question"]
        path = Exploration(store, gid, SimulatedLLM()).to_html(folder / f"tree-{size}.html")
        built[size] = (
            path,
            {
                "questions": len(questions),
                "seeds": {n["node_id"] for n in questions if n["depth"] == 1},
                "deepest": max(n["depth"] for n in questions),
            },
        )
        store.close()
    return built


def open_page(tab: Any, path: Path) -> None:
    tab.goto(path.as_uri())
    tab.wait_for_function(f"() => document.querySelector('{NETWORK}')?.dataset.drawn === '1'")


def attr(tab: Any, name: str) -> str:
    return str(tab.get_attribute(NETWORK, f"data-{name}"))


def inside(drawn: dict[str, Any]) -> list[dict[str, Any]]:
    """The drawn labels wholly inside the canvas."""
    c = drawn["canvas"]
    return [
        label
        for label in drawn["labels"]
        if label["left"] >= c["left"]
        and label["right"] <= c["right"]
        and label["top"] >= c["top"]
        and label["bottom"] <= c["bottom"]
    ]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", SIZES)
def test_a_big_tree_reads_at_every_zoom(
    browser: Any, pages: dict[int, tuple[Path, dict[str, Any]]], size: int, scheme: str
) -> None:
    path, facts = pages[size]
    options = {"viewport": {"width": 1280, "height": 900}, "color_scheme": scheme}
    with guarded_page(browser, **options) as (tab, traffic):
        open_page(tab, path)
        fitted = frame(tab)
        assert readable(fitted) == [], "every label drawn renders at 11 px or more"
        labelled = {label["id"] for label in fitted["labels"]}
        assert facts["seeds"] <= labelled, "the seed questions are labelled in the fitted view"
        assert fitted["bare"] == 0, "no box without its label"
        assert len(fitted["labels"]) + fitted["dots"] == facts["questions"], "every question drawn"
        use = fitted["use"]
        assert max(use["x"], use["y"]) >= 0.9 and min(use["x"], use["y"]) >= 0.5, f"canvas use {use}"
        assert label_overlaps(fitted) == [] and outside(boxes(tab)) == []
        assert low_contrast(tab) == {}, f"{scheme}: text under 4.5:1"
        assert attr(tab, "link-count") == "0", "no cross-branch link over the tree until one is chosen"
        screenshot(tab, f"big-{size}-{scheme}")

        # Zooming in (the wheel, over a dot under a label) labels it, every label still at 11 px or more.
        dot = next(d for d in fitted["dotsAt"] if d["parent"] in labelled)  # where the reader zooms
        tab.mouse.move(dot["x"], dot["y"])
        for _ in range(30):
            tab.mouse.wheel(0, -200)
            closer = frame(tab)
            assert readable(closer) == [] and closer["bare"] == 0, "at every zoom"
            if dot["id"] in {label["id"] for label in closer["labels"]}:
                break
        else:
            raise AssertionError("zooming in never labelled the dot")
        screenshot(tab, f"big-{size}-{scheme}-zoomed")

        # Expand all: every question drawn, labelled or a dot, never an empty box.
        tab.get_by_role("button", name="Expand all").click()
        tab.get_by_role("button", name="Fit").click()
        everything = frame(tab)
        assert len(everything["labels"]) + everything["dots"] == facts["questions"]
        assert readable(everything) == [] and everything["bare"] == 0 and everything["labels"]
        assert label_overlaps(everything) == []
        assert traffic.aborted == [] and traffic.failed == [] and traffic.errors == []


def test_links_show_for_the_selected_question_or_all_on_request(
    page: tuple[Any, Any], pages: dict[int, tuple[Path, dict[str, Any]]]
) -> None:
    tab, traffic = page
    open_page(tab, pages[150][0])
    assert attr(tab, "link-count") == "0"
    linked = tab.evaluate(
        "() => { const d = JSON.parse(document.getElementById('fractal-data').textContent);"
        " return d.links[0].from_question; }"
    )
    tab.evaluate(f"() => window.fractalView.select('{linked}', false)")
    shown = int(attr(tab, "link-count"))
    total = tab.evaluate("() => JSON.parse(document.getElementById('fractal-data').textContent).links.length")
    assert 0 < shown < total, "the selected question's links, not the others"
    tab.get_by_role("button", name="All links").click()
    assert int(attr(tab, "link-count")) > shown
    assert traffic.errors == []


def test_search_takes_words_in_any_order_and_marks_the_tree_and_the_outline(
    page: tuple[Any, Any], tmp_path: Path
) -> None:
    tab, traffic = page
    store = GraphStore()
    g = store.create_graph("Should a mid-sized city build a tram line?", "deep", "autonomous")
    gid = g["graph_id"]
    seeds = store.add_answer(
        gid,
        g["root_node_id"],
        "The plan.",
        sub_questions=["What is the tram line' cost, per rider?", "Who rides it?", "What do buses offer?"],
    )["sub_questions"]
    store.add_answer(gid, seeds[1]["node_id"], "Commuters, mostly; the COST of a pass decides.")
    path = Exploration(store, gid, SimulatedLLM()).to_html(tmp_path / "search.html")
    open_page(tab, path)
    search = tab.get_by_label("Search questions, answers and syntheses")
    search.fill("tram line cost")
    assert attr(tab, "found") == "1", "punctuation and quotes aside"
    search.fill("Cost  TRAM")
    assert attr(tab, "found") == "1", "words in any order, any case"
    search.fill("cost")
    assert attr(tab, "found") == "2", "answers are searched too"
    marked = tab.locator(".fractal-outline summary.fractal-match")
    assert marked.count() == 2, "the matches are marked in the outline"
    ringed = tab.evaluate(f"() => document.querySelector('{NETWORK}').fractalFrame().labels.map((l) => l.id)")
    assert {seeds[0]["node_id"], seeds[1]["node_id"]} <= set(ringed)
    screenshot(tab, "search-marks")
    assert traffic.errors == []
    store.close()


def test_a_findings_node_link_shows_its_node_in_the_tree(page: tuple[Any, Any], tmp_path: Path) -> None:
    tab, traffic = page
    with Exploration.create(
        "Should a mid-sized city build a tram line?", intensity="explore", llm=SimulatedLLM(seed=2)
    ) as ex:
        ex.run(progress=False, resume=True)
        result = ex.harvest(finish=True)
        path = ex.to_html(tmp_path / "harvested.html")
    assert result.findings and all(f.get("node_id") for f in result.findings)
    open_page(tab, path)
    link = tab.locator("section.fractal-report a.fractal-node-link:visible").first  # a finding's
    wanted = link.get_attribute("data-fractal-node")
    link.click()
    assert attr(tab, "selected") == wanted, "the link selects its node"
    shown = frame(tab)
    mine = [label for label in inside(shown) if label["id"] == wanted]
    assert mine and mine[0]["px"] >= 10, "in view, its label readable"
    assert tab.evaluate("() => window.scrollY") < 300, "scrolled back up to the tree"
    assert traffic.errors == []
