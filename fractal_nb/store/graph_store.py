"""``GraphStore``: the graph of one or many explorations in a DuckDB file or in memory.

The store's steps, each a plain class with its own SQL, composed here explicitly
(docs/architecture.md, "The store's layout"): every public call is a one-line
delegate to the step that owns it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Self

from typing_extensions import override

from ..arguments import STORE_LOG, check_store_target
from ..checks import require_flag
from ..errors import FractalError, InvalidInputError
from ..vocabulary import JsonArgument, ThinkonOutcome, TurnKind
from .answer import Answers
from .base import DEFAULT_LEASE_S, StoreCore
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
from .holders import OWN_HOLDER, HolderArgument, HolderInfo, hold, let_go, new_holder
from .journal import Journal
from .lineage import Lineage
from .links import Links
from .llm_log import LLMLog
from .queries import GraphQueries
from .records import (
    AddedNode,
    AnswerSubmitted,
    AnswerWritten,
    CallRows,
    Changes,
    Chosen,
    ChunkRecord,
    CitationRecord,
    Claim,
    ClaimableList,
    ClaimRecord,
    ClaimReleased,
    Forked,
    GateList,
    GraphList,
    GraphRecord,
    Halted,
    Heartbeat,
    LineageRecord,
    ModelSpend,
    NodeUpdated,
    OpenQuestions,
    QuestionContext,
    QuestionItems,
    ReadyList,
    Recovered,
    Saturated,
    Snapshot,
    SnapshotAt,
    SourceHit,
    SourceLines,
    SourceRecord,
    SourceText,
    StatusChanged,
    SynthesisClaim,
    SynthesisInputs,
    SynthesisReleased,
    Synthesized,
    ThinkonLevel,
    TurnRecord,
    TurnRequest,
)
from .reopening import Reopening
from .replay import Replay
from .sources import Sources
from .stops import Stops
from .synthesis import Synthesis
from .turn_requests import TurnRequests
from .turns import Turns


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
        try:  # every commit records the history of what it touched (docs/architecture.md, rule 13)
            journal = Journal(self._db)
        except BaseException:
            self._db.close()
            raise
        clock = self._db.now if clock is None else clock
        self.clock = clock
        # This store's claims are held by this process while the store is open.
        self.holder: HolderInfo = new_holder("store")
        hold(self.holder)
        # The steps, each given the core and the steps it calls (docs/architecture.md, "The store's layout").
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
        self._stops = Stops(core, self._calls)
        self._thinkon = ThinkonWrites(core, children)
        self._turns = Turns(core, self._graphs)
        self._requests = TurnRequests(core, children, self._turns, Reopening(core))
        self._sources = Sources(core, citations)
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

    # -- history and forks (docs/architecture.md, "History and forks") ----------------

    @override
    def get_state_at(self, graph_id: str, event_id: int) -> SnapshotAt:
        return self._replay.state_at(graph_id, event_id)

    @override
    def fork_graph(self, graph_id: str, at_event: int) -> Forked:
        return self._lineage.fork(graph_id, at_event)

    @override
    def copy_to(self, destination: Store, graph_ids: Sequence[str] | None = None) -> Copied:
        if not isinstance(destination, GraphStore):
            raise InvalidInputError(
                f"destination must be a store opened in this process (open_store(path or URL)), "
                f"not {type(destination).__name__}"
            )
        return copy_graphs_between(self._db, destination._db, graph_ids)

    @override
    def get_lineage(self, graph_id: str) -> list[LineageRecord]:
        self._core.graph(graph_id)  # NotFoundError for an unknown graph
        return self._lineage.lineage(graph_id)

    @override
    def list_family(self) -> list[LineageRecord]:
        return self._lineage.family()

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

    # -- turns and heads (store/turns.py, store/turn_requests.py; docs/architecture.md, "Turns and heads") --

    @override
    def ask(self, graph_id: str, question: str, under: str | None = None) -> TurnRequest:
        return self._requests.ask(graph_id, question, under)

    @override
    def attach(self, graph_id: str, question: str, under: str | None = None) -> TurnRequest:
        return self._requests.ask(graph_id, question, under, kind=TurnKind.ATTACH)

    @override
    def widen(self, graph_id: str, questions: Sequence[str], n: int | None = None) -> TurnRequest:
        return self._requests.widen(graph_id, questions, n)

    @override
    def deepen(self, graph_id: str, node_id: str, levels: int = 1) -> TurnRequest:
        return self._requests.deepen(graph_id, node_id, levels)

    @override
    def redecompose(self, graph_id: str, node_id: str, hint: str | None = None) -> TurnRequest:
        return self._requests.redecompose(graph_id, node_id, hint)

    @override
    def add_note(self, graph_id: str, node_id: str, text: str) -> TurnRequest:
        return self._requests.add_note(graph_id, node_id, text)

    @override
    def end_turn(self, graph_id: str, *, cost: float | None = None) -> TurnRecord | None:
        return self._turns.end_turn(graph_id, cost=cost)

    @override
    def list_turns(self, graph_id: str) -> list[TurnRecord]:
        return self._turns.list_turns(graph_id)

    @override
    def list_heads(self, graph_id: str) -> list[TurnRecord]:
        return [t for t in self._turns.list_turns(graph_id) if t["head_event"] is not None]

    # -- sources and citations (store/sources.py; docs/architecture.md, "Sources and citations") --

    @override
    def add_sources(self, graph_id: str, texts: Sequence[SourceText]) -> list[SourceRecord]:
        return self._sources.add(graph_id, texts)

    @override
    def add_source_text(self, graph_id: str, name: str, text: str) -> SourceRecord:
        return self.add_sources(
            graph_id, [{"name": name, "kind": "snippet", "location": None, "text": text}]
        )[0]

    @override
    def list_sources(self, graph_id: str) -> list[SourceRecord]:
        return self._sources.listing(graph_id)

    @override
    def source_chunks(self, graph_id: str) -> list[ChunkRecord]:
        return self._sources.chunks(graph_id)

    @override
    def read_source(self, graph_id: str, source: str, line_start: int, line_end: int) -> SourceLines:
        return self._sources.read(graph_id, source, line_start, line_end)

    @override
    def search_sources(self, graph_id: str, query: str, k: int = 5) -> list[SourceHit]:
        return self._sources.search(graph_id, query, k)

    @override
    def check_citations(self, graph_id: str, citations: Sequence[Mapping[str, Any]]) -> list[CitationRecord]:
        return self._sources.check(graph_id, citations)

    @override
    def table_lines(self, name: str, columns: Sequence[str] | None = None) -> list[str]:
        return self._sources.table_lines(name, columns)

    # -- graph lifecycle (store/graphs.py: GraphLifecycle) -----------------------------------------

    @override
    def resume_graph(self, graph_id: str) -> Snapshot:
        return self._graphs.resume_graph(graph_id)

    @override
    def update_graph_status(self, graph_id: str, status: str, reason: str | None = None) -> StatusChanged:
        return self._graphs.update_graph_status(graph_id, status, reason)

    @override
    def update_graph_metadata(self, graph_id: str, metadata: JsonArgument) -> dict[str, Any]:
        return self._graphs.update_graph_metadata(graph_id, metadata)

    @override
    def record_harvest(self, graph_id: str, harvest: Mapping[str, Any]) -> dict[str, Any]:
        return self._graphs.record_harvest(graph_id, harvest)

    @override
    def delete_graph(self, graph_id: str) -> dict[str, Any]:
        return self._graphs.delete_graph(graph_id)

    # -- the answer step (store/answer.py: Answers) ------------------------------------------------

    @override
    def add_node(
        self,
        graph_id: str,
        parent_id: str,
        node_type: str,
        text: str,
        owner: str | None = None,
        metadata: JsonArgument | None = None,
    ) -> AddedNode:
        return self._answers.add_node(graph_id, parent_id, node_type, text, owner, metadata)

    @override
    def add_answer(
        self,
        graph_id: str,
        question_id: str,
        text: str,
        *,
        owner: str | None = None,
        metadata: JsonArgument | None = None,
        sub_questions: Sequence[str | dict[str, Any]] | None = None,
        synthesize: bool = False,
        saturation: str | None = None,
    ) -> AnswerWritten:
        return self._answers.add_answer(
            graph_id,
            question_id,
            text,
            owner=owner,
            metadata=metadata,
            sub_questions=sub_questions,
            synthesize=synthesize,
            saturation=saturation,
        )

    @override
    def submit_answer(
        self,
        graph_id: str,
        question_id: str,
        text: str,
        *,
        owner: str | None = None,
        metadata: JsonArgument | None = None,
        sub_questions: Sequence[str | dict[str, Any]] | None = None,
        links: JsonArgument | None = None,
        calls: CallRows | None = None,
        saturation: str | None = None,
        boundary: JsonArgument | None = None,
        claim_next: bool = False,
        with_inputs: bool = False,
    ) -> AnswerSubmitted:
        wanted = self._inputs_wanted(with_inputs, claim_next)
        written = self._answers.submit_answer(
            graph_id,
            question_id,
            text,
            owner=owner,
            metadata=metadata,
            sub_questions=sub_questions,
            links=links,
            calls=calls,
            saturation=saturation,
            boundary=boundary,
            claim_next=claim_next,
        )
        if wanted:  # claim_next was given: the write says what it claimed
            self._with_inputs(written["next_synthesis"])
        return written

    # -- metadata and links (store/links.py: Links) ------------------------------------------------

    @override
    def update_node(self, graph_id: str, node_id: str, metadata: JsonArgument) -> NodeUpdated:
        return self._links.update_node(graph_id, node_id, metadata)

    # -- gates, halts, saturation, errors (store/stops.py: Stops) ----------------------------------

    @override
    def mark_saturated(self, graph_id: str, node_id: str, reason: str) -> Saturated:
        return self._stops.mark_saturated(graph_id, node_id, reason)

    @override
    def prune_branch(self, graph_id: str, node_id: str) -> Saturated:
        return self._stops.prune_branch(graph_id, node_id)

    @override
    def approve_gate(self, graph_id: str, node_ids: list[str] | None = None) -> dict[str, Any]:
        return self._stops.approve_gate(graph_id, node_ids)

    @override
    def submit_halt(
        self,
        graph_id: str,
        node_id: str,
        halt: JsonArgument,
        *,
        owner: str,
        calls: CallRows | None = None,
    ) -> Halted:
        return self._stops.submit_halt(graph_id, node_id, halt, owner=owner, calls=calls)

    @override
    def choose(self, graph_id: str, node_id: str, choice: int | str) -> Chosen:
        return self._stops.choose(graph_id, node_id, choice)

    @override
    def list_gates(self, graph_id: str) -> GateList:
        return self._stops.list_gates(graph_id)

    @override
    def mark_error(self, graph_id: str, node_id: str, message: str) -> dict[str, Any]:
        return self._stops.mark_error(graph_id, node_id, message)

    # -- the claim step (store/claim.py: Claims) ---------------------------------------------------

    @override
    def claim_work(
        self,
        graph_id: str,
        worker_id: str,
        *,
        holder: HolderArgument = OWN_HOLDER,
        with_context: bool = False,
    ) -> Claim:
        wanted = require_flag(with_context, "with_context")
        claim, question = self._claims.claim_question(graph_id, worker_id, holder=holder)
        if wanted and question is not None:
            with suppress(FractalError):  # the claim stands; the worker's own read meets the error
                claim["context"] = self._context.around(self._core.known_graph(question.graph_id), question)
        return claim

    @override
    def recover_stuck(
        self,
        graph_id: str,
        older_than_s: float | None = None,
        *,
        include_errors: bool = False,
        worker_id: str | None = None,
    ) -> Recovered:
        return self._claims.recover_stuck(
            graph_id, older_than_s, include_errors=include_errors, worker_id=worker_id
        )

    @override
    def heartbeat(self, holder_id: str) -> Heartbeat:
        return self._claims.heartbeat(holder_id)

    @override
    def release_claim(
        self,
        graph_id: str,
        node_id: str,
        worker_id: str,
        error: str,
        *,
        max_failures: int = 3,
        failed: bool = True,
    ) -> ClaimReleased:
        return self._claims.release_claim(
            graph_id, node_id, worker_id, error, max_failures=max_failures, failed=failed
        )

    # -- the synthesis step (store/synthesis.py: Synthesis) ----------------------------------------

    @override
    def claim_synthesis(
        self,
        graph_id: str,
        worker_id: str,
        *,
        holder: HolderArgument = OWN_HOLDER,
        skip: list[str] | None = None,
        with_inputs: bool = False,
    ) -> SynthesisClaim:
        wanted = require_flag(with_inputs, "with_inputs")
        claim = self._synthesis.claim_synthesis(graph_id, worker_id, holder=holder, skip=skip)
        return self._with_inputs(claim) if wanted else claim

    def _inputs_wanted(self, with_inputs: object, claim_next: object) -> bool:
        """``with_inputs`` of a write: the inputs of the synthesis it claims, so only with ``claim_next``."""
        if require_flag(with_inputs, "with_inputs") and claim_next is not True:
            raise InvalidInputError(
                "with_inputs=True needs claim_next=True: the inputs are the next synthesis's"
            )
        return bool(with_inputs)

    def _with_inputs(self, claim: SynthesisClaim) -> SynthesisClaim:
        """``claim`` with its question's synthesis inputs, when it holds one."""
        if claim["node_id"] is not None:
            with suppress(FractalError):  # the claim stands; the worker's own read meets the error
                claim["inputs"] = self._context.get_synthesis_inputs(claim["graph_id"], claim["node_id"])
        return claim

    @override
    def submit_synthesis(
        self,
        graph_id: str,
        node_id: str,
        synthesis_text: str,
        *,
        worker_id: str,
        calls: CallRows | None = None,
        claims: list[ClaimRecord] | None = None,
        findings: Sequence[Mapping[str, Any]] | None = None,
        extra: Mapping[str, Any] | None = None,
        claim_next: bool = False,
        with_inputs: bool = False,
    ) -> Synthesized:
        wanted = self._inputs_wanted(with_inputs, claim_next)
        written = self._synthesis.submit_synthesis(
            graph_id,
            node_id,
            synthesis_text,
            worker_id=worker_id,
            calls=calls,
            claims=claims,
            findings=findings,
            extra=extra,
            claim_next=claim_next,
        )
        if wanted:  # claim_next was given: the write says what it claimed
            self._with_inputs(written["next_synthesis"])
        return written

    @override
    def synthesize_node(
        self,
        graph_id: str,
        node_id: str,
        synthesis_text: str,
        *,
        claims: list[ClaimRecord] | None = None,
        findings: Sequence[Mapping[str, Any]] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> Synthesized:
        return self._synthesis.synthesize_node(
            graph_id, node_id, synthesis_text, claims=claims, findings=findings, extra=extra
        )

    @override
    def release_synthesis(self, graph_id: str, node_id: str, worker_id: str) -> SynthesisReleased:
        return self._synthesis.release_synthesis(graph_id, node_id, worker_id)

    # -- a question's context (store/context.py: NodeContext) --------------------------------------

    @override
    def get_context(
        self, graph_id: str, node_id: str, *, limit: int = 6, candidates: int = 8
    ) -> QuestionContext:
        return self._context.get_context(graph_id, node_id, limit=limit, candidates=candidates)

    @override
    def get_synthesis_inputs(self, graph_id: str, node_id: str) -> SynthesisInputs:
        return self._context.get_synthesis_inputs(graph_id, node_id)

    # -- the contract's reads (store/queries.py: GraphQueries) -------------------------------------

    @override
    def get_snapshot(self, graph_id: str) -> Snapshot:
        return self._queries.get_snapshot(graph_id)

    @override
    def get_snapshot_text(self, graph_id: str) -> str:
        return self._queries.get_snapshot_text(graph_id)

    @override
    def get_graph(self, graph_id: str) -> GraphRecord:
        return self._queries.get_graph(graph_id)

    @override
    def get_node(self, graph_id: str, node_id: str) -> dict[str, Any]:
        return self._queries.get_node(graph_id, node_id)

    @override
    def list_graphs(self) -> GraphList:
        return self._queries.list_graphs()

    @override
    def get_branch(self, graph_id: str, node_id: str) -> dict[str, Any]:
        return self._queries.get_branch(graph_id, node_id)

    @override
    def get_open_questions(self, graph_id: str) -> OpenQuestions:
        return self._queries.get_open_questions(graph_id)

    @override
    def get_claimable_work(self, graph_id: str, worker_id: str | None = None) -> ClaimableList:
        return self._queries.get_claimable_work(graph_id, worker_id)

    @override
    def get_ready_to_synthesize(self, graph_id: str) -> ReadyList:
        return self._queries.get_ready_to_synthesize(graph_id)

    @override
    def query_convergence(self, graph_id: str) -> dict[str, Any]:
        return self._queries.query_convergence(graph_id)

    @override
    def query_contradictions(self, graph_id: str) -> dict[str, Any]:
        return self._queries.query_contradictions(graph_id)

    @override
    def get_saturation_status(self, graph_id: str) -> dict[str, Any]:
        return self._queries.get_saturation_status(graph_id)

    @override
    def get_events(self, graph_id: str, since: int = 0, limit: int | None = None) -> dict[str, Any]:
        return self._queries.get_events(graph_id, since, limit)

    @override
    def get_changes(self, graph_id: str, since: int = 0) -> Changes:
        return self._queries.get_changes(graph_id, since)

    @override
    def get_question_items(self, graph_id: str) -> QuestionItems:
        return self._queries.get_question_items(graph_id)

    @override
    def carries_evidence(self, graph_id: str) -> bool:
        return self._queries.carries_evidence(graph_id)

    # -- the call log (store/llm_log.py: LLMLog) ---------------------------------------------------

    @override
    def record_llm_call(
        self,
        *,
        graph_id: str | None,
        node_id: str | None,
        worker: str | None,
        role: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        attempts: int,
        latency_s: float,
        outcome: str,
        error: str | None = None,
    ) -> dict[str, Any]:
        return self._calls.record_llm_call(
            graph_id=graph_id,
            node_id=node_id,
            worker=worker,
            role=role,
            model=model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            attempts=attempts,
            latency_s=latency_s,
            outcome=outcome,
            error=error,
        )

    @override
    def record_llm_calls(self, calls: CallRows) -> int:
        return self._calls.record_llm_calls(calls)

    @override
    def get_llm_calls(self, graph_id: str, node_id: str | None = None) -> dict[str, Any]:
        return self._calls.get_llm_calls(graph_id, node_id)

    @override
    def count_replies(self, graph_id: str) -> dict[str, int]:
        return self._calls.count_replies(graph_id)

    @override
    def llm_spend(self, graph_id: str) -> list[ModelSpend]:
        return self._calls.llm_spend(graph_id)

    @override
    def cache_get(self, cache_key: str) -> dict[str, Any] | None:
        return self._calls.cache_get(cache_key)

    @override
    def cache_put(self, cache_key: str, *, model: str, role: str, response: dict[str, Any]) -> None:
        return self._calls.cache_put(cache_key, model=model, role=role, response=response)

    # -- a thinkon chain (store/chain.py: ThinkonWrites) -----------------------------------------

    @override
    def thinkon_level(self, graph_id: str, node_id: str) -> ThinkonLevel:
        return self._thinkon.thinkon_level(graph_id, node_id)

    @override
    def thinkon_chain(self, graph_id: str) -> list[ThinkonLevel]:
        return self._thinkon.thinkon_chain(graph_id)

    @override
    def thinkon_plan(self, graph_id: str, node_id: str, todo: str, *, worker_id: str) -> ThinkonLevel:
        return self._thinkon.thinkon_plan(graph_id, node_id, todo, worker_id=worker_id)

    @override
    def thinkon_call(self, graph_id: str, node_id: str, goal: str, *, worker_id: str) -> ThinkonLevel:
        return self._thinkon.thinkon_call(graph_id, node_id, goal, worker_id=worker_id)

    @override
    def thinkon_return(
        self,
        graph_id: str,
        node_id: str,
        result: str,
        *,
        worker_id: str,
        outcome: ThinkonOutcome | str = ThinkonOutcome.RETURNED,
        reason: str | None = None,
    ) -> ThinkonLevel | None:
        return self._thinkon.thinkon_return(
            graph_id, node_id, result, worker_id=worker_id, outcome=outcome, reason=reason
        )


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
