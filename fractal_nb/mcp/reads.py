"""The read tools: what ``fractal-nb report | state | events | heads | turns | tree | payload`` print.

docs/architecture/faces.md, "Inspection over MCP": a read tool is no store method
(the tool table's rows are), so it is not a row of :data:`fractal_nb.mcp.tools.TOOLS`
and ``RemoteStore`` has no method for it. Each runs the inspection command of the
same name (``cli/inspection.py COMMANDS``) on the served graph, through the facade
(an :class:`~fractal_nb.Exploration` over the served store with a model that refuses
every call), and returns ``{"graph_id", "command", "document", "text"}``:
``document`` what ``--json`` prints, ``text`` what the terminal shows. Nothing is
written; a refusal comes back as ``{"error": ...}`` as the store tools' do.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Annotated, Any, NamedTuple

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from ..errors import FractalError
from ..store import Store
from .tool_shape import answered, refused, shaped
from .tools import GRAPH_ID, NODE_ID, Param


def _whole(description: str) -> Any:
    """A strict whole number, as the store tools' (``tools.py``): true, "2" or 2.0 are refused."""
    return Annotated[int, Field(description=description, strict=True)]


AT_EVENT = Param(
    "at_event",
    _whole("The state at this event id (0: as the graph stands), e.g. a head's head_event."),
    default=0,
)
SINCE = Param("since", _whole("Only the events after this event id (0: all)."), default=0)


class Read(NamedTuple):
    """One read tool: the inspection command it runs, what it says it does, its parameters."""

    command: str
    doc: str
    params: tuple[Param, ...]

    @property
    def name(self) -> str:
        """The tool's MCP name: ``fractal_`` + the command."""
        return f"fractal_{self.command}"


_SAID = (
    " Returns {graph_id, command, document: what `fractal-nb %s FILE --json` prints, "
    "text: what it prints to a terminal}. Read-only."
)
READS = (
    Read("report", "The result as the graph stands (never harvested) and its evidence.", (GRAPH_ID,)),
    Read(
        "state",
        "Where the exploration stands: line of work, branches, values, the head resume uses, checks.",
        (GRAPH_ID,),
    ),
    Read(
        "events",
        "The event log, oldest first (after `since`; with at_event, up to it).",
        (GRAPH_ID, SINCE, AT_EVENT),
    ),
    Read("heads", "One row per head (a turn's end), the current one last.", (GRAPH_ID, AT_EVENT)),
    Read("turns", "One row per turn, the open one last.", (GRAPH_ID, AT_EVENT)),
    Read("tree", "The question tree, nested, each question with its status and id.", (GRAPH_ID, AT_EVENT)),
    Read(
        "payload",
        "One node's whole record: row, metadata, claims, citations with their check, children, links, "
        "its model calls.",
        (GRAPH_ID, NODE_ID),
    ),
)
"""Every read tool, in the order the server lists them (after the store's)."""


def read_options(command: str, args: argparse.Namespace) -> dict[str, Any]:
    """``command``'s read tool options from the inspection command's arguments (:func:`read_shown`'s inverse).

    >>> read_options("events", argparse.Namespace(since=3, at=None))
    {'since': 3, 'at_event': 0}
    """
    every = {
        "since": getattr(args, "since", 0),
        "at_event": getattr(args, "at", None) or 0,
        "node_id": getattr(args, "node", None),
    }
    taken = {p.name for read in READS if read.command == command for p in read.params}
    return {name: value for name, value in every.items() if name in taken}


def read_shown(store: Store, command: str, graph_id: str, **options: Any) -> dict[str, Any]:
    """What ``fractal-nb COMMAND`` shows of ``graph_id`` in ``store``, as JSON-ready data."""
    from ..cli.inspection import COMMANDS  # the faces' shared table, loaded with the first read
    from ..exploration.exploration import Exploration
    from ..llm.read_only import ReadOnlyLLM

    at = options.get("at_event") or None
    args = argparse.Namespace(since=options.get("since", 0), at=at, node=options.get("node_id"))
    with Exploration(store, graph_id, ReadOnlyLLM()) as ex:  # the store stays the server's
        shown = COMMANDS[command](ex, args)
    document = json.loads(json.dumps(shown.document, ensure_ascii=False, default=str))
    return {"graph_id": graph_id, "command": command, "document": document, "text": shown.text}


def _read_function(store: Store, read: Read) -> Callable[..., CallToolResult]:
    """The function served as ``read``: its signature the parameters, its body :func:`read_shown`."""

    def call(**arguments: Any) -> CallToolResult:
        try:
            return answered(read_shown(store, read.command, **arguments))
        except FractalError as exc:
            return refused(exc)

    return shaped(call, read.command, read.doc + _SAID % read.command, read.params)


def add_reads(server: MCPServer, store: Store) -> None:
    """Serve each of :data:`READS` on ``server``."""
    for read in READS:
        server.tool(name=read.name)(_read_function(store, read))
