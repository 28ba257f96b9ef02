"""``ExplorationView``: the live graph with its controls, what ``Exploration.view()`` returns.

Step, Step ×N, Run and Harvest work in a background thread, so the cell
returns at once and the kernel stays free. Those threads only push to a queue;
one task on the kernel's loop (:class:`KernelPump`) drains it and is the only
code that writes to the widgets. Buttons act through the :class:`Exploration`
facade (Recover failed through ``Exploration.recover``). A control that cannot act now is
disabled, and the line under the buttons says why and what to do next (finished,
waiting at gates, nothing left to explore, a spent budget, a pause and its stored
reason, a run stuck behind failed questions), its questions links that select them
in the tree, with the buttons its next steps need beside it (Recover failed, Finish &
harvest); after a run stopped at its circuit breaker or wall clock, Run reads Resume.
The newest message replaces the one before it. Steering (Ask, Widen, and the
Inspector's Deepen, Redecompose and Note; the Turns tab's Fork here) lives in
:mod:`.steering_panel`, the history slider under the graph in :mod:`.history_slider`.
"""

from __future__ import annotations

import html
import json
import keyword
import math
import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from ..exploration.exploration import recovers_failures
from ..exploration.terms import CHAIN_KEY, FAILED, PRUNED, VIEW_STATUSES, level_state
from ..results.evidence import CitedLines, NodeEvidence
from ..results.result import FractalResult, StepRecord, linked_ids, node_link
from ..text import clip
from ..vocabulary import PENDING_QUESTION, TERMINAL_GRAPH, GraphStatus, NodeStatus, SaturationReason
from .citations_html import citations_html, evidence_html, finding_html, support_badge
from .downloads import DownloadButtons
from .graph_feed import DeltaMessage
from .held_questions import GateList, HeldQuestion
from .history_slider import HistorySlider
from .kernel_pump import KernelPump
from .lab_link import LabServer, lab_server
from .network_widget import NetworkWidget
from .question_tree import QuestionItem, view_status
from .steering_panel import SteeringControls

if TYPE_CHECKING:
    from ..exploration.exploration import Exploration

ERROR_STYLE = "color:var(--jp-error-color1, #b42323)"
MUTED_STYLE = "color:var(--jp-ui-font-color2, #57606a)"
LINES = "line-height:1.45"  # a status line that wraps reads as a paragraph (ipywidgets sets 28 px lines)
QUESTION_LINK_STYLE = "color:var(--jp-content-link-color, #0969da);text-decoration:underline"
PUBLISHED_EXPORT = (
    "<span style='color:var(--jp-ui-font-color2, #57606a)'>This page is published: the downloads above "
    "save the syntheses and the graph in your browser; nothing is written on the server.</span>"
)
TABS = ("Gates", "Inspector", "Result", "Export", "Turns")
# The tabs the panel brings forward: gates when they wait, the result when one is shown, else the Inspector.
GATES_TAB, INSPECTOR_TAB, RESULT_TAB = TABS.index("Gates"), TABS.index("Inspector"), TABS.index("Result")
PANEL_CSS = "fractal-panel"  # the class views/static/panel.css styles the panel by
RUN_TIP = "Work with the chosen number of workers"
RESUME_TIP = "Go on past the budget the last run stopped at, with the chosen number of workers"
RECOVER_TIP = "Reopen the failed questions: Step or Run tries them again"
FINISH_TIP = (
    "Finish the exploration now and write its result; the work left, failed questions too, become gaps"
)
FINISH_NEXT = "Finish & harvest concludes with the work left as gaps."
# How a model outage is stored as a pause's reason (engine/calls.py): the graph waits for the model, not
# for the person, and Run goes on once it answers again (issue 38).
OUTAGE_REASONS = ("model unavailable:", "model failed ")


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
        self._init_state(exploration, interval_s)
        self._bind()
        self.refresh()
        self._pump.start()

    def _make_controls(self, exploration: Exploration, height: str) -> None:
        """The panel's widgets: the network, the buttons and sliders, the status lines, each tab's parts."""
        budget = exploration.budget
        self.network = NetworkWidget(exploration.store, exploration.graph_id, height=height)
        self.network.show_status = False  # the panel's status line says it, once (_show_controls)
        self.step_button = _button("Step", "step-forward", "Process one node in a background thread")
        self.step_count = widgets.BoundedIntText(
            value=5, min=1, max=10_000, layout=widgets.Layout(width="70px")
        )
        self.step_n_button = _button("Step ×N", "forward", "Process N nodes, one after another")
        self.run_button = _button("Run", "play", RUN_TIP, style="success")
        self.pause_button = _button(
            "Pause", "pause", "Finish nodes in flight, then stop", style="warning", disabled=True
        )
        self.harvest_button = _button(
            "Harvest", "flag-checkered", "Finish the exploration and write its result; work left becomes gaps"
        )
        self.report_button = _button(
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
        self.progress = widgets.IntProgress(
            value=0, min=0, max=1, description="done", bar_style="info", layout=widgets.Layout(width="260px")
        )
        self.counts = widgets.HTML()
        self.totals = widgets.HTML()
        self.guide = widgets.HTML()  # the one status line: what the graph is doing, or why a control waits
        # The status line's next steps, beside it while they apply (issue 38: a run stuck behind a failed
        # question said "Ready" and Run did nothing).
        self.recover_button = _button("Recover failed", "redo", RECOVER_TIP)
        self.finish_button = _button("Finish & harvest", "flag-checkered", FINISH_TIP)
        self.message = widgets.HTML()  # the newest note or error
        self.warning = widgets.HTML()  # a degraded result's warning, while the graph's result is degraded

        self.gate_list = GateList()  # each gated question whole, wrapped, with its tick box (issue 38)
        self.approve_button = _button("Approve", "check")
        self.approve_all_button = _button("Approve all", "check-double", style="success")
        self.prune_gate_button = _button("Prune", "cut", style="danger")
        self.gate_note = widgets.HTML("No gated questions.")
        self.held_box = widgets.VBox([])  # questions a worker holds for the person ("Halts")
        self.held_cards: list[HeldQuestion] = []
        self._held_key: tuple[Any, ...] = ()

        self.inspector = widgets.HTML("<i>Click a question in the graph to inspect it.</i>")
        self.approve_node_button = _button("Approve", "check", style="success", disabled=True)
        self.prune_branch_button = _button("Prune branch", "cut", style="danger", disabled=True)
        self.result = widgets.HTML("<i>Report shows the result as the graph stands; Harvest finishes it.</i>")

        self.export_name = widgets.Text(value="syntheses", description="variable")
        self.export_path = widgets.Text(value="", description="file", placeholder="syntheses.csv or .parquet")
        self.export_button = _button("Export syntheses", "download")
        # A browser download (Voila, Binder: nothing written on the server), then the kernel's own ways.
        self.downloads = DownloadButtons(exploration)
        self.exported: Any = None  # the last exported DataFrame
        self.steering = SteeringControls(exploration, self.network, self._start, self._post)
        self.history = HistorySlider(exploration, self.network)

    def _make_tabs(self, height: str) -> widgets.Tab:
        """The tabs beside the tree: Gates, Inspector, Result, Export, Turns."""
        pages: dict[str, list[widgets.Widget]] = {
            "Gates": [
                self.gate_note,
                self.gate_list,
                widgets.HBox([self.approve_button, self.approve_all_button, self.prune_gate_button]),
                self.held_box,
            ],
            "Inspector": [
                scrolled(self.inspector),
                pinned(
                    widgets.HBox([self.approve_node_button, self.prune_branch_button]),
                    self.steering.inspector_bar,
                ),
            ],
            "Result": [self.result],
            "Export": [self.downloads, widgets.HTML(PUBLISHED_EXPORT)]
            if self.published
            else [
                self.downloads,
                widgets.HTML(
                    "<b>Export</b> the syntheses into this kernel (a variable) or a file on its disk:"
                ),
                self.export_name,
                self.export_path,
                self.export_button,
            ],
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
            widgets.HBox([self.progress, self.counts, self.totals], layout=row),
            widgets.HBox([self.guide, self.recover_button, self.finish_button], layout=row).add_class(
                "fractal-state"
            ),
            self.message,
            self.warning,
            widgets.HBox(
                [tree, self.tabs],
                layout=widgets.Layout(flex_flow="row wrap", align_items="flex-start", grid_gap="8px"),
            ),
        ]

    def _init_state(self, exploration: Exploration, interval_s: float) -> None:
        """What the panel keeps between refreshes, and the pump that refreshes it."""
        self._inbox: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._job: threading.Thread | None = None
        self._stop = threading.Event()
        self._steps = 0
        self._inspected: str | None = None
        self._read_at: tuple[int, str] = (-1, "")  # the feed's (seq, status) when the store was last read
        self._budget_state = ("", "")  # a budget_exhausted graph's state and reason (_budget_state_now)
        self._paused_why: str | None = None  # a paused graph's stored reason, read when the graph changed
        # Failed questions recovery reopens (a thinkon chain's failed level is its failed return, never
        # reopened: store/claim.py), and how many answered questions wait behind them with nothing else
        # to do (0: Step or Run has work), both read when the graph changed.
        self._recovers = recovers_failures(exploration)
        self._failed: list[QuestionItem] = []
        self._stuck = 0
        self._result_for = ""  # the graph status the Result tab and the warning were last read at
        self._gates_seen = 0
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
        self.finish_button.on_click(self._handler(lambda: self._start("harvest", self._harvest)))
        self.recover_button.on_click(self._handler(self._recover))
        self.report_button.on_click(self._handler(self._report))
        self.approve_button.on_click(self._handler(lambda: self._approve(list(self.gate_list.value))))
        self.approve_all_button.on_click(self._handler(lambda: self._approve(None)))
        self.prune_gate_button.on_click(self._handler(self._prune_gated))
        self.approve_node_button.on_click(self._handler(self._approve_selected))
        self.prune_branch_button.on_click(self._handler(self._prune_selected))
        self.export_button.on_click(self._handler(self._export))
        self.steering.bind(self._handler)
        self.network.observe(lambda _change: self._post("inspect", None), names="selected")
        self.gate_list.observe(self._show_chosen_gate, names="value")

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
        if selected and selected != self._inspected and selected not in self.gate_list.value:
            self.tabs.selected_index = INSPECTOR_TAB  # the reader's click shows what it selected
        if selected != self._inspected or (selected and _touches(delta, selected)):
            self._inspect(selected)  # a new selection, or the inspected node changed
        feed = self.network.feed
        counts = feed.counts()  # once per tick, for every part below
        if (
            feed.seq,
            feed.status,
        ) != self._read_at:  # what the feed does not carry: read when the graph changed
            self._read_at = (feed.seq, feed.status)
            self._show_totals()
            stopped = feed.status == GraphStatus.BUDGET_EXHAUSTED
            self._budget_state = self._budget_state_now() if stopped else ("", "")
            paused = feed.status == GraphStatus.PAUSED
            self._paused_why = self.exploration.status_reason if paused else None
            self._failed = self._failed_now()
            self._stuck = self._stuck_now(counts)
            if feed.status != self._result_for and feed.status != GraphStatus.ACTIVE:
                self._show_result(self.exploration.preview())  # a run ended: its result as it stands
                if not self._result_for and not feed.counts()["gated"]:
                    self.tabs.selected_index = RESULT_TAB  # opened on a stopped graph: its result first
            elif feed.status != self._result_for:  # running again: the last result's warning is old
                self.warning.value = ""
            self._result_for = feed.status
            self.history.refresh()
            self.steering.show_turns(self.history.events[0] if self.history.events else 0)
        self._show_counts(counts)
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
        # Run reads "Resume" on a budget_exhausted or error graph: clicking it is the explicit act.
        resume = self.exploration.status in (GraphStatus.BUDGET_EXHAUSTED, GraphStatus.ERROR)
        report = self.exploration.run(self.workers.value, progress=False, on_step=self._record, resume=resume)
        return report.headline(), report.status in ("model_unavailable", "seed_failed", "error")

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

    def _approve(self, node_ids: list[str] | None) -> None:
        if node_ids is not None and not node_ids:
            raise ValueError("select gated questions to approve (or use Approve all)")
        opened = self.exploration.approve(node_ids)
        self._post("note", f"approved {opened['count']} gated question(s): Step or Run works on them")

    def _prune_gated(self) -> None:
        chosen = list(self.gate_list.value)
        if not chosen:
            raise ValueError("select gated questions to prune")
        for node_id in chosen:
            self.exploration.prune(node_id)
        self._post("note", f"pruned {len(chosen)} gated question(s)")

    def _choose(self, node_id: str, choice: int | str) -> None:
        """The person's answer to a held question (docs/architecture.md, "Halts"): it reopens with it."""
        chosen = self.exploration.choose(node_id, choice)["choice"]
        self._post(
            "note",
            f"answered {node_id} ({clip(chosen['text'], 80)}): it reopens with your "
            f"{'clarification' if chosen['kind'] == 'confusion' else 'choice'}; Step or Run goes on with it",
        )

    def _prune_held(self, node_id: str) -> None:
        self.exploration.prune(node_id)
        self._post("note", f"pruned the held question {node_id}")

    def _approve_selected(self) -> None:
        node_id = self.network.selected
        if not node_id:
            raise ValueError("click a gated question in the graph first")
        self._approve([node_id])

    def _prune_selected(self) -> None:
        node_id = self.network.selected
        if not node_id:
            raise ValueError("click a node in the graph first")
        cascaded = self.exploration.prune(node_id)["cascaded"]
        self._post("note", f"pruned the branch under {node_id} ({len(cascaded)} question(s) below it)")

    def _export(self) -> None:
        if self.published:  # the page's reader is not the kernel's owner: downloads only
            raise ValueError("this page is published: download the syntheses above (nothing is saved here)")
        name, path = self.export_name.value.strip(), self.export_path.value.strip()
        if name and (not name.isidentifier() or keyword.iskeyword(name)):
            raise ValueError(f"{name!r} is not a Python variable name")
        suffix = Path(path).suffix.lower()
        if path and suffix not in (".csv", ".parquet"):
            raise ValueError(f"the export file must end in .csv or .parquet, not {path!r}")
        frame = self.exploration.syntheses()
        if path:
            frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path, index=False)
        self.exported = frame
        where = []
        if name:
            _user_namespace()[name] = frame
            where.append(f"variable {name}")
        if path:
            where.append(path)
        self._post("note", f"exported {len(frame)} syntheses to {' and '.join(where) or 'view.exported'}")

    def _show_chosen_gate(self, change: dict[str, Any]) -> None:
        """A gate chosen in the list is selected (and shown) in the graph too."""
        chosen = change["new"]
        if chosen:
            self.network.selected = chosen[0]

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
        """The result in the Result tab (what ``report()`` shows); a degraded one warns above the graph."""
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
            f". To try “{_question_link(failed[0]['id'], clip(failed[0]['text'], 70))}” again, select it "
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

    def _show_counts(self, counts: dict[str, int]) -> None:
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

    def _blocked(self, counts: dict[str, int]) -> tuple[str, str]:
        """Why Step and Run cannot act now, and what to do: (``finished``/``gates``/…, HTML), or ('', '').

        The HTML is escaped text, the questions in it links that select them in the tree.
        """
        status = self.network.feed.status
        if status == GraphStatus.ERROR:  # resumable by an explicit act (docs/architecture.md, statuses)
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
            held = len(self.held_cards)
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

    def _budget_state_now(self) -> tuple[str, str]:
        """A budget_exhausted graph: ``spent`` (tokens or cost: raise it in code) or ``stopped`` (Resume)."""
        spent = self.exploration.budget_reached()
        if spent:
            return "spent", html.escape(
                f"The run stopped: {spent}. To go on, raise it in code "
                f"(e.g. ex.run(max_tokens=...)); {FINISH_NEXT}"
            )
        return "stopped", html.escape(
            f"The last run stopped at its budget ({self.exploration.status_reason}); the "
            f"questions it left are marked unexplored. Resume goes on past it; {FINISH_NEXT}"
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

    def _show_controls(self, counts: dict[str, int]) -> None:
        busy = self._busy()
        status = self.network.feed.status
        state, blocked = self._blocked(counts)
        for control in (self.step_button, self.step_n_button, self.run_button):
            control.disabled = busy or state not in ("", "stopped")
        stopped = state == "stopped"
        self.run_button.description, self.run_button.tooltip = (
            ("Resume", RESUME_TIP) if stopped else ("Run", RUN_TIP)
        )
        self.pause_button.disabled = not busy
        self.steering.show_controls(busy, status)
        self.harvest_button.disabled = busy or state == "finished"
        self.harvest_button.description = (
            "Harvest" if state in ("finished", "explored") else "Finish & harvest"
        )
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
        _show(self.recover_button, not busy and bool(self._failed))
        # Finishing with the work left as gaps is a next step when the graph cannot simply go on.
        finish = state in ("stuck", "spent") or (
            state in ("", "stopped") and status != GraphStatus.ACTIVE and counts["total"] > 1
        )
        finish = not busy and finish and status != GraphStatus.ERROR
        _show(self.finish_button, finish)
        _show(self.harvest_button, not finish)  # one Finish & harvest: beside the line that offers it

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

    def _show_gates(self) -> None:
        gated = self.network.feed.gated()
        self._show_held(gated)
        held = {card.node_id for card in self.held_cards}
        gated = {node_id: text for node_id, text in gated.items() if node_id not in held}
        options = tuple((text, node_id) for node_id, text in gated.items())
        if options != tuple(self.gate_list.options):
            self.gate_list.options = options
        notes = [
            f"{len(gated)} gated question(s) wait for approval: tick some to Approve or Prune them, "
            "or Approve all."
            if gated
            else ""
            if held
            else "No gated questions.",
            f"{len(held)} question(s) a worker holds for your answer: choose an option or answer below."
            if held
            else "",
        ]
        self.gate_note.value = " ".join(note for note in notes if note)
        for control in (self.approve_button, self.approve_all_button, self.prune_gate_button):
            control.disabled = not gated
        self.approve_node_button.disabled = self.network.selected not in gated
        if (gated or held) and not self._gates_seen and not self._busy():
            self.tabs.selected_index = GATES_TAB  # new gates: show where to act on them
        self._gates_seen = len(gated) + len(held)

    def _show_held(self, gated: dict[str, str]) -> None:
        """A card per question a worker holds for the person, read when the graph changed and gates are up."""
        key = (self.network.feed.seq, tuple(gated)) if gated else ()
        if key == self._held_key:
            return
        self._held_key = key
        rows = self.exploration.held() if gated else []
        for card in self.held_cards:  # answered, pruned or read again: its widgets go
            card.close()
        self.held_cards = [HeldQuestion(row, self._handler, self._choose, self._prune_held) for row in rows]
        self.held_box.children = tuple(self.held_cards)

    def _inspect(self, node_id: str) -> None:
        self._inspected = node_id
        self.prune_branch_button.disabled = not node_id
        if not node_id:
            self.inspector.value = "<i>Click a question in the graph to inspect it.</i>"
            return
        self.inspector.value = inspector_html(self.exploration.inspect(node_id))


def _button(
    description: str, icon: str, tooltip: str = "", *, style: str = "", disabled: bool = False
) -> widgets.Button:
    """A panel button: sized to its label, with an icon and a tooltip."""
    return widgets.Button(
        description=description,
        icon=icon,
        tooltip=tooltip,
        button_style=style,
        disabled=disabled,
        layout=widgets.Layout(width="auto"),
    )


def _show(button: widgets.Button, shown: bool) -> None:
    """Show ``button`` in its row, or take it out of the layout."""
    button.layout.display = None if shown else "none"


FAILED_LINKED = 3  # the failed questions a status line names, each a link; "and N more" after them


def _blocking(failed: list[QuestionItem]) -> list[QuestionItem]:
    """The failed questions still in ``error``: one a harvest saturated as failed holds nothing up."""
    return [q for q in failed if q["reason"] != SaturationReason.ERROR]


def _it(failed: list[QuestionItem]) -> str:
    return "it" if len(failed) == 1 else "them"


def _question_link(node_id: str, text: str) -> str:
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
        f"“{_question_link(q['id'], clip(q['text'], 90))}” ({html.escape(clip(q['error'] or 'failed', 120))})"
        for q in failed[:FAILED_LINKED]
    )
    more = f" and {len(failed) - FAILED_LINKED} more" if len(failed) > FAILED_LINKED else ""
    return f"{len(failed)} failed question{'' if len(failed) == 1 else 's'}: {named}{more}"


def _touches(delta: DeltaMessage | None, node_id: str) -> bool:
    """Whether ``delta`` carries the node (a question, or an answer folded into one)."""
    return delta is not None and any(
        q["id"] == node_id or any(a["id"] == node_id for a in q["answers"]) for q in delta["questions"]
    )


_OUTCOME_MARKS = {
    "failed": f" <b style='{ERROR_STYLE}'>failed</b>",
    "cut": f" <b style='{ERROR_STYLE}'>cut short</b>",
}


def _level_html(level: dict[str, Any]) -> str:
    """A thinkon level's phase, plan and done (docs/architecture.md, "Thinkon"), escaped."""
    plan = level["todo"]
    done = "".join(
        f"<li>{html.escape(str(d.get('goal', '')))}{_OUTCOME_MARKS.get(str(d.get('outcome')), '')}"
        f"<br><span style='{MUTED_STYLE}'>{html.escape(clip(str(d.get('result', '')), 600))}</span></li>"
        for d in level["done"]
    )
    return (
        f"<div class='fractal-level'><p><b>Thinkon level</b> · next: {html.escape(level['phase'])}</p>"
        + (
            f"<p><b>Plan</b> (written by Think):</p><pre class='fractal-plan'>{html.escape(plan)}</pre>"
            if plan
            else ""
        )
        + (f"<p><b>Done</b> ({len(level['done'])}):</p><ol>{done}</ol>" if done else "")
        + "</div>"
    )


def scrolled(content: widgets.Widget) -> widgets.Box:
    """``content`` in a box that takes the page's room left and scrolls (never pushes what is pinned)."""
    return widgets.Box(
        [content],
        layout=widgets.Layout(flex="1 1 auto", min_height="0", overflow="auto", width="100%"),
    )


def pinned(*controls: widgets.Widget) -> widgets.VBox:
    """Controls that keep their height at a page's foot, whatever scrolls above them."""
    return widgets.VBox(list(controls), layout=widgets.Layout(flex="0 0 auto", width="100%"))


def inspector_html(details: dict[str, Any]) -> str:
    """A node's details as HTML, every model-written string escaped."""
    node = details["node"]
    meta = dict(node["metadata"])
    synthesis = meta.pop("synthesis", None)
    level = meta.get(CHAIN_KEY)  # a thinkon level: its plan and done stand for its answer
    evidence: NodeEvidence | None = details.get("evidence")
    server = lab_server() if evidence else None
    rows = _status_rows(node, meta)
    if evidence and evidence["track"]:
        rows.append(f"<p class='fractal-track'><b>Track:</b> {html.escape(evidence['track'])}</p>")
    rows.append(
        f"<p><b>{'Question' if node['node_type'] == 'question' else 'Answer'}:</b> "
        f"{html.escape(node['text'])}{support_badge(evidence['support']) if evidence else ''}</p>"
    )
    if evidence:
        rows.append(_cited(evidence["citations"], server))
    if isinstance(level, dict):
        rows.append(_level_html(level_state(meta)))
    else:
        rows += _answer_rows(details, evidence, server)
    if evidence and evidence["findings"]:
        items = "".join(finding_html(f, server) for f in evidence["findings"])
        rows.append(f"<p><b>Findings of the track</b></p><ul>{items}</ul>")
    rows += _tree_rows(details, synthesis, chained=isinstance(level, dict))
    rows.append(
        f"<details><summary>Metadata</summary><pre>{html.escape(json.dumps(meta, indent=1))}</pre></details>"
    )
    rows.append(_calls_html(details["llm_calls"]))
    rows.append(f"<p style='{MUTED_STYLE}'>{html.escape(node['node_id'])}</p>")
    return "".join(rows)


def _status_rows(node: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    """The inspector's heading (type, status, depth) and why the node failed or is weak."""
    shown = view_status(node["status"], node["status_reason"])
    rows = [
        f"<h4 style='margin:4px 0'>{html.escape(node['node_type'])} · {html.escape(shown)}"
        f"{' (' + html.escape(node['status_reason']) + ')' if node['status_reason'] else ''}"
        f" · depth {node['depth']}</h4>",
    ]
    if shown == FAILED:
        error = str(meta.get("last_error") or node["status_reason"] or "error")
        rows.append(
            f"<p class='fractal-failed-note' style='{ERROR_STYLE}'><b>Failed:</b> {html.escape(error)}</p>"
        )
    if meta.get("synthesis_failed"):
        rows.append(
            f"<p class='fractal-weak-note' style='{ERROR_STYLE}'><b>Weak synthesis:</b> the model could not "
            "synthesize it; its sub-findings were joined without the model.</p>"
        )
    if isinstance(meta.get("weak"), list) and meta["weak"]:  # the store's weak mark (docs/architecture.md)
        built_on = "; ".join(
            f"{m.get('reason')}: {m.get('node_id')}" for m in meta["weak"] if isinstance(m, dict)
        )
        rows.append(
            f"<p class='fractal-weak-note' style='{ERROR_STYLE}'><b>Weak synthesis:</b> built on "
            f"{html.escape(built_on)}; weak until synthesized again on sound sub-questions.</p>"
        )
    return rows


def _answer_rows(
    details: dict[str, Any], evidence: NodeEvidence | None, server: LabServer | None
) -> list[str]:
    """The question's answers, each with its support and citations."""
    rows = []
    for answer in (c for c in details["children"] if c["node_type"] == "answer"):
        cited = evidence["answers"].get(answer["node_id"]) if evidence else None
        rows.append(
            f"<p><b>Answer:</b> {html.escape(answer['text'])}"
            f"{support_badge(cited['support']) if cited else ''}</p>"
        )
        if cited:
            rows.append(_cited(cited["citations"], server))
    return rows


def _tree_rows(details: dict[str, Any], synthesis: object, *, chained: bool) -> list[str]:
    """The node's sub-questions, its synthesis (a level's result) and its links to other branches."""
    rows = []
    subs = [c for c in details["children"] if c["node_type"] == "question"] + details.get("sub_questions", [])
    if subs:
        items = "".join(
            f"<li>{html.escape(c['text'])} <i>({html.escape(c['status'])})</i></li>" for c in subs
        )
        rows.append(f"<p><b>Sub-questions:</b></p><ul>{items}</ul>")
    if synthesis:
        rows.append(f"<p><b>{'Result' if chained else 'Synthesis'}:</b> {html.escape(str(synthesis))}</p>")
    for link in details["links"]:
        note = link["metadata"].get("insight") or link["metadata"].get("tension") or ""
        rows.append(
            f"<p><b>{html.escape(link['edge_type'])}</b> {html.escape(link['from_node'])} — "
            f"{html.escape(link['to_node'])}: {html.escape(note)}</p>"
        )
    return rows


def _calls_html(calls: Any) -> str:
    """The node's model calls as a table (a DataFrame), or a line saying there are none."""
    if not len(calls):
        return "<p><i>No LLM calls logged for this node.</i></p>"
    shown = calls[
        ["role", "worker", "model", "prompt_tokens", "completion_tokens", "latency_s", "outcome", "error"]
    ]
    return (
        f"<details open><summary>LLM calls ({len(calls)})</summary>"
        f"{shown.to_html(index=False, escape=True, float_format='{:.3f}'.format)}</details>"
    )


def _cited(citations: list[CitedLines], server: LabServer | None) -> str:
    """An answer's citations under it, with how many there are ('' for none)."""
    if not citations:
        return ""
    return (
        f"<div class='fractal-citations'><b>Citations ({len(citations)}):</b>"
        f"{citations_html(citations, server)}</div>"
    )


def published_kernel() -> bool:
    """Whether this kernel serves a published page (Voila sets ``VOILA_KERNEL_ID`` in its kernels)."""
    return bool(os.environ.get("VOILA_KERNEL_ID"))


def _user_namespace() -> dict[str, Any]:
    """The notebook's global namespace (the ``__main__`` module's outside IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with ipywidgets
        shell = None
    else:
        shell = get_ipython()
    if shell is not None:
        namespace: dict[str, Any] = shell.user_ns
        return namespace
    import __main__

    main: dict[str, Any] = __main__.__dict__
    return main
