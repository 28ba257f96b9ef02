"""Download buttons, headless: a view's request answered with the file's bytes in one buffer, or a refusal."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from fractal_nb import Exploration, InvalidInputError, SimulatedLLM
from fractal_nb.views import DownloadButtons
from fractal_nb.views.assets import STATIC
from fractal_nb.views.downloads import KINDS, file_stem
from tests.engine.test_runs import FAST

HOSTILE = 'Why do <img src=x onerror="window.__pwned=1"> cities / grow?'
Sent = list[tuple[dict[str, Any], list[bytes] | None]]


def capture(widget: DownloadButtons) -> Sent:
    sent: Sent = []
    widget.send = lambda content, buffers=None: sent.append((content, buffers))  # no kernel here
    return sent


def click(
    widget: DownloadButtons, sent: Sent, kind: str, request: int = 1
) -> tuple[dict[str, Any], bytes | None]:
    """What the view's click on ``kind`` gets back: the message and its buffer (None when refused)."""
    widget._on_view_message(widget, {"type": "download", "kind": kind, "request": request}, [])
    message, buffers = sent[-1]
    assert message["request"] == request
    return message, (buffers[0] if buffers else None)


def assert_same(read: pd.DataFrame, frame: pd.DataFrame) -> None:
    """The same table, a missing value being missing whichever way the file spells it (CSV: empty)."""

    def plain(f: pd.DataFrame) -> pd.DataFrame:
        return f.astype(object).where(f.notna(), None)

    pd.testing.assert_frame_equal(plain(read), plain(frame))


@pytest.fixture(scope="module")
def explored() -> Iterator[Exploration]:
    with Exploration.create(HOSTILE, intensity="pulse", llm=SimulatedLLM(seed=3), clock=FAST) as ex:
        ex.run(progress=False)
        yield ex


def test_csv_and_parquet_carry_the_syntheses_frame(explored: Exploration) -> None:
    widget = DownloadButtons(explored)
    sent = capture(widget)
    frame = explored.syntheses()
    assert len(frame) > 3
    message, data = click(widget, sent, "csv")
    assert data is not None and message["type"] == "file" and message["size"] == len(data)
    assert message["mime"].startswith("text/csv") and message["name"].endswith("-syntheses.csv")
    assert_same(pd.read_csv(io.BytesIO(data)), frame)
    message, data = click(widget, sent, "parquet", request=2)
    assert data is not None and data[:4] == b"PAR1" and data[-4:] == b"PAR1"
    assert message["name"].endswith("-syntheses.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(io.BytesIO(data)), frame)
    assert pq.read_table(io.BytesIO(data)).num_rows == len(frame)


def test_the_report_and_the_page_are_what_report_and_to_html_give(
    explored: Exploration, tmp_path: Any
) -> None:
    widget = DownloadButtons(explored)
    sent = capture(widget)
    message, data = click(widget, sent, "markdown")
    assert data is not None and data.decode("utf-8") == str(explored.report())
    assert message["name"].endswith("-report.md") and message["mime"].startswith("text/markdown")
    message, data = click(widget, sent, "html")
    assert data is not None and data.decode("utf-8") == explored.render_html()
    assert data == explored.to_html(tmp_path / "page.html").read_bytes(), "the page to_html writes"
    assert message["name"].endswith("-page.html") and message["mime"].startswith("text/html")
    assert "Why do &lt;img src=x" in data.decode("utf-8") and HOSTILE not in data.decode("utf-8")


def test_a_download_only_reads_the_graph() -> None:
    with Exploration.create("Why do tides turn?", intensity="pulse", llm=SimulatedLLM(), clock=FAST) as ex:
        ex.step(3)  # work left: report() shows it as it stands, a harvest would finish it
        status, events, calls = ex.status, len(ex.events()), len(ex.llm_calls())
        widget = DownloadButtons(ex)
        sent = capture(widget)
        for request, kind in enumerate(KINDS):
            message, _ = click(widget, sent, kind, request)
            assert message["type"] == "file", message
        assert (ex.status, len(ex.events()), len(ex.llm_calls())) == (status, events, calls)
        assert "harvest" not in ex.store.get_graph(ex.graph_id)["metadata"]


def test_an_empty_graph_or_a_closed_store_is_a_message_never_an_exception() -> None:
    ex = Exploration.create("Why do tides turn?", intensity="pulse", llm=SimulatedLLM(), clock=FAST)
    widget = DownloadButtons(ex)
    sent = capture(widget)
    for kind in ("csv", "parquet"):
        message, data = click(widget, sent, kind)
        assert data is None and message["type"] == "refused" and message["kind"] == kind
        assert "no question is synthesized yet" in message["message"]
    assert click(widget, sent, "markdown")[0]["type"] == "file", "the report of an empty graph says so"
    message, _ = click(widget, sent, "zip", 7)
    assert message == {
        "type": "refused",
        "request": 7,
        "kind": "zip",
        "message": "unknown download 'zip'; should be one of: csv, parquet, markdown, html",
    }
    widget._on_view_message(widget, "not a dict", [])
    widget._on_view_message(widget, {"type": "hello"}, [])
    widget._on_view_message(widget, {"type": "download", "kind": "csv", "request": "x"}, [])
    assert len(sent) == 5 and sent[-1][0]["request"] == 0, "a request that is no number is answered as 0"
    ex.close()
    message, data = click(widget, sent, "html")
    assert message["type"] == "refused" and data is None and message["message"]


def test_file_names_are_safe_and_name_the_graph() -> None:
    assert file_stem("g-0a1b", HOSTILE) == "why-do-img-src-x-onerror-window-pwned-1-cities-g-0a1b", (
        "cut between words"
    )
    assert (
        file_stem("g-0a1b", "Café? " * 30).startswith("cafe-cafe-")
        and len(file_stem("g-0a1b", "x" * 99)) < 60
    )
    assert file_stem("../../etc", "城市") == "etc"
    assert file_stem("", "") == "graph"
    for stem in (file_stem("g/1", HOSTILE), file_stem("g 1", "")):
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", stem), stem


def test_kinds_choose_the_buttons_and_are_checked(explored: Exploration) -> None:
    widget = DownloadButtons(explored, kinds=["markdown", "csv"])
    assert widget.kinds == ["markdown", "csv"] and widget.labels["markdown"] == "Markdown report"
    assert repr(widget) == f"<DownloadButtons {explored.graph_id} (markdown, csv)>"
    for bad in (["pdf"], ["csv", "csv"], [], "csv"):
        with pytest.raises(InvalidInputError, match="csv, parquet, markdown, html|string"):
            DownloadButtons(explored, kinds=bad)


def test_the_front_end_is_ours_writes_no_html_and_reads_both_themes() -> None:
    script = (STATIC / "downloads.js").read_text()
    style = (STATIC / "downloads.css").read_text()
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script and "https://" not in script
    assert "createObjectURL" in script and "revokeObjectURL" in script and ".download = " in script
    assert '[data-jp-theme-light="false"] .fractal-downloads' in style
    assert "var(--fractal-text)" in style and "--jp-ui-font-color0" in style
