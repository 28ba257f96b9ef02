"""to_html: one offline page, pyvis in_line, no CDN, model text kept out of HTML; report()."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fractal_nb import Exploration, GraphStore, InvalidInputError, SimulatedLLM
from fractal_nb.views.html_export import render_html
from fractal_nb.views.network_style import EXPORT_PHYSICS_LIMIT
from tests.engine.test_runs import FAST
from tests.graph_builder import grow_graph

HOSTILE = '</script><img src=x onerror="window.__pwned=1"> a href="javascript:alert(1)"'


def test_page_is_offline_and_carries_every_node(tmp_path: Path) -> None:
    with Exploration.create(
        "Why do rivers meander?", intensity="explore", llm=SimulatedLLM(seed=3, link_rate=0.5), clock=FAST
    ) as ex:
        ex.run(progress=False)
        path = ex.to_html(tmp_path / "graph.html")
        page = path.read_text()
        nodes = ex.nodes()
    assert not re.search(r"\b(?:src|href)=\"(?:https?:)?//", page), "nothing is fetched from a CDN"
    assert "cdn.jsdelivr" not in page and "cdnjs" not in page
    assert "vis.Network(" in page and "@version 9.1.2" in page, "vis-network is inlined"
    assert all(node_id in page for node_id in nodes.node_id)
    assert '"physics": {"enabled": true' in page
    assert "convergence" in page or "contradiction" in page


def test_model_text_never_becomes_markup(fresh_store: GraphStore) -> None:
    g = fresh_store.create_graph(HOSTILE, "pulse", "autonomous")
    fresh_store.add_answer(g["graph_id"], g["root_node_id"], HOSTILE, sub_questions=[HOSTILE])
    page = render_html(fresh_store.get_changes(g["graph_id"]), heading=HOSTILE)
    assert "<img src=x" not in page and "</script><img" not in page
    assert "&lt;img src=x" in page, "the heading is escaped"
    assert "hre\\u200df" in page, "titles never say 'href', which would switch pyvis to innerHTML"
    assert "tooltip_link" not in page and "popup.innerHTML" not in page, (
        "pyvis's innerHTML tooltip path stays off"
    )


def test_big_graphs_are_laid_out_with_physics_off(fresh_store: GraphStore) -> None:
    gid = grow_graph(fresh_store, EXPORT_PHYSICS_LIMIT + 10)
    page = render_html(fresh_store.get_changes(gid), heading="big")
    assert '"physics": {"enabled": false' in page
    assert page.count('"x": ') > EXPORT_PHYSICS_LIMIT


def test_bad_paths_are_refused_and_write_nothing(tmp_path: Path) -> None:
    with Exploration.create("Why?", intensity="pulse", llm=SimulatedLLM(), clock=FAST) as ex:
        with pytest.raises(InvalidInputError, match=".html"):
            ex.to_html(tmp_path / "graph.png")
        with pytest.raises(InvalidInputError, match="folder .*missing does not exist"):
            ex.to_html(tmp_path / "missing" / "graph.html")
    assert list(tmp_path.iterdir()) == []


def test_report_is_markdown_of_the_result_as_it_stands() -> None:
    with Exploration.create(
        "Why do rivers meander?", intensity="pulse", llm=SimulatedLLM(seed=1), clock=FAST
    ) as ex:
        ex.run(progress=False)
        events = len(ex.events())
        look = ex.report()
        assert look == ex.preview().to_markdown() and "**Status:** active" in look
        assert len(ex.events()) == events and ex.status == "active"  # a look changes nothing
        result = ex.harvest()
        report = ex.report()
    assert report._repr_markdown_() == report == result.to_markdown()
    assert report.startswith("### Why do rivers meander?")
    assert "**Findings**" in report and "**Synthesis chain**" in report
    assert result.synthesis_chain[0].question in report.replace("\\", "")
