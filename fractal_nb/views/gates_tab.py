"""The Gates tab: the gated questions with Approve, Approve all and Prune, and the held questions' cards.

The gated questions are a :class:`GateList` (each whole, wrapped, escaped, with its
tick box); the questions a worker holds for the person are :class:`HeldQuestion`
cards (docs/architecture/engine.md, "Halts"), read through ``Exploration.held()`` only when
the graph changed while gates are up. Every button calls the facade
(``Exploration.approve`` / ``prune`` / ``choose``) through the panel's handler, so a
refusal becomes the panel's error and nothing changes (docs/architecture/faces.md, "The
live view's protocol").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from ..text import clip
from .held_questions import Act, GateList, HeldQuestion
from .panel_layout import button

if TYPE_CHECKING:
    from ..exploration.exploration import Exploration
    from .network_widget import NetworkWidget


class GatesTab:
    """The Gates tab of one panel, acting through ``exploration`` and the panel's handler."""

    def __init__(
        self, exploration: Exploration, network: NetworkWidget, handler: Act, post: Callable[[str, Any], None]
    ) -> None:
        self.exploration = exploration
        self.network = network
        self._handler = handler
        self._post = post  # news for the kernel task: what an action did
        self.gate_list = GateList()  # each gated question whole, wrapped, with its tick box (issue 38)
        self.approve_button = button("Approve", "check")
        self.approve_all_button = button("Approve all", "check-double", style="success")
        self.prune_gate_button = button("Prune", "cut", style="danger")
        self.gate_note = widgets.HTML("No gated questions.")
        self.held_box = widgets.VBox([])  # questions a worker holds for the person ("Halts")
        self.held_cards: list[HeldQuestion] = []
        self._held_key: tuple[Any, ...] = ()
        self.waiting = 0  # the gated and held questions shown at the last refresh
        self.page = [
            self.gate_note,
            self.gate_list,
            widgets.HBox([self.approve_button, self.approve_all_button, self.prune_gate_button]),
            self.held_box,
        ]
        self.approve_button.on_click(handler(lambda: self.approve(list(self.gate_list.value))))
        self.approve_all_button.on_click(handler(lambda: self.approve(None)))
        self.prune_gate_button.on_click(handler(self._prune_gated))
        self.gate_list.observe(self._show_chosen_gate, names="value")

    def approve(self, node_ids: list[str] | None) -> None:
        """Approve the gated ``node_ids`` (None: every gated question)."""
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
        """The person's answer to a held question: it reopens with it.

        See docs/architecture/engine.md, "Halts".
        """
        chosen = self.exploration.choose(node_id, choice)["choice"]
        self._post(
            "note",
            f"answered {node_id} ({clip(chosen['text'], 80)}): it reopens with your "
            f"{'clarification' if chosen['kind'] == 'confusion' else 'choice'}; Step or Run goes on with it",
        )

    def _prune_held(self, node_id: str) -> None:
        self.exploration.prune(node_id)
        self._post("note", f"pruned the held question {node_id}")

    def _show_chosen_gate(self, change: dict[str, Any]) -> None:
        """A gate chosen in the list is selected (and shown) in the graph too."""
        chosen = change["new"]
        if chosen:
            self.network.selected = chosen[0]

    def show(self) -> dict[str, str]:
        """Show the gated and held questions as the feed has them; the gated ones not held, by id."""
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
        self.waiting = len(gated) + len(held)
        return gated

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
