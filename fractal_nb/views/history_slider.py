"""The history slider: replay a graph's run and jump to any head, through the live view's own protocol.

The slider runs over the graph's own event ids (``Exploration.events()``; a file's
other graphs have events between them). Moving it sends the network widget a
``snapshot`` message built from the graph as it was at that event
(``NetworkWidget.show_past``: ``store.get_state_at`` folded by
``graph_feed.snapshot_at``, drawn by the same ``network.js``); while it is back in
time the live deltas are held and the view says it shows the past. **Live** (or
the slider's right end) sends a fresh snapshot of the present. A button per head
jumps to it, and marks under the track show where the heads are
(docs/architecture/faces.md, "The live view's protocol").
"""

from __future__ import annotations

import html
from bisect import bisect_right
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from ..errors import FractalError

if TYPE_CHECKING:
    from ..exploration.exploration import Exploration
    from .network_widget import NetworkWidget

MUTED_STYLE = "color:var(--jp-ui-font-color2, #57606a)"
ERROR_STYLE = "color:var(--jp-error-color1, #b42323)"
REPLAY_FRAMES = 60  # a replay takes about this many steps, however long the log


class HistorySlider(widgets.VBox):  # type: ignore[misc]
    """A slider over one graph's events, a Play button that replays them, head buttons and Live."""

    def __init__(self, exploration: Exploration, network: NetworkWidget) -> None:
        self.exploration = exploration
        self.network = network
        self.events: list[int] = []  # the graph's event ids, oldest first
        self.heads: list[tuple[int, int]] = []  # (turn, head event)
        self.turn_starts: list[tuple[int, int]] = []  # (started event, turn)
        self.slider = widgets.IntSlider(
            value=0,
            min=0,
            max=0,
            readout=False,
            continuous_update=False,
            description="history",
            layout=widgets.Layout(width="calc(100% - 16px)"),  # room for the thumb at the right end
        )
        # Play and the slider are linked here, in the kernel, never in the page: a page link echoes
        # every value the kernel sets back as if the reader had moved the slider, and an echo that
        # arrived after a run's next refresh put the live view in the past (issue 38).
        self.play = widgets.Play(value=0, min=0, max=0, step=1, interval=150, description="Replay")
        self.live_button = widgets.Button(
            description="Live",
            icon="broadcast-tower",
            tooltip="Back to the graph as it is now",
            layout=widgets.Layout(width="auto"),
            disabled=True,
        )
        self.position = widgets.HTML()
        self.marks = widgets.HTML()
        self.head_bar = widgets.HBox(layout=widgets.Layout(flex_flow="row wrap"))
        self._moving = False  # the slider is being set from Python: not a reader's move
        self.slider.observe(self._moved, names="value")
        self.play.observe(self._played, names="value")
        self.live_button.on_click(lambda _b: self.live())
        network.on_live = self.live
        super().__init__(
            [
                widgets.HBox(
                    [self.play, self.live_button, self.position], layout=widgets.Layout(align_items="center")
                ),
                self.slider,
                self.marks,
                self.head_bar,
            ]
        )

    @property
    def showing_past(self) -> bool:
        """Whether the view shows the past (live deltas held)."""
        return self.network.past is not None

    def refresh(self) -> None:
        """Take the graph's new events and heads (the panel calls this when the graph changed)."""
        since = self.events[-1] if self.events else 0
        self.events.extend(int(e) for e in self.exploration.events(since)["event_id"])
        turns = self.exploration.turns()
        self.turn_starts = [
            (int(e), int(t)) for e, t in zip(turns["started_event"], turns["turn"], strict=True)
        ]
        heads = self.exploration.heads()
        found = [(int(t), int(e)) for t, e in zip(heads["turn"], heads["head_event"], strict=True)]
        self.play.step = max(1, len(self.events) // REPLAY_FRAMES)
        self._moving = True
        try:
            self.slider.max = self.play.max = max(len(self.events) - 1, 0)
            if not self.showing_past:
                self._place(self.slider.max)
        finally:
            self._moving = False
        if found != self.heads:
            self.heads = found
            self.head_bar.children = [self._head_button(turn, event) for turn, event in found]
        self._show_marks()
        self._show_position()

    def jump(self, event_id: int) -> None:
        """Show the graph as it was at ``event_id`` (one of :attr:`events`)."""
        index = self.events.index(event_id)
        self._place(index)
        self._show_at(index)

    def live(self) -> None:
        """Back to the present: a fresh snapshot, deltas again, the slider at its end (a replay stops)."""
        self.play.playing = False
        self._place(self.slider.max)
        self.network.show_live()
        self._show_position()

    def label(self, event_id: int) -> str:
        """What the view says it shows at ``event_id``: the event, its turn, the head it is (if one)."""
        turn = self.turn_at(event_id)
        head = next((t for t, e in self.heads if e == event_id), None)
        where = f"event {event_id} (turn {turn}" + (f", head {head})" if head is not None else ")")
        return where

    def turn_at(self, event_id: int) -> int:
        """The turn open (or last ended) at ``event_id``."""
        starts = [e for e, _ in self.turn_starts]
        i = bisect_right(starts, event_id)
        return self.turn_starts[max(i - 1, 0)][1] if self.turn_starts else 1

    # -- internals --------------------------------------------------------------------

    def _place(self, index: int) -> None:
        """Put the slider and the Play button at ``index``, as Python's own move (no reader's)."""
        was, self._moving = self._moving, True
        try:
            self.play.value = self.slider.value = index
        finally:
            self._moving = was

    def _moved(self, change: dict[str, Any]) -> None:
        """The reader moved the slider (or a replay did): the view follows, and so does Play."""
        if self._moving or not self.events:
            return
        index = int(change["new"])
        self._place(index)  # Play follows the slider
        if index >= len(self.events) - 1:
            self.live()
        else:
            self._show_at(index)

    def _played(self, change: dict[str, Any]) -> None:
        """A replay's frame (the page's Play moved): the slider moves there, as if the reader had."""
        if self._moving:
            return
        self.slider.value = int(change["new"])

    def _show_at(self, index: int) -> None:
        """Show the past at ``index``; a refusal (a file older than its history) is said, never raised."""
        event = self.events[index]
        try:
            self.network.show_past(event, self.label(event))
        except FractalError as exc:  # the view keeps what it showed
            self.position.value = f"<span style='{ERROR_STYLE}'>{html.escape(f'event {event}: {exc}')}</span>"
            return
        self._show_position()

    def _head_button(self, turn: int, event: int) -> widgets.Button:
        before = event < self.events[0]  # a fork keeps the heads of its source: their events are not its own
        button = widgets.Button(
            description=f"Head {turn}",
            icon="flag",
            tooltip=(
                f"Made before this graph was forked (event {event} is its source's): open the source"
                if before
                else f"The graph as turn {turn} ended (event {event})"
            ),
            disabled=before,
            layout=widgets.Layout(width="auto"),
        )
        button.on_click(lambda _b: self.jump(event))
        return button

    def _show_position(self) -> None:
        past = self.network.past
        self.live_button.disabled = past is None
        for (_, event), button in zip(self.heads, self.head_bar.children, strict=True):
            button.button_style = "info" if past is not None and past["seq"] == event else ""
        text = (
            f"showing the past: {past['past']} · live updates held"
            if past is not None
            else f"live · {len(self.events)} events"
        )
        self.position.value = f"<span style='{MUTED_STYLE}'>{html.escape(text)}</span>"

    def _show_marks(self) -> None:
        """A mark under the track at each head (positions as percentages of the track)."""
        span = max(len(self.events) - 1, 1)
        marks = []
        for turn, event in self.heads:
            if event < self.events[0]:  # a head of the graph this one was forked from
                continue
            left = 100 * self.events.index(event) / span
            # The ▲ sits at the head; near the right end the label goes to its left, inside the strip.
            right = left > 85
            text, shift = (f"head {turn} ▲", "calc(-100% + 0.5em)") if right else (f"▲ head {turn}", "-0.5em")
            marks.append(
                f"<span class='fractal-head-mark' title='head {turn}: event {event}' "
                f"style='position:absolute;left:{left:.2f}%;transform:translateX({shift});"
                f"white-space:nowrap'>{text}</span>"
            )
        self.marks.value = (
            "<div class='fractal-head-marks' style='position:relative;height:1.4em;margin:0 24px 0 calc(var("
            f"--jp-widgets-inline-label-width, 80px) + 8px);{MUTED_STYLE}'>{''.join(marks)}</div>"
        )
