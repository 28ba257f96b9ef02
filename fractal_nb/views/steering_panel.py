"""Steering from the panel: Ask and Widen, the Inspector's Deepen, Redecompose and Note, the Turns tab.

Each control calls the facade (``Exploration.ask`` / ``widen`` / ``deepen`` /
``redecompose`` / ``note`` / ``fork``, docs/architecture/store.md "Turns and heads")
through the panel's background job, so a refusal or a slow model call never
blocks or raises into the kernel: the panel's message line says what the call
did (its turn, the nodes it created and reopened) or why it was refused. The
controls are disabled, with the reason beside them, while a job runs or the
graph is in error. Every string from the graph reaches HTML escaped.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
import pandas as pd

from ..exploration.steering import TurnStep
from ..exploration.terms import MAX_LEVELS, MAX_WIDEN
from ..text import clip
from ..vocabulary import GraphStatus

if TYPE_CHECKING:
    from ..exploration.exploration import Exploration
    from .network_widget import NetworkWidget

MUTED_STYLE = "color:var(--jp-ui-font-color2, #57606a)"
ASK_UNDER = (("under the root", "root"), ("under the selected question", "selected"))
Job = Callable[[str, Callable[[], tuple[str, bool]]], None]
"""The panel's ``_start``: run a named piece of work in the background, its outcome the message."""
# The Turns tab's tables: the short columns side by side, the long ones on a line of their own below each
# row, so each table fits the tab's 300 px column and its header reads whole (issue 42: it was clipped).
TURN_TABLE = ["turn", "kind", "head_event", "status", "tokens"]
TURN_BELOW = ["asked", "started_event"]
HEAD_TABLE = ["turn", "head_event", "status"]
HEAD_BELOW = ["open", "synthesized", "saturated", "superseded", "root_synthesis"]
THIS_GRAPH = " (this graph)"


def step_text(step: TurnStep, what: str) -> str:
    """What a steering call did, for the panel's message line.

    >>> step_text(TurnStep(2, "ask", ("n-1",), ("n-0",)), "asked under the root")
    'turn 2: asked under the root · 1 node(s) created, 1 reopened · Run works on them'
    >>> step_text(TurnStep(2, "deepen", (), ()), "deepened 1 level(s)")
    'turn 2: deepened 1 level(s) · 0 node(s) created, 0 reopened · nothing new for Run'
    """
    next_step = "Run works on them" if step.created or step.reopened else "nothing new for Run"
    return (
        f"turn {step.turn}: {what} · {len(step.created)} node(s) created, "
        f"{len(step.reopened)} reopened · {next_step}"
    )


def frame_html(frame: pd.DataFrame, columns: list[str], empty: str, below: tuple[str, ...] = ()) -> str:
    """``frame`` as an escaped HTML table (text on one line, clipped), or ``empty`` in italics.

    ``columns`` stand side by side, headed by their names in words; each of ``below`` is a
    ``name value`` on a line under its row, spanning the table, so a long text wraps there.

    >>> frame = pd.DataFrame({"turn": [1], "head_event": [9], "asked": ["<b>x</b>"]})
    >>> print(frame_html(frame, ["turn", "head_event"], "none", below=("asked",)))
    <table class="fractal-turns"><thead><tr><th>turn</th><th>head event</th></tr></thead><tbody>\
<tr class="fractal-record"><td>1</td><td>9</td></tr><tr class="fractal-below"><td colspan="2">\
<span class="fractal-field"><b>asked</b> &lt;b&gt;x&lt;/b&gt;</span></td></tr></tbody></table>
    """
    if frame.empty:
        return f"<p><i>{html.escape(empty)}</i></p>"
    head = "".join(f"<th>{html.escape(c.replace('_', ' '))}</th>" for c in columns)
    rows = []
    for record in frame.to_dict("records"):
        cells = "".join(f"<td>{html.escape(_cell(record[c]))}</td>" for c in columns)
        rows.append(f'<tr class="fractal-record">{cells}</tr>')
        fields = " · ".join(
            f'<span class="fractal-field"><b>{html.escape(c.replace("_", " "))}</b> '
            f"{html.escape(_cell(record[c]))}</span>"
            for c in below
            if _cell(record[c])
        )
        if fields:
            rows.append(f'<tr class="fractal-below"><td colspan="{len(columns)}">{fields}</td></tr>')
    return (
        f'<table class="fractal-turns"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )


def lineage_lines(lineage: pd.DataFrame, graph_id: str, at_head: dict[int, int]) -> list[str]:
    """A line per graph of ``lineage()``: its id, where it was forked from, its status.

    ``at_head`` maps this graph's head events to their turns, to name the head a fork was made at.

    >>> lineage = pd.DataFrame({"graph_id": ["g-1", "g-2"], "forked_from": [None, "g-1"],
    ...                         "forked_at": [pd.NA, 29], "status": ["completed", "active"]})
    >>> for line in lineage_lines(lineage, "g-1", {29: 1}):
    ...     print(line)
    g-1 (this graph): the original · completed
    g-2: forked from this graph at event 29 (head 1) · active
    """
    lines = []
    for row in lineage.itertuples():
        name = f"{row.graph_id}{THIS_GRAPH if row.graph_id == graph_id else ''}"
        if pd.isna(row.forked_from):  # an original
            where = "the original"
        else:
            source = "this graph" if row.forked_from == graph_id else str(row.forked_from)
            head = at_head.get(int(row.forked_at)) if row.forked_from == graph_id else None
            where = f"forked from {source} at event {int(row.forked_at)}" + (
                f" (head {head})" if head else ""
            )
        lines.append(f"{name}: {where} · {row.status}")
    return lines


def _cell(value: Any) -> str:
    r"""A table cell: blank for a missing value, a whole float as an integer, text on one line, clipped.

    >>> [_cell(None), _cell(float("nan")), _cell(32.0), _cell(0.25), _cell("a\n b")]
    ['', '', '32', '0.25', 'a b']
    """
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return clip(" ".join(str(value).split()), 160)


class SteeringControls:
    """The steering widgets of one panel, acting through ``exploration`` and the panel's job."""

    def __init__(
        self, exploration: Exploration, network: NetworkWidget, start: Job, post: Callable[[str, Any], None]
    ) -> None:
        self.exploration = exploration
        self.network = network
        self._start = start
        self._post = post  # news for the kernel task: ("clear", a text box) once its call succeeded
        self._make_controls()
        self._make_bars()
        self._make_turns()

    def _make_controls(self) -> None:
        """The steering controls: ask, widen, deepen, redecompose, note."""
        layout = widgets.Layout(width="auto")
        self.ask_text = widgets.Text(
            placeholder="A follow-up question…", layout=widgets.Layout(width="320px")
        )
        self.ask_under = widgets.Dropdown(
            options=ASK_UNDER, value="root", layout=widgets.Layout(width="210px")
        )
        self.ask_button = widgets.Button(
            description="Ask", icon="question", tooltip="Ask a follow-up: Run answers it", layout=layout
        )
        self.widen_count = widgets.BoundedIntText(
            value=2, min=1, max=MAX_WIDEN, layout=widgets.Layout(width="60px")
        )
        self.widen_button = widgets.Button(
            description="Widen",
            icon="arrows-alt-h",
            tooltip="Ask the model for N more seed questions the graph does not cover (one model call)",
            layout=layout,
        )
        self.steer_note = widgets.HTML()  # why steering waits
        self.levels = widgets.BoundedIntText(
            value=1, min=1, max=MAX_LEVELS, layout=widgets.Layout(width="55px")
        )
        self.deepen_button = widgets.Button(
            description="Deepen", icon="level-down-alt", tooltip="Let this branch go deeper", layout=layout
        )
        self.hint = widgets.Text(placeholder="hint (optional)", layout=widgets.Layout(width="220px"))
        self.redecompose_button = widgets.Button(
            description="Redecompose",
            icon="redo",
            tooltip="Answer it again with a different decomposition; the old sub-tree is superseded",
            layout=layout,
        )
        self.note_text = widgets.Textarea(
            placeholder="Your evidence or correction…", rows=2, layout=widgets.Layout(width="320px")
        )
        self.note_button = widgets.Button(
            description="Note", icon="sticky-note", tooltip="Add a note under this question", layout=layout
        )

    def _make_bars(self) -> None:
        """The bar above the tree (ask, widen) and the inspector's (deepen, redecompose, note)."""
        self.inspector_note = widgets.HTML()
        row = widgets.Layout(flex_flow="row wrap", align_items="center")
        self.bar = widgets.HBox(
            [
                self.ask_text,
                self.ask_under,
                self.ask_button,
                self.widen_count,
                self.widen_button,
                self.steer_note,
            ],
            layout=row,
        )
        self.inspector_bar = widgets.VBox(
            [
                widgets.HBox(
                    [
                        widgets.Label("levels"),
                        self.levels,
                        self.deepen_button,
                        self.hint,
                        self.redecompose_button,
                    ],
                    layout=row,
                ),
                widgets.HBox([self.note_text, self.note_button], layout=row),
                self.inspector_note,
            ]
        )

    def _make_turns(self) -> None:
        """The Turns tab's tables (turns, heads, forks) and its fork buttons."""
        row = widgets.Layout(flex_flow="row wrap", align_items="center")
        self.turns_table = widgets.HTML()
        self.heads_table = widgets.HTML()
        self.fork_list = widgets.HTML()  # this graph, where it was forked from, and its forks
        self.fork_bar = widgets.HBox(layout=row)
        self.forks: list[Exploration] = []  # the forks made here, newest last
        # The Turns tab: the tables scroll (views/control_panel.py), the fork buttons stay below them.
        self.turns_tables = widgets.VBox(
            [
                widgets.HTML("<b>Turns</b>"),
                self.turns_table,
                widgets.HTML("<b>Heads</b>"),
                self.heads_table,
                widgets.HTML("<b>Forks</b>"),
                self.fork_list,
            ]
        )
        self._heads: list[int] = []  # the head events the fork buttons were built for
        self._forks_shown = 0  # how many of ``forks`` the fork list was read after

    def bind(self, handler: Callable[[Callable[[], object]], Callable[[object], None]]) -> None:
        """Wire the buttons through the panel's click handler (errors become the message)."""
        self.ask_button.on_click(handler(self.ask))
        self.widen_button.on_click(handler(self.widen))
        self.deepen_button.on_click(handler(self.deepen))
        self.redecompose_button.on_click(handler(self.redecompose))
        self.note_button.on_click(handler(self.note))
        self._handler = handler

    # -- actions -----------------------------------------------------------------------

    def ask(self) -> None:
        """Ask the typed follow-up, under the root or the selected question."""
        question = self.ask_text.value.strip()
        if not question:
            raise ValueError("type a follow-up question first")
        under = None
        if self.ask_under.value == "selected":
            under = self._selected_question()

        def work() -> tuple[str, bool]:
            step = self.exploration.ask(question, under)
            self._post("clear", self.ask_text)
            where = "under the root" if under is None else f"under {under}"
            return step_text(step, f"asked {where}"), False

        self._start("ask", work)

    def widen(self) -> None:
        """Ask the model for the chosen number of new seed questions."""
        n = self.widen_count.value
        self._start("widen", lambda: (step_text(self.exploration.widen(n), f"widened by {n}"), False))

    def deepen(self) -> None:
        """Let the selected question's branch go the chosen number of levels deeper."""
        node_id, levels = self._selected_question(), self.levels.value
        self._start(
            "deepen",
            lambda: (
                step_text(self.exploration.deepen(node_id, levels), f"deepened {levels} level(s)"),
                False,
            ),
        )

    def redecompose(self) -> None:
        """Answer the selected question again, with the hint if one is typed."""
        node_id, hint = self._selected_question(), self.hint.value.strip() or None

        def work() -> tuple[str, bool]:
            step = self.exploration.redecompose(node_id, hint)
            self._post("clear", self.hint)
            return step_text(step, "redecomposed" + (" with a hint" if hint else "")), False

        self._start("redecompose", work)

    def note(self) -> None:
        """Add the typed note under the selected question."""
        node_id, text = self._selected_question(), self.note_text.value.strip()
        if not text:
            raise ValueError("type the note first")

        def work() -> tuple[str, bool]:
            step = self.exploration.note(node_id, text)
            self._post("clear", self.note_text)
            return step_text(step, "noted"), False

        self._start("note", work)

    def fork(self, head_event: int) -> str:
        """Fork at a head; what the message says: where the fork is and how to open it."""
        heads = self.exploration.heads()
        row = heads[heads["head_event"] == head_event].iloc[0]
        fork = self.exploration.fork(at=row)
        self.forks.append(fork)
        path = self.exploration.store.path
        where = (
            f"in {path}: Exploration.open({str(path)!r}, graph_id={fork.graph_id!r}, llm=...) opens it"
            if path is not None
            else "in this session's memory"
        )
        return (
            f"forked head {int(row['turn'])} (event {head_event}) into graph {fork.graph_id} {where}; "
            "the Turns tab lists it under Forks; view.steering.forks[-1] holds it (.view() shows it)"
        )

    def _selected_question(self) -> str:
        node_id = self.network.selected
        if not node_id or node_id not in self.network.feed.tree.questions:
            raise ValueError("click a question in the graph first")
        return node_id

    # -- showing (kernel task only) -------------------------------------------------------

    def show_controls(self, busy: bool, status: str) -> None:
        """Enable what can act now; say why the rest waits."""
        why = (
            "Steering waits while the job runs (Pause stops it)."
            if busy
            else "The graph is in error: Resume runs it again, then steer it."
            if status == GraphStatus.ERROR
            else ""
        )
        selected = self.network.selected in self.network.feed.tree.questions
        for control in (self.ask_button, self.widen_button):
            control.disabled = bool(why)
        for control in (self.deepen_button, self.redecompose_button, self.note_button):
            control.disabled = bool(why) or not selected
        self.steer_note.value = f"<span style='{MUTED_STYLE}'>{html.escape(why)}</span>" if why else ""
        inspector_why = why or ("" if selected else "Click a question to deepen, redecompose or note it.")
        note = f"<span style='{MUTED_STYLE}'>{html.escape(inspector_why)}</span>" if inspector_why else ""
        if self.inspector_note.value != note:
            self.inspector_note.value = note
        if len(self.forks) != self._forks_shown:  # a fork made here changes no event of this graph
            self.show_forks()

    def show_turns(self, first_event: int) -> None:
        """The Turns tab from ``turns()`` and ``heads()`` (the graph changed).

        ``first_event`` is the graph's first event: a fork keeps its source's earlier heads,
        which it cannot be forked at (their events are the source's), so their buttons wait.
        """
        turns, heads = self.exploration.turns(), self.exploration.heads()
        self.turns_table.value = frame_html(turns, TURN_TABLE, "No turns yet.", below=tuple(TURN_BELOW))
        self.heads_table.value = frame_html(
            heads, HEAD_TABLE, "No heads yet: Harvest ends a turn in a head.", below=tuple(HEAD_BELOW)
        )
        self.show_forks(heads)
        events = [int(e) for e in heads["head_event"]]
        if events != self._heads:
            self._heads = events
            buttons = []
            for turn, event in zip(heads["turn"], events, strict=True):
                before = event < first_event
                button = widgets.Button(
                    description=f"Fork here: head {int(turn)}",
                    icon="code-branch",
                    tooltip=(
                        f"Made before this graph was forked: fork its source at event {event}"
                        if before
                        else f"A new graph holding this one as it was at event {event}"
                    ),
                    disabled=before,
                    layout=widgets.Layout(width="auto"),
                )
                button.on_click(self._handler(self._forker(event)))
                buttons.append(button)
            self.fork_bar.children = buttons

    def show_forks(self, heads: pd.DataFrame | None = None) -> None:
        """The Forks list: this graph, the graph it was forked from, and every fork (``lineage()``).

        A fork made with Fork here shows in it at once (issue 38: only the message line said so),
        with the head it was made at and how to open it. A list, not a table: the ids read
        whole in the tab's column.
        """
        self._forks_shown = len(self.forks)
        lineage = self.exploration.lineage()
        if len(lineage) <= 1:
            self.fork_list.value = (
                "<p><i>No forks yet: Fork here makes a new graph holding this one as it was at a head; "
                "this one never changes.</i></p>"
            )
            return
        heads = self.exploration.heads() if heads is None else heads
        at_head = {int(e): int(t) for t, e in zip(heads["turn"], heads["head_event"], strict=True)}
        items = "".join(
            f"<li>{html.escape(line)}</li>"
            for line in lineage_lines(lineage, self.exploration.graph_id, at_head)
        )
        how = (
            "Exploration.open(path, graph_id=..., llm=...) opens one; read_only=True reads it, "
            "no model needed."
            if self.exploration.store.path is not None
            else "In memory: view.steering.forks holds the forks made here."
        )
        self.fork_list.value = (
            f"<ul class='fractal-forks' style='line-height:1.4;padding-left:1.2em'>{items}</ul>"
            f"<p style='{MUTED_STYLE}'>{html.escape(how)}</p>"
        )

    def _forker(self, event: int) -> Callable[[], Any]:
        return lambda: self._start("fork", lambda: (self.fork(event), False))
