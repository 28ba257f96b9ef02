"""``NetworkWidget``: the live question tree, an anywidget drawing with pyvis's own vis-network build."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anywidget
import traitlets

from ..store import Store
from .assets import static_text, view_script, vis_network_source
from .graph_feed import DeltaMessage, GraphFeed, SnapshotMessage, snapshot_at


class NetworkWidget(anywidget.AnyWidget):
    """A live, incremental view of one graph.

    Call :meth:`refresh` (from the kernel's thread; ``ExplorationView`` and
    :meth:`live` do it for you) to send what changed. A view that opens, or
    that sees a gap in the deltas, asks for a full snapshot. Clicking a node
    sets :attr:`selected`. :meth:`show_past` draws the graph as it was at an
    event (a ``snapshot`` message marked ``past``) and holds the live deltas
    until :meth:`show_live` sends a fresh snapshot (docs/architecture/faces.md,
    "The live view's protocol").
    """

    _esm = view_script()
    # The panel's few rules ride along: a widget's CSS is the page's (views/static/panel.css).
    _css = static_text("network.css") + static_text("panel.css")
    selected = traitlets.Unicode("", help="Id of the node clicked in the view ('' for none).").tag(sync=True)
    height = traitlets.Unicode("520px").tag(sync=True)
    show_status = traitlets.Bool(True, help="Whether the legend says the graph's status.").tag(sync=True)

    def __init__(self, store: Store, graph_id: str, *, height: str = "520px") -> None:
        super().__init__(height=height)
        self.feed = GraphFeed(store, graph_id)
        self._pump: Any = None
        self.past: SnapshotMessage | None = None  # the past snapshot shown (None: the live graph)
        # What the view's "Back to live" asks for; the history slider puts itself back to its end too.
        self.on_live: Callable[[], None] = self.show_live
        self.on_msg(self._on_view_message)

    def refresh(self) -> DeltaMessage | None:
        """Send views what changed since the last refresh; returns the delta (None: nothing did).

        While the view shows the past the feed still follows the store (the panel reads its
        counts), but the delta is held: :meth:`show_live` sends the present whole.
        """
        delta = self.feed.delta()
        if delta is not None and self.past is None:
            self._emit(delta)
        return delta

    def show_past(self, event_id: int, label: str) -> SnapshotMessage:
        """Draw the graph as it was at ``event_id`` (``label``: what the view says it shows)."""
        state = self.feed.store.get_state_at(self.feed.graph_id, event_id)
        self.past = snapshot_at(state, label)
        self._emit(self.past)
        return self.past

    def show_live(self) -> None:
        """Back to the live graph: a fresh snapshot, then deltas again."""
        self.past = None
        self._emit(self.feed.snapshot())

    def live(self, interval_s: float = 0.5) -> NetworkWidget:
        """Keep refreshing from the kernel's event loop (changes by other processes included)."""
        from .kernel_pump import KernelPump

        if self._pump is None:
            self._pump = KernelPump(self.refresh, interval_s=interval_s)
        self._pump.start()
        return self

    def stop(self) -> None:
        """Stop :meth:`live` refreshing."""
        if self._pump is not None:
            self._pump.stop()

    def _on_view_message(self, _widget: object, content: dict[str, Any], _buffers: object) -> None:
        if isinstance(content, dict) and content.get("type") == "live":
            if self.past is not None:
                self.on_live()
            return
        if not isinstance(content, dict) or content.get("type") != "hello":
            return
        if content.get("need_vis"):
            self._emit({"type": "vis", "source": vis_network_source()})
        self._emit(self.past if self.past is not None else self.feed.snapshot())

    def _emit(self, message: Mapping[str, Any]) -> None:
        self.send(message)
