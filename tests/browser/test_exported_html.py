"""The exported page in a real browser: offline, a readable tree, details on click, search, both themes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fractal_nb import Exploration, GraphStore, SimulatedLLM
from tests.browser.conftest import guarded_page
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
)
from tests.engine.test_runs import FAST
from tests.graph_builder import grow_graph

pytestmark = pytest.mark.browser

HOSTILE = '<img src=x onerror="window.__pwned=1"> <a href="javascript:alert(1)">read</a>'


def drawn(tab: Any, timeout_ms: float = 30_000) -> None:
    tab.wait_for_function(
        f"() => document.querySelector('{NETWORK}')?.dataset.drawn === '1'", timeout=timeout_ms
    )


def data(tab: Any) -> dict[str, str]:
    return dict(tab.evaluate(f"() => ({{...document.querySelector('{NETWORK}').dataset}})"))


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, int]:
    """An explore run (about 80 nodes, with cross-branch links) as a page: (path, questions, nodes)."""
    folder = tmp_path_factory.mktemp("export")
    with Exploration.create(
        "Why do rivers meander?", intensity="explore", llm=SimulatedLLM(seed=3, link_rate=0.5), clock=FAST
    ) as ex:
        ex.run(progress=False)
        nodes = ex.nodes()
        path = ex.to_html(folder / "graph.html")
    return path, int((nodes.node_type == "question").sum()), len(nodes)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_page_draws_offline_a_readable_tree_in_both_themes(
    browser: Any, exported: tuple[Path, int, int], scheme: str
) -> None:
    path, questions, total = exported
    options = {"viewport": {"width": 1280, "height": 900}, "color_scheme": scheme}
    with guarded_page(browser, **options) as (tab, traffic):
        tab.goto(path.as_uri())
        drawn(tab)
        assert data(tab)["nodeCount"] == str(total) and tab.locator("h1").count() == 1
        assert "questions · " in tab.locator("header p").inner_text()
        opening = boxes(tab)
        assert outside(opening) == [] and overlapping(opening) == [], "the opening view fits and reads"
        drawn_now = frame(tab)
        assert drawn_now["labels"] and readable(drawn_now) == [], "labels read at the opening zoom"
        screenshot(tab, f"export-{scheme}")
        tab.get_by_role("button", name="Expand all").click()
        tab.get_by_role("button", name="Fit").click()
        everything = boxes(tab)
        assert len(everything["boxes"]) == questions, "one node per question"
        assert outside(everything) == [], "after Fit every node is in view"
        assert overlapping(everything) == [], "no two labels overlap"
        assert low_contrast(tab) == {}, f"{scheme}: text under 4.5:1"
        screenshot(tab, f"export-{scheme}-expanded")
        tab.get_by_role("button", name="Q/A graph").click()
        graph = boxes(tab)
        assert len(graph["boxes"]) == total, "the full question/answer graph is one toggle away"
        assert overlapping(graph) == [], "answers have a column of their own"
        assert traffic.failed == [] and traffic.errors == [], "offline: nothing fetched, no page error"


def test_search_finds_and_a_click_shows_the_details(
    page: tuple[Any, Any], exported: tuple[Path, int, int]
) -> None:
    tab, traffic = page
    tab.goto(exported[0].as_uri())
    drawn(tab)
    word = tab.evaluate(  # a word of the first seed question, whatever the simulator writes
        "() => JSON.parse(document.getElementById('fractal-data').textContent).questions[1].text"
        ".split(/\\W+/).filter((w) => w.length > 4)[0]"
    )
    tab.get_by_label("Search questions, answers and syntheses").fill(word.upper())
    found = int(data(tab)["found"])
    assert found > 0
    chosen = tab.locator(".fractal-toolbar select").nth(1)
    value = chosen.locator("option").nth(1).get_attribute("value")
    chosen.select_option(value)
    assert data(tab)["selected"] == value
    details = tab.locator(".fractal-details")
    assert details.is_visible() and word.lower() in details.inner_text().lower()
    tab.get_by_label("Search questions, answers and syntheses").fill("")
    tab.locator(".fractal-toolbar select").nth(0).select_option("saturated")
    assert int(data(tab)["found"]) > 0
    assert traffic.failed == [] and traffic.aborted == [] and traffic.errors == []


def test_labels_drop_the_tag_and_wrap_to_three_lines_of_26(page: tuple[Any, Any], tmp_path: Path) -> None:
    tab, traffic = page
    store = GraphStore()
    root_text = "[simulated] Why do tides turn twice a day in most places of the world, and not once?"
    g = store.create_graph(root_text, "pulse", "autonomous")
    long_word = "Supercalifragilisticexpialidocious-and-then-some?"
    short = "Why the moon?"
    store.add_answer(g["graph_id"], g["root_node_id"], "It pulls.", sub_questions=[long_word, short])
    tab.goto(Exploration(store, g["graph_id"], SimulatedLLM()).to_html(tmp_path / "labels.html").as_uri())
    drawn(tab)
    labels = {label["label"] for label in frame(tab)["labels"]}
    assert labels == {
        "Why do tides turn twice a\nday in most places of the\nworld, and not once?",
        "Supercalifragilisticexpial\nidocious-and-then-some?",
        short,
    }, labels
    store.add_answer(g["graph_id"], g["root_node_id"], "More.", sub_questions=["word " * 30])
    tab.goto(Exploration(store, g["graph_id"], SimulatedLLM()).to_html(tmp_path / "labels.html").as_uri())
    drawn(tab)
    cut = next(label["label"] for label in frame(tab)["labels"] if label["label"].startswith("word"))
    assert cut == "word word word word word\nword word word word word\nword word word word word …"
    assert traffic.failed == [] and traffic.errors == []
    store.close()


def test_hostile_model_text_stays_text(page: tuple[Any, Any], tmp_path: Path) -> None:
    tab, traffic = page
    store = GraphStore()
    g = store.create_graph(HOSTILE, "pulse", "autonomous")
    store.add_answer(g["graph_id"], g["root_node_id"], HOSTILE, sub_questions=[HOSTILE])
    ex = Exploration(store, g["graph_id"], SimulatedLLM())
    path = ex.to_html(tmp_path / "hostile.html")
    tab.goto(path.as_uri())
    drawn(tab)
    root = g["root_node_id"]
    at = tab.evaluate(f"""() => {{
        const el = document.querySelector('{NETWORK}'), net = el.visNetwork;
        const box = el.querySelector('canvas').getBoundingClientRect();
        const p = net.canvasToDOM(net.getPositions(['{root}'])['{root}']);
        return {{x: box.left + p.x, y: box.top + p.y}}; }}""")
    tab.mouse.move(at["x"], at["y"])
    tab.wait_for_function(
        "() => { const t = document.querySelector('.vis-tooltip');"
        " return t && t.style.visibility === 'visible'; }",
        timeout=10_000,
    )
    tooltip = tab.evaluate(
        "() => { const t = document.querySelector('.vis-tooltip');"
        " return {text: t.innerText, elements: t.querySelectorAll(':not(br)').length,"
        " height: t.getBoundingClientRect().height}; }"
    )
    assert "<img src=x" in tooltip["text"] and tooltip["elements"] == 0 and tooltip["height"] <= 262
    tab.mouse.click(at["x"], at["y"])
    assert "<img src=x" in tab.locator(".fractal-details").inner_text()
    assert tab.evaluate("() => window.__pwned") is None
    assert tab.evaluate("() => document.querySelectorAll('img').length") == 0
    assert traffic.failed == [] and traffic.errors == []
    store.close()


@pytest.mark.slow
def test_twenty_thousand_nodes_open_readable_and_every_question_has_a_place(
    page: tuple[Any, Any], tmp_path: Path
) -> None:
    tab, traffic = page
    store = GraphStore()
    gid = grow_graph(store, 20_000)
    path = Exploration(store, gid, SimulatedLLM()).to_html(tmp_path / "big.html")
    tab.goto(path.as_uri(), timeout=120_000)
    drawn(tab, timeout_ms=120_000)
    opening = boxes(tab)
    assert len(opening["boxes"]) <= 601, "it opens closed below the level that keeps 600 questions"
    assert overlapping(opening) == [] and outside(opening) == []
    drawn_now = frame(tab)
    assert drawn_now["labels"] and readable(drawn_now) == [] and drawn_now["bare"] == 0
    placed = tab.evaluate("() => window.fractalView.layoutAll()")
    questions = sum(1 for n in store.get_changes(gid)["nodes"] if n["node_type"] == "question")
    assert placed == {"count": questions, "distinct": questions}
    assert traffic.errors == []
    store.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_failures_are_visible_on_the_page(browser: Any, tmp_path: Path, scheme: str) -> None:
    from tests.views.failing_graph import RATE_LIMIT, failing_graph

    store = GraphStore()
    built = failing_graph(store)
    store.mark_saturated(built["graph_id"], built["failed"], "error")  # as a harvest would: the root is ready
    store.synthesize_node(built["graph_id"], built["root"], "Loads fail first.")  # weak: built on failures
    path = Exploration(store, built["graph_id"], SimulatedLLM(), clock=FAST).to_html(tmp_path / "failed.html")
    options = {"viewport": {"width": 1280, "height": 900}, "color_scheme": scheme}
    with guarded_page(browser, **options) as (tab, traffic):
        tab.goto(path.as_uri())
        drawn(tab)
        assert "2 question(s) failed" in tab.locator(".fractal-warning").inner_text()
        assert tab.locator(".fractal-legend .fractal-failed").inner_text() == "failed 2"
        assert data(tab)["failedCount"] == "2"
        tab.locator(".fractal-toolbar select").nth(0).select_option("failed")
        assert data(tab)["found"] == "2", "the filter finds the failed questions"
        tab.evaluate(f"() => window.fractalView.select('{built['failed']}', true)")
        note = tab.locator(".fractal-details .fractal-failed-note")
        assert note.inner_text() == f"Failed: {RATE_LIMIT}", "the error text, as text"
        tab.evaluate(f"() => window.fractalView.select('{built['weak']}', true)")
        assert "weak synthesis" in tab.locator(".fractal-details .fractal-weak-note").inner_text()
        tab.evaluate(f"() => window.fractalView.select('{built['root']}', true)")
        marked = tab.locator(".fractal-details .fractal-weak-note").inner_text()  # the store's weak mark
        assert f"built on failed: {built['failed']}" in marked and f"joined: {built['weak']}" in marked
        report = tab.locator("section.fractal-report")
        assert "failed: Which loads matter most?" in report.inner_text()
        assert low_contrast(tab) == {}, f"{scheme}: text under 4.5:1"
        warn = tab.evaluate(
            "() => { const w = getComputedStyle(document.querySelector('.fractal-warning'));"
            " return [w.color, w.backgroundColor]; }"
        )
        assert contrast(*warn) >= 4.5, f"{scheme}: the warning under 4.5:1"
        screenshot(tab, f"export-failed-{scheme}")
        assert tab.evaluate("() => window.__pwned") is None
        assert traffic.aborted == [] and traffic.failed == [] and traffic.errors == []
    store.close()


# The evidence's own text: badges, quotes, stored lines, links, muted details.
EVIDENCE_TEXT = (
    ".fractal-badge, .fractal-quote, .fractal-lines, .fractal-cite-link, .fractal-cite-name, "
    ".fractal-cite-detail, section.fractal-evidence li"
)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_citations_and_their_quoted_lines_read_on_the_page(
    browser: Any, tmp_path: Path, scheme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.views.cited_graph import NOTES, cited_graph
    from tests.views.test_evidence_faces import serve_from

    serve_from(monkeypatch, tmp_path / "runtime", tmp_path)  # exported from a kernel of a Jupyter server
    store = GraphStore()
    built = cited_graph(store, tmp_path / "root")
    path = Exploration(store, built["graph_id"], SimulatedLLM(), clock=FAST).to_html(tmp_path / "cited.html")
    options = {"viewport": {"width": 1280, "height": 900}, "color_scheme": scheme}
    with guarded_page(browser, **options) as (tab, traffic):
        tab.goto(path.as_uri())
        drawn(tab)
        evidence = tab.locator("section.fractal-evidence")
        assert "Upkeep decides, not loads." in evidence.locator(".fractal-synthesis-object").inner_text()
        unsupported = evidence.locator("ul.fractal-unsupported-findings")
        assert 'Bridges never fail. <img src=x onerror="window.__pwned=1">' in unsupported.inner_text()
        verified = evidence.locator("ul.fractal-findings .fractal-citation").first
        assert verified.locator("a.fractal-cite-link").inner_text() == f"{NOTES}:L2-L3"
        assert verified.locator("a").get_attribute("href") == "/lab/tree/root/notes/bridges.md"
        assert verified.locator("blockquote").inner_text().startswith("Most failures start at the bearings")
        assert (
            "3  where water collects and steel rusts." in verified.locator("pre.fractal-lines").inner_text()
        )
        assert verified.locator(".fractal-badge").inner_text() == "verified"
        counts = evidence.locator(".fractal-support-counts").inner_text()
        assert counts == "Findings: 1 supported · 1 unsupported"
        # The live view: the unsupported answers marked, the track named.
        assert tab.locator(".fractal-legend .fractal-unsupported").inner_text() == "✗ unsupported answers 2"
        tab.locator(".fractal-toolbar select").nth(0).select_option("unsupported")
        assert data(tab)["found"] == "2", "the filter finds the questions with an unsupported answer"
        tab.evaluate(f"() => window.fractalView.select('{built['track']}', true)")
        track = tab.locator(".fractal-details .fractal-track").inner_text()
        assert track == 'Track: Loads <img src=x onerror="window.__pwned=1">'
        assert low_contrast(tab) == {}, f"{scheme}: text under 4.5:1"
        assert low_text_contrast(tab, EVIDENCE_TEXT) == [], f"{scheme}: evidence text under 4.5:1"
        evidence.scroll_into_view_if_needed()
        screenshot(tab, f"export-evidence-{scheme}")
        assert tab.evaluate("() => window.__pwned") is None
        assert traffic.aborted == [] and traffic.failed == [] and traffic.errors == []
    store.close()


# A synthesis with what a CSV must quote (a comma, quotes, a line break) and what a page must not run.
AWKWARD = 'Loads fail first, "mostly";\nthen upkeep. </script><img src=x onerror="window.__pwned=1">'


def downloaded(tab: Any, name: str) -> tuple[str, str]:
    """Click the page's download button named ``name``; the file's suggested name and its text."""
    with tab.expect_download() as started:
        tab.get_by_role("button", name=name, exact=True).click()
    download = started.value
    assert download.failure() is None
    return download.suggested_filename, Path(download.path()).read_text(encoding="utf-8")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_page_downloads_its_tables_and_report_built_in_the_browser(
    browser: Any, tmp_path: Path, scheme: str
) -> None:
    """Issue 38: the exported page offers its own downloads, no server behind it (the file is opened
    from disk): the syntheses and gaps as the notebook's frames write them, the questions, the report."""
    import io
    import json

    import pandas as pd

    from fractal_nb.views.downloads import file_stem
    from tests.views.failing_graph import failing_graph

    store = GraphStore()
    built = failing_graph(store)
    store.mark_saturated(built["graph_id"], built["failed"], "error")
    store.synthesize_node(built["graph_id"], built["root"], AWKWARD)
    ex = Exploration(store, built["graph_id"], SimulatedLLM(), clock=FAST)
    path = ex.to_html(tmp_path / "failed.html")
    stem = file_stem(ex.graph_id, store.get_graph(ex.graph_id)["seed"])
    chain = pd.DataFrame(
        [
            {
                "node_id": link.node_id,
                "depth": link.depth,
                "question": link.question,
                "synthesis": link.synthesis,
                "degraded": link.degraded,
                "weak": "; ".join(link.weak),
            }
            for link in ex.preview().synthesis_chain
        ]
    )
    nodes = ex.nodes()
    questions = nodes[nodes.node_type == "question"]
    options = {"viewport": {"width": 1280, "height": 900}, "color_scheme": scheme}
    with guarded_page(browser, **options) as (tab, traffic):
        tab.goto(path.as_uri())
        drawn(tab)
        bar = tab.get_by_role("navigation", name="Download the graph")
        assert bar.get_by_role("group", name="Syntheses 3").is_visible()
        assert bar.get_by_role("group", name=f"Questions {len(questions)}").is_visible()

        name, text = downloaded(tab, "Syntheses as CSV")
        assert name == f"{stem}-syntheses.csv"
        assert text == chain.to_csv(index=False), "as pandas writes the chain: quoted, every line kept"
        assert AWKWARD in pd.read_csv(io.StringIO(text)).synthesis.tolist()
        name, text = downloaded(tab, "Syntheses as JSON")
        assert name == f"{stem}-syntheses.json" and json.loads(text) == chain.to_dict("records")

        name, text = downloaded(tab, "Gaps as CSV")
        assert name == f"{stem}-gaps.csv" and text == ex.gaps().to_csv(index=False), "the notebook's gaps"
        assert json.loads(downloaded(tab, "Gaps as JSON")[1]) == ex.gaps().to_dict("records")

        name, text = downloaded(tab, "Questions as CSV")
        table = pd.read_csv(io.StringIO(text), keep_default_na=False)
        assert name == f"{stem}-questions.csv"
        assert table.node_id.tolist() == questions.node_id.tolist()
        assert table.set_index("node_id").loc[built["failed"], "status"] == "failed"
        assert "RateLimitError: 429" in table.set_index("node_id").loc[built["failed"], "reason"]
        rows = json.loads(downloaded(tab, "Questions as JSON")[1])
        assert [row["node_id"] for row in rows] == questions.node_id.tolist()
        assert rows[0]["question"] == store.get_graph(ex.graph_id)["seed"] and rows[0]["parent_id"] is None

        name, text = downloaded(tab, "Report as Markdown")
        assert name == f"{stem}-report.md" and text == ex.report()
        assert bar.get_by_role("status").inner_text().startswith(f"{stem}-report.md (")

        assert low_text_contrast(tab, ".fractal-downloads button, .fractal-downloads-caption") == []
        screenshot(tab, f"export-downloads-{scheme}")
        assert tab.evaluate("() => window.__pwned") is None
        assert traffic.aborted == [] and traffic.failed == [] and traffic.errors == []
    store.close()


def test_a_click_on_a_node_brings_its_details_into_view(
    browser: Any, exported: tuple[Path, int, int]
) -> None:
    """The details open below the tree: a click scrolls them into view (issue 38: below the fold)."""
    with guarded_page(browser, viewport={"width": 1400, "height": 900}) as (tab, traffic):
        tab.goto(exported[0].as_uri())
        drawn(tab)
        label = frame(tab)["labels"][-1]
        tab.mouse.click((label["left"] + label["right"]) / 2, (label["top"] + label["bottom"]) / 2)
        assert data(tab)["selected"] == label["id"]
        details = tab.locator(".fractal-details")
        tab.wait_for_function(  # wholly on screen (a smooth scroll, if any, ends there)
            "(e) => { const r = e.getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; }",
            arg=details.element_handle(),
        )
        assert details.is_visible() and label["id"] in details.inner_text()
        screenshot(tab, "export-click-details")
        assert traffic.errors == []


# Where the page's result shows its conclusion (the root's synthesis, the chain's first entry), its chain
# and its gaps, top to bottom, and whether the gaps are folded and what their fold says.
RESULT_ORDER = """() => {
    const report = document.querySelector('section.fractal-report');
    const top = (e) => (e ? e.getBoundingClientRect().top + scrollY : null);
    const chain = report.querySelector('details.fractal-chain');
    const gaps = report.querySelector('details.fractal-gaps');
    const root = chain.querySelector('li').cloneNode(true);  // the root's question, synthesis, link
    root.querySelector('b').remove();
    root.querySelector('a')?.remove();
    const conclusion = [...report.querySelectorAll('.fractal-result > p')]
        .find((p) => p.textContent.trim() === root.textContent.trim());
    return { conclusion: top(conclusion), chain: top(chain), gaps: top(gaps), chainOpen: chain.open,
             gapsOpen: gaps.open, fold: gaps.querySelector('summary').innerText,
             gapsShown: gaps.querySelector('li').checkVisibility() };
}"""


def test_the_result_leads_with_the_conclusion_and_its_chain_then_the_gaps_folded(
    page: tuple[Any, Any], exported: tuple[Path, int, int]
) -> None:
    """Issue 42: every gap (50 of them) stood between the conclusion and the chain of syntheses."""
    tab, traffic = page
    path, _questions, _total = exported
    tab.goto(path.as_uri())
    drawn(tab)
    shown = tab.evaluate(RESULT_ORDER)
    assert shown["conclusion"] is not None, "the conclusion is the root's synthesis, shown as a paragraph"
    assert shown["conclusion"] < shown["chain"] < shown["gaps"], shown
    assert shown["chainOpen"] and not shown["gapsOpen"] and not shown["gapsShown"], shown
    assert shown["fold"].startswith("Gaps (") and int(shown["fold"][6:-1]) > 10, shown
    tab.locator("section.fractal-report").scroll_into_view_if_needed()
    screenshot(tab, "export-result-order")
    assert traffic.aborted == [] and traffic.errors == []
