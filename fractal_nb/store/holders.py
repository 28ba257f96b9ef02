"""Who holds a claim: a process (host, pid, start time) and one open store or remote worker in it.

A claim records its holder. A live holder renews its claims' leases with a
heartbeat; recovery gives back only the claims of holders that are gone: at once
for a process on this host that has exited (or a store of this process that was
closed, or a killed process its parent has not reaped yet), after its lease for
a holder that has gone silent anywhere: a store's own claims hold for the
store's lease, another process's (a remote worker's) for the short
:data:`HOLDER_LEASE_S`, which its heartbeat renews (docs/store.md, "How claims recover").
"""

from __future__ import annotations

import os
import socket
import uuid
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeAlias, TypedDict

from ..errors import InvalidInputError
from ..vocabulary import JsonArgument, parse_metadata
from .in_process import GUARD, LIVE_HOLDERS

HOST = socket.gethostname()
# The lease of a claim held by another process (a remote worker): short, and renewed by its heartbeat
# three times a lease, so a worker killed anywhere gives its claims back within it (rule 5).
HOLDER_LEASE_S = 20.0


class OwnHolder(StrEnum):
    """The store's own holder as a claim's ``holder`` argument (the default): this open store."""

    STORE = "store"


OWN_HOLDER = OwnHolder.STORE


class HolderInfo(TypedDict):
    """A claim's holder as stored and as sent over MCP by a remote worker."""

    holder_id: str
    host: str
    pid: int
    proc_start: str | None  # the process's start time as the OS tells it (tells a reused pid apart)
    label: str


HolderArgument: TypeAlias = OwnHolder | HolderInfo | JsonArgument | None
"""Who a claim is for: the store's own (:data:`OWN_HOLDER`), a holder (its record or JSON), or None (a plain
lease, no holder)."""


def new_holder(label: str) -> HolderInfo:
    """A fresh holder for this process; :func:`hold` marks it live, :func:`let_go` ends it."""
    pid = os.getpid()
    return HolderInfo(
        holder_id=f"{HOST}/{pid}/{uuid.uuid4().hex[:12]}",
        host=HOST,
        pid=pid,
        proc_start=process_start(pid),
        label=label,
    )


def hold(holder: HolderInfo) -> None:
    """Mark a holder of this process live (its store is open)."""
    with GUARD:
        LIVE_HOLDERS.add(holder["holder_id"])


def let_go(holder: HolderInfo) -> None:
    """Mark a holder of this process gone (its store closed): its claims may be recovered at once."""
    with GUARD:
        LIVE_HOLDERS.discard(holder["holder_id"])


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command name (Linux): [] where it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    # The command name (field 2) may hold spaces and parentheses: count from its closing one.
    return stat[stat.rindex(")") + 2 :].split()


def _start(fields: list[str]) -> str | None:
    """The start time (clock ticks since boot) among ``_stat``'s fields, or None."""
    return fields[19] if len(fields) > 19 else None


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), or None where it cannot be read."""
    return _start(_stat(pid))


def is_gone(holder_id: str, host: str, pid: int, proc_start: str | None) -> bool:
    """Whether the holder is certainly gone; a holder on another host never is (its lease decides)."""
    if host != HOST:
        return False
    if pid == os.getpid():
        with GUARD:
            return holder_id not in LIVE_HOLDERS
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, someone else's
        pass
    fields = _stat(pid)
    if fields[:1] == ["Z"]:  # killed, not yet reaped by its parent: gone all the same
        return True
    start = _start(fields)
    return proc_start is not None and start is not None and start != proc_start


def parse_holder(value: object) -> HolderInfo:
    """A holder sent by a client: the fields of :class:`HolderInfo` as a dict or a JSON string, checked."""
    if isinstance(value, str):  # over MCP, as metadata is
        value = parse_metadata(value, "holder")
    if not isinstance(value, dict):
        raise InvalidInputError(f"holder must be an object with holder_id, host, pid, not {value!r}")
    fields: dict[str, Any] = value
    for key in ("holder_id", "host", "label"):
        text = fields.get(key, "" if key == "label" else None)
        if not isinstance(text, str) or (key != "label" and not text.strip()) or len(text) > 300:
            raise InvalidInputError(
                f"holder[{key!r}] must be a non-empty string of at most 300 characters, not {text!r}"
            )
    pid, start = fields.get("pid"), fields.get("proc_start")
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid < 2**31:
        raise InvalidInputError(f"holder['pid'] must be a positive process id, not {pid!r}")
    if start is not None and (not isinstance(start, str) or len(start) > 40):
        raise InvalidInputError(f"holder['proc_start'] must be a short string or null, not {start!r}")
    return HolderInfo(
        holder_id=fields["holder_id"],
        host=fields["host"],
        pid=pid,
        proc_start=start,
        label=fields.get("label", ""),
    )
