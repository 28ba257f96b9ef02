"""``GraphStore``: the graph of one or many explorations in a DuckDB file or in memory.

The store's steps, each a plain class with its own SQL, composed here explicitly
(docs/architecture/store.md, "The store's layout"): every public call is a one-line
delegate to the step that owns it (:func:`delegate`, with the contract's signature),
or a few lines written out where it joins steps or the connection.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, Self, TypeVar

from typing_extensions import override

from ..arguments import STORE_LOG, check_store_target
from ..errors import InvalidInputError
from ..vocabulary import JsonArgument
from .answer import Answers
from .base import DEFAULT_LEASE_S, StoreCore
from .budget_turns import BudgetTurns
from .chain import ThinkonWrites
from .children import Children
from .citations import CitationCheck
from .claim import Claims
from .context import NodeContext
from .contract import Store
from .copy import Copied, copy_graphs_between
from .database import Database, Tracer
from .dialect import Dialect, dialect_of
from .duckdb_file import DuckDBDatabase
from .graphs import GraphLifecycle
from .holders import HolderInfo, hold, let_go, new_holder
from .journal import Journal
from .lineage import Lineage
from .links import Links
from .llm_log import LLMLog
from .queries import GraphQueries
from .records import LineageRecord, SourceRecord, TurnRecord
from .reopening import Reopening
from .replay import Replay
from .round_trips import RoundTrips
from .source_grep import SourceGrep
from .sources import Sources
from .stops import Stops
from .synthesis import Synthesis
from .turn_requests import TurnRequests
from .turns import Turns

P = ParamSpec("P")
R = TypeVar("R")


def delegate(
    member: Callable[Concatenate[Store, P], R], step: Callable[[GraphStore], Callable[P, R]]
) -> Callable[Concatenate[GraphStore, P], R]:
    """``member`` of :class:`Store` done by the step's method ``step`` picks from the store.

    The one-line delegate of "The store's layout": the member's signature (mypy
    checks the step's method takes it) and docstring are the contract's, and it is
    marked ``@override`` as a member written out would be.
    """

    def call(self: GraphStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return step(self)(*args, **kwargs)

    call.__name__ = member.__name__
    call.__qualname__ = f"GraphStore.{member.__name__}"  # inspect.getdoc finds the contract's docstring
    # The contract's annotations evaluated, as a method written out shows them: so store/contract.py
    # imports at run time every name its annotations use (one under TYPE_CHECKING fails this import).
    call.__signature__ = inspect.signature(member, eval_str=True)  # type: ignore[attr-defined]
    call.step = step  # type: ignore[attr-defined]  # what tests/test_store_contract.py checks
    return override(call)


class GraphStore(Store):
    """The graph contract on DuckDB or PostgreSQL; the only place in fractal_nb that speaks SQL.

    Every method returns a JSON-ready dict (ids are strings) and raises a
    :class:`~fractal_nb.FractalError` on bad input; a refused call changes
    nothing. Safe to share between threads: claims are atomic.

    Parameters
    ----------
    path:
        A DuckDB file, None for an in-memory store, or a ``postgresql://`` URL (a schema
        many processes share; the ``[postgres]`` extra).
    read_only:
        Open a file that no process is writing, for reading only.
    lease_s:
        How long a claim holds before another worker may take it over.
    clock:
        Seconds since the epoch; swap it in tests to age leases. By default the
        database's: this machine's on DuckDB, the server's on PostgreSQL (leases held
        by many machines are timed by one clock).
    tracer:
        Called with ``(sql, params)`` before every statement.

    Examples
    --------
    >>> store = GraphStore()
    >>> g = store.create_graph("Why do cities grow?", "pulse", "autonomous")
    >>> a = store.add_node(g["graph_id"], g["root_node_id"], "answer", "Jobs and trade.")
    >>> q = store.add_node(g["graph_id"], a["node_id"], "question", "Which jobs?")
    >>> store.claim_work(g["graph_id"], "worker-1")["node_id"] == q["node_id"]
    True
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        read_only: bool = False,
        lease_s: float = DEFAULT_LEASE_S,
        clock: Callable[[], float] | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        if not isinstance(lease_s, int | float) or isinstance(lease_s, bool) or lease_s <= 0:
            raise InvalidInputError(f"lease_s must be a positive number of seconds, not {lease_s!r}")
        self._db: Database = _connect(path, read_only=read_only, tracer=tracer)
        try:  # every commit records the history of what it touched (docs/architecture/store.md, rule 13)
            journal = Journal(self._db)
        except BaseException:
            self._db.close()
            raise
        clock = self._db.now if clock is None else clock
        self.clock = clock
        # This store's claims are held by this process while the store is open.
        self.holder: HolderInfo = new_holder("store")
        hold(self.holder)
        # The steps, each given the core and the steps it calls
        # (docs/architecture/store.md, "The store's layout").
        self._core = core = StoreCore(self._db, journal, clock)
        citations = CitationCheck(self._db)
        self._calls = LLMLog(core)
        self._queries = GraphQueries(core)
        self._context = NodeContext(core)
        self._graphs = GraphLifecycle(core, self._queries, citations)
        self._claims = Claims(core, self.holder, float(lease_s))
        self.lease_s = self._claims.lease_s  # how long this store's claims hold (the claim step's)
        self._synthesis = Synthesis(core, self._claims, citations, self._calls)
        children = Children(core)
        self._links = Links(core)
        self._answers = Answers(core, children, self._links, citations, self._calls, self._synthesis)
        self._round_trips = RoundTrips(core, self._claims, self._synthesis, self._answers, self._context)
        self._stops = Stops(core, self._calls)
        self._thinkon = ThinkonWrites(core, children)
        self._turns = Turns(core, self._graphs)
        self._requests = TurnRequests(core, children, self._turns, Reopening(core))
        self._budgets = BudgetTurns(core, self._turns)
        self._sources = Sources(core, citations)
        self._grep = SourceGrep(self._sources)
        self._replay = Replay(self._db)
        self._lineage = Lineage(core, self._replay)

    @property
    @override
    def path(self) -> str | None:
        return self._db.path

    @property
    @override
    def read_only(self) -> bool:
        return self._db.read_only

    @override
    def close(self) -> None:
        let_go(self.holder)
        self._db.close()

    @override
    def __enter__(self) -> Self:
        return self

    @override
    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    @override
    def location(self) -> str:
        return self._db.location

    def __repr__(self) -> str:
        where = self._db.location
        mode = ", read_only" if self._db.read_only else ""
        return f"<GraphStore {where}{mode}>"

    @override
    def watch(self, graph_id: str, wake: Callable[[], None]) -> Callable[[], None]:
        gid = self._core.known_graph(graph_id).graph_id

        def heard(graph: str) -> None:
            if graph == gid:
                wake()

        return self._db.listen(heard)

    @contextmanager
    @override
    def batch(self) -> Iterator[None]:
        with self._db.write():
            yield

    @override
    def run_lock(self, graph_id: str) -> threading.Lock:
        return self._db.file.run_lock(graph_id)

    @override
    def copy_to(self, destination: Store, graph_ids: Sequence[str] | None = None) -> Copied:
        if not isinstance(destination, GraphStore):
            raise InvalidInputError(
                f"destination must be a store opened in this process (open_store(path or URL)), "
                f"not {type(destination).__name__}"
            )
        return copy_graphs_between(self._db, destination._db, graph_ids)

    @override
    def create_graph(
        self,
        seed: str,
        intensity: str = "explore",
        checkpoint_mode: str = "autonomous",
        metadata: JsonArgument | None = None,
    ) -> dict[str, Any]:
        with self._db.write():
            created = self._graphs.create_graph(seed, intensity, checkpoint_mode, metadata)
            self._turns.open_seed(created["graph_id"])
        return created

    # -- history and forks (store/lineage.py, replay.py; docs/architecture/store.md, "History and forks") --

    get_state_at = delegate(Store.get_state_at, lambda s: s._replay.state_at)
    fork_graph = delegate(Store.fork_graph, lambda s: s._lineage.fork)
    list_family = delegate(Store.list_family, lambda s: s._lineage.family)

    @override
    def get_lineage(self, graph_id: str) -> list[LineageRecord]:
        self._core.graph(graph_id)  # NotFoundError for an unknown graph
        return self._lineage.lineage(graph_id)

    # -- turns and heads (store/turns.py, store/turn_requests.py; docs/architecture/store.md, "Turns and
    # heads") --

    ask = delegate(Store.ask, lambda s: s._requests.ask)
    attach = delegate(Store.attach, lambda s: s._requests.attach)
    widen = delegate(Store.widen, lambda s: s._requests.widen)
    deepen = delegate(Store.deepen, lambda s: s._requests.deepen)
    redecompose = delegate(Store.redecompose, lambda s: s._requests.redecompose)
    add_note = delegate(Store.add_note, lambda s: s._requests.add_note)
    new_budget = delegate(Store.new_budget, lambda s: s._budgets.new_budget)
    end_turn = delegate(Store.end_turn, lambda s: s._turns.end_turn)
    list_turns = delegate(Store.list_turns, lambda s: s._turns.list_turns)

    @override
    def list_heads(self, graph_id: str) -> list[TurnRecord]:
        return [t for t in self._turns.list_turns(graph_id) if t["head_event"] is not None]

    # -- sources and citations (store/sources.py; docs/architecture/store.md, "Sources and citations") --

    add_sources = delegate(Store.add_sources, lambda s: s._sources.add)
    list_sources = delegate(Store.list_sources, lambda s: s._sources.listing)
    source_chunks = delegate(Store.source_chunks, lambda s: s._sources.chunks)
    read_source = delegate(Store.read_source, lambda s: s._sources.read)
    search_sources = delegate(Store.search_sources, lambda s: s._sources.search)
    glob_sources = delegate(Store.glob_sources, lambda s: s._grep.glob)
    grep_sources = delegate(Store.grep_sources, lambda s: s._grep.grep)
    check_citations = delegate(Store.check_citations, lambda s: s._sources.check)
    table_lines = delegate(Store.table_lines, lambda s: s._sources.table_lines)

    @override
    def add_source_text(self, graph_id: str, name: str, text: str) -> SourceRecord:
        return self.add_sources(
            graph_id, [{"name": name, "kind": "snippet", "location": None, "text": text}]
        )[0]

    # -- graph lifecycle (store/graphs.py: GraphLifecycle) -----------------------------------------

    resume_graph = delegate(Store.resume_graph, lambda s: s._graphs.resume_graph)
    start_harvest = delegate(Store.start_harvest, lambda s: s._graphs.start_harvest)
    update_graph_status = delegate(Store.update_graph_status, lambda s: s._graphs.update_graph_status)
    update_graph_metadata = delegate(Store.update_graph_metadata, lambda s: s._graphs.update_graph_metadata)
    record_harvest = delegate(Store.record_harvest, lambda s: s._graphs.record_harvest)
    delete_graph = delegate(Store.delete_graph, lambda s: s._graphs.delete_graph)

    # -- the answer step (store/answer.py: Answers) and metadata and links (store/links.py: Links) --

    add_node = delegate(Store.add_node, lambda s: s._answers.add_node)
    add_answer = delegate(Store.add_answer, lambda s: s._answers.add_answer)
    update_node = delegate(Store.update_node, lambda s: s._links.update_node)

    # -- gates, halts, saturation, errors (store/stops.py: Stops) ----------------------------------

    mark_saturated = delegate(Store.mark_saturated, lambda s: s._stops.mark_saturated)
    prune_branch = delegate(Store.prune_branch, lambda s: s._stops.prune_branch)
    approve_gate = delegate(Store.approve_gate, lambda s: s._stops.approve_gate)
    submit_halt = delegate(Store.submit_halt, lambda s: s._stops.submit_halt)
    choose = delegate(Store.choose, lambda s: s._stops.choose)
    list_gates = delegate(Store.list_gates, lambda s: s._stops.list_gates)
    mark_error = delegate(Store.mark_error, lambda s: s._stops.mark_error)

    # -- the claim step (store/claim.py: Claims) ---------------------------------------------------

    recover_stuck = delegate(Store.recover_stuck, lambda s: s._claims.recover_stuck)
    heartbeat = delegate(Store.heartbeat, lambda s: s._claims.heartbeat)
    release_claim = delegate(Store.release_claim, lambda s: s._claims.release_claim)

    # -- the synthesis step (store/synthesis.py: Synthesis) ----------------------------------------

    synthesize_node = delegate(Store.synthesize_node, lambda s: s._synthesis.synthesize_node)
    release_synthesis = delegate(Store.release_synthesis, lambda s: s._synthesis.release_synthesis)

    # -- claims and writes that carry their work's read (store/round_trips.py: RoundTrips) ---------

    claim_work = delegate(Store.claim_work, lambda s: s._round_trips.claim_work)
    claim_synthesis = delegate(Store.claim_synthesis, lambda s: s._round_trips.claim_synthesis)
    submit_answer = delegate(Store.submit_answer, lambda s: s._round_trips.submit_answer)
    submit_synthesis = delegate(Store.submit_synthesis, lambda s: s._round_trips.submit_synthesis)

    # -- a question's context (store/context.py: NodeContext) --------------------------------------

    get_context = delegate(Store.get_context, lambda s: s._context.get_context)
    get_synthesis_inputs = delegate(Store.get_synthesis_inputs, lambda s: s._context.get_synthesis_inputs)

    # -- the contract's reads (store/queries.py: GraphQueries) -------------------------------------

    get_snapshot = delegate(Store.get_snapshot, lambda s: s._queries.get_snapshot)
    get_snapshot_text = delegate(Store.get_snapshot_text, lambda s: s._queries.get_snapshot_text)
    get_graph = delegate(Store.get_graph, lambda s: s._queries.get_graph)
    get_node = delegate(Store.get_node, lambda s: s._queries.get_node)
    list_graphs = delegate(Store.list_graphs, lambda s: s._queries.list_graphs)
    get_branch = delegate(Store.get_branch, lambda s: s._queries.get_branch)
    get_open_questions = delegate(Store.get_open_questions, lambda s: s._queries.get_open_questions)
    get_claimable_work = delegate(Store.get_claimable_work, lambda s: s._queries.get_claimable_work)
    get_ready_to_synthesize = delegate(
        Store.get_ready_to_synthesize, lambda s: s._queries.get_ready_to_synthesize
    )
    query_convergence = delegate(Store.query_convergence, lambda s: s._queries.query_convergence)
    query_contradictions = delegate(Store.query_contradictions, lambda s: s._queries.query_contradictions)
    get_saturation_status = delegate(Store.get_saturation_status, lambda s: s._queries.get_saturation_status)
    get_events = delegate(Store.get_events, lambda s: s._queries.get_events)
    get_changes = delegate(Store.get_changes, lambda s: s._queries.get_changes)
    get_question_items = delegate(Store.get_question_items, lambda s: s._queries.get_question_items)
    carries_evidence = delegate(Store.carries_evidence, lambda s: s._queries.carries_evidence)

    # -- the call log (store/llm_log.py: LLMLog) ---------------------------------------------------

    record_llm_call = delegate(Store.record_llm_call, lambda s: s._calls.record_llm_call)
    record_llm_calls = delegate(Store.record_llm_calls, lambda s: s._calls.record_llm_calls)
    get_llm_calls = delegate(Store.get_llm_calls, lambda s: s._calls.get_llm_calls)
    count_replies = delegate(Store.count_replies, lambda s: s._calls.count_replies)
    llm_spend = delegate(Store.llm_spend, lambda s: s._calls.llm_spend)
    cache_get = delegate(Store.cache_get, lambda s: s._calls.cache_get)
    cache_put = delegate(Store.cache_put, lambda s: s._calls.cache_put)

    # -- a thinkon chain (store/chain.py: ThinkonWrites) -----------------------------------------

    thinkon_level = delegate(Store.thinkon_level, lambda s: s._thinkon.thinkon_level)
    thinkon_chain = delegate(Store.thinkon_chain, lambda s: s._thinkon.thinkon_chain)
    thinkon_plan = delegate(Store.thinkon_plan, lambda s: s._thinkon.thinkon_plan)
    thinkon_call = delegate(Store.thinkon_call, lambda s: s._thinkon.thinkon_call)
    thinkon_return = delegate(Store.thinkon_return, lambda s: s._thinkon.thinkon_return)


def _connect(path: str | Path | None, *, read_only: bool, tracer: Tracer | None) -> Database:
    """The connection ``path`` names: a DuckDB file (or memory), or a PostgreSQL schema."""
    if dialect_of(path) is Dialect.DUCKDB:
        return DuckDBDatabase(path, read_only=read_only, tracer=tracer)
    try:
        from .postgres import PostgresDatabase  # noqa: PLC0415 - the [postgres] extra, only when asked for
    except ImportError as exc:
        raise InvalidInputError(
            f"a postgresql:// store needs psycopg 3 ({exc.name} is not installed): "
            "pip install 'fractal-nb[postgres]'"
        ) from None
    return PostgresDatabase(str(path), read_only=read_only, tracer=tracer)


def open_store(
    target: str | Path | None = None,
    *,
    read_only: bool = False,
    lease_s: float = DEFAULT_LEASE_S,
    clock: Callable[[], float] | None = None,
    tracer: Tracer | None = None,
) -> Store:
    """The store ``target`` names: a DuckDB file's path, a ``postgresql://`` URL, or None (in memory).

    >>> with open_store() as store:
    ...     store.location
    ':memory:'
    """
    return GraphStore(target, read_only=read_only, lease_s=lease_s, clock=clock, tracer=tracer)


def copy_graphs(
    source: str | Path, destination: str | Path, graph_ids: Sequence[str] | None = None
) -> Copied:
    """Copy graphs from the store at ``source`` into the one at ``destination`` (made if a new file).

    ``source`` and ``destination`` are DuckDB files or ``postgresql://`` URLs, either way round;
    ``graph_ids`` None copies every graph of ``source`` (forks with their origins). ``source`` is
    opened read-only. A refused copy (see :meth:`Store.copy_to`) writes nothing, and leaves no
    new file behind.

    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> with open_store(folder / "a.duckdb") as store:
    ...     graph_id = store.create_graph("Why do cities grow?", "pulse")["graph_id"]
    >>> copy_graphs(folder / "a.duckdb", folder / "b.duckdb")["graph_ids"] == [graph_id]
    True
    >>> with open_store(folder / "b.duckdb", read_only=True) as copy:
    ...     copy.get_graph(graph_id)["seed"]
    'Why do cities grow?'
    """
    source_target = check_store_target(source, "source", must_exist=True)
    target = check_store_target(destination, "destination")
    made = isinstance(target, Path) and not target.exists()
    with open_store(source_target, read_only=True) as opened:
        try:
            with open_store(target) as into:
                return opened.copy_to(into, graph_ids)
        except BaseException:
            if made and isinstance(target, Path):  # a refused copy leaves no file behind
                for left in (target, target.with_name(target.name + STORE_LOG)):
                    left.unlink(missing_ok=True)
            raise
