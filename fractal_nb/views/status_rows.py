"""The panel's status rows: the progress with its counts and totals, and the line that says what to do.

The status line under the buttons says what the graph is doing or why Step and
Run cannot act now, and what to do next (finished, waiting at gates, nothing left
to explore, a spent budget, a pause and its stored reason, a run stuck behind
failed questions); its questions are links that select them in the tree, and the
buttons its next steps need stand beside it while they apply (Recover failed,
Finish & harvest). What the feed does not carry (the totals, the budget's state, a
pause's reason, the failed and the stuck questions) is read only when the graph
changed (docs/architecture/faces.md, "The live view's protocol").
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING

import ipywidgets as widgets

from ..exploration.exploration import recovers_failures
from ..exploration.terms import FAILED, PRUNED, VIEW_STATUSES
from ..results.result import node_link
from ..text import clip
from ..vocabulary import PENDING_QUESTION, TERMINAL_GRAPH, GraphStatus, NodeStatus, SaturationReason
from .panel_layout import ERROR_STYLE, LINES, MUTED_STYLE, button, show
from .question_tree import QuestionItem

if TYPE_CHECKING:
    from ..exploration.exploration import Exploration
    from .network_widget import NetworkWidget

QUESTION_LINK_STYLE = "color:var(--jp-content-link-color, #0969da);text-decoration:underline"
RECOVER_TIP = "Reopen the failed questions: Step or Run tries them again"
FINISH_TIP = (
    "Finish the exploration now and write its result; the work left, failed questions too, become gaps"
)
FINISH_NEXT = "Finish & harvest concludes with the work left as gaps."
# How a model outage is stored as a pause's reason (engine/calls.py): the graph waits for the model, not
# for the person, and Run goes on once it answers again (issue 38).
OUTAGE_REASONS = ("model unavailable:", "model failed ")
FAILED_LINKED = 3  # the failed questions a status line names, each a link; "and N more" after them


class StatusRows:
    """The progress row and the status line of one panel, reading ``exploration`` and the tree's feed."""

    def __init__(self, exploration: Exploration, network: NetworkWidget) -> None:
        self.exploration = exploration
        self.network = network
        row = widgets.Layout(flex_flow="row wrap", align_items="center")
        self.progress = widgets.IntProgress(
            value=0, min=0, max=1, description="done", bar_style="info", layout=widgets.Layout(width="260px")
        )
        self.counts = widgets.HTML()
        self.totals = widgets.HTML()
        self.progress_row = widgets.HBox([self.progress, self.counts, self.totals], layout=row)
        self.guide = widgets.HTML()  # the one status line: what the graph is doing, or why a control waits
        # The status line's next steps, beside it while they apply (issue 38: a run stuck behind a failed
        # question said "Ready" and Run did nothing).
        self.recover_button = button("Recover failed", "redo", RECOVER_TIP)
        self.finish_button = button("Finish & harvest", "flag-checkered", FINISH_TIP)
        self.state_row = widgets.HBox(
            [self.guide, self.recover_button, self.finish_button], layout=row
        ).add_class("fractal-state")
        self._budget_state = ("", "")  # a budget_exhausted graph's state and reason (_budget_state_now)
        self._paused_why: str | None = None  # a paused graph's stored reason, read when the graph changed
        # Failed questions recovery reopens (a thinkon chain's failed level is its failed return, never
        # reopened: store/claim.py), and how many answered questions wait behind them with nothing else
        # to do (0: Step or Run has work), both read when the graph changed.
        self._recovers = recovers_failures(exploration)
        self._failed: list[QuestionItem] = []
        self._stuck = 0

    def read(self, counts: dict[str, int]) -> None:
        """What the rows show that the feed does not carry, read when the graph changed."""
        status = self.network.feed.status
        self._show_totals()
        stopped = status == GraphStatus.BUDGET_EXHAUSTED
        self._budget_state = self._budget_state_now() if stopped else ("", "")
        self._paused_why = self.exploration.status_reason if status == GraphStatus.PAUSED else None
        self._failed = self._failed_now()
        self._stuck = self._stuck_now(counts)

    def show_counts(self, counts: dict[str, int]) -> None:
        """The progress bar and the count of questions in each status."""
        questions = counts["total"] - counts["answers"]
        self.progress.max = max(questions, 1)
        self.progress.value = counts["synthesized"] + counts["saturated"] + counts[FAILED] + counts[PRUNED]
        parts = [
            f"<b style='{ERROR_STYLE}'>{counts[s]} {s}</b>" if s == FAILED else f"{counts[s]} {s}"
            for s in VIEW_STATUSES
            if counts[s]
        ]
        if counts["weak"]:
            parts.append(f"<b style='{ERROR_STYLE}'>{counts['weak']} weak synthesis(es)</b>")
        if counts.get("unsupported"):
            parts.append(f"<b style='{ERROR_STYLE}'>{counts['unsupported']} unsupported answer(s)</b>")
        parts.append(f"{counts['answers']} answers")
        self.counts.value = f"<span>{' · '.join(parts)}</span>"

    def _show_totals(self) -> None:
        usage = self.exploration.usage()
        spent = usage["cost"]
        cost = (
            ""
            if spent is None
            else " · cost unknown: a model has no price"
            if math.isinf(spent)
            else f" · cost {spent:.4f}"
        )
        self.totals.value = (
            f"<span style='{MUTED_STYLE}'>{usage['calls']:,} model calls · {usage['tokens']:,} tokens"
            f"{cost}</span>"
        )

    def blocked(self, counts: dict[str, int], held: int) -> tuple[str, str]:
        """Why Step and Run cannot act now, and what to do: (``finished``/``gates``/…, HTML), or ('', '').

        ``held``: the questions a worker holds for the person. The HTML is escaped text, the
        questions in it links that select them in the tree.
        """
        status = self.network.feed.status
        # Resumable by an explicit act (docs/architecture/store.md, "The graph contract").
        if status == GraphStatus.ERROR:
            return "stopped", html.escape(
                f"The last run failed inside the engine ({self.exploration.status_reason}). "
                "Resume runs again once the cause is gone; Report shows the result as it stands."
            )
        if status in TERMINAL_GRAPH:
            return "finished", html.escape(
                f"This exploration is {status}: nothing is left to run. Report shows its result "
                "(Result tab); Export saves the syntheses."
            )
        if status == GraphStatus.BUDGET_EXHAUSTED:
            return self._budget_state
        if counts["open"] == 0 and counts["claimed"] == 0 and counts["gated"]:
            return "gates", html.escape(
                f"Waiting at {counts['gated']} gate(s): approve or prune them in the Gates tab "
                "below (or Approve in the Inspector)"
                + (f"; {held} question(s) wait for your answer there" if held else "")
                + ", then Step or Run."
            )
        if self._stuck:  # Run would end at once, "complete", with the root never synthesized (issue 38)
            blocking = _blocking(self._failed)
            it, gaps = _it(blocking), "a gap" if len(blocking) == 1 else "gaps"
            return "stuck", (
                f"<b>Stuck:</b> {self._stuck} question(s) wait for their synthesis, blocked by "
                f"{_failed_html(blocking)}. Recover failed to try {it} again, or Finish &amp; harvest "
                f"to conclude with {it} as {gaps}."
            )
        if counts["total"] > 1 and not any(counts[s] for s in (*PENDING_QUESTION, NodeStatus.ANSWERED)):
            return (
                "explored",
                "Nothing is left to explore: Harvest writes the result (Report shows it first).",
            )
        return "", ""

    def show(self, counts: dict[str, int], state: str, blocked: str, *, busy: bool) -> bool:
        """Write the status line and show its next steps; whether it offers Finish & harvest."""
        status = self.network.feed.status
        # A failed question is named wherever it is not the reason itself, with Recover failed beside it.
        failed = self._failed and state not in ("finished", "stuck")
        text = (
            html.escape("Working… Pause stops after the nodes in flight.")
            if busy
            else (blocked or self._ready(counts))
            + (
                f" {_failed_html(self._failed)}: Recover failed tries {_it(self._failed)} again."
                if failed
                else ""
            )
        )
        self.guide.value = f"<div class='fractal-status' style='{MUTED_STYLE};{LINES}'>{text}</div>"
        show(self.recover_button, not busy and bool(self._failed))
        # Finishing with the work left as gaps is a next step when the graph cannot simply go on.
        finish = state in ("stuck", "spent") or (
            state in ("", "stopped", "budget") and status != GraphStatus.ACTIVE and counts["total"] > 1
        )
        finish = not busy and finish and status != GraphStatus.ERROR
        show(self.finish_button, finish)
        return finish

    def _ready(self, counts: dict[str, int]) -> str:
        """The status line (HTML) of a graph with work to do and nothing in the way (a pause says why)."""
        paused = self.network.feed.status == GraphStatus.PAUSED
        # Why it paused, as stored (a model outage says which server and what it answered), and what
        # goes on from there: an outage waits for the model, any other pause for the person.
        why = self._paused_why if paused else None
        state = f"Paused ({clip(why, 300)})" if why else "Paused" if paused else "Ready"
        go_on = "Run resumes when the model is back" if why and why.startswith(OUTAGE_REASONS) else ""
        if counts["total"] <= 1:
            seeds = "Step seeds the exploration (the root's plan and its questions)"
            return html.escape(
                f"{state}: {go_on}; {seeds} then." if go_on else f"{state}: {seeds}; Run works it through."
            )
        waiting, answered = counts["open"] + counts["claimed"], counts["answered"]
        work = "work left"
        if waiting:
            work = f"{waiting} open question(s)"
        elif answered:
            work = f"{answered} question(s) wait for their synthesis"
        if not paused:
            return html.escape(f"{state}: {work}. Step processes one, Run works with the workers chosen.")
        go_on = f"{go_on or 'Run goes on'} (Step processes one)"
        return html.escape(f"{state}: {work}. {go_on}; {FINISH_NEXT}")

    def _budget_state_now(self) -> tuple[str, str]:
        """A budget_exhausted graph: ``spent`` (tokens or cost: a new one in code) or ``budget`` (New budget).

        Terminal for resume (docs/architecture/store.md, "The graph contract"): going on is a new turn.
        """
        spent = self.exploration.budget_reached()
        if spent:
            return "spent", html.escape(
                f"The run stopped: {spent}. To go on, give it a new budget in code "
                f"(e.g. ex.new_budget(max_tokens=...), then Run); {FINISH_NEXT}"
            )
        return "budget", html.escape(
            f"The last run stopped at its budget ({self.exploration.status_reason}); the "
            f"questions it left are marked unexplored. New budget opens a new turn under the same "
            f"limits and runs on; {FINISH_NEXT}"
        )

    def _failed_now(self) -> list[QuestionItem]:
        """The failed questions Recover failed reopens: none in a finished graph or a thinkon chain."""
        if not self._recovers or self.network.feed.status in TERMINAL_GRAPH:
            return []
        return self.network.feed.failed()

    def _stuck_now(self, counts: dict[str, int]) -> int:
        """The answered questions waiting behind failed ones, with nothing for Step or Run to do (else 0)."""
        waiting = counts[NodeStatus.ANSWERED]
        if not _blocking(self._failed) or not waiting or any(counts[s] for s in PENDING_QUESTION):
            return 0
        ready = self.exploration.store.get_ready_to_synthesize(self.exploration.graph_id)["count"]
        return 0 if ready else waiting


def _blocking(failed: list[QuestionItem]) -> list[QuestionItem]:
    """The failed questions still in ``error``: one a harvest saturated as failed holds nothing up."""
    return [q for q in failed if q["reason"] != SaturationReason.ERROR]


def _it(failed: list[QuestionItem]) -> str:
    return "it" if len(failed) == 1 else "them"


def question_link(node_id: str, text: str) -> str:
    """A question's text as a link in a sentence: the tree selects and shows it (:func:`node_link`)."""
    return node_link(
        node_id, label=text, title="Show this question in the tree", style=QUESTION_LINK_STYLE
    ).lstrip()


def _failed_html(failed: list[QuestionItem]) -> str:
    """``1 failed question: “…” (its error)``: each question a link that selects it in the tree, escaped.

    >>> item = {"id": "n-1", "text": "<b>Why?</b>", "error": "LLMOutputError: no JSON"}
    >>> print(_failed_html([item]))  # doctest: +ELLIPSIS
    1 failed question: “<a ... data-fractal-node="n-1" ...>&lt;b&gt;Why?&lt;/b&gt;</a>” (LLMOutputError: ...)
    """
    named = ", ".join(
        f"“{question_link(q['id'], clip(q['text'], 90))}” ({html.escape(clip(q['error'] or 'failed', 120))})"
        for q in failed[:FAILED_LINKED]
    )
    more = f" and {len(failed) - FAILED_LINKED} more" if len(failed) > FAILED_LINKED else ""
    return f"{len(failed)} failed question{'' if len(failed) == 1 else 's'}: {named}{more}"
