"""The widget's protocol: hello → vis build + snapshot, deltas with sequence numbers, escaping.

Covers: views/assets.py, views/kernel_pump.py.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fractal_nb import GraphStore
from fractal_nb.views import NetworkWidget
from fractal_nb.views.assets import STATIC, VIEW_SCRIPT, vis_network_source
from fractal_nb.views.kernel_pump import KernelPump

HOSTILE = '<img src=x onerror="window.__pwned=1"> see href="javascript:alert(1)"'


def capture(widget: NetworkWidget) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    widget.send = sent.append  # the comm has no kernel on the other end here
    return sent


def test_a_view_that_says_hello_gets_vis_once_then_a_snapshot(fresh_store: GraphStore) -> None:
    g = fresh_store.create_graph("Why do tides turn?", "pulse", "autonomous")
    widget = NetworkWidget(fresh_store, g["graph_id"])
    sent = capture(widget)
    widget._on_view_message(widget, {"type": "hello", "need_vis": True}, [])
    assert [m["type"] for m in sent] == ["vis", "snapshot"]
    assert sent[0]["source"] == vis_network_source() and "vis-network" in sent[0]["source"][:200]
    widget._on_view_message(widget, {"type": "hello", "need_vis": False}, [])
    assert [m["type"] for m in sent] == ["vis", "snapshot", "snapshot"]
    widget._on_view_message(widget, {"type": "nonsense"}, [])
    widget._on_view_message(widget, "not a dict", [])
    assert len(sent) == 3


def test_refresh_sends_ordered_deltas_only_when_something_changed(fresh_store: GraphStore) -> None:
    g = fresh_store.create_graph("Why do tides turn?", "pulse", "autonomous")
    widget = NetworkWidget(fresh_store, g["graph_id"])
    sent = capture(widget)
    first = widget.refresh()
    assert first is not None and first["since"] == 0
    assert widget.refresh() is None and len(sent) == 1
    fresh_store.add_answer(g["graph_id"], g["root_node_id"], "The moon.", sub_questions=["Which moon?"])
    delta = widget.refresh()
    assert delta is not None and delta["since"] == first["seq"] and delta["seq"] > first["seq"]
    assert {q["status"] for q in delta["questions"]} == {"answered", "open"}
    assert [a["text"] for q in delta["questions"] for a in q["answers"]] == ["The moon."]
    assert delta["links"] == [] and delta["counts"]["total"] == 3 and delta["counts"]["open"] == 1


def test_model_text_stays_text(fresh_store: GraphStore) -> None:
    g = fresh_store.create_graph(HOSTILE, "pulse", "autonomous")
    widget = NetworkWidget(fresh_store, g["graph_id"])
    item = widget.feed.snapshot()["questions"][0]
    assert item["text"] == HOSTILE, "sent as data; the view shows it with textContent or a text title"
    for script in [(STATIC / name).read_text() for name in VIEW_SCRIPT]:
        assert "innerHTML" not in script and "insertAdjacentHTML" not in script


def test_the_vis_build_comes_from_the_installed_pyvis_not_from_this_repo() -> None:
    import pyvis

    build = Path(pyvis.__file__).parent / "lib" / "vis-9.1.2" / "vis-network.min.js"
    assert vis_network_source() == build.read_text()
    repo = Path(__file__).parents[2]
    committed_js = list((repo / "fractal_nb").rglob("*.js"))
    assert committed_js and all(p.parent == STATIC for p in committed_js), "only our own view's files"
    assert set(VIEW_SCRIPT) <= {p.name for p in committed_js}
    assert all(p.stat().st_size < 40_000 for p in committed_js), "our own view, not a library"
    assert all("https://" not in p.read_text() for p in committed_js)


async def until(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Yield to the loop until ``condition`` holds (the pump ticks meanwhile); fail after ``timeout_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        assert loop.time() < deadline, "the condition never held"
        await asyncio.sleep(0)


def test_the_pump_runs_ticks_on_its_loop_thread_when_woken_from_other_threads() -> None:
    ticks: list[str] = []

    async def scenario() -> None:
        pump = KernelPump(lambda: ticks.append(threading.current_thread().name), interval_s=30)
        assert pump.start()
        wakers = [threading.Thread(target=pump.wake, name=f"worker-{i}") for i in range(4)]
        for t in wakers:
            t.start()
        for t in wakers:
            t.join()
        await until(lambda: len(ticks) >= 1)  # woken well before its 30 s interval
        pump.stop()
        await until(lambda: not pump.running)

    asyncio.run(scenario())
    assert ticks and set(ticks) == {"MainThread"}, "ticks happen only on the loop's own thread"


def test_the_pump_stops_and_keeps_the_error_when_a_tick_fails() -> None:
    def broken() -> None:
        raise RuntimeError("store closed")

    async def scenario() -> KernelPump:
        pump = KernelPump(broken, interval_s=0.01)
        pump.start()
        await until(lambda: not pump.running)
        return pump

    pump = asyncio.run(scenario())
    assert not pump.running and isinstance(pump.error, RuntimeError)


def test_without_a_running_loop_the_pump_does_not_start() -> None:
    pump = KernelPump(lambda: None)
    assert pump.start() is False and not pump.running
    pump.wake()  # harmless


@pytest.mark.parametrize("interval", [0.05])
def test_live_widget_refreshes_from_the_loop(fresh_store: GraphStore, interval: float) -> None:
    g = fresh_store.create_graph("Why do tides turn?", "pulse", "autonomous")
    widget = NetworkWidget(fresh_store, g["graph_id"])
    sent = capture(widget)

    async def scenario() -> None:
        widget.live(interval_s=interval)
        await until(lambda: len(sent) == 1)  # the graph as it is
        writer = threading.Thread(
            target=lambda: fresh_store.add_node(g["graph_id"], g["root_node_id"], "answer", "The moon.")
        )
        writer.start()
        writer.join()
        await until(lambda: len(sent) == 2)  # the other thread's write, seen by the next tick
        widget.stop()

    asyncio.run(scenario())
    assert [m["type"] for m in sent] == ["delta", "delta"]
    assert sent[1]["counts"]["answers"] == 1
