"""Ports on 127.0.0.1: a free one (closed again: nothing listens there until a test starts a server),
and whether one listens now."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port the system had free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> bool:
    """Whether something accepts connections on the port now."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False
