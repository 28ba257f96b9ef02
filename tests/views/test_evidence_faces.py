"""Evidence in the faces: the Inspector, the exported page, the live view's feed and ``fractal-nb report``.

Each shows a citation as ``name:L12-L14`` with the status the store's check gave
it, its quote and the stored lines (escaped), and a JupyterLab link only for a
file under the root of the Jupyter server that started the kernel.

Covers: views/citations_html.py, views/inspector_html.py, views/lab_link.py.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from fractal_nb import Exploration, GraphStore, SimulatedLLM
from fractal_nb.cli.exit_codes import EXIT_OK
from fractal_nb.cli.main import main
from fractal_nb.views.citations_html import evidence_html, finding_html
from fractal_nb.views.graph_feed import GraphFeed, snapshot_at
from fractal_nb.views.html_export import render_html
from fractal_nb.views.inspector_html import inspector_html
from fractal_nb.views.lab_link import LabServer, lab_server
from tests.engine.test_runs import FAST
from tests.views.cited_graph import BAD_SOURCE, HOSTILE, MISQUOTE, NOTES, CitedGraph, cited_graph

ESCAPED = "&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;"


@pytest.fixture
def cited(tmp_path: Path) -> Iterator[tuple[Exploration, CitedGraph]]:
    store = GraphStore()
    built = cited_graph(store, tmp_path / "root")
    with Exploration(store, built["graph_id"], SimulatedLLM(), clock=FAST) as ex:
        yield ex, built


def serve_from(monkeypatch: pytest.MonkeyPatch, runtime: Path, root: Path, base_url: str = "/") -> None:
    """This process as a kernel of a Jupyter server rooted at ``root``: its info file, its pid in the env."""
    runtime.mkdir(parents=True, exist_ok=True)
    (runtime / f"jpserver-{os.getpid()}.json").write_text(
        json.dumps({"root_dir": str(root), "base_url": base_url, "pid": os.getpid()}), encoding="utf-8"
    )
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("JPY_PARENT_PID", str(os.getpid()))


def test_the_inspector_shows_each_citation_with_its_status_quote_and_stored_lines(
    cited: tuple[Exploration, CitedGraph], monkeypatch: pytest.MonkeyPatch
) -> None:
    ex, built = cited
    monkeypatch.delenv("JPY_PARENT_PID", raising=False)
    page = inspector_html(ex.inspect(built["root"]))
    for label, status in [
        (f"{NOTES}:L2-L3", "verified"),
        (f"{NOTES}:L4", "misquoted"),
        (f"{NOTES}:L90-L95", "no such lines"),
        (f"{ESCAPED}.md:L1", "no such source"),
    ]:
        assert label in page, label
        assert f">{status}</span>" in page, status
    assert "<pre class='fractal-lines'" in page and "2  Most failures start at the bearings," in page
    assert "4  Overloads matter less than upkeep." in page, "a misquote shows the lines it misquotes"
    assert "Citations (4):" in page and "fractal-unsupported" in page
    assert HOSTILE not in page and MISQUOTE not in page and BAD_SOURCE not in page
    assert "<a " not in page, "outside a Jupyter server there is no link: the path is shown"
    bare = inspector_html(ex.inspect(built["bare_question"]))
    assert ">unsupported</span>" in bare and "Citations" not in bare, (
        "an answer citing nothing is unsupported"
    )
    answer = inspector_html(ex.inspect(built["cited_answer"]))
    assert "Citations (4):" in answer, "an answer node shows its own citations"
    track = inspector_html(ex.inspect(built["track"]))
    assert f"<b>Track:</b> Loads {ESCAPED}" in track and "Findings of the track" in track
    assert ">supported</span>" in track and ">verified</span>" in track


def test_a_citation_links_to_its_file_in_jupyterlab_only_under_the_server_root(
    cited: tuple[Exploration, CitedGraph], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ex, built = cited
    serve_from(monkeypatch, tmp_path / "runtime", tmp_path, "/user/me/")
    page = inspector_html(ex.inspect(built["root"]))
    href = "href='/user/me/lab/tree/root/notes/bridges.md'"
    assert page.count(href) == 3, "each citation of the file links to it, whatever its status"
    assert "target='_blank'" in page and "Go to Line… lines 2-3" in page
    assert f"<code class='fractal-cite-name'>{ESCAPED}.md:L1</code>" in page, "no source: no file, no link"
    serve_from(monkeypatch, tmp_path / "runtime", tmp_path / "elsewhere")
    assert "<a " not in inspector_html(ex.inspect(built["root"])), "a file outside the root is only named"


def test_the_server_is_the_one_that_started_the_kernel(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("JPY_PARENT_PID", "1234567")
    assert lab_server() is None, "no info file of that server (Voila writes none): no link"
    monkeypatch.delenv("JPY_PARENT_PID")
    assert lab_server() is None
    serve_from(monkeypatch, tmp_path, tmp_path / "root")
    assert lab_server() == LabServer(tmp_path / "root", "/")
    (tmp_path / f"jpserver-{os.getpid()}.json").write_text("{not json", encoding="utf-8")
    assert lab_server() is None


@pytest.mark.parametrize(
    ("location", "href"),
    [
        ("/srv/work/notes/a b#1.md", "/lab/tree/notes/a%20b%231.md"),
        ("/srv/work/../work/notes/x.md", "/lab/tree/notes/x.md"),
        ("/srv/work/.git/config", None),
        ("/srv/work", None),
        ("/srv/other/x.md", None),
        ("/srv/work/../other/x.md", None),
    ],
)
def test_lab_hrefs_quote_the_path_and_refuse_what_lab_cannot_open(location: str, href: str | None) -> None:
    assert LabServer(Path("/srv/work")).href(location) == href


def test_a_file_changed_on_disk_is_marked(cited: tuple[Exploration, CitedGraph]) -> None:
    ex, built = cited
    assert "the file changed since it was added" not in inspector_html(ex.inspect(built["root"]))
    built["file"].write_text("Another text entirely.\n", encoding="utf-8")
    page = inspector_html(ex.inspect(built["root"]))
    assert page.count(">the file changed since it was added</span>") == 3
    assert "2  Most failures start at the bearings," in page, "the lines shown are the ones added"
    built["file"].unlink()
    assert ex.evidence()["answers"][0]["citations"][0]["changed"], "a file gone counts as changed"


def test_the_exported_page_shows_the_evidence_escaped(cited: tuple[Exploration, CitedGraph]) -> None:
    ex, built = cited
    page = render_html(ex.store.get_question_items(ex.graph_id), heading="bridges", evidence=ex.evidence())
    evidence = page[page.index('<section class="fractal-evidence">') :]
    for part in (
        "<h3>Synthesis of the tracks</h3>",
        "<b>Unified:</b> Upkeep decides, not loads.",
        f"Loads matter on old spans {ESCAPED} <span",
        "(tracks: Loads, Upkeep)",
        "<b>Confidence:</b> medium · the tracks differ on old spans",
        "Who inspects the bearings?",
        "<h3>Tracks (2)</h3>",
        f"<b>Loads {ESCAPED}</b>",
        "<b>Findings:</b> 1 supported · 1 unsupported",
        "<h3>Findings with their citations</h3>",
        "<h3>Unsupported findings</h3>",
        f"Bridges never fail. {ESCAPED}",
        "<b>Answers:</b> 2 unsupported",
        f"{NOTES}:L2-L3",
        "2  Most failures start at the bearings,",
    ):
        assert part in evidence, part
    assert evidence.index("Bearings fail first.") < evidence.index("<h3>Unsupported findings</h3>")
    assert HOSTILE not in page and MISQUOTE not in page
    plain = render_html(ex.store.get_question_items(ex.graph_id), heading="bridges")
    assert '<section class="fractal-evidence">' not in plain, "no evidence given, no section"


def test_a_graph_without_evidence_has_no_evidence_section(tmp_path: Path) -> None:
    with Exploration.create("Why?", llm=SimulatedLLM(seed=1), clock=FAST) as ex:
        ex.run(progress=False)
        page = render_html(ex.store.get_question_items(ex.graph_id), heading="why", evidence=ex.evidence())
        assert ex.evidence()["answers"] == [] and '<section class="fractal-evidence">' not in page


def test_the_feed_marks_unsupported_answers_and_names_tracks(cited: tuple[Exploration, CitedGraph]) -> None:
    ex, built = cited
    feed = GraphFeed(ex.store, ex.graph_id)
    snapshot = feed.snapshot()
    items = {q["id"]: q for q in snapshot["questions"]}
    assert items[built["root"]]["unsupported"] == 1 and items[built["bare_question"]]["unsupported"] == 1
    assert items[built["root"]]["answers"][0]["support"] == "unsupported"
    assert items[built["track"]]["track"] == f"Loads {HOSTILE}" and items[built["track"]]["unsupported"] == 0
    assert items[built["root"]]["track"] is None
    assert snapshot["counts"]["unsupported"] == 2
    supported = ex.store.add_answer(
        ex.graph_id,
        built["track"],
        "Axles.",
        metadata={
            "citations": [{"source": NOTES, "line_start": 4, "line_end": 4, "quote": "Overloads matter less"}]
        },
    )
    delta = feed.delta()
    assert delta is not None
    [track] = [q for q in delta["questions"] if q["id"] == built["track"]]
    assert track["answers"][-1] == {
        "id": supported["answer"]["node_id"],
        "text": "Axles.",
        "support": "supported",
    }
    assert delta["counts"]["unsupported"] == 2 and track["track"] == f"Loads {HOSTILE}"
    past = snapshot_at(ex.store.get_state_at(ex.graph_id, feed.seq), "now")
    assert past["questions"] == feed.snapshot()["questions"], "the past at the last event is the live graph"


def test_report_prints_the_evidence_escaped(
    cited: tuple[Exploration, CitedGraph], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ex, built = cited
    path = tmp_path / "cited.duckdb"
    ex.store.close()
    store = GraphStore(str(path))
    rebuilt = cited_graph(store, tmp_path / "root2")
    store.close()
    assert main(["report", str(path)]) == EXIT_OK
    out = capsys.readouterr().out
    assert "## Evidence" in out and "Answers: 2 unsupported" in out
    assert "notes/bridges.md:L4 \\[misquoted\\]" in out and "Findings: 1 supported, 1 unsupported" in out
    assert "### Unsupported" in out and "Nuance (Loads, Upkeep)" in out and "Confidence: medium" in out
    assert HOSTILE not in out and "&lt;img" in out
    assert main(["report", str(path), "--json"]) == EXIT_OK
    document = json.loads(capsys.readouterr().out)
    statuses = [c["status"] for c in document["evidence"]["answers"][0]["citations"]]
    assert statuses == ["verified", "misquoted", "no_such_lines", "no_such_source"]
    assert (
        document["evidence"]["synthesis"]["confidence"] == "medium"
        and rebuilt["graph_id"] == document["graph_id"]
    )


def test_citations_an_outside_client_wrote_badly_are_left_out_not_errors() -> None:
    from fractal_nb.results.evidence import cited_lines, findings_shown

    store = GraphStore()
    gid = store.create_graph("Why?", "explore", "autonomous")["graph_id"]
    raw = [
        "not a citation",
        {"source": 7, "line_start": 1, "line_end": 1},
        {"source": "a.md", "line_start": True, "line_end": 2},
        {"source": "a.md", "line_start": 1.5, "line_end": 2},
        {"source": "a.md", "line_start": " 3", "line_end": "4", "quote": "q"},
    ]
    [shown] = cited_lines(store, gid, raw, {})
    assert (shown["label"], shown["status"], shown["status_label"]) == (
        "a.md:L3-L4",
        "unchecked",
        "not checked",
    )
    assert shown["lines"] == [] and shown["location"] is None
    assert cited_lines(store, gid, {"not": "a list"}, {}) == []
    assert findings_shown(store, gid, [{"finding": ""}, "x", {"finding": "kept"}], {})[0]["finding"] == "kept"


def test_without_sources_an_answer_says_so_and_a_superseded_one_is_not_shown() -> None:
    store = GraphStore()
    g = store.create_graph("Why?", "explore", "autonomous")
    [seed] = store.add_answer(g["graph_id"], g["root_node_id"], "One way.", sub_questions=["How?"])[
        "sub_questions"
    ]
    store.add_answer(g["graph_id"], seed["node_id"], "Because.", metadata={"citations": []})
    with Exploration(store, g["graph_id"], SimulatedLLM(), clock=FAST) as ex:
        page = inspector_html(ex.inspect(seed["node_id"]))
        assert "fractal-no-sources" in page and ">no sources</span>" in page
        assert ex.evidence()["answer_support"] == {"no_sources": 1}
        ex.redecompose(seed["node_id"], hint="again")  # a later turn replaces its answer
        assert ex.evidence()["answers"] == [], "a superseded answer is not the graph's now"


def test_a_server_info_file_without_a_root_gives_no_server(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    serve_from(monkeypatch, tmp_path, tmp_path)
    (tmp_path / f"jpserver-{os.getpid()}.json").write_text(json.dumps({"root_dir": 3}), encoding="utf-8")
    assert lab_server() is None
    assert LabServer(tmp_path, "/", "ws://x").absolute("/lab/tree/a") is None
    monkeypatch.delenv("JUPYTER_RUNTIME_DIR")
    from fractal_nb.views.lab_link import _runtime_dir

    assert _runtime_dir().name == "runtime", "Jupyter's own runtime folder"


def test_report_says_a_changed_file(cited: tuple[Exploration, CitedGraph]) -> None:
    from fractal_nb.results.evidence import evidence_lines

    ex, built = cited
    built["file"].write_text("Another text.\n", encoding="utf-8")
    lines = evidence_lines(ex.evidence())
    assert any("\\[verified\\] (the file changed since it was added)" in line for line in lines)


def test_the_panel_shows_unsupported_answers_and_the_evidence_in_its_result_tab(
    cited: tuple[Exploration, CitedGraph],
) -> None:
    ex, built = cited
    view = ex.view()
    try:
        assert "2 unsupported answer(s)" in view.status_rows.counts.value
        view.report_button.click()
        view.refresh()
        result = view.result.value
        assert "<h3>Evidence</h3>" in result and "<h3>Synthesis of the tracks</h3>" in result
        assert "<h3>Unsupported findings</h3>" in result and f"{NOTES}:L4" in result
        assert HOSTILE not in result and ESCAPED in result
    finally:
        view.close()


def test_findings_tracks_and_cited_answers_link_to_their_nodes(cited: tuple[Exploration, CitedGraph]) -> None:
    ex, built = cited
    shown = evidence_html(ex.evidence(), None)
    page = render_html(
        ex.store.get_question_items(ex.graph_id), heading="b", result=ex.preview(), evidence=ex.evidence()
    )

    def link(node_id: str) -> str:
        return f'href="#fractal-node-{node_id}" data-fractal-node="{node_id}"'

    track_item = shown[shown.index("<li class='fractal-track-item'>") : shown.index("Upkeep</b>")]
    assert link(built["track"]) in track_item, "the track, and its finding, link to the track"
    findings = shown[
        shown.index("<ul class='fractal-findings'>") : shown.index("<h3>Unsupported findings</h3>")
    ]
    assert link(built["track"]) in findings, "the harvest's finding the track documented"
    unsupported = shown[shown.index("<ul class='fractal-unsupported-findings'>") :]
    assert link(built["root"]) in unsupported.split("<h3>")[0], (
        "no track, no answer's citation, no chain: the root"
    )
    answers = shown[shown.index("<ul class='fractal-cited-answers'>") :]
    assert link(built["root"]) in answers and link(built["bare_question"]) in answers
    assert page.count('class="fractal-node-link"') >= shown.count('class="fractal-node-link"')
    assert finding_html(ex.evidence()["findings"][0], None).count('class="fractal-node-link"') == 1
