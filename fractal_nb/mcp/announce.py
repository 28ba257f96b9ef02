"""Where a serving process listens: ``FILE.mcp.json`` next to the DuckDB file it serves.

docs/architecture/faces.md, "Inspection over MCP" (26): ``fractal-nb serve-mcp --http``
and ``ex.serve_mcp()`` write the file once they listen and remove it when they stop;
an inspection command that finds FILE locked reads it with :func:`served_at`, which
trusts it only when its process is the one holding the file, on this host. The file
holds the URL, the process id and host, and whether a token is needed: never the token.
Only the standard library loads here.

Examples
--------
>>> announcement_path("cities.duckdb").name
'cities.duckdb.mcp.json'
>>> announcement_path("postgresql://db.example.org/graphs") is None
True
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

SUFFIX = ".mcp.json"


class Announced(NamedTuple):
    """What a serving process says of itself: where it listens, who it is, whether it needs a token."""

    url: str
    pid: int
    host: str
    token_required: bool


def announcement_path(db: str | Path) -> Path | None:
    """The announcement's path for a DuckDB file (None for a database URL or an in-memory store)."""
    where = str(db)
    if "://" in where or where in ("", ":memory:") or where.startswith(":memory:"):
        return None
    return Path(where + SUFFIX)


def announce(db: str | Path, url: str, *, token_required: bool) -> Path | None:
    """Write ``db``'s announcement (replacing any other whole); its path, or None when ``db`` is no file."""
    path = announcement_path(db)
    if path is None or not Path(db).is_file():
        return None
    said = {"url": url, "pid": os.getpid(), "host": socket.gethostname(), "token_required": token_required}
    draft = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        draft.write_text(json.dumps(said) + "\n", encoding="utf-8")
        os.replace(draft, path)  # a reader sees the old file or the new one, never half of one
    except OSError:  # a folder this process may not write: inspection then reports the lock alone
        draft.unlink(missing_ok=True)
        return None
    return path


def withdraw(path: Path | None, url: str) -> None:
    """Remove an announcement this process wrote for ``url`` (one another process wrote since is kept)."""
    if path is None:
        return
    said = _read(path)
    if said is not None and said.pid == os.getpid() and said.url == url:
        path.unlink(missing_ok=True)


def served_at(db: str | Path, holder_pid: int | None) -> Announced | None:
    """Where the process holding ``db`` serves it, if it said so: its pid the holder's, its host this one."""
    path = announcement_path(db)
    said = _read(path) if path is not None else None
    if said is None or holder_pid is None or said.pid != holder_pid or said.host != socket.gethostname():
        return None  # none, or left by a process killed outright: not the one that holds the file now
    return said


def _read(path: Path) -> Announced | None:
    """The announcement at ``path``, or None when there is none or it is not one."""
    try:
        said = json.loads(path.read_text(encoding="utf-8"))
        announced = Announced(
            str(said["url"]), int(said["pid"]), str(said["host"]), bool(said["token_required"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return announced if _on_loopback(announced.url) else None


def _on_loopback(url: str) -> bool:
    """Whether ``url`` is http(s) on this machine's loopback: the only place a reader follows a file to.

    The file is anyone's to write: a URL elsewhere would send the reader (and its token) off the machine.

    >>> _on_loopback("http://127.0.0.1:8765/mcp"), _on_loopback("http://[::1]:8765/mcp")
    (True, True)
    >>> _on_loopback("http://203.0.113.7:8765/mcp"), _on_loopback("file:///etc/passwd")
    (False, False)
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    if parts.hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:  # a name: not followed
        return False
