"""``KernelPump``: one task on the kernel's event loop, the only code that writes to widgets.

Worker threads never touch a widget: they push to a queue and call
:meth:`KernelPump.wake`; the task runs ``tick`` on the kernel's own thread,
at once when woken and every ``interval_s`` otherwise (to see writes made
by other processes, such as MCP workers).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


class KernelPump:
    """Run ``tick`` on the running event loop, periodically and on demand from any thread."""

    def __init__(self, tick: Callable[[], object], *, interval_s: float = 0.5) -> None:
        self.tick = tick
        self.interval_s = interval_s
        self.error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        """Whether the task is alive (False outside a kernel: call ``tick`` yourself there)."""
        return self._task is not None and not self._task.done()

    def start(self) -> bool:
        """Start on the loop running in this thread (a Jupyter kernel's); False if there is none."""
        if self.running:
            return True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        self._loop, self._wakeup, self.error = loop, asyncio.Event(), None
        self._task = loop.create_task(self._run(), name="fractal-nb view pump")
        return True

    def wake(self) -> None:
        """Ask for a tick as soon as the loop is free; safe from any thread."""
        loop, wakeup = self._loop, self._wakeup
        if loop is None or wakeup is None or not self.running:
            return
        try:
            loop.call_soon_threadsafe(wakeup.set)
        except RuntimeError:  # the loop has closed (kernel shutting down)
            pass

    def stop(self) -> None:
        """Cancel the task (a tick in progress finishes first)."""
        if self._task is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        self._task = None

    async def _run(self) -> None:
        assert self._wakeup is not None
        while True:
            try:
                await asyncio.wait_for(self._wakeup.wait(), self.interval_s)
            except TimeoutError:
                pass
            self._wakeup.clear()
            try:
                self.tick()
            except Exception as exc:  # a closed store, say: stop, and keep the reason
                self.error = exc
                log.exception("fractal-nb view stopped refreshing")
                return
