"""``GraphStore``: the graph of one or many explorations in a DuckDB file or in memory.

The store's steps, each a plain class with its own SQL, composed here explicitly
(docs/architecture.md, "The store's layout"): every public call is a one-line
delegate to the step that owns it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Self

from ..errors import FractalError, InvalidInputError
from ..model import ThinkonOutcome, TurnKind
from .answer import Answers
from .base import DEFAULT_LEASE_S, StoreCore, require_flag
from .children import Children
from .citations import CitationCheck
from .claim import Claims
from .context import NodeContext
from .database import Database, Tracer
from .graphs import GraphLifecycle
from .holders import HolderInfo, hold, let_go, new_holder
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
from .replay import Replay
from .sources import Sources
from .stops import Stops
from .synthesis import Synthesis
from .thinkon import ThinkonWrites
from .turns import Turns


class GraphStore:
    """The graph contract on DuckDB; the only place in fractal_nb that speaks SQL.

    Every method returns a JSON-ready dict (ids are strings) and raises a
    :class:`~fractal_nb.FractalError` on bad input; a refused call changes
    nothing. Safe to share between threads: claims are atomic.

    Parameters
    ----------
    path:
        A DuckDB file, or None for an in-memory store.
    read_only:
        Open a file that no process is writing, for reading only.
    lease_s:
        How long a claim holds before another worker may take it over.
    clock:
        Seconds since the epoch; swap it in tests to age leases.
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
        clock: Callable[[], float] = time.time,
        tracer: Tracer | None = None,
    ) -> None:
        if not isinstance(lease_s, int | float) or isinstance(lease_s, bool) or lease_s <= 0:
            raise InvalidInputError(f"lease_s must be a positive number of seconds, not {lease_s!r}")
        self._db = Database(path, read_only=read_only, tracer=tracer)
        try:  # every commit records the history of what it touched (docs/architecture.md, rule 13)
            journal = Journal(self._db)
        except BaseException:
            self._db.close()
            raise
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
        self._turns = Turns(core, children, self._graphs)
        self._sources = Sources(core, citations)
        self._replay = Replay(self._db)
        self._lineage = Lineage(core, self._replay)

    @property
    def path(self) -> str | None:
        """The DuckDB file, or None for an in-memory store."""
        return self._db.path

    @property
    def read_only(self) -> bool:
        """Opened ``read_only=True``: every write is refused (docs/architecture.md, "Inspecting a file")."""
        return self._db.read_only

    def close(self) -> None:
        """Release the DuckDB file (idempotent); claims still held here become recoverable at once."""
        let_go(self.holder)
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self.path or ":memory:"
        mode = ", read_only" if self._db.read_only else ""
        return f"<GraphStore {where}{mode}>"

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Run several calls as one transaction: all of them land, or none if the block raises."""
        with self._db.write():
            yield

    def run_lock(self, graph_id: str) -> threading.Lock:
        """The lock that lets one run or step at a time work ``graph_id`` in this process (in_process.py)."""
        return self._db.file.run_lock(graph_id)

    # -- history and forks (docs/architecture.md, "History and forks") ----------------

    def get_state_at(self, graph_id: str, event_id: int) -> SnapshotAt:
        """The graph as it was at ``event_id``: a snapshot (as get_snapshot) folded from its history."""
        return self._replay.state_at(graph_id, event_id)

    def fork_graph(self, graph_id: str, at_event: int) -> Forked:
        """A new graph in this file from ``graph_id``'s state at ``at_event``; the source never changes."""
        return self._lineage.fork(graph_id, at_event)

    def get_lineage(self, graph_id: str) -> list[LineageRecord]:
        """The lineage of ``graph_id``: its original and every fork of it, oldest first."""
        self._core.graph(graph_id)  # NotFoundError for an unknown graph
        return self._lineage.lineage(graph_id)

    def list_family(self) -> list[LineageRecord]:
        """Every graph in the file and where it was forked from, oldest first."""
        return self._lineage.family()

    def create_graph(
        self,
        seed: str,
        intensity: str = "explore",
        checkpoint_mode: str = "autonomous",
        metadata: dict[str, Any] | str | None = None,
    ) -> dict[str, Any]:
        """Create a graph whose root question is ``seed`` (turn 1 opens); returns ids, budget and status."""
        with self._db.write():
            created = self._graphs.create_graph(seed, intensity, checkpoint_mode, metadata)
            self._turns.open_seed(created["graph_id"])
        return created

    # -- turns and heads (store/turns.py; docs/architecture.md, "Turns and heads") --

    def ask(self, graph_id: str, question: str, under: str | None = None) -> TurnRequest:
        """A follow-up question under the root's answer or ``under`` a node (:meth:`Turns.ask`)."""
        return self._turns.ask(graph_id, question, under)

    def attach(self, graph_id: str, question: str, under: str | None = None) -> TurnRequest:
        """A fork's narrower question: :meth:`ask` opening a turn of kind ``attach`` (:meth:`Turns.ask`)."""
        return self._turns.ask(graph_id, question, under, kind=TurnKind.ATTACH)

    def widen(self, graph_id: str, questions: Sequence[str], n: int | None = None) -> TurnRequest:
        """New seed questions under the root's answer (:meth:`Turns.widen`)."""
        return self._turns.widen(graph_id, questions, n)

    def deepen(self, graph_id: str, node_id: str, levels: int = 1) -> TurnRequest:
        """Let a branch go ``levels`` past the depth for this turn (:meth:`Turns.deepen`)."""
        return self._turns.deepen(graph_id, node_id, levels)

    def redecompose(self, graph_id: str, node_id: str, hint: str | None = None) -> TurnRequest:
        """Answer a question again with a new decomposition (:meth:`Turns.redecompose`)."""
        return self._turns.redecompose(graph_id, node_id, hint)

    def add_note(self, graph_id: str, node_id: str, text: str) -> TurnRequest:
        """A person's note under a question (:meth:`Turns.add_note`)."""
        return self._turns.add_note(graph_id, node_id, text)

    def end_turn(self, graph_id: str, *, cost: float | None = None) -> TurnRecord | None:
        """End the open turn in a head (:meth:`Turns.end_turn`)."""
        return self._turns.end_turn(graph_id, cost=cost)

    def list_turns(self, graph_id: str) -> list[TurnRecord]:
        """The graph's turns, heads included (:meth:`Turns.list_turns`)."""
        return self._turns.list_turns(graph_id)

    def list_heads(self, graph_id: str) -> list[TurnRecord]:
        """The graph's heads: its ended turns in order, the current head last (the open turn left out).

        >>> store = GraphStore()
        >>> g = store.create_graph("Why do cities grow?", "pulse")
        >>> store.list_heads(g["graph_id"])  # turn 1 (the seed) ends in a head at its harvest
        []
        """
        return [t for t in self._turns.list_turns(graph_id) if t["head_event"] is not None]

    # -- sources and citations (store/sources.py; docs/architecture.md, "Sources and citations") --

    def add_sources(self, graph_id: str, texts: Sequence[SourceText]) -> list[SourceRecord]:
        """Add texts as the graph's sources, kept as chunks (:meth:`Sources.add`)."""
        return self._sources.add(graph_id, texts)

    def add_source_text(self, graph_id: str, name: str, text: str) -> SourceRecord:
        """Add one text snippet as a source named ``name`` (what MCP offers: text, never a path to read)."""
        return self.add_sources(
            graph_id, [{"name": name, "kind": "snippet", "location": None, "text": text}]
        )[0]

    def list_sources(self, graph_id: str) -> list[SourceRecord]:
        """The graph's sources in the order they were added (:meth:`Sources.list`)."""
        return self._sources.listing(graph_id)

    def source_chunks(self, graph_id: str) -> list[ChunkRecord]:
        """The chunks of the graph's sources (:meth:`Sources.chunks`)."""
        return self._sources.chunks(graph_id)

    def read_source(self, graph_id: str, source: str, line_start: int, line_end: int) -> SourceLines:
        """A span of a source's lines as stored (:meth:`Sources.read`)."""
        return self._sources.read(graph_id, source, line_start, line_end)

    def search_sources(self, graph_id: str, query: str, k: int = 5) -> list[SourceHit]:
        """The chunks of the graph's sources that best match ``query`` (:meth:`Sources.search`)."""
        return self._sources.search(graph_id, query, k)

    def check_citations(self, graph_id: str, citations: Sequence[Mapping[str, Any]]) -> list[CitationRecord]:
        """Each citation with what the store's check found; nothing written (:meth:`Sources.check`)."""
        return self._sources.check(graph_id, citations)

    def table_lines(self, name: str, columns: Sequence[str] | None = None) -> list[str]:
        """A table or view of this file beside the graphs, a line per row (:meth:`Sources.table_lines`)."""
        return self._sources.table_lines(name, columns)

    # -- graph lifecycle (store/graphs.py: GraphLifecycle) -----------------------------------------

    def resume_graph(self, graph_id: str) -> Snapshot:
        """Reactivate a paused or budget-exhausted graph and return its snapshot."""
        return self._graphs.resume_graph(graph_id)

    def update_graph_status(self, graph_id: str, status: str, reason: str | None = None) -> StatusChanged:
        """Move the graph to ``status`` if the transition table allows it."""
        return self._graphs.update_graph_status(graph_id, status, reason)

    def update_graph_metadata(self, graph_id: str, metadata: dict[str, Any] | str) -> dict[str, Any]:
        """Merge ``metadata`` into the graph's (shallow), e.g. the harvest's summary."""
        return self._graphs.update_graph_metadata(graph_id, metadata)

    def record_harvest(self, graph_id: str, harvest: Mapping[str, Any]) -> dict[str, Any]:
        """Write the harvest (graph metadata ``harvest``), its findings' citations checked first."""
        return self._graphs.record_harvest(graph_id, harvest)

    def delete_graph(self, graph_id: str) -> dict[str, Any]:
        """Delete the graph with its nodes, edges, events and call log."""
        return self._graphs.delete_graph(graph_id)

    # -- the answer step (store/answer.py: Answers) ------------------------------------------------

    def add_node(
        self,
        graph_id: str,
        parent_id: str,
        node_type: str,
        text: str,
        owner: str | None = None,
        metadata: dict[str, Any] | str | None = None,
    ) -> AddedNode:
        """Add an answer or a sub-question under ``parent_id`` (:meth:`Answers.add_node`)."""
        return self._answers.add_node(graph_id, parent_id, node_type, text, owner, metadata)

    def add_answer(
        self,
        graph_id: str,
        question_id: str,
        text: str,
        *,
        owner: str | None = None,
        metadata: dict[str, Any] | str | None = None,
        sub_questions: Sequence[str | dict[str, Any]] | None = None,
        synthesize: bool = False,
        saturation: str | None = None,
    ) -> AnswerWritten:
        """Add an answer and its sub-questions in one transaction (what a worker writes)."""
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

    def submit_answer(
        self,
        graph_id: str,
        question_id: str,
        text: str,
        *,
        owner: str | None = None,
        metadata: dict[str, Any] | str | None = None,
        sub_questions: Sequence[str | dict[str, Any]] | None = None,
        links: dict[str, Any] | str | None = None,
        calls: CallRows | None = None,
        saturation: str | None = None,
        boundary: dict[str, Any] | str | None = None,
        claim_next: bool = False,
        with_inputs: bool = False,
    ) -> AnswerSubmitted:
        """Everything a worker writes for a claimed question, in one transaction.

        ``claim_next``: with the synthesis it made ready above, claimed for ``owner``;
        ``with_inputs``: that synthesis's inputs too (:meth:`claim_synthesis`).
        """
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

    def update_node(self, graph_id: str, node_id: str, metadata: dict[str, Any] | str) -> NodeUpdated:
        """Merge ``metadata`` into the node's (shallow); link keys create edges once."""
        return self._links.update_node(graph_id, node_id, metadata)

    # -- gates, halts, saturation, errors (store/stops.py: Stops) ----------------------------------

    def mark_saturated(self, graph_id: str, node_id: str, reason: str) -> Saturated:
        """Saturate a node and every unfinished question below it (the reason is inherited)."""
        return self._stops.mark_saturated(graph_id, node_id, reason)

    def prune_branch(self, graph_id: str, node_id: str) -> Saturated:
        """A person's prune: saturate the node and its unfinished descendants as ``pruned``."""
        return self._stops.prune_branch(graph_id, node_id)

    def approve_gate(self, graph_id: str, node_ids: list[str] | None = None) -> dict[str, Any]:
        """Open gated questions: the given ones, or every gated question when None."""
        return self._stops.approve_gate(graph_id, node_ids)

    def submit_halt(
        self,
        graph_id: str,
        node_id: str,
        halt: dict[str, Any] | str,
        *,
        owner: str,
        calls: CallRows | None = None,
    ) -> Halted:
        """A worker's halt on its claimed question instead of an answer (:meth:`Stops.submit_halt`)."""
        return self._stops.submit_halt(graph_id, node_id, halt, owner=owner, calls=calls)

    def choose(self, graph_id: str, node_id: str, choice: int | str) -> Chosen:
        """The person's answer to a held question: it reopens (``open``) with ``metadata["choice"]``."""
        return self._stops.choose(graph_id, node_id, choice)

    def list_gates(self, graph_id: str) -> GateList:
        """The gated questions in creation order, each with the halt holding it (None: a checkpoint's)."""
        return self._stops.list_gates(graph_id)

    def mark_error(self, graph_id: str, node_id: str, message: str) -> dict[str, Any]:
        """Mark an unfinished question as failed; ``recover_stuck(include_errors=True)`` reopens it."""
        return self._stops.mark_error(graph_id, node_id, message)

    # -- the claim step (store/claim.py: Claims) ---------------------------------------------------

    def claim_work(
        self,
        graph_id: str,
        worker_id: str,
        *,
        holder: HolderInfo | dict[str, Any] | str | None = "store",
        with_context: bool = False,
    ) -> Claim:
        """Atomically claim the next question for ``worker_id`` (docs/architecture.md, rule 1).

        ``with_context``: the claim also carries the question's ``context``, as
        :meth:`get_context` reads it, read after the claim commits (outside the
        write lock): a worker's claim and read in one call.
        """
        wanted = require_flag(with_context, "with_context")
        claim, question = self._claims.claim_question(graph_id, worker_id, holder=holder)
        if wanted and question is not None:
            with suppress(FractalError):  # the claim stands; the worker's own read meets the error
                claim["context"] = self._context.around(self._core.known_graph(question.graph_id), question)
        return claim

    def recover_stuck(
        self,
        graph_id: str,
        older_than_s: float | None = None,
        *,
        include_errors: bool = False,
        worker_id: str | None = None,
    ) -> Recovered:
        """Return stuck claims to open: by default those past their lease and those of gone holders."""
        return self._claims.recover_stuck(
            graph_id, older_than_s, include_errors=include_errors, worker_id=worker_id
        )

    def heartbeat(self, holder_id: str) -> Heartbeat:
        """A live holder renews the leases of all its claims (questions and syntheses), in every graph."""
        return self._claims.heartbeat(holder_id)

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
        """Give back a claim after a failed attempt, recording why (:meth:`Claims.release_claim`)."""
        return self._claims.release_claim(
            graph_id, node_id, worker_id, error, max_failures=max_failures, failed=failed
        )

    # -- the synthesis step (store/synthesis.py: Synthesis) ----------------------------------------

    def claim_synthesis(
        self,
        graph_id: str,
        worker_id: str,
        *,
        holder: HolderInfo | dict[str, Any] | str | None = "store",
        skip: list[str] | None = None,
        with_inputs: bool = False,
    ) -> SynthesisClaim:
        """Hand the deepest ready question no one is synthesizing to ``worker_id``.

        ``with_inputs``: the claim also carries what the synthesis reads
        (:meth:`get_synthesis_inputs`), read after the claim commits, outside the
        write lock: a claim and its read in one call.
        """
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
        """Synthesize a question this worker holds the synthesis of, with the calls behind it, at once.

        ``claim_next``: with the synthesis it made ready above, claimed for this worker;
        ``with_inputs``: that synthesis's inputs too (:meth:`claim_synthesis`).
        """
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
        """Record an answered question's synthesis (in ``metadata["synthesis"]``), with its ``claims``."""
        return self._synthesis.synthesize_node(
            graph_id, node_id, synthesis_text, claims=claims, findings=findings, extra=extra
        )

    def release_synthesis(self, graph_id: str, node_id: str, worker_id: str) -> SynthesisReleased:
        """Give back a synthesis claim (after a failed call), so another worker may take it."""
        return self._synthesis.release_synthesis(graph_id, node_id, worker_id)

    # -- a question's context (store/context.py: NodeContext) --------------------------------------

    def get_context(
        self, graph_id: str, node_id: str, *, limit: int = 6, candidates: int = 8
    ) -> QuestionContext:
        """What a worker needs to answer ``node_id``, each part capped (rule: bounded prompts)."""
        return self._context.get_context(graph_id, node_id, limit=limit, candidates=candidates)

    def get_synthesis_inputs(self, graph_id: str, node_id: str) -> SynthesisInputs:
        """A question, its answers and its sub-questions with their syntheses: all a synthesis reads."""
        return self._context.get_synthesis_inputs(graph_id, node_id)

    # -- the contract's reads (store/queries.py: GraphQueries) -------------------------------------

    def get_snapshot(self, graph_id: str) -> Snapshot:
        """The whole graph: its fields, nodes and edges (:meth:`GraphQueries.get_snapshot`)."""
        return self._queries.get_snapshot(graph_id)

    def get_snapshot_text(self, graph_id: str) -> str:
        """:meth:`get_snapshot` as JSON text, its nodes and edges as DuckDB wrote them (never parsed here)."""
        return self._queries.get_snapshot_text(graph_id)

    def get_graph(self, graph_id: str) -> GraphRecord:
        """The graph's own fields (status, seed, budget, metadata) without its nodes."""
        return self._queries.get_graph(graph_id)

    def get_node(self, graph_id: str, node_id: str) -> dict[str, Any]:
        """One node with its direct children and the links touching it: what an inspector shows."""
        return self._queries.get_node(graph_id, node_id)

    def list_graphs(self) -> GraphList:
        """Every graph in the store (without nodes), oldest first (:meth:`GraphQueries.list_graphs`)."""
        return self._queries.list_graphs()

    def get_branch(self, graph_id: str, node_id: str) -> dict[str, Any]:
        """The subtree under ``node_id`` (itself included) and the edges inside it."""
        return self._queries.get_branch(graph_id, node_id)

    def get_open_questions(self, graph_id: str) -> OpenQuestions:
        """Questions waiting for a worker (status ``open``) (:meth:`GraphQueries.get_open_questions`)."""
        return self._queries.get_open_questions(graph_id)

    def get_claimable_work(self, graph_id: str, worker_id: str | None = None) -> ClaimableList:
        """What ``claim_work`` would hand out, in order (affinity to ``worker_id`` first)."""
        return self._queries.get_claimable_work(graph_id, worker_id)

    def get_ready_to_synthesize(self, graph_id: str) -> ReadyList:
        """Answered questions whose sub-questions all are synthesized or saturated, deepest first."""
        return self._queries.get_ready_to_synthesize(graph_id)

    def query_convergence(self, graph_id: str) -> dict[str, Any]:
        """Clusters of nodes joined by convergence edges; a cluster's insight joins its edges'."""
        return self._queries.query_convergence(graph_id)

    def query_contradictions(self, graph_id: str) -> dict[str, Any]:
        """Contradiction edges as node pairs with their tension, in creation order."""
        return self._queries.query_contradictions(graph_id)

    def get_saturation_status(self, graph_id: str) -> dict[str, Any]:
        """Per seed-question branch: status counts and whether it is done."""
        return self._queries.get_saturation_status(graph_id)

    def get_events(self, graph_id: str, since: int = 0, limit: int | None = None) -> dict[str, Any]:
        """Events after ``since`` in order, at most ``limit`` (None: all): the feed of the live view."""
        return self._queries.get_events(graph_id, since, limit)

    def get_changes(self, graph_id: str, since: int = 0) -> Changes:
        """What changed after event ``since`` (everything when 0), lean: the live view's feed."""
        return self._queries.get_changes(graph_id, since)

    def get_question_items(self, graph_id: str) -> QuestionItems:
        """The whole graph as the live view's question items and links, JSON written by DuckDB."""
        return self._queries.get_question_items(graph_id)

    def carries_evidence(self, graph_id: str) -> bool:
        """Whether some answer carries a support value or some question a track (what evidence reads)."""
        return self._queries.carries_evidence(graph_id)

    # -- the call log (store/llm_log.py: LLMLog) ---------------------------------------------------

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
        """Append one call to the log (failed calls too: ``outcome="error"``)."""
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

    def record_llm_calls(self, calls: CallRows) -> int:
        """Append several calls (dicts of :meth:`record_llm_call`'s fields) in one statement."""
        return self._calls.record_llm_calls(calls)

    def get_llm_calls(self, graph_id: str, node_id: str | None = None) -> dict[str, Any]:
        """Every logged call of a graph (or of one of its nodes), in order (:meth:`LLMLog.get_llm_calls`)."""
        return self._calls.get_llm_calls(graph_id, node_id)

    def count_replies(self, graph_id: str) -> dict[str, int]:
        """How a graph's model calls went, by kind (:meth:`LLMLog.count_replies`)."""
        return self._calls.count_replies(graph_id)

    def llm_spend(self, graph_id: str) -> list[ModelSpend]:
        """What a graph's model calls spent, per model: calls, prompt_tokens, completion_tokens."""
        return self._calls.llm_spend(graph_id)

    def cache_get(self, cache_key: str) -> dict[str, Any] | None:
        """A recorded completion, or None (:meth:`LLMLog.cache_get`)."""
        return self._calls.cache_get(cache_key)

    def cache_put(self, cache_key: str, *, model: str, role: str, response: dict[str, Any]) -> None:
        """Record (or re-record) a completion (:meth:`LLMLog.cache_put`)."""
        return self._calls.cache_put(cache_key, model=model, role=role, response=response)

    # -- a thinkon chain (store/thinkon.py: ThinkonWrites) -----------------------------------------

    def thinkon_level(self, graph_id: str, node_id: str) -> ThinkonLevel:
        """A level's state: goal, level above, phase, plan, done (:meth:`ThinkonWrites.thinkon_level`)."""
        return self._thinkon.thinkon_level(graph_id, node_id)

    def thinkon_chain(self, graph_id: str) -> list[ThinkonLevel]:
        """The levels that have not returned, root first: the chain as it stands (the last acts next)."""
        return self._thinkon.thinkon_chain(graph_id)

    def thinkon_plan(self, graph_id: str, node_id: str, todo: str, *, worker_id: str) -> ThinkonLevel:
        """Think's plan: written to the level's ``todo`` (and as its answer); the level's Eval is next."""
        return self._thinkon.thinkon_plan(graph_id, node_id, todo, worker_id=worker_id)

    def thinkon_call(self, graph_id: str, node_id: str, goal: str, *, worker_id: str) -> ThinkonLevel:
        """Eval's call: a sub-goal, a new level under this one's plan; this level waits for its return."""
        return self._thinkon.thinkon_call(graph_id, node_id, goal, worker_id=worker_id)

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
        """A level's return: its result (its synthesis), appended to the parent's ``done`` at once."""
        return self._thinkon.thinkon_return(
            graph_id, node_id, result, worker_id=worker_id, outcome=outcome, reason=reason
        )
