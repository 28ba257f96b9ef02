"""A free TCP port on 127.0.0.1 (closed again: nothing listens there until a test starts a server)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port the system had free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
