"""The Gates tab's held questions: a worker's question to the person, answered in the panel.

A worker that halts on an ambiguity offers options with their tradeoffs; on a
confusion it asks a clarifying question (docs/architecture.md, "Halts"). Each
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

from ..model import HaltKind
from ..text import clip

Act = Callable[[Callable[[], object]], Callable[[object], None]]
"""The panel's handler: wraps an action so its error becomes the panel's message."""


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
