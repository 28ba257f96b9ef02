"""A run stuck behind a failed question, in Voila, in a real browser (issue 38).

The model (a local fake OpenAI-compatible server in this process, reached by the app's
kernel through the real ``openai`` client) cannot answer one seed question. The panel
says the run is stuck and why, the question a link that selects it in the tree; each of
the two buttons beside the message takes the graph to its end: Recover failed (once the
model can answer it) then Run, or Finish & harvest.

Screenshots go to ``$FRACTAL_NB_SCREENSHOTS`` (default ``screenshots/``) for a person to look at.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import guarded_page
from tests.browser.test_steering_app import outcome
from tests.browser.test_voila_app import REPO, attr, button, json_counts, voila, wait_for
from tests.browser.tree_checks import low_contrast, low_text_contrast, screenshot
from tests.llm.fake_openai import FakeOpenAI
from tests.views.test_control_panel_states import HOSTILE_QUESTION, SEED, PoisonedModel

pytestmark = pytest.mark.browser

# The graph test_control_panel_states.stuck_run builds, in the app's kernel, on the fake model at {base_url}.
STUCK_APP = """\
import sys
sys.path.insert(0, {repo!r})
from fractal_nb import Exploration, OpenAILLM
from tests.engine.test_runs import FAST

llm = OpenAILLM("fake", base_url={base_url!r}, api_key="x", timeout=5.0, max_retries=1)
ex = Exploration.create({seed!r}, intensity="pulse", llm=llm, clock=FAST)
ex.run(progress=False)
ex.view(height="420px")
"""
STATE = ".fractal-state .fractal-status"  # the panel's status line, its buttons beside it


def beside(tab: Any, label: str) -> Any:
    """The status line's own button labelled ``label`` (the top row has a Finish & harvest too)."""
    return tab.locator(
        ".fractal-state button.widget-button", has_text=re.compile(rf"^\s*{re.escape(label)}\s*$")
    )


@pytest.mark.parametrize(("theme", "way"), [("light", "Recover failed"), ("dark", "Finish & harvest")])
def test_a_stuck_run_says_why_and_each_way_on_ends_it(
    browser: Any, tmp_path: Path, theme: str, way: str
) -> None:
    model = PoisonedModel()
    with (
        FakeOpenAI(responder=model) as server,
        guarded_page(browser, viewport={"width": 1400, "height": 900}) as (tab, traffic),
        voila(
            tmp_path, STUCK_APP.format(repo=str(REPO), base_url=server.base_url, seed=SEED), theme=theme
        ) as url,
    ):
        tab.goto(url, timeout=90_000)
        wait_for(tab, "el.dataset.drawn === '1'", timeout_s=90)
        state = tab.locator(STATE)
        state.filter(has_text="Stuck:").wait_for(timeout=60_000)
        said = state.inner_text()
        assert f"blocked by 1 failed question: “{HOSTILE_QUESTION}” (LLMOutputError: " in said, said
        assert "Recover failed to try it again, or Finish & harvest to conclude with it as a gap." in said
        assert button(tab, "Run").is_disabled() and button(tab, "Step").is_disabled()
        for label in ("Recover failed", "Finish & harvest"):
            assert beside(tab, label).is_visible() and beside(tab, label).is_enabled()
        assert low_text_contrast(tab, STATE) == [] and low_text_contrast(tab, f"{STATE} a") == []
        screenshot(tab, f"stuck-{theme}")

        # The question named is a link: the tree selects it and the Inspector shows it.
        link = tab.locator(f"{STATE} a.fractal-node-link")
        failed = str(link.get_attribute("data-fractal-node"))
        link.click()
        wait_for(tab, f"el.dataset.selected === '{failed}'")
        tab.locator(".widget-html", has_text="question · failed").first.wait_for(
            state="visible", timeout=30_000
        )

        model.fixed = True  # the model can answer it now (Recover failed would fail again otherwise)
        beside(tab, way).click()
        if way == "Recover failed":
            assert outcome(tab, "recovered ").startswith("recovered 1 question(s): open again")
            state.filter(has_text="Ready: 1 open question(s).").wait_for(timeout=30_000)
            assert beside(tab, "Recover failed").is_hidden() and beside(tab, "Finish & harvest").is_hidden()
            button(tab, "Run").and_(tab.locator(":not([disabled])")).wait_for(timeout=30_000)
            button(tab, "Run").click()
            assert outcome(tab, "run: ").startswith("run: all_complete")
            state.filter(has_text="Nothing is left to explore").wait_for(timeout=30_000)
            wait_for(tab, "JSON.parse(el.dataset.counts).failed === 0")
            assert json_counts(tab)["open"] == 0 and attr(tab, "status") == "active"
        else:
            assert outcome(tab, "harvest: ").startswith("harvest: finished; the result is in the Result tab")
            wait_for(tab, "el.dataset.status === 'completed'")
            state.filter(has_text="This exploration is completed").wait_for(timeout=30_000)
            warning = tab.locator(".fractal-degraded-warning")
            assert "Redecompose it (Inspector)" in warning.inner_text()
            assert warning.locator(f"a[data-fractal-node='{failed}']").count() == 1
            assert json_counts(tab)["failed"] == 1, "concluded with it as a gap"
        screenshot(tab, f"stuck-{theme}-after-{way.split()[0].lower()}")
        assert low_contrast(tab) == {}, f"{theme}: text under 4.5:1"
        assert tab.evaluate("() => window.__pwned") is None
        assert traffic.aborted == [] and traffic.failed == [] and traffic.errors == []
