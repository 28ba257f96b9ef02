"""Results render model text as data: escaped in HTML and Markdown, never executed."""

from __future__ import annotations

from fractal_nb import FractalResult
from fractal_nb.results import ChainLink

HOSTILE = '<script>alert("x")</script> **bold** [link](javascript:x) # heading'


def result() -> FractalResult:
    return FractalResult(
        graph_id="g-1", seed=HOSTILE, status="completed", summary=HOSTILE, node_count=3,
        edge_count=2, max_depth=1, convergence_count=0, contradiction_count=1,
        synthesis_chain=[ChainLink("n-1", 0, HOSTILE, HOSTILE), ChainLink("n-2", 1, "Q?", "A.")],
        findings=[{"finding": HOSTILE, "confidence": "high"}], gaps=[HOSTILE],
    )


def test_html_escapes_model_text() -> None:
    html = result()._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert html.count("&lt;script&gt;") == 6  # seed, summary, finding, gap, chain question + synthesis


def test_markdown_escapes_model_text() -> None:
    md = result()._repr_markdown_()
    assert "<script>" not in md
    assert "**bold**" not in md and "\\*\\*bold\\*\\*" in md
    assert "[link]" not in md and "\\# heading" in md
    assert md.splitlines()[0].startswith("### ")


def test_to_dict_is_json_ready() -> None:
    import json

    data = json.loads(json.dumps(result().to_dict()))
    assert data["synthesis_chain"][1] == {"node_id": "n-2", "depth": 1, "question": "Q?", "synthesis": "A."}
