"""``ExplorationView``: the live graph with its controls, what ``Exploration.view()`` returns.

Step, Step ×N and Run work in a background thread, so the cell returns at
once and the kernel stays free. Those threads only push to a queue; one task
on the kernel's loop (:class:`KernelPump`) drains it and is the only code
that writes to the widgets. Buttons act through the :class:`Exploration`
facade, never through the store directly.
"""

from __future__ import annotations

import html
import json
import keyword
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from ..results import StepRecord
from ..text import clip
from .kernel_pump import KernelPump
from .network_widget import NetworkWidget

if TYPE_CHECKING:
    from ..exploration import Exploration

_STATUS_ORDER = ("open", "gated", "claimed", "answered", "synthesized", "saturated", "error")


class ExplorationView(widgets.VBox):  # type: ignore[misc]
    """Live network, run controls, progress, gates, node inspector and export, in one widget.

    Outside a kernel (no running event loop) nothing refreshes by itself:
    call :meth:`refresh` after acting, as the tests do.
    """

    def __init__(self, exploration: Exploration, *, height: str = "520px", interval_s: float = 0.5) -> None:
        self.exploration = exploration
        budget = exploration.budget
        self.network = NetworkWidget(exploration.store, exploration.graph_id, height=height)
        button = widgets.Layout(width="auto")
        self.step_button = widgets.Button(
            description="Step",
            icon="step-forward",
            layout=button,
            tooltip="Process one node in a background thread",
        )
        self.step_count = widgets.BoundedIntText(
            value=5, min=1, max=10_000, layout=widgets.Layout(width="70px")
        )
        self.step_n_button = widgets.Button(
            description="Step ×N", icon="forward", layout=button, tooltip="Process N nodes, one after another"
        )
        self.run_button = widgets.Button(
            description="Run",
            icon="play",
            button_style="success",
            layout=button,
            tooltip="Work with the chosen number of workers",
        )
        self.pause_button = widgets.Button(
            description="Pause",
            icon="pause",
            button_style="warning",
            layout=button,
            disabled=True,
            tooltip="Finish nodes in flight, then stop",
        )
        self.workers = widgets.IntSlider(
            value=min(4, budget.max_agents),
            min=1,
            max=budget.max_agents,
            description="workers",
            continuous_update=False,
        )
        self.progress = widgets.IntProgress(
            value=0, min=0, max=1, description="done", bar_style="info", layout=widgets.Layout(width="260px")
        )
        self.counts = widgets.HTML()
        self.message = widgets.HTML()

        self.gate_list = widgets.SelectMultiple(options=[], rows=5, layout=widgets.Layout(width="100%"))
        self.approve_button = widgets.Button(description="Approve", icon="check", layout=button)
        self.approve_all_button = widgets.Button(
            description="Approve all", icon="check-double", button_style="success", layout=button
        )
        self.prune_gate_button = widgets.Button(
            description="Prune", icon="cut", button_style="danger", layout=button
        )
        self.gate_note = widgets.HTML("No gated questions.")

        self.inspector = widgets.HTML("<i>Click a node in the graph to inspect it.</i>")
        self.prune_branch_button = widgets.Button(
            description="Prune branch", icon="cut", disabled=True, button_style="danger", layout=button
        )

        self.export_name = widgets.Text(value="syntheses", description="variable")
        self.export_path = widgets.Text(value="", description="file", placeholder="syntheses.csv or .parquet")
        self.export_button = widgets.Button(description="Export syntheses", icon="download", layout=button)
        self.exported: Any = None  # the last exported DataFrame

        tabs = widgets.Tab(
            children=[
                widgets.VBox(
                    [
                        self.gate_note,
                        self.gate_list,
                        widgets.HBox([self.approve_button, self.approve_all_button, self.prune_gate_button]),
                    ]
                ),
                widgets.VBox([self.inspector, self.prune_branch_button]),
                widgets.VBox([self.export_name, self.export_path, self.export_button]),
            ]
        )
        for i, title in enumerate(("Gates", "Inspector", "Export")):
            tabs.set_title(i, title)
        self.tabs = tabs
        super().__init__(
            [
                widgets.HBox(
                    [
                        self.step_button,
                        self.step_count,
                        self.step_n_button,
                        self.run_button,
                        self.pause_button,
                        self.workers,
                    ]
                ),
                widgets.HBox([self.progress, self.counts]),
                self.network,
                tabs,
                self.message,
            ]
        )

        self._inbox: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._job: threading.Thread | None = None
        self._stop = threading.Event()
        self._steps = 0
        self._note = ""
        self._error = ""
        self._inspected: str | None = None
        self._pump = KernelPump(self.refresh, interval_s=interval_s)

        self.step_button.on_click(self._handler(lambda: self._start("step", lambda: self._steps_of(1))))
        self.step_n_button.on_click(
            self._handler(lambda: self._start("step ×N", lambda: self._steps_of(self.step_count.value)))
        )
        self.run_button.on_click(self._handler(lambda: self._start("run", self._run)))
        self.pause_button.on_click(self._handler(self._pause))
        self.approve_button.on_click(self._handler(lambda: self._approve(list(self.gate_list.value))))
        self.approve_all_button.on_click(self._handler(lambda: self._approve(None)))
        self.prune_gate_button.on_click(self._handler(self._prune_gated))
        self.prune_branch_button.on_click(self._handler(self._prune_selected))
        self.export_button.on_click(self._handler(self._export))
        self.network.observe(lambda _change: self._post("inspect", None), names="selected")
        self.refresh()
        self._pump.start()

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
                self._note = f"{self._steps} node(s) processed · last: {clip(value.question, 70)}"
                if value.error:
                    self._error = f"{clip(value.question, 50)}: {value.error}"
            elif kind == "note":
                self._note = value
            elif kind == "error":
                self._error = value
            self._say()
        self.network.refresh()
        busy = self._job is not None and self._job.is_alive()
        for control in (self.step_button, self.step_n_button, self.run_button):
            control.disabled = busy
        self.pause_button.disabled = not busy
        self._show_counts()
        self._show_gates()
        if self.network.selected != self._inspected:
            self._inspect(self.network.selected)

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

    def _start(self, name: str, work: Callable[[], str]) -> None:
        if self._job is not None and self._job.is_alive():
            raise RuntimeError(f"busy: pause the {self._job.name} first")
        self._stop.clear()
        self._error = ""

        def target() -> None:
            try:
                self._post("note", f"{name}: {work()}")
            except Exception as exc:
                self._post("error", f"{name} failed: {type(exc).__name__}: {exc}")

        self._job = threading.Thread(target=target, name=name, daemon=True)
        self._job.start()

    def _steps_of(self, n: int) -> str:
        done = 0
        while done < n and not self._stop.is_set():
            records = self.exploration.step(1)
            for record in records:
                self._record(record)
            if not records:
                break
            done += len(records)
        return f"{done} node(s) processed" + (" (paused)" if self._stop.is_set() else "")

    def _run(self) -> str:
        report = self.exploration.run(self.workers.value, progress=False, on_step=self._record)
        return report.headline()

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
        self._post("note", f"approved {opened['count']} gated question(s)")

    def _prune_gated(self) -> None:
        chosen = list(self.gate_list.value)
        if not chosen:
            raise ValueError("select gated questions to prune")
        for node_id in chosen:
            self.exploration.prune(node_id)
        self._post("note", f"pruned {len(chosen)} gated question(s)")

    def _prune_selected(self) -> None:
        node_id = self.network.selected
        if not node_id:
            raise ValueError("click a node in the graph first")
        cascaded = self.exploration.prune(node_id)["cascaded"]
        self._post("note", f"pruned the branch under {node_id} ({len(cascaded)} question(s) below it)")

    def _export(self) -> None:
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

    # -- widget writing (kernel task only) ------------------------------------------------

    def _post(self, kind: str, value: Any) -> None:
        """Queue news for the kernel task and wake it (from any thread)."""
        self._inbox.put((kind, value))
        self._pump.wake()

    def _say(self) -> None:
        """The last note, and the last error under it until the next job starts."""
        text = f"<div>{html.escape(self._note)}</div>"
        if self._error:
            text += f"<div style='color:#b42323'>error: {html.escape(self._error)}</div>"
        self.message.value = text

    def _show_counts(self) -> None:
        counts = self.network.feed.counts()
        questions = sum(counts[s] for s in _STATUS_ORDER)
        self.progress.max = max(questions, 1)
        self.progress.value = counts["synthesized"] + counts["saturated"]
        parts = [f"{counts[s]} {s}" for s in _STATUS_ORDER if counts[s]]
        parts.append(f"{counts['answers']} answers")
        self.counts.value = (
            f"<span>{' · '.join(parts)} · graph <b>{html.escape(self.network.feed.status)}</b></span>"
        )

    def _show_gates(self) -> None:
        gated = self.network.feed.gated()
        options = [(clip(text, 90), node_id) for node_id, text in gated.items()]
        if options != list(self.gate_list.options):
            self.gate_list.options = options
        self.gate_note.value = (
            f"{len(gated)} gated question(s) wait for approval." if gated else "No gated questions."
        )
        for control in (self.approve_button, self.approve_all_button, self.prune_gate_button):
            control.disabled = not gated

    def _inspect(self, node_id: str) -> None:
        self._inspected = node_id
        self.prune_branch_button.disabled = not node_id
        if not node_id:
            self.inspector.value = "<i>Click a node in the graph to inspect it.</i>"
            return
        self.inspector.value = inspector_html(self.exploration.inspect(node_id))


def inspector_html(details: dict[str, Any]) -> str:
    """A node's details as HTML, every model-written string escaped."""
    node = details["node"]
    meta = dict(node["metadata"])
    synthesis = meta.pop("synthesis", None)
    rows = [
        f"<h4 style='margin:4px 0'>{html.escape(node['node_type'])} · {html.escape(node['status'])}"
        f"{' (' + html.escape(node['status_reason']) + ')' if node['status_reason'] else ''}"
        f" · depth {node['depth']}</h4>",
        f"<p><b>{'Question' if node['node_type'] == 'question' else 'Answer'}:</b> "
        f"{html.escape(node['text'])}</p>",
    ]
    answers = [c for c in details["children"] if c["node_type"] == "answer"]
    for answer in answers:
        rows.append(f"<p><b>Answer:</b> {html.escape(answer['text'])}</p>")
    subs = [c for c in details["children"] if c["node_type"] == "question"]
    if subs:
        items = "".join(
            f"<li>{html.escape(c['text'])} <i>({html.escape(c['status'])})</i></li>" for c in subs
        )
        rows.append(f"<p><b>Sub-questions:</b></p><ul>{items}</ul>")
    if synthesis:
        rows.append(f"<p><b>Synthesis:</b> {html.escape(str(synthesis))}</p>")
    for link in details["links"]:
        note = link["metadata"].get("insight") or link["metadata"].get("tension") or ""
        rows.append(
            f"<p><b>{html.escape(link['edge_type'])}</b> {html.escape(link['from_node'])} — "
            f"{html.escape(link['to_node'])}: {html.escape(note)}</p>"
        )
    rows.append(
        f"<details><summary>Metadata</summary><pre>{html.escape(json.dumps(meta, indent=1))}</pre></details>"
    )
    calls = details["llm_calls"]
    if len(calls):
        shown = calls[
            ["role", "worker", "model", "prompt_tokens", "completion_tokens", "latency_s", "outcome", "error"]
        ]
        rows.append(
            f"<details open><summary>LLM calls ({len(calls)})</summary>"
            f"{shown.to_html(index=False, escape=True, float_format='{:.3f}'.format)}</details>"
        )
    else:
        rows.append("<p><i>No LLM calls logged for this node.</i></p>")
    rows.append(f"<p style='color:#777'>{html.escape(node['node_id'])}</p>")
    return "".join(rows)


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
