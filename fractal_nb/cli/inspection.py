"""The read-only commands of ``fractal-nb``: report, events, edges, tree, export, heads, turns, sources.

docs/architecture/facade.md, "Inspecting a file": each command opens the file with
``Exploration.open(..., read_only=True)``, so it never writes it, and is one
small function of :data:`COMMANDS` that asks the facade and returns what to
print: the text for a terminal and the same as one JSON document (``--json``).
A new command is one more such function and one more row of ``parser.INSPECTION_HELP``.
``--at EVENT`` (tree, edges, export) hands a command the state at that event,
``ex.at(EVENT)``, instead of the exploration as it stands.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple, cast

import pandas as pd

from ..arguments import check_store_target, shown_target
from ..checks import require_id
from ..errors import InvalidInputError, StateError, StoreLockedError, StoreUnreachableError
from ..exploration.exploration import Exploration
from ..exploration.graph_sql import TABLES, GraphRows
from ..exploration.history import GraphAt
from ..exploration.steering import HEAD_COLUMNS, TURN_COLUMNS
from ..results.evidence import evidence_lines
from ..store.records import Snapshot
from ..text import clip
from .parser import SERVED_READS

_TEXT_WIDTH = 80  # a JSON column is cut to this in a table (--json prints it whole)
# Model text is data: no escape sequence of it reaches the terminal (tabs and newlines aside).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class Shown(NamedTuple):
    """What a command prints: ``text`` for a terminal, ``document`` for ``--json``."""

    text: str
    document: Any


class InspectionUsageError(InvalidInputError):
    """A usage error an inspection command finds itself (exit 2): nothing was written."""


class GraphChoiceError(InspectionUsageError):
    """The file holds several graphs (or none) and ``--graph-id`` names none of them: a usage error."""


Command = Callable[[Exploration, argparse.Namespace], Shown]


def show_report(ex: Exploration, args: argparse.Namespace) -> Shown:
    """The result as the graph stands (``ex.report()``): read, never harvested; then its evidence.

    The evidence (``ex.evidence()``): answers by support, each cited answer's
    citations with their status, the findings with theirs (the unsupported apart),
    the tracks and the synthesis object.
    """
    result = ex.preview()
    evidence = ex.evidence()
    said = evidence_lines(evidence)
    text = result.to_markdown() + ("\n\n" + "\n".join(said) if said else "")
    return Shown(text, {**result.to_dict(), "evidence": evidence})


def show_events(ex: Exploration, args: argparse.Namespace) -> Shown:
    """The event log after ``--since`` (``ex.events(since)``)."""
    events = ex.events(since=args.since)
    if args.at is not None:  # the log as it stood at that event
        events = events[events["event_id"] <= _event_in_history(ex, args.at)]
    return _table(events, "events", ["event_id", "created_at", "kind", "node_id", "actor"])


def show_edges(ex: Exploration, args: argparse.Namespace) -> Shown:
    """Every edge, tree and links (``ex.edges()``; with ``--at``, ``ex.at(EVENT).edges()``)."""
    shown = _table(_state(ex, args).edges(), "edges", ["from_node", "to_node", "edge_type", "created_at"])
    return shown if args.at is None else Shown(shown.text, {**shown.document, "event_id": args.at})


def show_tree(ex: Exploration, args: argparse.Namespace) -> Shown:
    """The question tree, indented by level, each question with its status (``ex.nodes()``, or ``--at``'s)."""
    nodes = _state(ex, args).nodes()
    keys = nodes[_NODE_KEYS].astype(object)
    by_id = {row["node_id"]: row for row in keys.where(keys.notna(), None).to_dict("records")}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for node in by_id.values():
        if node["node_type"] == "question":
            children.setdefault(_question_above(node, by_id), []).append(node)

    def item(node: dict[str, Any]) -> dict[str, Any]:
        below = [item(child) for child in children.get(node["node_id"], [])]
        return {
            **{k: node[k] for k in ("node_id", "depth", "status", "status_reason", "text")},
            "children": below,
        }

    roots = [item(node) for node in children.get(None, [])]
    lines: list[str] = []

    def draw(entry: dict[str, Any], indent: int) -> None:
        status = entry["status"] + (f": {entry['status_reason']}" if entry["status_reason"] else "")
        lines.append(f"{'  ' * indent}[{status}] {_one_line(entry['text'])}  ({entry['node_id']})")
        for child in entry["children"]:
            draw(child, indent + 1)

    for entry in roots:
        draw(entry, 0)
    document: dict[str, Any] = {"graph_id": ex.graph_id, "tree": roots}
    if args.at is not None:
        document["event_id"] = args.at
    return Shown("\n".join(lines), document)


def show_heads(ex: Exploration, args: argparse.Namespace) -> Shown:
    """One row per head, the current head last (``ex.heads()``)."""
    columns = [c for c in HEAD_COLUMNS if c not in ("root_synthesis", "cost")]
    heads = ex.heads()
    if args.at is not None:  # the heads made by that event
        heads = heads[heads["head_event"] <= _event_in_history(ex, args.at)]
    return _table(heads, "heads", columns, cut=("asked",))


def show_state(ex: Exploration, args: argparse.Namespace) -> Shown:
    """Where the exploration stands (``ex.state()``): the completion standard's six answers."""
    state = ex.state()
    lines = [f"{state.graph_id} ({state.status}): {state.seed}", "", "Line of work:"]
    lines += [f"  {step}" for step in state.line_of_work]
    lines += ["", f"Resume uses: {state.resume_from}", "", "Branches:"]
    lines += [
        f"  {b['node_id']}  {b['origin']}: {b['question']} ({b['status']}"
        + (f", superseded in turn {b['superseded_turn']}" if b["superseded_turn"] else "")
        + f"; why: {b['why']})"
        for b in state.branches
    ]
    lines += ["", "Values: " + ", ".join(f"{n} {kind}" for kind, n in state.counts().items())]
    lines += [
        f"  {v['kind']:<8}  {v['node_id']}  {v['text']}"
        + (f"  ({clip(v['detail'], 100)})" if v["kind"] in ("verified", "stated") else "")
        for v in state.values
    ]
    lines += ["", "Heads to attach from:"]
    lines += [
        f"  head {h['turn']} (event {h['head_event']}): "
        f"{'worth it' if h['worth_attaching'] else 'not'}: {h['why']}"
        for h in state.attach_from
    ] or ["  (none before the current head)"]
    lines += ["", "Checks:"]
    lines += [f"  {'ok  ' if c['passed'] else 'FAIL'}  {c['name']}: {c['detail']}" for c in state.checks]
    return Shown(_CONTROL.sub("?", "\n".join(lines)), state.to_dict())


def show_turns(ex: Exploration, args: argparse.Namespace) -> Shown:
    """One row per turn, the open one last (``ex.turns()``)."""
    turns = ex.turns()
    if args.at is not None:  # the turns begun by that event; a head made after it is not one yet
        at = _event_in_history(ex, args.at)
        turns = turns[turns["started_event"] <= at].copy()
        later = turns["head_event"] > at
        turns.loc[later, ["head_event", "status", "tokens", "cost"]] = None
    for column in ("head_event", "tokens"):  # empty for the open turn: whole numbers, not floats
        turns[column] = turns[column].astype("Int64")
    return _table(turns, "turns", [c for c in TURN_COLUMNS if c != "cost"], cut=("asked",))


def export(ex: Exploration, args: argparse.Namespace) -> Shown:
    """Write the graph to ``--to``, its format by suffix: Markdown, HTML, or one table as Parquet.

    With ``--at``: one table (nodes, edges or gaps) as Parquet, as it was at that event.
    """
    out = Path(args.to)
    suffix = out.suffix.lower()
    try:
        if suffix == ".md":
            out.write_text(ex.report() + "\n", encoding="utf-8")
        elif suffix == ".html":
            ex.to_html(out)
        else:
            rows = GraphRows(ex) if args.at is None else RowsAt(ex, ex.at(args.at))
            TABLES[args.table](rows).to_parquet(out, index=False)
    except OSError as exc:
        raise StateError(f"cannot write --to {out}: {exc.strerror or exc}") from None
    what = f"the {args.table} table as Parquet" if suffix == ".parquet" else suffix[1:]
    document = {"graph_id": ex.graph_id, "written": str(out), "format": suffix[1:]}
    if suffix == ".parquet":
        document["table"] = args.table
    if args.at is not None:
        document["event_id"] = args.at
    then = f" at event {args.at}" if args.at is not None else ""
    return Shown(f"wrote {out} ({what}) from graph {ex.graph_id}{then}", document)


class RowsAt(GraphRows):
    """The rows of the graph at an event (``ex.at``): its nodes and edges then, and the gaps read off them."""

    def __init__(self, exploration: Exploration, at: GraphAt) -> None:
        super().__init__(exploration)
        self.at = at

    @cached_property
    def snapshot(self) -> Snapshot:
        """The graph's fields, nodes and edges at the event."""
        return cast(
            Snapshot,
            {**self.at.graph, "nodes": list(self.at.node_records), "edges": list(self.at.edge_records)},
        )


def show_sources(ex: Exploration, args: argparse.Namespace) -> Shown:
    """The graph's sources and whether each file changed on disk (``ex.sources()``)."""
    return _table(ex.sources(), "sources", ["name", "kind", "lines", "chunks", "changed", "location"])


def show_payload(ex: Exploration, args: argparse.Namespace) -> Shown:
    """One node's whole record (``ex.payload(NODE)``): row, metadata, claims, citations, calls, links."""
    record = ex.payload(args.node)
    node = record["node"]
    status = node["status"] + (f": {node['status_reason']}" if node["status_reason"] else "")
    lines = [
        f"{node['node_type']} {node['node_id']} [{status}] depth {node['depth']}, "
        f"parent {node['parent_id'] or '-'}, owner {node['owner'] or '-'}",
        "",
        node["text"],
    ]
    metadata = dict(node["metadata"])
    claims = metadata.pop("claims", None) or []  # listed on their own below, whole in --json
    lines += _listed(
        "Metadata", [f"{k}: {json.dumps(v, ensure_ascii=False, default=str)}" for k, v in metadata.items()]
    )
    lines += _listed("Claims", [f"{c.get('kind')}: {c.get('text')}" for c in claims])
    lines += _listed("Citations", _citation_lines(record["evidence"]))
    lines += _listed(
        "Children",
        [
            f"[{c['status']}] {c['node_type']} {c['node_id']}: {_cut(_one_line(c['text']))}"
            for c in record["children"]
        ],
    )
    lines += _listed(
        "Links", [f"{e['edge_type']}: {e['from_node']} -> {e['to_node']}" for e in record["links"]]
    )
    lines += _listed(
        "Model calls",
        [
            f"{c['role']:<12} {c['model'] or '-'}  tokens {c['prompt_tokens']}+{c['completion_tokens']}  "
            f"{c['outcome']}" + (f": {c['error']}" if c["error"] else "")
            for c in record["llm_calls"]
        ],
    )
    lines += ["", f"Kept: {record['kept']}"]
    return Shown(_CONTROL.sub("?", "\n".join(lines)), record)


def _citation_lines(evidence: dict[str, Any]) -> list[str]:
    """Each citation of a node and of its answers, with the store's check of it."""
    cited = [("", c) for c in evidence.get("citations") or []]
    for answer in (evidence.get("answers") or {}).values():
        cited += [(f"answer {answer['node_id']}: ", c) for c in answer.get("citations") or []]
    return [
        f"{whose}{c.get('status', '?')}  {c.get('source')} lines {c.get('line_start')}-{c.get('line_end')}: "
        f"{_cut(_one_line(str(c.get('quote', ''))))}"
        for whose, c in cited
    ]


def _listed(title: str, items: list[str]) -> list[str]:
    """A titled block of indented items, or ``(none)``."""
    return ["", f"{title}:"] + [f"  {item}" for item in items or ["(none)"]]


COMMANDS: dict[str, Command] = {
    "report": show_report,
    "events": show_events,
    "edges": show_edges,
    "tree": show_tree,
    "export": export,
    "heads": show_heads,
    "state": show_state,
    "turns": show_turns,
    "sources": show_sources,
    "payload": show_payload,
}
"""Each read-only command: its name -> the function that asks the facade (one line each)."""


def _event_in_history(ex: Exploration, event: int) -> int:
    """``event``, once the store has checked it is one of the graph's (else its error: exit 1)."""
    return ex.at(event).event_id


def _state(ex: Exploration, args: argparse.Namespace) -> Exploration | GraphAt:
    """What ``--at`` names: the graph at that event (``ex.at``, read from its history), else as it stands."""
    return ex if args.at is None else ex.at(args.at)


def inspect_file(args: argparse.Namespace) -> str:
    """Run ``args.command`` on ``args.file`` opened read-only; what to print.

    A ``NODE`` (payload) of the wrong form is a usage error before the file is opened.
    """
    if getattr(args, "node", None) is not None:
        try:
            require_id(args.node, "NODE")
        except InvalidInputError as exc:
            raise InspectionUsageError(str(exc)) from None
    try:
        with open_read_only(check_store_target(args.file, "FILE"), args.graph_id) as ex:
            shown = COMMANDS[args.command](ex, args)
    except StoreLockedError as locked:
        shown = read_served(args, locked)
    if args.json:  # JSON escapes every control character
        return json.dumps(shown.document, ensure_ascii=False, default=str, indent=2)
    return _CONTROL.sub("\N{REPLACEMENT CHARACTER}", shown.text)


def read_served(args: argparse.Namespace, locked: StoreLockedError) -> Shown:
    """``args.command`` read through the MCP server of the process holding FILE, where it said it listens.

    docs/architecture/faces.md, "Inspection over MCP" (26): ``FILE.mcp.json`` names the
    URL, trusted only when its process holds the file on this host; the token is
    ``--token`` or ``FRACTAL_NB_TOKEN``. No such file, a command no read tool answers,
    or a server that does not answer: ``locked`` is raised, saying so when a server was found.
    """
    from ..mcp.announce import served_at

    served = served_at(args.file, locked.holder_pid) if args.command in SERVED_READS else None
    if served is None:
        raise locked
    from ..mcp.auth import client_token
    from ..mcp.reads import read_options
    from ..mcp.remote import RemoteStore

    options = read_options(args.command, args)
    print(  # said first: whatever the server answers, the reader knows who answers it
        f"fractal-nb: {args.file} is in use by process {served.pid}, which serves it over MCP: "
        f"reading through {served.url}",
        file=sys.stderr,
        flush=True,
    )
    try:
        with RemoteStore(served.url, token=client_token(args.token)) as remote:
            graph_id = args.graph_id or chosen_graph(remote.list_graphs()["graphs"], args.file)
            value = remote.call(f"fractal_{args.command}", graph_id=graph_id, **options)
    except StoreUnreachableError as exc:
        raise StoreLockedError(
            f"{locked}. Its MCP server at {served.url} did not answer: {exc}",
            path=locked.path,
            holder_pid=locked.holder_pid,
        ) from None
    return Shown(str(value["text"]), value["document"])


def chosen_graph(graphs: Sequence[Mapping[str, Any]], path: Path | str) -> str:
    """The id of the only graph of ``graphs``; else :class:`GraphChoiceError` listing them."""
    if len(graphs) == 1:
        return str(graphs[0]["graph_id"])
    listing = "".join(
        f"\n  {g['graph_id']}  {g['status']:<16} {_one_line(str(g['seed']))[:60]}" for g in graphs
    )
    where = shown_target(path)
    raise GraphChoiceError(
        f"{where} holds {len(graphs)} explorations; pass --graph-id with one of:{listing}"
        if graphs
        else f"{where} holds no exploration"
    )


def open_read_only(path: Path | str, graph_id: str | None) -> Exploration:
    """The exploration ``path`` holds (``graph_id``: one of several), opened read-only.

    A file another process holds for writing raises :class:`StoreLockedError`
    with :func:`locked_message`'s text; a file of several graphs without
    ``graph_id`` raises :class:`GraphChoiceError` listing them.
    """
    try:
        if graph_id is None:
            graph_id = chosen_graph(Exploration.graphs(path, read_only=True).to_dict("records"), path)
        return Exploration.open(path, graph_id, read_only=True)
    except StoreLockedError as exc:
        raise StoreLockedError(
            locked_message(path, exc.holder_pid), path=exc.path, holder_pid=exc.holder_pid
        ) from None


def locked_message(path: Path | str, pid: int | None) -> str:
    """Who holds the file and the ways round: wait, or read through the holder's MCP server."""
    holder = f"process {pid}" if pid else "another process"
    return (
        f"{path} is in use by {holder}, which has it open for writing: DuckDB then lets no other "
        "process open it, not even to read. Ways round: wait until that process closes it (a run "
        "ends, a notebook calls ex.close()); or read through that process's MCP server (a "
        f"`fractal-nb serve-mcp {path} --http` it runs, or a notebook's ex.serve_mcp()): its tools "
        "fractal_list_graphs, fractal_get_graph and fractal_get_snapshot (every node and edge) read the "
        "same data, fractal_query_convergence and fractal_query_contradictions its links, "
        "fractal_list_turns, fractal_list_heads and fractal_get_state_at its turns, heads and the state at "
        "an event; in the "
        "notebook that holds it, ex.report(), ex.events(), ex.edges() and ex.sql(...) do"
    )


_NODE_KEYS = ["node_id", "parent_id", "node_type", "depth", "status", "status_reason", "text"]


def _question_above(node: dict[str, Any], by_id: dict[str, dict[str, Any]]) -> str | None:
    """The question a question hangs under (through its answer, or directly), None for the root."""
    parent = by_id.get(node["parent_id"]) if node["parent_id"] else None
    while parent is not None and parent["node_type"] != "question":
        parent = by_id.get(parent["parent_id"]) if parent["parent_id"] else None
    return None if parent is None else str(parent["node_id"])


def _table(frame: pd.DataFrame, name: str, columns: list[str], cut: tuple[str, ...] = ()) -> Shown:
    """A frame as a text table (JSON columns and the ``cut`` ones cut) and as a JSON document (whole)."""
    extra = [c for c in ("payload", "metadata") if c in frame.columns]
    records = json.loads(frame.to_json(orient="records", date_format="iso"))
    shown = frame[columns + extra].astype(object)
    shown = shown.where(shown.notna(), "")
    for column in extra:
        shown[column] = [_cut(json.dumps(v, ensure_ascii=False)) for v in shown[column]]
    for column in cut:
        shown[column] = [_cut(str(v)) for v in shown[column]]
    text = shown.to_string(index=False) if len(shown) else f"(no {name})"
    return Shown(text, {name: records})


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _cut(text: str) -> str:
    return text if len(text) <= _TEXT_WIDTH else text[: _TEXT_WIDTH - 1] + "…"
