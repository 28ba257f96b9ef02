"""Download buttons in Voila, in a real browser: each click saves a file there, nothing on the server."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.browser.test_voila_app import voila
from tests.browser.tree_checks import low_text_contrast, screenshot

pytestmark = pytest.mark.browser

SEED = "Why do some cities grow faster than others?"
APP = f"""\
from IPython.display import display
from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.views import DownloadButtons

ex = Exploration.create({SEED!r}, intensity="pulse", llm=SimulatedLLM(seed=4))
ex.run(progress=False)
empty = Exploration.create("Nothing explored yet?", intensity="pulse", llm=SimulatedLLM())
display(DownloadButtons(ex))
display(DownloadButtons(empty, kinds=["csv", "markdown"]))
"""
STEM = re.compile(r"why-do-some-cities-grow-faster-than-others-g-[0-9a-f]+")
WIDGETS = ".fractal-downloads"


def download(tab: Any, widget: Any, label: str) -> tuple[str, bytes]:
    """Click ``label`` in ``widget`` and catch what the browser saves: its name and bytes."""
    with tab.expect_download(timeout=60_000) as caught:
        widget.get_by_role("button", name=label, exact=True).click()
    saved = caught.value
    assert saved.failure() is None
    return saved.suggested_filename, Path(saved.path()).read_bytes()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_each_button_saves_its_file_in_the_browser(page: tuple[Any, Any], tmp_path: Path, theme: str) -> None:
    tab, traffic = page
    with voila(tmp_path, APP, theme=theme) as url:
        tab.goto(url, timeout=90_000)
        tab.locator(f"{WIDGETS} button").nth(5).wait_for(timeout=90_000)
        explored, empty = tab.locator(WIDGETS).nth(0), tab.locator(WIDGETS).nth(1)
        assert explored.locator("button").all_inner_texts() == [
            "CSV",
            "Parquet",
            "Markdown report",
            "HTML page",
        ]
        before = sorted(p.name for p in tmp_path.iterdir())

        name, data = download(tab, explored, "CSV")
        assert re.fullmatch(rf"{STEM.pattern}-syntheses\.csv", name), name
        frame = pd.read_csv(io.BytesIO(data))
        assert list(frame.columns[:4]) == ["node_id", "depth", "question", "synthesis"] and len(frame) > 3
        assert frame.loc[0, "question"] == SEED and frame.loc[0, "depth"] == 0
        status = explored.locator(".fractal-downloads-status")
        assert status.inner_text().startswith(name) and status.get_attribute("data-state") == "ok"

        name, data = download(tab, explored, "Parquet")
        assert re.fullmatch(rf"{STEM.pattern}-syntheses\.parquet", name), name
        assert data[:4] == b"PAR1" and data[-4:] == b"PAR1"
        table = pq.read_table(io.BytesIO(data))
        assert table.num_rows == len(frame) and table.column("node_id").to_pylist() == list(frame["node_id"])

        name, data = download(tab, explored, "Markdown report")
        assert re.fullmatch(rf"{STEM.pattern}-report\.md", name), name
        report = data.decode("utf-8")
        assert report.startswith(f"### {SEED}\n") and "**Synthesis chain**" in report
        assert all(f"\\[{node}\\]" in report for node in frame["node_id"]), "each synthesis names its node"

        name, data = download(tab, explored, "HTML page")
        assert re.fullmatch(rf"{STEM.pattern}-page\.html", name), name
        page_text = data.decode("utf-8")
        assert page_text.startswith("<!doctype html>") and f"<h1>{SEED}</h1>" in page_text
        assert (
            all(node in page_text for node in frame["node_id"])
            and "https://" not in page_text.split("<script>")[0]
        )

        # Nothing explored: the report comes; the syntheses are refused beside the buttons.
        name, data = download(tab, empty, "Markdown report")
        assert name.startswith("nothing-explored-yet-g-") and data.decode("utf-8").startswith(
            "### Nothing explored"
        )
        empty.get_by_role("button", name="CSV", exact=True).click()
        refused = empty.locator(".fractal-downloads-status[data-state='error']")
        refused.wait_for(timeout=30_000)
        assert "no question is synthesized yet" in refused.inner_text()
        assert empty.get_by_role("button", name="CSV", exact=True).is_enabled(), "the button is back"

        assert sorted(p.name for p in tmp_path.iterdir()) == before, "nothing written on the server"
        assert (
            low_text_contrast(tab, f"{WIDGETS} button, .fractal-downloads-status, .fractal-downloads-title")
            == []
        )
        explored.locator("button").first.hover()
        screenshot(tab, f"voila-downloads-{theme}")
    assert traffic.aborted == [] and traffic.failed == [] and traffic.errors == []
