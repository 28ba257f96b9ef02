"""to_html: one offline page (vis-network and our view inlined), no CDN, model text kept out of HTML.

Covers: views/assets.py.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fractal_nb import Exploration, GraphStore, InvalidInputError, SimulatedLLM
from fractal_nb.views.html_export import render_html
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
    assert "@version 9.1.2" in page and "createView(" in page, "vis-network and the view are inlined"
    assert all(node_id in page for node_id in nodes.node_id)
    assert page.count("<h1>") == 1 and "questions · " in page, "one styled title, with the counts"
    assert "convergence" in page or "contradiction" in page


def test_model_text_never_becomes_markup(fresh_store: GraphStore) -> None:
    g = fresh_store.create_graph(HOSTILE, "pulse", "autonomous")
    fresh_store.add_answer(g["graph_id"], g["root_node_id"], HOSTILE, sub_questions=[HOSTILE])
    page = render_html(fresh_store.get_question_items(g["graph_id"]), heading=HOSTILE)
    before, rest = page.split('<script type="application/json" id="fractal-data">')
    data, after = rest.split("</script>", 1)
    assert "<img src=x" not in before + after, "outside the JSON block, model text is escaped"
    assert "</" not in data, "nothing in the JSON block can end it"
    assert "&lt;img src=x" in before, "the heading is escaped"
    assert "\u200d" not in page, "model text is left as it is"
    assert "innerHTML" not in page.split('<script type="module">')[1], "our view never writes HTML"


def test_big_graphs_carry_every_question(fresh_store: GraphStore) -> None:
    gid = grow_graph(fresh_store, 2010)
    changes = fresh_store.get_changes(gid)
    page = render_html(fresh_store.get_question_items(gid), heading="big")
    questions = [n["node_id"] for n in changes["nodes"] if n["node_type"] == "question"]
    data = json.loads(page.split('id="fractal-data">', 1)[1].split("</script>", 1)[0])
    assert [q["id"] for q in data["questions"]] == questions


def test_bad_paths_are_refused_and_write_nothing(tmp_path: Path) -> None:
    with Exploration.create("Why?", intensity="pulse", llm=SimulatedLLM(), clock=FAST) as ex:
        with pytest.raises(InvalidInputError, match=".html"):
            ex.to_html(tmp_path / "graph.png")
        with pytest.raises(InvalidInputError, match="folder .*missing does not exist"):
            ex.to_html(tmp_path / "missing" / "graph.html")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (42, r"must be a file path \(str or Path\), not int: 42"),
        (None, "must be a file path .*, not None"),
        (b"graph.html", "must be a file path .*, not bytes: b'graph.html'"),
        ("gra\x00ph.html", "NUL character"),
    ],
    ids=["int", "None", "bytes", "nul"],
)
def test_a_non_path_is_refused_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: object, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with Exploration.create("Why?", intensity="pulse", llm=SimulatedLLM(), clock=FAST) as ex:
        with pytest.raises(InvalidInputError, match=message):
            ex.to_html(path)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_a_folder_as_the_page_or_a_file_as_its_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "graph.html").mkdir()
    (tmp_path / "graph.html" / "inside.txt").write_text("kept")
    (tmp_path / "notes.txt").write_text("kept")
    with Exploration.create("Why?", intensity="pulse", llm=SimulatedLLM(), clock=FAST) as ex:
        with pytest.raises(InvalidInputError, match="graph.html: is a directory; give a file inside it"):
            ex.to_html(tmp_path / "graph.html")
        with pytest.raises(InvalidInputError, match="notes.txt is a file, not a folder"):
            ex.to_html(tmp_path / "notes.txt" / "graph.html")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["graph.html", "inside.txt", "notes.txt"]
    assert (tmp_path / "notes.txt").read_text() == "kept"


_EXPORT_INTO = """
import sys
from fractal_nb import Exploration, InvalidInputError, SimulatedLLM
with Exploration.create("Why?", intensity="pulse", llm=SimulatedLLM()) as ex:
    try:
        ex.to_html(sys.argv[1])
    except InvalidInputError as exc:
        print(f"refused: {exc}")
    else:
        print("written")
"""


def test_a_folder_that_takes_no_new_files_is_refused_and_its_page_kept(tmp_path: Path) -> None:
    """A read-only folder: the export says so, leaves no partial file, and an older page stays as it was.

    Root writes anywhere, so as root the export runs without the capability that lets it
    (setpriv, from util-linux, drops it).
    """
    as_root = os.geteuid() == 0
    setpriv = shutil.which("setpriv")
    if as_root and setpriv is None:
        pytest.skip("as root this needs setpriv to drop CAP_DAC_OVERRIDE: apt-get install util-linux")
    folder = tmp_path / "locked"
    folder.mkdir()
    (folder / "graph.html").write_text("<p>the older page</p>")
    folder.chmod(0o555)
    drop = [str(setpriv), "--bounding-set=-dac_override", "--"] if as_root else []
    try:
        done = subprocess.run(
            [*drop, sys.executable, "-c", _EXPORT_INTO, str(folder / "graph.html")],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
    finally:
        folder.chmod(0o755)
    assert done.stdout.startswith(f"refused: cannot write {folder / 'graph.html'}: folder "), (
        done.stdout + done.stderr
    )
    assert "does not take new files (Permission denied); pass a path in a folder you can write" in done.stdout
    assert [p.name for p in folder.iterdir()] == ["graph.html"], "no partial file"
    assert (folder / "graph.html").read_text() == "<p>the older page</p>"


def test_a_page_is_replaced_whole(tmp_path: Path) -> None:
    (tmp_path / "graph.html").write_text("<p>the older page</p>")
    with Exploration.create("Why?", intensity="pulse", llm=SimulatedLLM(), clock=FAST) as ex:
        path = ex.to_html(tmp_path / "graph.html")
    assert path == tmp_path / "graph.html" and [p.name for p in tmp_path.iterdir()] == ["graph.html"]
    assert path.read_text().startswith("<!doctype html>") and "the older page" not in path.read_text()
    assert path.stat().st_mode & 0o777 == 0o666 & ~_umask(), "the page gets the usual permissions"


def _umask() -> int:
    done = subprocess.run(["sh", "-c", "umask"], capture_output=True, text=True, check=True)
    return int(done.stdout.strip(), 8)


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


def test_the_page_shows_the_degraded_warning_and_the_result_report_shows(
    fresh_store: GraphStore, tmp_path: Path
) -> None:
    from tests.views.failing_graph import failing_graph

    built = failing_graph(fresh_store)
    ex = Exploration(fresh_store, built["graph_id"], SimulatedLLM(), clock=FAST)
    result = ex.preview()
    page = ex.to_html(tmp_path / "failed.html").read_text()
    before, rest = page.split('<script type="application/json" id="fractal-data">')
    after = rest.split("</script>", 1)[1]
    warning = before.split('<p class="fractal-warning" role="alert">')[1].split("</p>")[0]
    assert "2 question(s) failed" in warning and "1 synthesis(es) failed" in warning
    assert (
        before.index('class="fractal-warning"')
        < before.index('id="fractal-view"')
        < before.index("<h2>Result</h2>")
    )
    assert result._repr_html_() in before, "the result as the panel's Result tab shows it"
    assert all(html.escape(gap, quote=True) in before for gap in result.gaps) and len(result.gaps) == 3
    assert "<img src=x" not in before + after, "model text and errors stay text"
    sound = fresh_store.create_graph("Why?", "pulse", "autonomous")
    clean = Exploration(fresh_store, sound["graph_id"], SimulatedLLM(), clock=FAST)
    assert 'class="fractal-warning"' not in clean.to_html(tmp_path / "sound.html").read_text()


def test_the_page_leads_with_the_conclusion_and_its_chain_and_folds_the_gaps(tmp_path: Path) -> None:
    """Issue 42: a graph cut short listed every gap between its conclusion and the chain of syntheses."""
    with Exploration.create("Why do tides turn?", intensity="pulse", llm=SimulatedLLM(seed=3)) as ex:
        ex.step(12)
        result = ex.preview()
        page = ex.to_html(tmp_path / "page.html").read_text(encoding="utf-8")
    assert result.gaps and result.synthesis_chain
    start = page.index('<section class="fractal-report">')
    report = page[start : page.index("</section>", start)]
    conclusion = report.index(html.escape(result.summary))
    chain = report.index("<details class='fractal-chain' open>")
    gaps = report.index("<details class='fractal-gaps'>")
    assert conclusion < chain < gaps, "the conclusion, then its chain, then the gaps"
    assert f"<b>Gaps</b> ({len(result.gaps)})</summary>" in report, "the gaps folded under their count"
    assert report.count("<b>Gaps</b>") == 1 and report.count("Synthesis chain") == 1, "each shown once"
    assert all(html.escape(gap) in report[gaps:] for gap in result.gaps)
