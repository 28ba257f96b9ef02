"""Sources: the texts a graph's answers cite, kept in the graph's file as chunks.

A plain class composed by :class:`~fractal_nb.store.GraphStore` (docs/architecture/store.md,
"Sources and citations"): the store's core (the connection, the clock, graph rows and the
event log) and the citation check are passed in. Every query is scoped by
``graph_id``. A source is stored whole, as non-overlapping line windows (chunks), so
a citation checks against the text as it was added whatever the disk holds later.

Ids are stable: ``source_id`` is the first 12 hex of sha256(name, NUL, content hash),
``chunk_id`` is ``<source_id>:<line_start>-<line_end>``. The same name and content
added again is the same source (nothing written); the same name with other content
is refused.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from ..checks import require_count, require_text, shown
from ..errors import InvalidInputError, NotFoundError
from ..retrieval import SourceIndex
from ..text import one_line
from .base import StoreCore
from .database import OWN_TABLES, Database
from .dialect import Dialect
from .records import ChunkRecord, CitationRecord, SourceHit, SourceLines, SourceRecord, SourceText
from .rows import iso

if TYPE_CHECKING:
    from .citations import CitationCheck

MAX_SOURCE_CHARS = 5_000_000  # one source's text
MAX_ADD_CHARS = 50_000_000  # all the texts of one add_sources call
MAX_SOURCES = 5_000  # texts in one add_sources call
MAX_NAME_CHARS = 1_000
MAX_FILE_BYTES = 2_000_000  # a file source's size: a larger file is left out of a folder, refused when named
MAX_READ_LINES = 400  # lines one read_source call returns
MAX_SEARCH_K = 50
MAX_QUERY_CHARS = 2_000
MAX_TABLE_ROWS = 100_000  # rows a table source may have
CHUNK_LINES = (20, 30, 40)  # a chunk's fewest, usual and most lines (fewer at a source's end)
CHUNK_CHARS = 8_000  # a chunk ends before it passes this many characters (at least one line)


class SourceKind(StrEnum):
    """What a source was made from (``sources.kind``)."""

    FILE = "file"
    SNIPPET = "snippet"
    DATAFRAME = "dataframe"  # a column, a line per row
    TABLE = "table"  # a table or view of the store's file, a line per row


def read_text_file(path: Path, max_bytes: int = MAX_FILE_BYTES) -> str:
    r"""A text file's content as a source stores it: UTF-8, newlines as ``\n``.

    Read only from a regular file, and at most ``max_bytes``: a named pipe, a
    device or a socket is refused before it is read (opened without blocking, so
    a pipe with no writer cannot hang the read), and so is a larger file, before
    more than ``max_bytes + 1`` bytes are in memory (a link to ``/dev/zero``
    cannot fill it). Refused (``InvalidInputError``) when it is not such a file
    or not UTF-8 text; ``OSError`` when it cannot be opened or is gone. The
    facade adds files with it and the citation check hashes the disk with it, so
    "changed" means the stored text would differ.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InvalidInputError(
                f"{path} is not a regular file (a pipe, device or socket); sources are text files"
            )
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InvalidInputError(f"{path} holds more bytes than a source file may: at most {max_bytes:,}")
    if b"\x00" in data[:8192]:
        raise InvalidInputError(f"{path} is a binary file, not text; add text files only")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def split_lines(text: str) -> list[str]:
    r"""A text's lines (a final newline ends the last line; it opens no empty one).

    >>> split_lines("a\nb\n")
    ['a', 'b']
    """
    lines = text.split("\n")
    return lines[:-1] if len(lines) > 1 and lines[-1] == "" else lines


def source_id(name: str, content_hash: str) -> str:
    """A source's stable id: the first 12 hex of sha256(name, NUL, content hash)."""
    return hashlib.sha256(f"{name}\0{content_hash}".encode()).hexdigest()[:12]


def chunk_spans(lines: Sequence[str]) -> list[tuple[int, int]]:
    """Non-overlapping 1-based inclusive line spans covering ``lines``, ~30 lines each.

    A chunk ends at the blank line nearest its usual length among lengths 20-40
    (``CHUNK_LINES``), else after 30 lines; it ends sooner when it would pass
    ``CHUNK_CHARS`` characters. The spans depend on the text only, so ids are stable.

    >>> chunk_spans(["x"] * 70)
    [(1, 30), (31, 70)]
    >>> chunk_spans((["x"] * 24 + [""]) * 3)
    [(1, 25), (26, 50), (51, 75)]
    """
    fewest, usual, most = CHUNK_LINES
    spans: list[tuple[int, int]] = []
    start, total = 0, len(lines)  # 0-based here
    while start < total:
        end = min(start + usual, total)  # exclusive
        if total - start > most:
            blanks = [i for i in range(start + fewest - 1, start + most) if not lines[i].strip()]
            if blanks:
                end = min(blanks, key=lambda i: (abs(i - (start + usual - 1)), i)) + 1
        else:
            end = total
        size, cut = 0, start
        while cut < end and (cut == start or size + len(lines[cut]) + 1 <= CHUNK_CHARS):
            size += len(lines[cut]) + 1
            cut += 1
        spans.append((start + 1, cut))
        start = cut
    return spans


def lines_of(db: Database, graph_id: str, source: str, start: int, end: int) -> list[str]:
    """A source's lines ``start`` to ``end`` (1-based, inclusive) as stored, read from its chunks."""
    rows = db.fetchall(
        "SELECT line_start, text FROM source_chunks WHERE graph_id = ? AND source_id = ? "
        "AND line_end >= ? AND line_start <= ? ORDER BY line_start",
        [graph_id, source, start, end],
    )
    lines: list[str] = []
    first = rows[0][0] if rows else start
    for _, text in rows:
        lines.extend(text.split("\n"))
    return lines[start - first : end - first + 1]


_SOURCE_COLUMNS = (
    "s.graph_id, s.source_id, s.name, s.kind, s.location, s.content_hash, s.line_count, "
    "(SELECT count(*) FROM source_chunks c WHERE c.graph_id = s.graph_id AND c.source_id = s.source_id), "
    "s.added_at"
)


class Sources:
    r"""The sources of the graphs in one store; ``GraphStore`` delegates its source calls here.

    Examples
    --------
    >>> from fractal_nb.store import GraphStore
    >>> store = GraphStore()
    >>> g = store.create_graph("How does a claim stay atomic?", "pulse")["graph_id"]
    >>> text = "Claims are atomic.\nOne UPDATE takes the row."
    >>> [s["line_count"] for s in store.add_sources(
    ...     g, [{"name": "notes.md", "kind": "snippet", "location": None, "text": text}])]
    [2]
    >>> store.read_source(g, "notes.md", 2, 2)["lines"]
    ['One UPDATE takes the row.']
    """

    def __init__(self, core: StoreCore, check: CitationCheck) -> None:
        self._core = core
        self._db = core.db
        self._check = check
        self._indexes: dict[str, tuple[tuple[int, int], SourceIndex]] = {}  # graph: (fingerprint, index)
        self._lock = threading.Lock()
        # What a DuckDB store raises reading a view over a file or a URL (on PostgreSQL: the server's rights).
        self._shut_views: tuple[type[Exception], ...] = (
            (duckdb.PermissionException,) if self._db.dialect is Dialect.DUCKDB else ()
        )

    # -- adding -------------------------------------------------------------------------

    def add(self, graph_id: str, texts: object) -> list[SourceRecord]:
        """Add ``texts`` (a list of :class:`SourceText`) as the graph's sources; one ``sources_added`` event.

        A text already there under its name is kept as it is; the same name with other
        content (in the graph or in this call) refuses the whole call, nothing written.
        """
        given = require_source_texts(texts)
        with self._db.write():
            graph = self._core.graph(graph_id)
            gid = graph.graph_id
            self._db.file.sourced.pop(gid, None)  # what writes read of its sources (in_process.py)
            known = self._names(gid, sorted({t["name"] for t in given}))
            fresh: dict[str, tuple[SourceText, str]] = {}
            for text in given:
                digest = hashlib.sha256(text["text"].encode("utf-8")).hexdigest()
                held = known.get(text["name"])
                if held is not None and held != digest:
                    raise InvalidInputError(
                        f"the graph already has a source named {text['name']!r} with other content; "
                        "a name holds one text. Add the new text under another name",
                        graph_id=gid,
                    )
                if held is None:
                    fresh[text["name"]] = (text, digest)
            if fresh:
                now = self._core.clock()
                ids = [source_id(name, digest) for name, (_, digest) in fresh.items()]
                self._core.log(gid, None, "sources_added", None, {"sources": ids, "names": list(fresh)}, now)
                event = self._db.fetchone("SELECT max(event_id) FROM events WHERE graph_id = ?", [gid])
                assert event is not None
                self._insert(gid, list(fresh.values()), now, int(event[0]))
            rows = self._db.fetchall(
                f"SELECT {_SOURCE_COLUMNS} FROM sources s WHERE s.graph_id = ? AND s.name IN "
                f"(SELECT unnest(?::VARCHAR[]))",
                [gid, sorted({t["name"] for t in given})],
            )
        by_name = {r[2]: _source(r) for r in rows}
        return list({t["name"]: by_name[t["name"]] for t in given}.values())

    def _names(self, graph_id: str, names: list[str]) -> dict[str, str]:
        """The content hash of each of ``names`` the graph has a source of."""
        return dict(
            self._db.fetchall(
                "SELECT name, content_hash FROM sources WHERE graph_id = ? "
                "AND name IN (SELECT unnest(?::VARCHAR[]))",
                [graph_id, names],
            )
        )

    def _insert(self, graph_id: str, fresh: list[tuple[SourceText, str]], now: float, event: int) -> None:
        source_rows: list[list[Any]] = []
        chunks: dict[str, list[Any]] = {"chunk_id": [], "source_id": [], "start": [], "end": [], "text": []}
        for text, digest in fresh:
            sid = source_id(text["name"], digest)
            lines = split_lines(text["text"])
            source_rows.append(
                [graph_id, sid, text["name"], text["kind"], text["location"], digest, len(lines), now, event]
            )
            for start, end in chunk_spans(lines):
                chunks["chunk_id"].append(f"{sid}:{start}-{end}")
                chunks["source_id"].append(sid)
                chunks["start"].append(start)
                chunks["end"].append(end)
                chunks["text"].append("\n".join(lines[start - 1 : end]))
        self._db.execute(
            "INSERT INTO sources (graph_id, source_id, name, kind, location, content_hash, line_count, "
            "added_at, added_event) VALUES " + ", ".join("(?, ?, ?, ?, ?, ?, ?, ?, ?)" for _ in source_rows),
            [v for row in source_rows for v in row],
        )
        self._db.execute(
            "INSERT INTO source_chunks (graph_id, chunk_id, source_id, line_start, line_end, text) "
            "SELECT ?, unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), "
            "unnest(?::INTEGER[]), unnest(?::INTEGER[]), unnest(?::VARCHAR[])",
            [
                graph_id,
                chunks["chunk_id"],
                chunks["source_id"],
                chunks["start"],
                chunks["end"],
                chunks["text"],
            ],
        )

    # -- reading ------------------------------------------------------------------------

    def listing(self, graph_id: str) -> list[SourceRecord]:
        """The graph's sources in the order they were added."""
        gid = self._core.known_graph(graph_id).graph_id
        rows = self._db.fetchall(
            f"SELECT {_SOURCE_COLUMNS} FROM sources s WHERE s.graph_id = ? ORDER BY s.added_event, s.name",
            [gid],
        )
        return [_source(r) for r in rows]

    def chunks(self, graph_id: str) -> list[ChunkRecord]:
        """The graph's chunks: by source (in the order they were added), then by line."""
        gid = self._core.known_graph(graph_id).graph_id
        rows = self._db.fetchall(
            "SELECT c.chunk_id, c.source_id, s.name, c.line_start, c.line_end, c.text "
            "FROM source_chunks c JOIN sources s ON s.graph_id = c.graph_id AND s.source_id = c.source_id "
            "WHERE c.graph_id = ? ORDER BY s.added_event, s.name, c.line_start",
            [gid],
        )
        return [
            {"chunk_id": c, "source_id": sid, "source": name, "line_start": a, "line_end": b, "text": text}
            for c, sid, name, a, b, text in rows
        ]

    def read(self, graph_id: str, source: object, line_start: object, line_end: object) -> SourceLines:
        """Lines ``line_start`` to ``line_end`` of a source (by name or id), as stored."""
        gid = self._core.known_graph(graph_id).graph_id
        if not isinstance(source, str) or not source.strip():
            raise InvalidInputError(f"source must be a source's name, not {shown(source)}")
        start = require_count(line_start, "line_start", minimum=1)
        end = require_count(line_end, "line_end", minimum=1)
        if end < start:
            raise InvalidInputError(f"line_end {end} is before line_start {start}")
        if end - start + 1 > MAX_READ_LINES:
            raise InvalidInputError(
                f"lines {start}-{end} are {end - start + 1:,} lines; read at most {MAX_READ_LINES} at once"
            )
        row = self._db.fetchone(
            "SELECT source_id, name, line_count FROM sources "
            "WHERE graph_id = ? AND (name = ? OR source_id = ?) ORDER BY name = ? DESC LIMIT 1",
            [gid, source, source, source],
        )
        if row is None:
            names = [s["name"] for s in self.listing(gid)]
            listed = ", ".join(repr(n) for n in names[:10]) + (
                f" and {len(names) - 10} more" if len(names) > 10 else ""
            )
            raise NotFoundError(
                f"graph {gid} has no source named {source!r}; "
                + (f"its sources: {listed}" if names else "it has no sources (add_sources)"),
                graph_id=gid,
            )
        sid, name, count = row
        if end > count:
            raise InvalidInputError(f"{name} has {count} lines; ask for lines 1 to {count}", graph_id=gid)
        return {
            "source": name,
            "line_start": start,
            "line_end": end,
            "lines": lines_of(self._db, gid, sid, start, end),
        }

    def search(self, graph_id: str, query: object, k: object = 5) -> list[SourceHit]:
        """The ``k`` chunks of the graph's sources that best match ``query`` (BM25), best first."""
        gid = self._core.known_graph(graph_id).graph_id
        text = require_text(query, "query")
        if len(text) > MAX_QUERY_CHARS:
            raise InvalidInputError(f"query is {len(text):,} characters; the limit is {MAX_QUERY_CHARS:,}")
        count = require_count(k, "k", minimum=1, maximum=MAX_SEARCH_K)
        return [{**chunk, "score": score} for chunk, score in self.index(gid).search(text, count)]

    def index(self, graph_id: str) -> SourceIndex:
        """The graph's retrieval index, built on first use and again once its sources changed."""
        row = self._db.fetchone(
            "SELECT count(*), coalesce(max(added_event), 0) FROM sources WHERE graph_id = ?", [graph_id]
        )
        assert row is not None
        fingerprint = (int(row[0]), int(row[1]))
        with self._lock:
            cached = self._indexes.get(graph_id)
        if cached is not None and cached[0] == fingerprint:
            return cached[1]
        index = SourceIndex(self.chunks(graph_id))
        with self._lock:
            self._indexes[graph_id] = (fingerprint, index)
        return index

    def check(self, graph_id: str, citations: object) -> list[CitationRecord]:
        """Each citation with the status the store's check gives it (a read; nothing written)."""
        gid = self._core.known_graph(graph_id).graph_id
        return self._check.check(gid, citations)

    # -- a table of the store's file ----------------------------------------------------

    def table_lines(self, name: object, columns: object = None) -> list[str]:
        """A table or view of the store's file as lines: a header, then a row per line (``|``-separated).

        Only SELECTs it: the analyst's own table beside the graphs, never written to. The
        store's own tables are not sources (``Exploration.sql`` reads a graph's rows). On
        PostgreSQL the store's schema is its file: a table or view there that is not the store's.
        """
        if not isinstance(name, str) or not name.strip():
            raise InvalidInputError(f"a table's name must be a non-empty string, not {shown(name)}")
        found = self._db.fetchall(
            "SELECT column_name FROM information_schema.columns WHERE table_catalog = current_database() "
            "AND table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position",
            [name],
        )
        if name in OWN_TABLES or name.endswith("_history") or not found:
            tables = [
                t
                for (t,) in self._db.fetchall(
                    "SELECT table_name FROM information_schema.tables WHERE table_catalog = "
                    "current_database() AND table_schema = current_schema() ORDER BY table_name"
                )
                if t not in OWN_TABLES
            ]
            listed = ", ".join(tables[:20]) or "none"
            raise InvalidInputError(
                f"{name!r} is not a table or view of the analyst's in this store's file (its own tables are "
                f"not sources); tables and views there: {listed}"
            )
        names = [c for (c,) in found]
        wanted = names if columns is None else _require_columns(columns, names, name)
        try:
            rows = self._db.fetchone(f"SELECT count(*) FROM {_quoted(name)}")
            assert rows is not None
            if rows[0] > MAX_TABLE_ROWS:
                raise InvalidInputError(
                    f"table {name!r} has {rows[0]:,} rows; a table source holds at most {MAX_TABLE_ROWS:,} "
                    "(make a view of the rows that matter)"
                )
            selected = ", ".join(f"CAST({_quoted(c)} AS VARCHAR)" for c in wanted)
            values = self._db.fetchall(f"SELECT {selected} FROM {_quoted(name)}")
        except self._shut_views as exc:  # a view over a file or a URL: rule 12 keeps it shut
            raise InvalidInputError(
                f"view {name!r} reads a file or a URL, which the store never opens (no file or network "
                f"access): load those rows into a table of the file first ({exc})"
            ) from None
        return [" | ".join(wanted), *(" | ".join("" if v is None else v for v in row) for row in values)]


def _quoted(identifier: str) -> str:
    """An SQL identifier quoted (a double quote inside doubled)."""
    return '"' + identifier.replace('"', '""') + '"'


def _require_columns(columns: object, names: list[str], table: str) -> list[str]:
    if not isinstance(columns, list | tuple) or not columns or not all(isinstance(c, str) for c in columns):
        raise InvalidInputError(
            f"columns must be a non-empty list of column names or None, not {shown(columns)}"
        )
    unknown = [c for c in columns if c not in names]
    if unknown:
        raise InvalidInputError(
            f"table {table!r} has no column {unknown[0]!r}; its columns: {', '.join(names)}"
        )
    return list(columns)


def require_source_texts(texts: object) -> list[SourceText]:
    """``add_sources``'s texts, each checked: name, kind, location and a non-empty text within the limits.

    All it refuses needs no database, so a caller checks before a file is opened
    (``Exploration.create``): one name with two texts is refused here too.
    """
    if not isinstance(texts, list | tuple) or not texts:
        raise InvalidInputError(
            f"texts must be a non-empty list of {{name, kind, location, text}} objects, not {shown(texts)}"
        )
    if len(texts) > MAX_SOURCES:
        raise InvalidInputError(f"texts holds {len(texts):,} sources; add at most {MAX_SOURCES:,} at once")
    checked: list[SourceText] = []
    total = 0
    for index, item in enumerate(texts):
        checked.append(_source_text(f"texts[{index}]", item))
        total += len(checked[-1]["text"])
        if total > MAX_ADD_CHARS:
            raise InvalidInputError(
                f"the texts hold more than {MAX_ADD_CHARS:,} characters; add them in parts"
            )
    texts_of: dict[str, str] = {}
    for item in checked:
        if texts_of.setdefault(item["name"], item["text"]) != item["text"]:
            raise InvalidInputError(
                f"two sources are named {item['name']!r} with other content; a name holds one text. "
                "Give one of them another name"
            )
    return checked


def _source_text(where: str, item: object) -> SourceText:
    """One source text checked: its name on one line, its kind, its location, its text within the limits."""
    if not isinstance(item, Mapping):
        raise InvalidInputError(
            f"{where} must be an object {{name, kind, location, text}}, not {shown(item)}"
        )
    name, kind, location, text = (item.get(k) for k in ("name", "kind", "location", "text"))
    if (
        not isinstance(name, str)
        or not name.strip()
        or len(name) > MAX_NAME_CHARS
        or "\x00" in name
        or one_line(name) != name
    ):
        raise InvalidInputError(
            f"{where}.name must be a name of 1-{MAX_NAME_CHARS:,} characters on one line (no NUL, "
            f"no line break: a name heads its evidence in a prompt), not {shown(name)}"
        )
    if kind not in tuple(SourceKind):
        raise InvalidInputError(f"{where}.kind must be one of {', '.join(SourceKind)}, not {shown(kind)}")
    if location is not None and (not isinstance(location, str) or not location.strip() or "\x00" in location):
        raise InvalidInputError(f"{where}.location must be a file's path or None, not {shown(location)}")
    return {"name": name, "kind": str(kind), "location": location, "text": _checked_text(where, name, text)}


def _checked_text(where: str, name: str, text: object) -> str:
    """A source's text: non-blank, within the limit, no NUL, valid Unicode; newlines as a file read has."""
    if isinstance(text, str):
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not isinstance(text, str) or not text.strip():
        raise InvalidInputError(f"{where} ({name!r}) has no text; a source must hold some text")
    if len(text) > MAX_SOURCE_CHARS:
        raise InvalidInputError(
            f"{where} ({name!r}) is {len(text):,} characters; a source holds at most {MAX_SOURCE_CHARS:,}"
        )
    if "\x00" in text:
        raise InvalidInputError(f"{where} ({name!r}) contains a NUL character; a source is text")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(f"{where} ({name!r}) is not valid Unicode text ({exc.reason})") from None
    return text


def _source(row: tuple[Any, ...]) -> SourceRecord:
    graph_id, sid, name, kind, location, digest, lines, chunks, added = row
    return {
        "graph_id": graph_id,
        "source_id": sid,
        "name": name,
        "kind": kind,
        "location": location,
        "content_hash": digest,
        "line_count": int(lines),
        "chunk_count": int(chunks),
        "added_at": iso(added),
    }
