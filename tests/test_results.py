"""Results render model text as data: escaped in HTML and Markdown, never executed.

Covers: engine/gaps.py, engine/result_of.py, results/result.py.
"""

from __future__ import annotations

from fractal_nb import FractalResult
from fractal_nb.engine.gaps import gap_text
from fractal_nb.results.result import ChainLink

HOSTILE = '<script>alert("x")</script> **bold** [link](javascript:x) # heading'


def result() -> FractalResult:
    return FractalResult(
        graph_id="g-1",
        seed=HOSTILE,
        status="completed",
        summary=HOSTILE,
        node_count=3,
        edge_count=2,
        max_depth=1,
        convergence_count=0,
        contradiction_count=1,
        synthesis_chain=[ChainLink("n-1", 0, HOSTILE, HOSTILE), ChainLink("n-2", 1, "Q?", "A.")],
        findings=[{"finding": HOSTILE, "confidence": "high"}],
        gaps=[HOSTILE],
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
    assert data["synthesis_chain"][1] == {
        "node_id": "n-2",
        "depth": 1,
        "question": "Q?",
        "synthesis": "A.",
        "degraded": False,
        "weak": [],
    }


def degraded() -> FractalResult:
    base = result()
    return FractalResult(
        **{
            **base.__dict__,
            "synthesis_chain": [
                ChainLink("n-1", 0, "Q?", "joined", degraded=True),
                ChainLink("n-2", 1, "Q2?", "A."),
            ],
            "replies": {"accepted": 7, "corrected": 2, "rejected": 3, "failed": 1},
            "degraded": True,
            "degraded_reasons": [f"3 of 12 replies refused {HOSTILE}", "the root failed"],
        }
    )


def test_a_degraded_result_says_so_in_markdown_and_html() -> None:
    md = degraded()._repr_markdown_()
    assert "**Model replies:** 7 accepted, 2 corrected, 3 rejected, 1 failed" in md
    [line] = [x for x in md.splitlines() if x.startswith("**Degraded result:**")]
    assert "<script>" not in line and "the root failed" in line
    assert "- **Q?** *(degraded)* joined" in md and "*(degraded)* A." not in md
    page = degraded()._repr_html_()
    assert "<p class='fractal-degraded'" in page and "<script>" not in page
    assert "7 accepted, 2 corrected, 3 rejected, 1 failed" in page
    assert page.count("<i>(degraded)</i>") == 1
    assert degraded().to_dict()["degraded"] is True


def test_a_sound_result_shows_no_degraded_line() -> None:
    assert "Degraded" not in result()._repr_markdown_() and "fractal-degraded" not in result()._repr_html_()


# -- gaps read from the graph as it is ------------------------------------------------------------


def test_a_resumed_and_finished_question_is_no_gap() -> None:
    from fractal_nb import Exploration, SimulatedLLM
    from tests.engine.test_runs import FAST

    seed = "Why do some cities grow faster than others?"
    with Exploration.create(seed, intensity="explore", llm=SimulatedLLM(seed=4), clock=FAST) as ex:
        assert ex.run(1, progress=False) == "budget_exhausted"  # one worker: the circuit breaker
        gaps = ex.gaps()
        cut = gaps[gaps["kind"] != "unknown"]  # the unknowns the answers named are gaps too
        assert len(cut) and set(cut["kind"]) == {"unexplored"}
        assert all(d == "budget_exhausted: circuit breaker" for d in cut["detail"])
        outcome = "budget_exhausted"
        while outcome == "budget_exhausted":
            ex.new_budget()  # budget_exhausted is terminal for resume: a new turn goes on
            outcome = str(ex.run(1, progress=False))
        assert outcome == "all_complete"
        nodes = ex.store.get_snapshot(ex.graph_id)["nodes"]
        assert sum(bool(n["metadata"].get("budget_exhausted")) for n in nodes) >= len(cut)  # stale marks
        assert set(ex.gaps()["kind"]) == {"unknown"}, "a resumed and finished question is no gap"
        unknowns = [gap_text(row) for row in ex.gaps().to_dict("records")]
        assert ex.preview().gaps == unknowns and ex.harvest().gaps == unknowns


def test_gaps_name_their_real_reason() -> None:
    from fractal_nb import Exploration, SimulatedLLM
    from tests.engine.test_runs import FAST

    with Exploration.create(
        "Why?", intensity="pulse", checkpoint="depth:1", llm=SimulatedLLM(seed=7), clock=FAST
    ) as ex:
        ex.run(progress=False)
        gated = set(ex.gates["node_id"])
        pruned = ex.prune(sorted(gated)[0])["node_id"]
        result = ex.harvest(finish=True)
        rows = {r["node_id"]: r for r in result.gap_rows}
        assert rows[pruned]["kind"] == "pruned"
        assert {rows[n]["kind"] for n in gated - {pruned}} == {"gated"}
        assert not any("budget" in g for g in result.gaps), result.gaps
        assert (
            sum(g.startswith("unexplored (gated: never approved): ") for g in result.gaps) == len(gated) - 1
        )


def test_a_weak_root_is_named_among_the_degraded_reasons() -> None:
    from fractal_nb import Exploration, GraphStore, SimulatedLLM
    from tests.engine.test_runs import FAST
    from tests.views.failing_graph import failing_graph

    store = GraphStore()
    built = failing_graph(store)
    with Exploration(store, built["graph_id"], SimulatedLLM(failure_rate=1.0), clock=FAST) as ex:
        result = ex.harvest(finish=True)  # every call fails: the root's synthesis is joined
        assert result.synthesis_chain[0].degraded and result.degraded
        assert "the root's synthesis is not the model's" in "; ".join(result.degraded_reasons)
        assert [r["kind"] for r in result.gap_rows].count("failed") == 2


def cited_result() -> FractalResult:
    """A result of a graph with sources: a supported finding, an unsupported one, hostile text in each."""
    quote = {"source": "notes/<a>.md", "line_start": 3, "line_end": 4, "quote": HOSTILE}
    return FractalResult(
        graph_id="g-1",
        seed="Why?",
        status="completed",
        summary="A summary.",
        node_count=3,
        edge_count=2,
        max_depth=1,
        convergence_count=0,
        contradiction_count=0,
        findings=[
            {
                "finding": HOSTILE,
                "confidence": "high",
                "support": "supported",
                "citations": [{**quote, "status": "verified"}],
            }
        ],
        has_sources=True,
        unsupported_findings=[
            {
                "finding": "An uncited " + HOSTILE,
                "confidence": "low",
                "support": "unsupported",
                "citations": [
                    {**quote, "status": "misquoted", "detail": "the quote is not in <b>those</b> lines"}
                ],
            }
        ],
        support_counts={"supported": 1, "unsupported": 1},
        answer_support={"supported": 2, "unsupported": 1, "no_sources": 0},
    )


def test_citations_and_unsupported_findings_are_shown_escaped() -> None:
    html, md = cited_result()._repr_html_(), cited_result().to_markdown()
    assert "<script>" not in html and "<b>those</b>" not in html and "notes/<a>.md" not in html
    assert html.count("&lt;script&gt;") == 4  # each finding, each quote
    assert (
        "notes/&lt;a&gt;.md:L3-L4" in html
        and "misquoted: the quote is not in &lt;b&gt;those&lt;/b&gt; lines" in html
    )
    assert "1 supported finding(s), 1 unsupported; answers: 2 supported, 1 unsupported" in html
    assert "fractal-unsupported" in html and "Unsupported findings" in html
    assert "<script>" not in md and "**Unsupported findings**" in md
    assert "1 supported finding(s), 1 unsupported; answers: 2 supported, 1 unsupported" in md
    assert md.index("**Findings**") < md.index("**Unsupported findings**")
    unsupported = md.split("**Unsupported findings**")[1]
    assert "*(unsupported)*" in unsupported and "misquoted" in unsupported
    assert cited_result().to_dict()["unsupported_findings"][0]["support"] == "unsupported"


def test_a_result_without_sources_shows_no_evidence_line() -> None:
    assert "Evidence" not in result().to_markdown() and "Evidence" not in result()._repr_html_()


def test_each_finding_and_chain_entry_links_to_its_node_escaped() -> None:
    hostile_id = 'n-"><script>x</script>'
    linked = FractalResult(
        **{
            **result().__dict__,
            "findings": [{"finding": "F.", "confidence": "high", "node_id": "n-2"}],
            "unsupported_findings": [{"finding": "U.", "confidence": "low", "node_id": hostile_id}],
        }
    )
    html = linked._repr_html_()
    link = (
        '<a class="fractal-node-link" href="#fractal-node-{0}" data-fractal-node="{0}" '
        'title="Show this node in the tree"'
    )
    assert html.count('class="fractal-node-link"') == 4, "two findings and two chain entries"
    assert link.format("n-2") in html and link.format("n-1") in html
    escaped = "n-&quot;&gt;&lt;script&gt;x&lt;/script&gt;"
    assert link.format(escaped) in html and "<script>x" not in html
    assert html.index("F. (high)") < html.index(link.format("n-2")) < html.index("U. (unsupported)")
    md = linked.to_markdown()
    assert "- F. *(high)* \\[n-2\\]" in md and "- **Q?** A. \\[n-2\\]" in md
    assert "<script>" not in md
    assert (
        'class="fractal-node-link"'
        not in FractalResult(**{**result().__dict__, "synthesis_chain": []})._repr_html_()
    ), "a finding without a node has no link"
