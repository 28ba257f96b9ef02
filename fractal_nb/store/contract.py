"""The store's contract, written once: ``WorkerStore`` and ``Store`` (docs/architecture.md, "Layers").

``WorkerStore`` holds the store methods a worker's loop uses, the seam between the
engine and a store. A worker reads the graph's sources through it too
(``search_sources``, ``read_source``), so remote workers gather evidence as local
ones do. :class:`~fractal_nb.store.GraphStore` (in this process) and
:class:`~fractal_nb.mcp.remote.RemoteStore` (another process's store, over MCP) both
implement it.

``Store`` is the whole store: every member of :class:`~fractal_nb.store.GraphStore`,
what the facade, the faces, and seeding, settling a run and the harvest
(``RunState.local``) use. Each signature and docstring lives here only; the
classes that implement it subclass it and mark each member ``@override``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, Self

from ..vocabulary import JsonArgument, ThinkonOutcome
from .copy import Copied
from .holders import OWN_HOLDER, HolderArgument, HolderInfo
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
    GrepHit,
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


class WorkerStore(Protocol):
    """Claims, context, the worker's one write, syntheses, releases and the call log."""

    holder: HolderInfo  # who holds the claims made through this store

    lease_s: float  # how long a claim holds without a heartbeat

    def get_graph(self, graph_id: str) -> GraphRecord:
        """The graph's own fields (status, seed, budget, metadata) without its nodes."""

    def claim_work(
        self,
        graph_id: str,
        worker_id: str,
        *,
        holder: HolderArgument = OWN_HOLDER,
        with_context: bool = False,
    ) -> Claim:
        """Atomically claim the next question for ``worker_id`` (docs/architecture/store.md, rule 1).

        ``with_context``: the claim also carries the question's ``context``, as
        :meth:`get_context` reads it, read after the claim commits (outside the
        write lock): a worker's claim and read in one call.
        """

    def get_claimable_work(self, graph_id: str, worker_id: str | None = None) -> ClaimableList:
        """What ``claim_work`` would hand out, in order (affinity to ``worker_id`` first)."""

    def recover_stuck(
        self,
        graph_id: str,
        older_than_s: float | None = None,
        *,
        include_errors: bool = False,
        worker_id: str | None = None,
    ) -> Recovered:
        """Return stuck claims to open: by default those past their lease and those of gone holders."""

    def heartbeat(self, holder_id: str) -> Heartbeat:
        """A live holder renews the leases of all its claims (questions and syntheses), in every graph."""

    def watch(self, graph_id: str, wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake()`` when another process's commit adds work to the graph; the call that stops it.

        On PostgreSQL through ``LISTEN``/``NOTIFY`` (store/postgres.py). A DuckDB file has one
        writing process, whose workers are woken in that process (``RunState.announce_work``),
        and MCP sends no news: there ``wake`` is never called and workers back off as before.
        """

    def get_context(
        self, graph_id: str, node_id: str, *, limit: int = 6, candidates: int = 8
    ) -> QuestionContext:
        """What a worker needs to answer ``node_id``, each part capped (rule: bounded prompts)."""

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
        """Everything a worker writes for a claimed question, in one transaction.

        ``claim_next``: with the synthesis it made ready above, claimed for ``owner``;
        ``with_inputs``: that synthesis's inputs too (:meth:`claim_synthesis`).
        """

    def submit_halt(
        self,
        graph_id: str,
        node_id: str,
        halt: JsonArgument,
        *,
        owner: str,
        calls: CallRows | None = None,
    ) -> Halted:
        """A worker's halt on its claimed question instead of an answer (:meth:`Stops.submit_halt`)."""

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

    def update_node(self, graph_id: str, node_id: str, metadata: JsonArgument) -> NodeUpdated:
        """Merge ``metadata`` into the node's (shallow); link keys create edges once."""

    def mark_saturated(self, graph_id: str, node_id: str, reason: str) -> Saturated:
        """Saturate a node and every unfinished question below it (the reason is inherited)."""

    def get_ready_to_synthesize(self, graph_id: str) -> ReadyList:
        """Answered questions whose sub-questions all are synthesized or saturated, deepest first."""

    def get_synthesis_inputs(self, graph_id: str, node_id: str) -> SynthesisInputs:
        """A question, its answers and its sub-questions with their syntheses: all a synthesis reads."""

    def claim_synthesis(
        self,
        graph_id: str,
        worker_id: str,
        *,
        holder: HolderArgument = OWN_HOLDER,
        skip: list[str] | None = None,
        with_inputs: bool = False,
    ) -> SynthesisClaim:
        """Hand the deepest ready question no one is synthesizing to ``worker_id``.

        Past the agent ceiling (docs/architecture/store.md, rule 17) nothing is handed
        out: ``node_id`` None with ``busy_workers``.
        ``with_inputs``: the claim also carries what the synthesis reads
        (:meth:`get_synthesis_inputs`), read after the claim commits, outside the
        write lock: a claim and its read in one call.
        """

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

    def release_synthesis(self, graph_id: str, node_id: str, worker_id: str) -> SynthesisReleased:
        """Give back a synthesis claim (after a failed call), so another worker may take it."""

    def record_llm_calls(self, calls: CallRows) -> int:
        """Append several calls (dicts of :meth:`record_llm_call`'s fields) in one statement."""

    def list_sources(self, graph_id: str) -> list[SourceRecord]:
        """The graph's sources in the order they were added (:meth:`Sources.list`)."""

    def search_sources(self, graph_id: str, query: str, k: int = 5) -> list[SourceHit]:
        """The chunks of the graph's sources that best match ``query`` (:meth:`Sources.search`)."""

    def read_source(self, graph_id: str, source: str, line_start: int, line_end: int) -> SourceLines:
        """A span of a source's lines as stored (:meth:`Sources.read`)."""

    def glob_sources(self, graph_id: str, pattern: str) -> list[str]:
        """The names of the graph's sources matching a glob such as ``**/*.py`` (:meth:`SourceGrep.glob`)."""

    def grep_sources(
        self, graph_id: str, pattern: str, glob: str | None = None, k: int = 50
    ) -> list[GrepHit]:
        """The lines of the graph's sources matching a regular expression (:meth:`SourceGrep.grep`)."""

    # -- the thinkon strategy (store/chain.py) ----------------------------------------

    def thinkon_level(self, graph_id: str, node_id: str) -> ThinkonLevel:
        """A level's state: goal, level above, phase, plan, done (:meth:`ThinkonWrites.thinkon_level`)."""

    def thinkon_chain(self, graph_id: str) -> list[ThinkonLevel]:
        """The levels that have not returned, root first: the chain as it stands (the last acts next)."""

    def thinkon_plan(
        self, graph_id: str, node_id: str, todo: str, *, worker_id: str, spent_s: float = 0.0
    ) -> ThinkonLevel:
        """Think's plan: written to the level's ``todo`` (and as its answer); the level's Eval is next."""

    def thinkon_call(
        self, graph_id: str, node_id: str, goal: str, *, worker_id: str, spent_s: float = 0.0
    ) -> ThinkonLevel:
        """Eval's call: a sub-goal, a new level under this one's plan; this level waits for its return."""

    def thinkon_return(
        self,
        graph_id: str,
        node_id: str,
        result: str,
        *,
        worker_id: str,
        outcome: ThinkonOutcome | str = ThinkonOutcome.RETURNED,
        reason: str | None = None,
        spent_s: float = 0.0,
    ) -> ThinkonLevel | None:
        """A level's return: its result (its synthesis), appended to the parent's ``done`` at once."""


class Store(WorkerStore, Protocol):
    """The whole store: the worker's methods and the rest of the graph contract.

    Every method returns a JSON-ready dict (ids are strings) and raises a
    :class:`~fractal_nb.FractalError` on bad input; a refused call changes
    nothing. :class:`~fractal_nb.store.GraphStore` implements it.
    """

    clock: Callable[[], float]  # seconds since the epoch: what leases and times are read from

    @property
    def path(self) -> str | None:
        """The DuckDB file, or None for an in-memory store or a PostgreSQL one."""

    @property
    def location(self) -> str:
        """Where the store is, as messages name it: a file, ``:memory:``, or a URL minus its password."""

    @property
    def read_only(self) -> bool:
        """Opened ``read_only=True``: every write is refused.

        See docs/architecture/facade.md, "Inspecting a file".
        """

    def close(self) -> None:
        """Release the DuckDB file (idempotent); claims still held here become recoverable at once."""

    def __enter__(self) -> Self:
        """The store itself, closed when the ``with`` block ends."""

    def __exit__(self, *exc: object) -> None:
        """Close the store (:meth:`close`), whatever the block raised."""

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Run several calls as one transaction: all of them land, or none if the block raises."""

    def run_lock(self, graph_id: str) -> threading.Lock:
        """The lock that lets one run or step at a time work ``graph_id`` in this process (in_process.py)."""

    # -- history and forks (docs/architecture/store.md, "History and forks") ----------------

    def get_state_at(self, graph_id: str, event_id: int) -> SnapshotAt:
        """The graph as it was at ``event_id``: a snapshot (as get_snapshot) folded from its history."""

    def fork_graph(self, graph_id: str, at_event: int) -> Forked:
        """A new graph in this file from ``graph_id``'s state at ``at_event``; the source never changes."""

    def copy_to(self, destination: Store, graph_ids: Sequence[str] | None = None) -> Copied:
        """Copy ``graph_ids`` (None: every graph here) into ``destination`` with every row, ids kept.

        Either engine to either (store/copy.py): statuses, links, events, history, the call log,
        turns, lineage and sources, in one transaction of ``destination``; claims in flight, a
        graph, node or event id ``destination`` holds, or a read-only ``destination`` are refused
        and nothing is written. ``destination`` is a store opened in this process (``open_store``).
        """

    def get_lineage(self, graph_id: str) -> list[LineageRecord]:
        """The lineage of ``graph_id``: its original and every fork of it, oldest first."""

    def list_family(self) -> list[LineageRecord]:
        """Every graph in the file and where it was forked from, oldest first."""

    def create_graph(
        self,
        seed: str,
        intensity: str = "explore",
        checkpoint_mode: str = "autonomous",
        metadata: JsonArgument | None = None,
    ) -> dict[str, Any]:
        """Create a graph whose root question is ``seed`` (turn 1 opens); returns ids, budget and status."""

    # -- turns and heads: store/turns.py, turn_requests.py (docs/architecture/store.md, "Turns and heads")

    def ask(self, graph_id: str, question: str, under: str | None = None) -> TurnRequest:
        """A follow-up question under the root's answer or ``under`` a node (:meth:`TurnRequests.ask`)."""

    def attach(self, graph_id: str, question: str, under: str | None = None) -> TurnRequest:
        """A fork's narrower question, asked in a turn of kind ``attach`` (:meth:`TurnRequests.attach`)."""

    def widen(self, graph_id: str, questions: Sequence[str], n: int | None = None) -> TurnRequest:
        """New seed questions under the root's answer (:meth:`TurnRequests.widen`)."""

    def deepen(self, graph_id: str, node_id: str, levels: int = 1) -> TurnRequest:
        """Let a branch go ``levels`` past the depth for this turn (:meth:`TurnRequests.deepen`)."""

    def redecompose(self, graph_id: str, node_id: str, hint: str | None = None) -> TurnRequest:
        """Answer a question again with a new decomposition (:meth:`TurnRequests.redecompose`)."""

    def add_note(self, graph_id: str, node_id: str, text: str) -> TurnRequest:
        """A person's note under a question (:meth:`TurnRequests.add_note`)."""

    def new_budget(self, graph_id: str, limits: JsonArgument) -> TurnRequest:
        """A budget_exhausted graph goes on: a new turn with ``limits`` (:meth:`BudgetTurns.new_budget`)."""

    def end_turn(self, graph_id: str, *, cost: float | None = None) -> TurnRecord | None:
        """End the open turn in a head (:meth:`Turns.end_turn`)."""

    def list_turns(self, graph_id: str) -> list[TurnRecord]:
        """The graph's turns, heads included (:meth:`Turns.list_turns`)."""

    def list_heads(self, graph_id: str) -> list[TurnRecord]:
        """The graph's heads: its ended turns in order, the current head last (the open turn left out).

        >>> from fractal_nb.store import GraphStore
        >>> store = GraphStore()
        >>> g = store.create_graph("Why do cities grow?", "pulse")
        >>> store.list_heads(g["graph_id"])  # turn 1 (the seed) ends in a head at its harvest
        []
        """

    # -- sources and citations (store/sources.py; docs/architecture/store.md, "Sources and citations") --

    def add_sources(self, graph_id: str, texts: Sequence[SourceText]) -> list[SourceRecord]:
        """Add texts as the graph's sources, kept as chunks (:meth:`Sources.add`)."""

    def add_source_text(self, graph_id: str, name: str, text: str) -> SourceRecord:
        """Add one text snippet as a source named ``name`` (what MCP offers: text, never a path to read)."""

    def source_chunks(self, graph_id: str) -> list[ChunkRecord]:
        """The chunks of the graph's sources (:meth:`Sources.chunks`)."""

    def check_citations(self, graph_id: str, citations: Sequence[Mapping[str, Any]]) -> list[CitationRecord]:
        """Each citation with what the store's check found; nothing written (:meth:`Sources.check`)."""

    def table_lines(self, name: str, columns: Sequence[str] | None = None) -> list[str]:
        """A table or view of this file beside the graphs, a line per row (:meth:`Sources.table_lines`)."""

    # -- graph lifecycle (store/graphs.py: GraphLifecycle) -----------------------------------------

    def resume_graph(self, graph_id: str) -> Snapshot:
        """Reactivate a paused graph and return its snapshot (a budget_exhausted one is refused)."""

    def start_harvest(self, graph_id: str) -> StatusChanged:
        """The harvest's own move: a paused or budget_exhausted graph active for its writes."""

    def update_graph_status(self, graph_id: str, status: str, reason: str | None = None) -> StatusChanged:
        """Move the graph to ``status`` if the transition table allows it."""

    def update_graph_metadata(self, graph_id: str, metadata: JsonArgument) -> dict[str, Any]:
        """Merge ``metadata`` into the graph's (shallow), e.g. the harvest's summary."""

    def record_harvest(self, graph_id: str, harvest: Mapping[str, Any]) -> dict[str, Any]:
        """Write the harvest (graph metadata ``harvest``), its findings' citations checked first."""

    def delete_graph(self, graph_id: str) -> dict[str, Any]:
        """Delete the graph with its nodes, edges, events and call log."""

    # -- the answer step (store/answer.py: Answers) ------------------------------------------------

    def add_node(
        self,
        graph_id: str,
        parent_id: str,
        node_type: str,
        text: str,
        owner: str | None = None,
        metadata: JsonArgument | None = None,
    ) -> AddedNode:
        """Add an answer or a sub-question under ``parent_id`` (:meth:`Answers.add_node`)."""

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
        """Add an answer and its sub-questions in one transaction (what a worker writes)."""

    # -- gates, halts, saturation, errors (store/stops.py: Stops) ----------------------------------

    def prune_branch(self, graph_id: str, node_id: str) -> Saturated:
        """A person's prune: saturate the node and its unfinished descendants as ``pruned``."""

    def approve_gate(self, graph_id: str, node_ids: list[str] | None = None) -> dict[str, Any]:
        """Open gated questions: the given ones, or every gated question when None."""

    def choose(self, graph_id: str, node_id: str, choice: int | str) -> Chosen:
        """The person's answer to a held question: it reopens (``open``) with ``metadata["choice"]``."""

    def list_gates(self, graph_id: str) -> GateList:
        """The gated questions in creation order, each with the halt holding it (None: a checkpoint's)."""

    def mark_error(self, graph_id: str, node_id: str, message: str) -> dict[str, Any]:
        """Mark an unfinished question as failed; ``recover_stuck(include_errors=True)`` reopens it."""

    # -- the synthesis step (store/synthesis.py: Synthesis) ----------------------------------------

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

    # -- the contract's reads (store/queries.py: GraphQueries) -------------------------------------

    def get_snapshot(self, graph_id: str) -> Snapshot:
        """The whole graph: its fields, nodes and edges (:meth:`GraphQueries.get_snapshot`)."""

    def get_snapshot_text(self, graph_id: str) -> str:
        """:meth:`get_snapshot` as JSON text, its nodes and edges as DuckDB wrote them (never parsed here)."""

    def get_node(self, graph_id: str, node_id: str) -> dict[str, Any]:
        """One node with its direct children and the links touching it: what an inspector shows."""

    def list_graphs(self) -> GraphList:
        """Every graph in the store (without nodes), oldest first (:meth:`GraphQueries.list_graphs`)."""

    def get_branch(self, graph_id: str, node_id: str) -> dict[str, Any]:
        """The subtree under ``node_id`` (itself included) and the edges inside it."""

    def get_open_questions(self, graph_id: str) -> OpenQuestions:
        """Questions waiting for a worker (status ``open``) (:meth:`GraphQueries.get_open_questions`)."""

    def query_convergence(self, graph_id: str) -> dict[str, Any]:
        """Clusters of nodes joined by convergence edges; a cluster's insight joins its edges'."""

    def query_contradictions(self, graph_id: str) -> dict[str, Any]:
        """Contradiction edges as node pairs with their tension, in creation order."""

    def get_saturation_status(self, graph_id: str) -> dict[str, Any]:
        """Per seed-question branch: status counts and whether it is done."""

    def get_events(self, graph_id: str, since: int = 0, limit: int | None = None) -> dict[str, Any]:
        """Events after ``since`` in order, at most ``limit`` (None: all): the feed of the live view."""

    def get_changes(self, graph_id: str, since: int = 0) -> Changes:
        """What changed after event ``since`` (everything when 0), lean: the live view's feed."""

    def get_question_items(self, graph_id: str) -> QuestionItems:
        """The whole graph as the live view's question items and links, JSON written by DuckDB."""

    def carries_evidence(self, graph_id: str) -> bool:
        """Whether some answer carries a support value or some question a track (what evidence reads)."""

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

    def get_llm_calls(self, graph_id: str, node_id: str | None = None) -> dict[str, Any]:
        """Every logged call of a graph (or of one of its nodes), in order (:meth:`LLMLog.get_llm_calls`)."""

    def count_replies(self, graph_id: str) -> dict[str, int]:
        """How a graph's model calls went, by kind (:meth:`LLMLog.count_replies`)."""

    def llm_spend(self, graph_id: str) -> list[ModelSpend]:
        """What a graph's model calls spent, per model: calls, prompt_tokens, completion_tokens."""

    def cache_get(self, cache_key: str) -> dict[str, Any] | None:
        """A recorded completion, or None (:meth:`LLMLog.cache_get`)."""

    def cache_put(self, cache_key: str, *, model: str, role: str, response: dict[str, Any]) -> None:
        """Record (or re-record) a completion (:meth:`LLMLog.cache_put`)."""
