"""The exported page draws offline in a real browser, and model text stays text there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fractal_nb import Exploration, GraphStore, SimulatedLLM
from tests.engine.test_runs import FAST

pytestmark = pytest.mark.browser

HOSTILE = '<img src=x onerror="window.__pwned=1"> <a href="javascript:alert(1)">read</a>'


def test_exported_graph_draws_offline_with_no_failed_requests(page: tuple[Any, Any], tmp_path: Path) -> None:
    tab, traffic = page
    with Exploration.create(
        "Why do rivers meander?", intensity="explore", llm=SimulatedLLM(seed=3, link_rate=0.5), clock=FAST
    ) as ex:
        ex.run(progress=False)
        path = ex.to_html(tmp_path / "graph.html")
        expected_nodes, expected_edges = len(ex.nodes()), len(ex.edges())
    tab.goto(path.as_uri())
    tab.wait_for_function(
        "() => typeof network !== 'undefined' && network.body"
        " && Object.keys(network.getPositions()).length > 0",
        timeout=30_000,
    )
    drawn = tab.evaluate("""() => ({
        nodes: nodes.length, edges: edges.length,
        canvas: document.querySelector('#mynetwork canvas')?.width || 0,
        placed: Object.keys(network.getPositions()).length})""")
    assert drawn["nodes"] == expected_nodes and drawn["edges"] == expected_edges
    assert drawn["placed"] == expected_nodes and drawn["canvas"] > 0
    assert traffic.failed == [] and traffic.aborted == [] and traffic.errors == []


def test_hostile_model_text_shows_as_text_in_the_tooltip(page: tuple[Any, Any], tmp_path: Path) -> None:
    tab, traffic = page
    store = GraphStore()
    g = store.create_graph(HOSTILE, "pulse", "autonomous")
    store.add_answer(g["graph_id"], g["root_node_id"], HOSTILE, sub_questions=[HOSTILE])
    ex = Exploration(store, g["graph_id"], SimulatedLLM())
    path = ex.to_html(tmp_path / "hostile.html")
    tab.goto(path.as_uri())
    tab.wait_for_function("() => typeof network !== 'undefined' && network.body", timeout=30_000)
    tab.evaluate("() => network.setOptions({physics: {enabled: false}})")  # the node stays where we hover
    root = g["root_node_id"]
    at = tab.evaluate(f"""() => {{
        const box = document.querySelector('#mynetwork').getBoundingClientRect();
        const p = network.canvasToDOM(network.getPositions(['{root}'])['{root}']);
        return {{x: box.left + p.x, y: box.top + p.y}}; }}""")
    tab.mouse.move(at["x"], at["y"])
    tab.wait_for_function(
        "() => { const t = document.querySelector('.vis-tooltip');"
        " return t && t.style.visibility === 'visible'; }",
        timeout=10_000,
    )
    tooltip = tab.evaluate(
        "() => { const t = document.querySelector('.vis-tooltip');"
        " return {text: t.innerText, elements: t.querySelectorAll(':not(br)').length}; }"
    )
    assert "<img src=x" in tooltip["text"] and tooltip["elements"] == 0
    assert tab.evaluate("() => window.__pwned") is None
    assert tab.evaluate("() => document.querySelectorAll('img').length") == 0
    assert traffic.failed == [] and traffic.errors == []
    store.close()
