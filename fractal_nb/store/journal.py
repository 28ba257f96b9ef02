"""History at commit: row images of what each write transaction touched, keyed by its last event.

docs/architecture/store.md, "History and forks" (rules 13-15). The store logs every mutation as an
event inside the write transaction that makes it; the journal hears of those events as they
are written (:meth:`Journal.logged`, from ``StoreCore.log``) and, just before the
transaction's COMMIT (:class:`~.database.Database` calls :meth:`Journal.before_commit`),
one statement per table it touches (most commits: one):

- the images of the nodes the events name (``node_history``), and of the graph when an event
  is the graph's own (``graph_history``), keyed by the commit's last event id of that graph;
- on each image, the ``node_seq`` / ``call_seq`` values then (the watermark): the links and
  model calls that existed at the event are those under the largest at that event.

The state at an event is then the latest image of each node at or before it (store/replay.py).
A commit that changes nodes without an event (a heartbeat renewing leases) rewrites their
images at the graph's current last event: an image is the state at the end of its event's
span. A file written by an older version gets a baseline (every node's image at each graph's
last event) the first time this version opens it; its history starts there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .database import Database
from .dialect import Per, pick

# node_seq and call_seq now: the watermark of links (edges.seq) and calls (llm_calls.call_id).
# PostgreSQL's currval is the session's own; a sequence's last_value is the store's, and exact under
# the write lock every write transaction holds.
_WATERMARK = Per(
    duckdb="currval('node_seq') AS max_seq, currval('call_seq') AS max_call_id",
    postgresql="(SELECT last_value FROM node_seq) AS max_seq, "
    "(SELECT last_value FROM call_seq) AS max_call_id",
)
_SEQUENCES = ("node_seq", "call_seq")
# Events that only take work (a claim): every other event may add some (a question, an answer that
# readies a synthesis, a reopened or recovered claim), so its commit tells other processes (Store.watch).
_TAKES_WORK = frozenset({"claimed", "synthesis_claimed"})
# The watermark sequences that never gave a value (their last_value NULL). Parameters: the names.
_UNUSED_SEQUENCES = Per(
    duckdb="SELECT sequence_name FROM duckdb_sequences() WHERE database_name = current_database() "
    "AND schema_name = 'main' AND last_value IS NULL AND sequence_name IN (?, ?)",
    postgresql="SELECT sequencename FROM pg_sequences WHERE schemaname = current_schema() "
    "AND last_value IS NULL AND sequencename IN (?, ?)",
)
# The columns of the store's tables, in table order. Parameter: the table names.
_COLUMNS = (
    "SELECT table_name, column_name FROM information_schema.columns "
    "WHERE table_catalog = current_database() AND table_schema = current_schema() AND table_name = ANY(?) "
    "ORDER BY table_name, ordinal_position"
)


def columns_of(db: Database, tables: Iterable[str]) -> dict[str, list[str]]:
    """The columns each of ``tables`` has in the store now, in table order, quoted.

    Statements that copy whole rows name them (``INSERT INTO t (columns) SELECT columns``), so a
    column a later schema adds, or one an older file gained late (history tables), is copied too.
    """
    found: dict[str, list[str]] = {table: [] for table in tables}
    for table, column in db.fetchall(_COLUMNS, [list(found)]):
        found[table].append(f'"{column}"')
    return found


@dataclass
class _Touched:
    """What one transaction did to one graph, as its events said."""

    last_event: int | None = None  # the transaction's last event of this graph (None: none logged)
    node_ids: set[str] = field(default_factory=set)
    graph_row: bool = False  # an event of the graph itself (node_id NULL): its row may have changed
    every_node: bool = False  # a baseline: every node's image (a fork's first commit)
    adds_work: bool = False  # an event other than a claim: other processes' workers may find work


class Journal:
    """Writes the history of one store's write transactions; the Database's commit hook.

    A read-only store writes nothing and has no hook.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        self._pending: dict[str, _Touched] = {}
        if db.read_only:
            return
        db.commit_hook = self
        with db.write():
            _sync_columns(db)
            _define_sequences(db)
            columns = columns_of(db, ("nodes", "graphs"))
            nodes, graphs = ", ".join(columns["nodes"]), ", ".join(columns["graphs"])
            watermark = pick(_WATERMARK, db.dialect)
            # Images with the watermark now: the target names each column, and ``*`` gives them in
            # the same (table) order, as fast on DuckDB as ``BY NAME``. Parameter: the event; then
            # the WHERE's.
            self._node_images = (
                f"INSERT INTO node_history (event_id, max_seq, max_call_id, {nodes}) "
                f"SELECT ? AS event_id, {watermark}, * FROM nodes"
            )
            self._graph_images = (
                f"INSERT INTO graph_history (event_id, max_seq, max_call_id, {graphs}) "
                f"SELECT ? AS event_id, {watermark}, * FROM graphs WHERE graph_id = ?"
            )
            # Images with a given watermark. Parameters: event, max_seq, max_call_id; then the WHERE's.
            self._node_images_marked = (
                f"INSERT INTO node_history (event_id, max_seq, max_call_id, {nodes}) "
                "SELECT ? AS event_id, ? AS max_seq, ? AS max_call_id, * FROM nodes"
            )
            self._baseline_unrecorded()

    # -- what the transaction did (called inside it) ----------------------------------

    def logged(
        self, graph_id: str, last_event: int, node_ids: list[str | None], kinds: Iterable[str]
    ) -> None:
        """Events of ``kinds`` up to ``last_event`` for ``graph_id``, on ``node_ids`` (None: the graph)."""
        touched = self._pending.setdefault(graph_id, _Touched())
        touched.last_event = max(last_event, touched.last_event or 0)
        touched.adds_work = touched.adds_work or any(kind not in _TAKES_WORK for kind in kinds)
        for node_id in node_ids:
            if node_id is None:
                touched.graph_row = True
            else:
                touched.node_ids.add(node_id)

    def changed(self, rows: list[tuple[str, str]]) -> None:
        """Nodes ``(graph_id, node_id)`` changed without an event (a lease renewed)."""
        for graph_id, node_id in rows:
            self._pending.setdefault(graph_id, _Touched()).node_ids.add(node_id)

    def baseline(self, graph_id: str) -> None:
        """Record every node of ``graph_id`` at this transaction's last event: its history starts there."""
        touched = self._pending.setdefault(graph_id, _Touched())
        touched.every_node = touched.graph_row = True

    # -- the Database's hook --------------------------------------------------------------

    def before_commit(self) -> None:
        """Write the images and watermarks of the transaction (they commit with it); tell of new work."""
        pending, self._pending = self._pending, {}
        for graph_id, touched in pending.items():
            if touched.last_event is None:
                self._rewrite_at_last(graph_id, sorted(touched.node_ids))
            else:
                self._record(graph_id, touched.last_event, touched)
        self._db.notify([graph_id for graph_id, touched in pending.items() if touched.adds_work])

    def rolled_back(self) -> None:
        """Forget what the rolled-back transaction noted, and what writes read of sources (in_process.py)."""
        self._pending = {}
        self._db.file.sourced.clear()

    def _record(self, graph_id: str, event_id: int, touched: _Touched) -> None:
        """Images of one graph at ``event_id``, with the watermark: one statement per table."""
        db = self._db
        if touched.every_node:
            db.execute(f"{self._node_images} WHERE graph_id = ?", [event_id, graph_id])
            db.execute(
                "INSERT INTO history_baselines (graph_id, event_id) VALUES (?, ?)", [graph_id, event_id]
            )
        elif touched.node_ids:
            ids = sorted(touched.node_ids)
            # One node (a claim, a status change: most commits) is a point lookup on the key's index;
            # several are read in their graph (a new graph's rows skip the older graphs' row groups:
            # docs/architecture/store.md, "Cost by graph").
            if len(ids) == 1:
                db.execute(f"{self._node_images} WHERE node_id = ?", [event_id, ids[0]])
            else:
                marks = ", ".join("?" for _ in ids)
                db.execute(
                    f"{self._node_images} WHERE graph_id = ? AND node_id IN ({marks})",
                    [event_id, graph_id, *ids],
                )
        if touched.graph_row:
            db.execute(self._graph_images, [event_id, graph_id])

    def _rewrite_at_last(self, graph_id: str, node_ids: list[str]) -> None:
        """Images of nodes changed without an event, at the graph's last recorded event (rule 13)."""
        db = self._db
        row = db.fetchone(
            "SELECT max(event_id) FROM (SELECT event_id FROM node_history WHERE graph_id = ? "
            "UNION ALL SELECT event_id FROM graph_history WHERE graph_id = ?) AS recorded",
            [graph_id, graph_id],
        )
        if row is None or row[0] is None or not node_ids:
            return
        marks = ", ".join("?" for _ in node_ids)
        where = f"graph_id = ? AND node_id IN ({marks})"
        # The rewritten images carry the event's watermark on: an event whose commit touched only
        # these nodes (a claim) keeps the links and calls that existed then.
        mark = db.fetchone(
            "SELECT coalesce(max(max_seq), 0), coalesce(max(max_call_id), 0) FROM (SELECT max_seq, "
            "max_call_id FROM node_history WHERE graph_id = ? AND event_id = ? UNION ALL SELECT max_seq, "
            "max_call_id FROM graph_history WHERE graph_id = ? AND event_id = ?) AS images",
            [graph_id, row[0], graph_id, row[0]],
        )
        assert mark is not None
        db.execute(f"DELETE FROM node_history WHERE event_id = ? AND {where}", [row[0], graph_id, *node_ids])
        db.execute(
            f"{self._node_images_marked} WHERE {where}", [row[0], mark[0], mark[1], graph_id, *node_ids]
        )

    def _baseline_unrecorded(self) -> None:
        """Graphs with no history yet (an older version wrote them): every row at their last event."""
        todo = self._db.fetchall(
            "SELECT graph_id, max(event_id) FROM events WHERE graph_id IN ("
            "SELECT graph_id FROM graphs WHERE graph_id NOT IN (SELECT graph_id FROM graph_history)) "
            "GROUP BY graph_id ORDER BY graph_id"
        )
        for graph_id, last_event in todo:
            self._record(graph_id, int(last_event), _Touched(every_node=True, graph_row=True))


def _sync_columns(db: Database) -> None:
    """Give node_history / graph_history every column nodes / graphs have (a later ALTER adds one).

    The type is the catalog's ``data_type``, which each engine reads back in its ALTER for the
    scalar types the store's tables use.
    """
    for table, history in (("nodes", "node_history"), ("graphs", "graph_history")):
        missing = db.fetchall(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_catalog = current_database() AND table_schema = current_schema() "
            "AND table_name = ? AND column_name NOT IN (SELECT column_name FROM information_schema.columns "
            "WHERE table_catalog = current_database() AND table_schema = current_schema() "
            "AND table_name = ?) ORDER BY ordinal_position",
            [table, history],
        )
        for name, data_type in missing:
            db.execute(f'ALTER TABLE {history} ADD COLUMN "{name}" {data_type}')


def _define_sequences(db: Database) -> None:
    """Give each watermark sequence a value the watermark can read (one that never gave one: an unused id).

    Until then DuckDB's currval raises, and PostgreSQL's last_value is the id the next nextval
    hands out (a watermark of it would hold the first link or call before it was made).
    """
    for (name,) in db.fetchall(pick(_UNUSED_SEQUENCES, db.dialect), list(_SEQUENCES)):
        db.execute(f"SELECT nextval('{name}')")
