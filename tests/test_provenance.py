"""Each finding names the node it rests on (results/provenance.py; docs/architecture/faces.md, "Evidence in
the faces").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fractal_nb import Exploration, GraphStore, SimulatedLLM, Snippet
from fractal_nb.results.provenance import Provenance, with_nodes
from tests.views.cited_graph import cited_graph


def question(
    node_id: str, depth: int, parent: str | None, text: str, synthesis: str | None = None, **meta: Any
) -> dict[str, Any]:
    metadata = {**meta, **({"synthesis": synthesis} if synthesis is not None else {})}
    status = "synthesized" if synthesis is not None else "open"
    return {
        "node_id": node_id,
        "node_type": "question",
        "depth": depth,
        "parent_id": parent,
        "text": text,
        "status": status,
        "metadata": metadata,
    }


def answer(
    node_id: str, question_id: str, *spans: tuple[str, int, int], status: str = "verified"
) -> dict[str, Any]:
    citations = [
        {"source": s, "line_start": a, "line_end": b, "quote": "q", "status": status} for s, a, b in spans
    ]
    return {
        "node_id": node_id,
        "node_type": "answer",
        "depth": 0,
        "parent_id": question_id,
        "text": "an answer",
        "status": "answered",
        "metadata": {"citations": citations},
    }


def graph() -> list[dict[str, Any]]:
    """root → a-root → q1 (→ a-q1 → q11), q2; q1 and q11 cite the same lines of notes."""
    return [
        question("root", 0, None, "Why do rivers flood?", "Rain and soil decide floods."),
        answer("a-root", "root", ("notes", 1, 2)),
        question("q1", 1, "a-root", "What does rain do?", "Heavy rain saturates soil quickly."),
        question("q2", 1, "a-root", "Which rivers flood most?", "Rivers in narrow valleys flood most."),
        answer("a-q1", "q1", ("notes", 10, 12)),
        question("q11", 2, "a-q1", "How fast does soil saturate?", "Clay saturates in hours."),
        answer("a-q11", "q11", ("notes", 10, 12), ("notes", 30, 31)),
        answer("a-q2", "q2", ("notes", 40, 40), status="misquoted"),
    ]


def node_of(
    finding: str, *spans: tuple[str, int, int], nodes: list[dict[str, Any]] | None = None
) -> str | None:
    cites = [{"source": s, "line_start": a, "line_end": b, "quote": "q"} for s, a, b in spans]
    return Provenance(nodes or graph()).node_of({"finding": finding, "citations": cites})  # type: ignore[arg-type]


def test_a_cited_finding_rests_on_the_question_whose_answer_verified_that_citation() -> None:
    assert node_of("anything", ("notes", 30, 31)) == "q11"
    assert node_of("anything", ("notes", 10, 12)) == "q1", "two questions verified it: the shallower"
    assert node_of("anything", ("notes", 1, 2)) == "root"
    assert node_of("anything", ("notes", 11, 11)) == "q1", "no same span: lines that overlap one"
    assert node_of("anything", ("notes", 31, 35), ("notes", 30, 31)) == "q11", "a same span before an overlap"
    # A citation no answer verified (misquoted there, another source) says nothing: the words decide.
    assert node_of("narrow valleys", ("notes", 40, 40)) == "q2"
    assert node_of("narrow valleys", ("other", 10, 12)) == "q2"


def test_an_uncited_finding_rests_on_the_chain_question_sharing_most_content_words() -> None:
    assert node_of("Clay soil saturates within hours") == "q11"
    assert node_of("Narrow valleys make rivers flood") == "q2"
    # "soil" and "saturate" are shared by q1 ("saturates soil") and q11 ("soil saturate"): the shallower.
    assert node_of("soil saturates") == "q1"
    assert node_of("Nothing in common whatsoever") == "root", "no shared word: the root"
    tied = graph() + [question("q3", 1, "a-root", "What do dams hold?", "Dams hold water back.")]
    tied[0] = question("root", 0, None, "Why do rivers flood?", "Floods follow rain.")
    assert node_of("dams hold water", nodes=tied) == "q3"
    level = graph() + [question("q3", 1, "a-root", "Narrow valleys?", "Valleys narrow.")]
    assert node_of("narrow valleys", nodes=level) == "q2", "same words, same depth: the first in tree order"


def test_a_joined_synthesis_is_no_material_and_a_superseded_node_is_not_the_graphs() -> None:
    nodes = graph()
    nodes[5] = question("q11", 2, "a-q1", "How fast?", "Clay saturates in hours.", synthesis_failed=True)
    assert node_of("Clay in hours", nodes=nodes) == "root"
    nodes = graph()
    nodes[6] = {**nodes[6], "superseded_turn": 2}
    assert node_of("anything", ("notes", 30, 31), nodes=nodes) == "root"


def test_a_track_finding_rests_on_its_track_and_a_stored_node_is_kept_when_it_is_one() -> None:
    nodes = graph()
    nodes[3] = question(
        "q2",
        1,
        "a-root",
        "Valleys: which",
        "s",
        track={"name": "Valleys"},
        findings=[{"finding": "Rain  decides floods.", "citations": []}],
    )
    assert node_of("rain decides floods", ("notes", 1, 2), nodes=nodes) == "q2", (
        "the track, before the citation"
    )
    kept = with_nodes(
        [{"finding": "x", "node_id": "q11"}, {"finding": "Rain", "node_id": "n-gone"}, {"finding": "Rain"}],
        nodes,  # type: ignore[arg-type]
    )
    assert [f["node_id"] for f in kept] == ["q11", "root", "root"]
    assert Provenance([]).node_of({"finding": "x"}) is None, "no root, no node"


@pytest.mark.parametrize("strategy", ["fractal", "tracks"])
def test_a_harvest_keeps_each_findings_node_and_every_face_reads_it(strategy: str) -> None:
    text = "\n".join(f"Line {i}: cities grow where jobs, water and trade routes meet." for i in range(60))
    llm = SimulatedLLM()
    with Exploration.create(
        "Why do cities grow?",
        intensity="pulse",
        llm=llm,
        sources=[Snippet(text, name="notes")],
        strategy=strategy,
    ) as ex:
        ex.run(progress=False)
        result = ex.harvest()
        nodes = {n["node_id"]: n for n in ex.store.get_snapshot(ex.graph_id)["nodes"]}
        assert result.findings
        for finding in result.findings:
            node = nodes[finding["node_id"]]
            assert node["node_type"] == "question"
            if strategy == "tracks":
                assert "track" in node["metadata"], "a track's finding rests on its track"
            else:
                spans = {(c["line_start"], c["line_end"]) for c in finding["citations"]}
                cited = {
                    (c["line_start"], c["line_end"])
                    for n in nodes.values()
                    if n["node_type"] == "answer" and n["parent_id"] == node["node_id"]
                    for c in n["metadata"].get("citations") or []
                }
                assert spans & cited, "the question whose answer verified its citation"
        stored = ex.store.get_graph(ex.graph_id)["metadata"]["harvest"]["findings"]
        assert [f["node_id"] for f in stored] == [f["node_id"] for f in result.findings], (
            "kept with the harvest"
        )
        assert [f["node_id"] for f in ex.preview().findings] == [f["node_id"] for f in result.findings]
        assert [f["node_id"] for f in ex.evidence()["findings"]] == [f["node_id"] for f in result.findings]


def test_a_harvest_stored_without_nodes_is_given_them_when_read(tmp_path: Path) -> None:
    store = GraphStore()
    built = cited_graph(store, tmp_path)
    with Exploration(store, built["graph_id"], SimulatedLLM()) as ex:
        evidence = ex.evidence()
        # "Bearings fail first." is the track's own finding; the misquoted one shares no word: the root.
        assert [f["node_id"] for f in evidence["findings"]] == [built["track"]]
        assert [f["node_id"] for f in evidence["unsupported_findings"]] == [built["root"]]
        assert [f["node_id"] for t in evidence["tracks"] for f in t["findings"]] == [built["track"]]
        assert ex.inspect(built["track"])["evidence"]["findings"][0]["node_id"] == built["track"]
