"""``ExplorationView``: the live graph with its controls, what ``Exploration.view()`` returns.

Step, Step ×N, Run and Harvest work in a background thread, so the cell
returns at once and the kernel stays free. Those threads only push to a queue;
one task on the kernel's loop (:class:`KernelPump`) drains it and is the only
code that writes to the widgets. Buttons act through the :class:`Exploration`
facade (Recover failed through ``Exploration.recover``). A control that cannot act now is
disabled, and the line under the buttons (:mod:`.status_rows`) says why and what to do
next, with the buttons its next steps need beside it (Recover failed, Finish & harvest);
after a run stopped at its circuit breaker or wall clock, Run reads New budget (``budget_exhausted`` is
terminal for resume: it opens a new turn, ``Exploration.new_budget``, then runs); after an engine
failure, Resume.
The newest message replaces the one before it. The Gates tab lives in :mod:`.gates_tab`,
the Export tab in :mod:`.export_tab`, the Inspector's HTML in :mod:`.inspector_html`.
Steering (Ask, Widen, and the Inspector's Deepen, Redecompose and Note; the Turns tab's
Fork here) lives in :mod:`.steering_panel`, the history slider under the graph in
:mod:`.history_slider` (docs/architecture/faces.md, "The live view's protocol").
"""

from __future__ import annotations

import html
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from ..results.result import FractalResult, StepRecord, linked_ids
from ..text import clip
from ..vocabulary import MODEL_FAILED, GraphStatus, RunOutcome
from .citations_html import evidence_html
from .export_tab import ExportTab, published_kernel
from .gates_tab import GatesTab
from .graph_feed import DeltaMessage
from .history_slider import HistorySlider
from .inspector_html import inspector_html
from .kernel_pump import KernelPump
from .lab_link import lab_server
from .network_widget import NetworkWidget
from .panel_layout import ERROR_STYLE, LINES, button, pinned, scrolled, show
from .status_rows import StatusRows, question_link
from .steering_panel import SteeringControls

if TYPE_CHECKING:
    import pandas as pd

    from ..exploration.exploration import Exploration

TABS = ("Gates", "Inspector", "Result", "Export", "Turns")
# The tabs the panel brings forward: gates when they wait, the result when one is shown, else the Inspector.
GATES_TAB, INSPECTOR_TAB, RESULT_TAB = TABS.index("Gates"), TABS.index("Inspector"), TABS.index("Result")
PANEL_CSS = "fractal-panel"  # the class views/static/panel.css styles the panel by
RUN_TIP = "Work with the chosen number of workers"
RESUME_TIP = "Run again once the cause of the failure is gone, with the chosen number of workers"
NEW_BUDGET_TIP = "A new turn under the same limits (each run has its own circuit breaker), then run on"


class ExplorationView(widgets.VBox):  # type: ignore[misc]
    """Live question tree, run controls, progress, gates, inspector, result and export, in one widget.

    Outside a kernel (no running event loop) nothing refreshes by itself:
    call :meth:`refresh` after acting, as the tests do.

    ``published``: the page is read by people whose kernel this is not (a Voila app,
    found by the ``VOILA_KERNEL_ID`` Voila sets in its kernels, when None). The Export
    tab then offers browser downloads only: no file is written on the server's disk,
    and no variable is set in its kernel.
    """

    def __init__(
        self,
        exploration: Exploration,
        *,
        height: str = "520px",
        interval_s: float = 0.5,
        published: bool | None = None,
    ) -> None:
        self.exploration = exploration
        self.published = published_kernel() if published is None else bool(published)
        self._make_controls(exploration, height)
        self.tabs = self._make_tabs(height)
        super().__init__(self._rows())
        self.add_class(PANEL_CSS)
        self._init_state(interval_s)
        self._bind()
        self.refresh()
        self._pump.start()

    def _make_controls(self, exploration: Exploration, height: str) -> None:
        """The panel's widgets: the network, the buttons and sliders, the status lines, each tab's parts."""
        budget = exploration.budget
        self.network = NetworkWidget(exploration.store, exploration.graph_id, height=height)
        self.network.show_status = False  # the panel's status line says it, once (_show_controls)
        self.step_button = button("Step", "step-forward", "Process one node in a background thread")
        self.step_count = widgets.BoundedIntText(
            value=5, min=1, max=10_000, layout=widgets.Layout(width="70px")
        )
        self.step_n_button = button("Step ×N", "forward", "Process N nodes, one after another")
        self.run_button = button("Run", "play", RUN_TIP, style="success")
        self.pause_button = button(
            "Pause", "pause", "Finish nodes in flight, then stop", style="warning", disabled=True
        )
        self.harvest_button = button(
            "Harvest", "flag-checkered", "Finish the exploration and write its result; work left becomes gaps"
        )
        self.report_button = button(
            "Report", "file-text", "The result as the graph stands now: read-only, no model call"
        )
        self.workers = widgets.IntSlider(
            value=min(4, budget.max_agents),
            min=1,
            max=budget.max_agents,
            description="workers",
            continuous_update=False,
            layout=widgets.Layout(width="230px"),
        )
        self.status_rows = StatusRows(exploration, self.network)  # the progress and the status line
        self.message = widgets.HTML()  # the newest note or error
        self.warning = widgets.HTML()  # a degraded result's warning, while the graph's result is degraded

        self.gates = GatesTab(exploration, self.network, self._handler, self._post)
        self.inspector = widgets.HTML("<i>Click a question in the graph to inspect it.</i>")
        self.approve_node_button = button("Approve", "check", style="success", disabled=True)
        self.prune_branch_button = button("Prune branch", "cut", style="danger", disabled=True)
        self.result = widgets.HTML("<i>Report shows the result as the graph stands; Harvest finishes it.</i>")
        self.exports = ExportTab(
            exploration, published=self.published, handler=self._handler, post=self._post
        )
        self.steering = SteeringControls(exploration, self.network, self._start, self._post)
        self.history = HistorySlider(exploration, self.network)

    def _make_tabs(self, height: str) -> widgets.Tab:
        """The tabs beside the tree: Gates, Inspector, Result, Export, Turns."""
        pages: dict[str, list[widgets.Widget]] = {
            "Gates": self.gates.page,
            "Inspector": [
                scrolled(self.inspector),
                pinned(
                    widgets.HBox([self.approve_node_button, self.prune_branch_button]),
                    self.steering.inspector_bar,
                ),
            ],
            "Result": [self.result],
            "Export": self.exports.page,
            "Turns": [scrolled(self.steering.turns_tables), pinned(self.steering.fork_bar)],
        }
        # Each tab is a box as tall as the tree beside it, so the controls, the tree and the tab in use
        # fit one screen (1400 x 900 in JupyterLab); on a narrow page the tabs wrap below. What a page
        # holds scrolls inside it; the Inspector's and the Turns' actions are pinned below what scrolls,
        # never squashed by a long node (issue 38: they were laid out 0 px tall under an answered one).
        return widgets.Tab(
            children=[
                widgets.VBox(
                    pages[title],
                    layout=widgets.Layout(max_height=f"calc({height} + 60px)", overflow="auto"),
                )
                for title in TABS
            ],
            titles=TABS,
            selected_index=INSPECTOR_TAB,
            layout=widgets.Layout(flex="0 1 340px", min_width="300px"),  # the tree takes the room left
        )

    def _rows(self) -> list[widgets.Widget]:
        """The panel's rows: the controls, the status line, then the tree beside the tabs."""
        row = widgets.Layout(flex_flow="row wrap", align_items="center")
        self.network.layout = widgets.Layout(width="100%")
        tree = widgets.VBox(
            [self.network, self.history], layout=widgets.Layout(flex="3 1 560px", min_width="0")
        )
        return [
            widgets.HBox(
                [
                    self.step_button,
                    self.step_count,
                    self.step_n_button,
                    self.run_button,
                    self.pause_button,
                    self.workers,
                    self.harvest_button,
                    self.report_button,
                ],
                layout=row,
            ),
            self.steering.bar,
            self.status_rows.progress_row,
            self.status_rows.state_row,
            self.message,
            self.warning,
            widgets.HBox(
                [tree, self.tabs],
                layout=widgets.Layout(flex_flow="row wrap", align_items="flex-start", grid_gap="8px"),
            ),
        ]

    def _init_state(self, interval_s: float) -> None:
        """What the panel keeps between refreshes, and the pump that refreshes it."""
        self._inbox: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._job: threading.Thread | None = None
        self._stop = threading.Event()
        self._steps = 0
        self._inspected: str | None = None
        self._read_at: tuple[int, str] = (-1, "")  # the feed's (seq, status) when the store was last read
        self._result_for = ""  # the graph status the Result tab and the warning were last read at
        self._pump = KernelPump(self.refresh, interval_s=interval_s)

    def _bind(self) -> None:
        """Each control's handler."""
        self.step_button.on_click(self._handler(lambda: self._start("step", lambda: self._steps_of(1))))
        self.step_n_button.on_click(
            self._handler(lambda: self._start("step ×N", lambda: self._steps_of(self.step_count.value)))
        )
        self.run_button.on_click(self._handler(lambda: self._start("run", self._run)))
        self.pause_button.on_click(self._handler(self._pause))
        self.harvest_button.on_click(self._handler(lambda: self._start("harvest", self._harvest)))
        self.status_rows.finish_button.on_click(self._handler(lambda: self._start("harvest", self._harvest)))
        self.status_rows.recover_button.on_click(self._handler(self._recover))
        self.report_button.on_click(self._handler(self._report))
        self.approve_node_button.on_click(self._handler(self._approve_selected))
        self.prune_branch_button.on_click(self._handler(self._prune_selected))
        self.steering.bind(self._handler)
        self.network.observe(lambda _change: self._post("inspect", None), names="selected")

    @property
    def exported(self) -> pd.DataFrame | None:
        """The syntheses the Export tab last exported into the kernel (None before any export)."""
        return self.exports.exported

    def __repr__(self) -> str:
        """What a saved notebook shows where the widget is not live (no kernel)."""
        counts = self.network.feed.counts()
        return (
            f"<ExplorationView of {self.exploration.graph_id}: {counts['total']} nodes, "
            f"graph {self.network.feed.status}; a live widget: run the notebook to see it>"
        )

    # -- the kernel-side writer -------------------------------------------------------

    def refresh(self) -> None:
        """Apply queued news and store changes to the widgets (the kernel task calls this)."""
        while True:
            try:
                kind, value = self._inbox.get_nowait()
            except queue.Empty:
                break
            if kind == "step":
                self._steps += 1
                if value.error:
                    self._say(f"{clip(value.question, 50)}: {value.error}", error=True)
                else:
                    self._say(f"{self._steps} node(s) processed · last: {clip(value.question, 70)}")
            elif kind == "note":
                self._say(value)
            elif kind == "error":
                self._say(value, error=True)
            elif kind == "clear":  # a steering call took the text typed: the box is ready for the next
                value.value = ""
            elif kind == "result":
                self._show_result(value)
                self.tabs.selected_index = RESULT_TAB
        delta = self.network.refresh()
        selected = self.network.selected
        if selected and selected != self._inspected and selected not in self.gates.gate_list.value:
            self.tabs.selected_index = INSPECTOR_TAB  # the reader's click shows what it selected
        if selected != self._inspected or (selected and _touches(delta, selected)):
            self._inspect(selected)  # a new selection, or the inspected node changed
        feed = self.network.feed
        counts = feed.counts()  # once per tick, for every part below
        # What the feed does not carry: read when the graph changed.
        if (feed.seq, feed.status) != self._read_at:
            self._read_at = (feed.seq, feed.status)
            self.status_rows.read(counts)
            if feed.status != self._result_for and feed.status != GraphStatus.ACTIVE:
                self._show_result(self.exploration.preview())  # a run ended: its result as it stands
                if not self._result_for and not feed.counts()["gated"]:
                    self.tabs.selected_index = RESULT_TAB  # opened on a stopped graph: its result first
            elif feed.status != self._result_for:  # running again: the last result's warning is old
                self.warning.value = ""
            self._result_for = feed.status
            self.history.refresh()
            self.steering.show_turns(self.history.events[0] if self.history.events else 0)
        self.status_rows.show_counts(counts)
        self._show_gates()
        self._show_controls(counts)

    def close(self) -> None:
        """Stop refreshing and close the widgets (a running job is paused first)."""
        if hasattr(self, "_pump"):  # fully built (close also runs from __del__)
            self._pause()
            self._pump.stop()
        super().close()

    # -- actions (kernel thread, from button clicks) -------------------------------------

    def _handler(self, action: Callable[[], object]) -> Callable[[object], None]:
        def on_click(_button: object) -> None:
            try:
                action()
            except Exception as exc:  # shown to the person, never lost in the kernel log
                self._post("error", f"{type(exc).__name__}: {exc}")
            self._pump.wake()

        return on_click

    def _busy(self) -> bool:
        return self._job is not None and self._job.is_alive()

    def _start(self, name: str, work: Callable[[], tuple[str, bool]]) -> None:
        """Run ``work`` in a thread; its outcome (text, whether it failed) becomes the message."""
        if self._busy():
            assert self._job is not None
            raise RuntimeError(f"busy: pause the {self._job.name} first")
        self._stop.clear()

        def target() -> None:
            try:
                text, failed = work()
                self._post("error" if failed else "note", f"{name}: {text}")
            except Exception as exc:
                self._post("error", f"{name} failed: {type(exc).__name__}: {exc}")

        self._job = threading.Thread(target=target, name=name, daemon=True)
        self._job.start()
        self._say(f"{name}: working…")

    def _steps_of(self, n: int) -> tuple[str, bool]:
        done, failed = 0, []
        while done < n and not self._stop.is_set():
            records = self.exploration.step(1)
            for record in records:
                self._record(record)
                if record.error:
                    failed.append(record)
            if not records:
                break
            done += len(records)
        text = f"{done} node(s) processed" + (" (paused)" if self._stop.is_set() else "")
        if failed:
            text += f"; {len(failed)} failed, the last: {clip(failed[-1].error or '', 160)}"
        return text, bool(failed) and len(failed) == done

    def _run(self) -> tuple[str, bool]:
        # Run reads "Resume" on an error graph and "New budget" on a budget_exhausted one: clicking it is
        # the explicit act; budget_exhausted is terminal for resume, going on a new turn (its own record).
        status = self.exploration.status
        if status == GraphStatus.BUDGET_EXHAUSTED:
            self.exploration.new_budget()
        resume = status == GraphStatus.ERROR
        report = self.exploration.run(self.workers.value, progress=False, on_step=self._record, resume=resume)
        return report.headline(), report.status in MODEL_FAILED | {RunOutcome.ERROR}

    def _recover(self) -> None:
        """Reopen the failed questions (``Exploration.recover``)."""
        if self._busy():
            assert self._job is not None
            raise RuntimeError(f"busy: pause the {self._job.name} first")
        reopened = self.exploration.recover()
        self._post(
            "note",
            f"recovered {reopened['count']} question(s): open again, Step or Run tries them again",
        )

    def _harvest(self) -> tuple[str, bool]:
        result = self.exploration.harvest(finish=True)
        self._post("result", result)
        degraded = " (degraded: see the Result tab)" if result.degraded else ""
        return f"finished; the result is in the Result tab{degraded}", False

    def _report(self) -> None:
        result = self.exploration.preview()
        self._post("result", result)
        self._post("note", "report: the result as the graph stands now (Result tab); nothing was changed")

    def _record(self, record: StepRecord) -> None:
        """From worker threads: queue the news and wake the kernel task."""
        self._post("step", record)

    def _pause(self) -> None:
        self._stop.set()
        self.exploration.pause()

    def _approve_selected(self) -> None:
        node_id = self.network.selected
        if not node_id:
            raise ValueError("click a gated question in the graph first")
        self.gates.approve([node_id])

    def _prune_selected(self) -> None:
        node_id = self.network.selected
        if not node_id:
            raise ValueError("click a node in the graph first")
        cascaded = self.exploration.prune(node_id)["cascaded"]
        self._post("note", f"pruned the branch under {node_id} ({len(cascaded)} question(s) below it)")

    # -- widget writing (kernel task only) ------------------------------------------------

    def _post(self, kind: str, value: Any) -> None:
        """Queue news for the kernel task and wake it (from any thread)."""
        self._inbox.put((kind, value))
        self._pump.wake()

    def _say(self, text: str, *, error: bool = False) -> None:
        """Show the newest message in place of the one before."""
        style = ERROR_STYLE if error else ""
        prefix = "error: " if error else ""
        self.message.value = f"<div style='{style}'>{html.escape(prefix + text)}</div>"

    def _show_result(self, result: FractalResult) -> None:
        """The result in the Result tab (the conclusion, its chain, then the gaps); a degraded one warns."""
        evidence = evidence_html(self.exploration.evidence(), lab_server())
        self.result.value = result._repr_html_() + (
            f"<div class='fractal-evidence'><h3>Evidence</h3>{evidence}</div>" if evidence else ""
        )
        # One line above the tree (it must not push the tree off the screen): the first reason, its
        # node ids links that select them, and how many more the Result tab lists.
        reasons = result.degraded_reasons
        more = f"; {len(reasons) - 1} more in the Result tab" if len(reasons) > 1 else " (Result tab)"
        # A finished graph's failed question is tried again by a new turn (Recover failed is for one
        # still running): the next step names the first, a link that selects it.
        failed = self.network.feed.failed()
        again = (
            f". To try “{question_link(failed[0]['id'], clip(failed[0]['text'], 70))}” again, select it "
            "and Redecompose it (Inspector)"
            if failed and result.status == GraphStatus.COMPLETED
            else ""
        )
        self.warning.value = (
            f"<div class='fractal-degraded-warning' style='{ERROR_STYLE};border-left:3px solid currentColor;"
            f"padding-left:.5em;{LINES}'><b>Degraded result:</b> "
            f"{linked_ids(html.escape(clip(reasons[0], 240)))}{html.escape(more)}{again}</div>"
            if result.degraded and reasons
            else ""
        )

    def _show_controls(self, counts: dict[str, int]) -> None:
        """Enable what can act now; the status line says why the rest waits and what to do next."""
        busy = self._busy()
        state, blocked = self.status_rows.blocked(counts, held=len(self.gates.held_cards))
        for control in (self.step_button, self.step_n_button, self.run_button):
            control.disabled = busy or state not in ("", "stopped", "budget")
        self.step_button.disabled |= state == "budget"  # a step is no new budget: Run's New budget is
        self.step_n_button.disabled |= state == "budget"
        self.run_button.description, self.run_button.tooltip = (
            ("Resume", RESUME_TIP)
            if state == "stopped"
            else ("New budget", NEW_BUDGET_TIP)
            if state == "budget"
            else ("Run", RUN_TIP)
        )
        self.pause_button.disabled = not busy
        self.steering.show_controls(busy, self.network.feed.status)
        self.harvest_button.disabled = busy or state == "finished"
        self.harvest_button.description = (
            "Harvest" if state in ("finished", "explored") else "Finish & harvest"
        )
        finish = self.status_rows.show(counts, state, blocked, busy=busy)
        show(self.harvest_button, not finish)  # one Finish & harvest: beside the line that offers it

    def _show_gates(self) -> None:
        """The Gates tab, the Inspector's Approve, and the Gates tab brought forward when gates appear."""
        seen = self.gates.waiting
        gated = self.gates.show()
        self.approve_node_button.disabled = self.network.selected not in gated
        if self.gates.waiting and not seen and not self._busy():
            self.tabs.selected_index = GATES_TAB  # new gates: show where to act on them

    def _inspect(self, node_id: str) -> None:
        self._inspected = node_id
        self.prune_branch_button.disabled = not node_id
        if not node_id:
            self.inspector.value = "<i>Click a question in the graph to inspect it.</i>"
            return
        self.inspector.value = inspector_html(self.exploration.inspect(node_id))


def _touches(delta: DeltaMessage | None, node_id: str) -> bool:
    """Whether ``delta`` carries the node (a question, or an answer folded into one)."""
    return delta is not None and any(
        q["id"] == node_id or any(a["id"] == node_id for a in q["answers"]) for q in delta["questions"]
    )
