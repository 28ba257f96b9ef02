"""The Gates tab's questions: the gated ones to approve or prune, and a worker's questions to the person.

:class:`GateList` lists the gated questions, each whole and wrapped beside its
tick box (issue 38: a one-line list cut each at ~45 characters, so a person could
not read what they decided); the panel's Approve and Prune act on the ticked ones.

A worker that halts on an ambiguity offers options with their tradeoffs; on a
confusion it asks a clarifying question (docs/architecture/engine.md, "Halts"). Each
held question shows as a card: a button per option, a text box for the person's
own answer or clarification, and Prune. Every click calls the facade
(``Exploration.choose`` / ``prune``) through the panel's handler, so a refusal
is shown as the panel's error and nothing changes.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets
import traitlets

from ..text import clip
from ..vocabulary import HaltKind

Act = Callable[[Callable[[], object]], Callable[[object], None]]
"""The panel's handler: wraps an action so its error becomes the panel's message."""


TICKED_BORDER = "3px solid var(--jp-brand-color1, #1f77b4)"
UNTICKED_BORDER = "3px solid transparent"
WRAPPED = "white-space:normal;overflow-wrap:anywhere;line-height:1.4;padding:5px 0"


class GateList(widgets.VBox):  # type: ignore[misc]
    """The gated questions, each whole and wrapped beside its tick box; ``value``: the ticked ids.

    Set ``options`` to ``(text, node_id)`` pairs (as a ``SelectMultiple`` takes them, whose
    place it takes); ``value`` is the tuple of ticked node ids in the list's order, and may
    be set too. A question still listed keeps its tick when the options change. Every
    question's text reaches HTML escaped. The list scrolls in its own box.

    >>> gates = GateList()
    >>> gates.options = [("Which <b>ports</b> grew first, and why did the river ports fall behind?", "n-1"),
    ...                  ("Who paid for the roads?", "n-2")]
    >>> gates.rows[0].children[1].value
    "<div style='white-space:normal;...'>Which &lt;b&gt;ports&lt;/b&gt; grew first, ..."
    >>> gates.rows[1].children[0].value = True  # the person ticks the second
    >>> gates.value
    ('n-2',)
    """

    options = traitlets.Tuple()
    value = traitlets.Tuple()

    def __init__(self) -> None:
        self.rows: list[widgets.HBox] = []
        self._rows_by_id: dict[str, tuple[str, widgets.HBox]] = {}  # node id: its text and its row
        self._showing = False  # the ticks are being set from ``value``: no tick is the person's
        super().__init__([], layout=widgets.Layout(width="100%", max_height="360px", overflow="auto"))
        self.add_class("fractal-gate-list")

    @traitlets.validate("options")
    def _pairs(self, proposal: dict[str, Any]) -> tuple[tuple[str, str], ...]:
        return tuple((str(text), str(node_id)) for text, node_id in proposal["value"])

    @traitlets.validate("value")
    def _listed(self, proposal: dict[str, Any]) -> tuple[str, ...]:
        chosen = {str(node_id) for node_id in proposal["value"]}
        return tuple(node_id for _text, node_id in self.options if node_id in chosen)

    @traitlets.observe("options")
    def _rebuild(self, change: dict[str, Any]) -> None:
        """A row per option; a question still listed keeps its row, and so a tick still on its way.

        Rebuilding every row lost a tick the page sent while the list changed (the box it
        ticked was closed before the tick arrived, issue 41's review).
        """
        before, self._rows_by_id = self._rows_by_id, {}
        for text, node_id in change["new"]:
            kept = before.pop(node_id, None)
            if kept is not None and kept[0] != text:
                _close_row(kept[1])
                kept = None
            self._rows_by_id[node_id] = kept or (text, self._row(text, node_id, node_id in self.value))
        for _text, row in before.values():
            _close_row(row)
        self.rows = [row for _text, row in self._rows_by_id.values()]
        self.children = tuple(self.rows)
        self.value = self._ticks()

    @traitlets.observe("value")
    def _show_ticks(self, change: dict[str, Any]) -> None:
        self._showing = True
        try:
            for row, (_text, node_id) in zip(self.rows, self.options, strict=True):
                ticked = node_id in change["new"]
                row.children[0].value = ticked
                row.layout.border_left = TICKED_BORDER if ticked else UNTICKED_BORDER
        finally:
            self._showing = False

    def _row(self, text: str, node_id: str, ticked: bool) -> widgets.HBox:
        box = widgets.Checkbox(
            value=ticked,
            indent=False,
            description="",
            tooltip=f"Tick to approve or prune {node_id}",
            layout=widgets.Layout(width="28px", flex="0 0 auto"),
        )
        box.observe(self._ticked, names="value")
        question = widgets.HTML(
            f"<div style='{WRAPPED}'>{html.escape(text)}</div>",
            layout=widgets.Layout(flex="1 1 auto", min_width="0"),
        )
        return widgets.HBox(
            [box, question],
            layout=widgets.Layout(
                align_items="flex-start",
                border_left=TICKED_BORDER if ticked else UNTICKED_BORDER,
                padding="0 0 0 4px",
                margin="2px 0",
            ),
        )

    def _ticks(self) -> tuple[str, ...]:
        """The ids of the ticked questions, in the list's order (what the boxes say)."""
        return tuple(node_id for node_id, (_text, row) in self._rows_by_id.items() if row.children[0].value)

    def _ticked(self, _change: dict[str, Any]) -> None:
        """The person ticked or cleared a box: ``value`` follows."""
        if not self._showing:
            self.value = self._ticks()

    def close(self) -> None:
        """Close the list and every row in it."""
        self.options = ()
        super().close()


def _close_row(row: widgets.HBox) -> None:
    """Close a row of the list and its widgets."""
    for child in row.children:
        child.close()
    row.close()


class HeldQuestion(widgets.VBox):  # type: ignore[misc]
    """One held question: what the worker asks, an option button each, a free answer, Prune."""

    def __init__(
        self,
        held: dict[str, Any],
        handler: Act,
        choose: Callable[[str, int | str], None],
        prune: Callable[[str], None],
    ) -> None:
        self.node_id: str = held["node_id"]
        self.kind: str = held["kind"]
        ambiguity = self.kind == HaltKind.AMBIGUITY
        options = list(held["options"] or [])
        self.text = widgets.HTML(held_html(held))
        self.option_buttons = [
            widgets.Button(
                description=clip(str(o["option"]), 48),
                tooltip=clip(f"{o['option']}: {o['tradeoffs']}", 300),
                button_style="info",
                layout=widgets.Layout(width="auto"),
            )
            for o in options
        ]
        for index, button in enumerate(self.option_buttons):
            button.on_click(handler(self._picker(choose, index)))
        self.answer = widgets.Text(
            placeholder="or your own answer" if ambiguity else "your clarification",
            layout=widgets.Layout(width="60%"),
        )
        self.answer_button = widgets.Button(
            description="Answer" if ambiguity else "Clarify",
            icon="reply",
            layout=widgets.Layout(width="auto"),
        )
        self.answer_button.on_click(handler(lambda: choose(self.node_id, self._typed())))
        self.prune_button = widgets.Button(
            description="Prune", icon="cut", button_style="danger", layout=widgets.Layout(width="auto")
        )
        self.prune_button.on_click(handler(lambda: prune(self.node_id)))
        row = widgets.Layout(flex_flow="row wrap", align_items="center")
        super().__init__(
            [
                self.text,
                widgets.HBox(self.option_buttons, layout=row),
                widgets.HBox([self.answer, self.answer_button, self.prune_button], layout=row),
            ],
            layout=widgets.Layout(border_left="3px solid #1f77b4", padding="0 0 0 .5em", margin="4px 0"),
        )

    def close(self) -> None:
        """Close the card and every widget in it."""
        for child in self.children:
            for widget in getattr(child, "children", ()):
                widget.close()
            child.close()
        super().close()

    def _picker(self, choose: Callable[[str, int | str], None], index: int) -> Callable[[], None]:
        """The action of the option button ``index``: choose that option."""
        return lambda: choose(self.node_id, index)

    def _typed(self) -> str:
        text = str(self.answer.value).strip()
        if not text:
            what = (
                "choose an option or type your own answer" if self.option_buttons else "type a clarification"
            )
            raise ValueError(f"{what} first")
        return text


def held_html(held: dict[str, Any]) -> str:
    """A held question as HTML, every model-written string escaped.

    >>> held_html({"node_id": "n-1", "question": "<b>Q</b>?", "kind": "confusion", "asks": "Which?",
    ...            "options": []})
    '<p><b>Question:</b> &lt;b&gt;Q&lt;/b&gt;?<br><b>The worker asks (confusion):</b> Which?</p>'
    """
    rows = [
        f"<p><b>Question:</b> {html.escape(str(held['question']))}<br>"
        f"<b>The worker asks ({html.escape(str(held['kind']))}):</b> {html.escape(str(held['asks']))}</p>"
    ]
    options = held["options"] or []
    if options:
        items = "".join(
            f"<li><b>{html.escape(str(o['option']))}</b>: {html.escape(str(o['tradeoffs']))}</li>"
            for o in options
        )
        rows.append(f"<ol start='0' class='fractal-held-options'>{items}</ol>")
    return "".join(rows)
