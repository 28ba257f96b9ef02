"""The exported page's own downloads (issue 38): the tables it carries, inert, named as the notebook's."""

from __future__ import annotations

import json
from pathlib import Path

from fractal_nb import Exploration, GraphStore, SimulatedLLM
from fractal_nb.views import DownloadButtons
from fractal_nb.views.html_export import downloads_spec, render_html
from tests.engine.test_runs import FAST
from tests.views.failing_graph import HOSTILE, failing_graph

SPEC_BLOCK = '<script type="application/json" id="fractal-downloads-data">'


def carried(page: str) -> tuple[str, dict[str, object]]:
    """The page's downloads block: its text as written, and what it holds."""
    block = page.split(SPEC_BLOCK, 1)[1].split("</script>", 1)[0]
    return block, json.loads(block)


def test_the_page_carries_the_chain_the_gaps_and_the_report(fresh_store: GraphStore, tmp_path: Path) -> None:
    built = failing_graph(fresh_store)
    ex = Exploration(fresh_store, built["graph_id"], SimulatedLLM(), clock=FAST)
    result = ex.preview()
    page = ex.to_html(tmp_path / "failed.html").read_text()
    block, spec = carried(page)
    seed = fresh_store.get_graph(ex.graph_id)["seed"]
    items = fresh_store.get_question_items(ex.graph_id)
    assert spec == json.loads(json.dumps(downloads_spec(items, heading=seed, result=result)))
    tables = spec["tables"]
    assert isinstance(tables, dict)
    assert tables["gaps"] == {"columns": list(ex.gaps().columns), "rows": ex.gaps().to_dict("records")}
    syntheses = tables["syntheses"]
    assert [row["node_id"] for row in syntheses["rows"]] == [link.node_id for link in result.synthesis_chain]
    joined = next(row for row in syntheses["rows"] if row["node_id"] == built["weak"])
    assert joined["degraded"] is True and joined["synthesis"].startswith("[model synthesis failed")
    assert spec["report"] == ex.report() and spec["questions"] == 5
    assert "<" not in block and ">" not in block and "&" not in block, "nothing in the block is markup"
    assert f"RateLimitError: 429 Too Many Requests {HOSTILE}" in [
        row["detail"] for row in tables["gaps"]["rows"]
    ]
    # The files are named as the notebook's downloads name them (views/downloads.py).
    assert f"{spec['stem']}-syntheses.csv" == DownloadButtons(ex).build("csv").name


def test_the_bar_sits_under_the_title_and_its_script_writes_no_html(fresh_store: GraphStore) -> None:
    g = fresh_store.create_graph(HOSTILE, "pulse", "autonomous")
    page = render_html(fresh_store.get_question_items(g["graph_id"]), heading=HOSTILE)
    header = page.split("<header>", 1)[1].split("</header>", 1)[0]
    assert '<nav id="fractal-downloads" aria-label="Download the graph"></nav>' in header
    script = page.split(SPEC_BLOCK, 1)[1].split('<script type="module">', 1)[1]
    assert "offerDownloads(" in script and "innerHTML" not in script and "insertAdjacentHTML" not in script
    assert ".fractal-downloads-group" in page.split("</style>", 1)[0], "the bar's own style is inlined"


def test_without_a_result_the_page_offers_its_questions_only(fresh_store: GraphStore) -> None:
    g = fresh_store.create_graph("Why do tides turn?", "pulse", "autonomous")
    fresh_store.add_answer(g["graph_id"], g["root_node_id"], "The moon.", sub_questions=["Why twice?"])
    items = fresh_store.get_question_items(g["graph_id"])
    _, spec = carried(render_html(items, heading="Why do tides turn?"))
    assert spec == {
        "stem": f"why-do-tides-turn-{g['graph_id']}",
        "questions": 2,
        "tables": {},
        "report": None,
    }
