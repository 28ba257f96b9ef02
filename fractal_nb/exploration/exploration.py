"""``Exploration``: the object a person holds in a notebook — create, run, step, steer, export."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx
import pandas as pd

from ..arguments import check_llm, check_store_target
from ..checks import require_flag, require_id, require_text
from ..engine import Clock, Limits, RealClock, RunState, caller_tools, gap_rows, preview
from ..errors import InvalidInputError
from ..llm.protocol import LLM
from ..results.evidence import Evidence, evidence_of, node_evidence
from ..results.export import to_networkx
from ..results.result import FractalResult, MarkdownText, StepRecord
from ..results.run_report import RunReport, Usage
from ..store import Store, open_store
from ..store.frame_sql import SqlParams
from ..store.records import Chosen, Recovered, Saturated
from ..store.stops import refuse_not_held, resolve_choice
from ..vocabulary import (
    Budget,
    CheckpointMode,
    GraphStatus,
    Intensity,
    NodeStatus,
    NodeType,
    check_node_transition,
    is_chain,
    parse_choice,
)
from .frames import call_frame, edge_frame, event_frame, gate_frame, held_rows, node_frame, synthesis_frame
from .graph_sql import GAP_COLUMNS, run_sql
from .history import GraphAt, event_point, lineage_frame, own_event
from .opening import check_clock, new_graph, opened_graph
from .running import Runner, check_writable
from .source_inputs import source_frame, source_texts
from .state import ExplorationState, exploration_state
from .steering import Steering, TurnStep

if TYPE_CHECKING:
    from ..mcp.server import BackgroundServer
    from ..views import ExplorationView


PAYLOAD_KEPT = (
    "the node's row, metadata and links, and each model call's role, model, tokens and outcome; no "
    "prompt or reply is kept per node: the reply is what the node's text and metadata hold, and the "
    "record/replay cache keeps replies under a hash of their prompt, not by node"
)
"""What :meth:`Exploration.payload` can show of a node's model exchange, said in its ``kept``."""


class Exploration:
    """One fractal exploration: a graph in a store, a model, and the controls.

    Examples
    --------
    >>> from fractal_nb import Exploration, SimulatedLLM
    >>> ex = Exploration.create("Why do cities grow?", intensity="pulse", llm=SimulatedLLM())
    >>> ex.run(progress=False).status  # a RunOutcome: compares equal to its text
    <RunOutcome.ALL_COMPLETE: 'all_complete'>
    >>> ex.harvest().status
    'completed'
    """

    def __init__(
        self,
        store: Store,
        graph_id: str,
        llm: LLM,
        *,
        clock: Clock | None = None,
        owns_store: bool = False,
        tools: object = None,
    ) -> None:
        graph = store.get_graph(graph_id)
        self.store = store
        self.graph_id = graph_id
        self.llm = llm
        self._owns_store = owns_store
        self._clock = clock or RealClock()
        # The caller's tools are this process's, never the file's (docs/notebook.md, "Your own tools").
        limits, tools = Limits.from_metadata(graph["metadata"]), caller_tools(tools)
        self._state = RunState.for_graph(
            store, graph, llm, limits=limits, whole=store, tools=tools, clock=self._clock
        )
        # One run per graph in this process, whichever Exploration object asks (a notebook
        # may open the same file again while a Run goes on).
        running = store.run_lock(graph_id)
        self._mcp: BackgroundServer | None = None
        self._runner = Runner(store, graph_id, self._state, running, self._clock)
        self._steering = Steering(store, graph_id, self._state, running, self._state.call.reset_health)

    # -- opening (fractal_nb/exploration/opening.py) --------------------------------------

    @classmethod
    def create(
        cls,
        seed: str,
        *,
        intensity: str = "explore",
        checkpoint: str = "autonomous",
        llm: LLM,
        path: str | Path | None = None,
        clock: Clock | None = None,
        max_tokens: int | None = None,
        max_cost: float | None = None,
        prices: dict[str, tuple[float, float]] | None = None,
        max_wall_s: float | None = None,
        node_timeout_s: float | None = None,
        sources: object = None,
        strategy: str | None = None,
        prompts: dict[str, str] | None = None,
        preset: str | None = None,
        solve_time_s: float | None = None,
        tools: list[Callable[..., object]] | None = None,
    ) -> Exploration:
        """Start a new exploration of ``seed`` in a new or existing DuckDB file (None: in memory).

        The budgets (see :meth:`run`) are kept with the graph: every run of it honours them.
        ``strategy``: ``"fractal"`` (sub-questions synthesized bottom-up) or ``"tracks"``
        (at least three orthogonal tracks with cited findings, aggregated into a synthesis
        object; docs/architecture/engine.md, "Tracks"), kept with the graph; None: ``"fractal"``,
        or ``"tracks"`` with a preset.
        ``preset``: ``"architecture"`` or ``"feature"``, seed 003's fixed track sets for exploring a
        codebase given as ``sources``, each track's evidence gathered by its skill (glob, grep and
        read over the sources, run by the engine); it implies ``strategy="tracks"`` and refuses another.
        ``sources``: the evidence its answers cite, an item or a list of items as
        :meth:`add_sources` takes them, added with the graph in one transaction.
        ``prompts``: with ``strategy="thinkon"``, the caller's own Think and Eval templates
        (``{"think": Prompt_t, "eval": Prompt_e}``, either or both; ``$goal``, ``$done``… as
        docs/strategies.md lists), kept with the graph; the engine adds the reply format.
        ``solve_time_s``: with ``strategy="thinkon"``, each sub-goal's Solve time (its subtree's),
        kept with the graph (docs/notebook.md, "Budgets"). ``tools``: functions the model may
        call (docs/notebook.md, "Your own tools"), for the runs of this Exploration in this
        process: tools are code, so the file does not keep them (pass them to :meth:`open` again).
        Every argument is checked before the file is opened: a refused one creates nothing
        (a :class:`~fractal_nb.exploration.source_inputs.Table` is read once the file is open,
        before the graph is made).
        """
        check_llm(llm)
        check_clock(clock)
        require_text(seed, "seed")
        CheckpointMode.parse(checkpoint, parse_choice(Intensity, intensity, "intensity"))
        limits = Limits.parse(
            max_tokens=max_tokens,
            max_cost=max_cost,
            prices=prices,
            max_wall_s=max_wall_s,
            node_timeout_s=node_timeout_s,
            solve_time_s=solve_time_s,
        )
        checked = caller_tools(tools)
        store, graph_id = new_graph(
            seed,
            intensity,
            checkpoint,
            limits,
            strategy,
            sources=sources,
            path=path,
            prompts=prompts,
            preset=preset,
        )
        return cls(store, graph_id, llm, clock=clock, owns_store=True, tools=checked)

    @classmethod
    def open(
        cls,
        path: str | Path,
        graph_id: str | None = None,
        *,
        llm: LLM | None = None,
        clock: Clock | None = None,
        read_only: bool = False,
        tools: list[Callable[..., object]] | None = None,
    ) -> Exploration:
        """Reopen an exploration from its file; claims left by a dead run go back to open.

        ``graph_id`` may be omitted when the file holds a single graph. Opening a
        file whose graph is running in this process is safe: the running claims
        stay with their run, and ``run()`` / ``step()`` here are refused until it stops.

        ``read_only=True`` opens the file for reading only (several processes may
        read a file no process writes): nothing is recovered, and every call that
        would write (run, step, approve, prune, an unfinished harvest, a steering call) is refused
        with :class:`~fractal_nb.StateError` before the model is called. The
        ``fractal-nb`` inspection commands open files this way. Reading needs no model:
        ``llm`` may then be left out (a run, a step or a steering call is refused, naming
        ``llm=``); opening to write needs it. ``tools``: as :meth:`create`'s, for this process.
        """
        checked = caller_tools(tools)
        store, opened, model = opened_graph(path, graph_id, llm, clock, read_only=read_only)
        return cls(store, opened, model, clock=clock, owns_store=True, tools=checked)

    @staticmethod
    def graphs(path: str | Path, *, read_only: bool = False) -> pd.DataFrame:
        """The explorations a file holds, oldest first: ``graph_id``, ``seed``, ``intensity``, ``status``.

        For :meth:`open` when the file holds more than one (it then needs the ``graph_id``);
        ``read_only=True`` reads the file without writing it (see :meth:`open`).
        """
        require_flag(read_only, "read_only")
        where = check_store_target(path, must_exist=True)
        with open_store(where, read_only=read_only) as store:
            graphs = store.list_graphs()["graphs"]
        return pd.DataFrame(graphs, columns=["graph_id", "seed", "intensity", "status"])

    def close(self) -> None:
        """Stop the MCP server if one runs, and release the DuckDB file (when this exploration opened it)."""
        self.stop_mcp()
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> Exploration:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Exploration {self.graph_id} {self._state.seed[:60]!r} in {self.store.location}>"

    # -- running (fractal_nb/exploration/running.py; docs/architecture/store.md, "The graph contract") --

    @property
    def status(self) -> str:
        """The graph's status: active, paused, completed, error or budget_exhausted."""
        return str(self.store.get_graph(self.graph_id)["status"])

    @property
    def status_reason(self) -> str | None:
        """Why the graph has its status (e.g. ``"circuit breaker"`` for a budget_exhausted one), or None."""
        return self.store.get_graph(self.graph_id)["status_reason"]

    def budget_reached(self) -> str | None:
        """The spend budget (tokens or cost) the graph has already reached, or None.

        Any run would stop at it at once: going on needs a larger budget
        (``new_budget(max_tokens=...)``). ``budget_exhausted`` is terminal for resume
        (docs/notebook.md, "Budgets").
        """
        return self._runner.limits().reached(self.store.llm_spend(self.graph_id), 0.0)

    def new_budget(
        self,
        *,
        max_tokens: int | None = None,
        max_cost: float | None = None,
        prices: dict[str, tuple[float, float]] | None = None,
        max_wall_s: float | None = None,
        node_timeout_s: float | None = None,
    ) -> TurnStep:
        """Go on with a ``budget_exhausted`` graph: a new turn of kind ``budget``, then ``run()``.

        ``budget_exhausted`` is terminal for resume (docs/notebook.md, "Budgets"):
        ``run(resume=True)`` refuses it. This is the way on: the limits given are
        merged into the graph's (as ``run()`` takes them), the stopped turn ends in
        a head, and a turn of kind ``budget`` opens recording the graph's limits
        (``turns()``); the graph is active again. With no limit given it goes on
        under the same limits: for a graph its circuit breaker or wall clock
        stopped (each run has its own). A token or cost budget already spent, or a
        graph not ``budget_exhausted``, is refused and nothing changes.
        """
        asked = Limits.parse(
            max_tokens=max_tokens,
            max_cost=max_cost,
            prices=prices,
            max_wall_s=max_wall_s,
            node_timeout_s=node_timeout_s,
        )
        return TurnStep.of(self._runner.new_budget(asked))

    def run(
        self,
        max_workers: int | None = None,
        *,
        progress: bool = True,
        on_step: Callable[[StepRecord], None] | None = None,
        resume: bool = False,
        max_tokens: int | None = None,
        max_cost: float | None = None,
        prices: dict[str, tuple[float, float]] | None = None,
        max_wall_s: float | None = None,
        node_timeout_s: float | None = None,
        solve_time_s: float | None = None,
    ) -> RunReport:
        """Seed if needed, then work with up to ``max_workers`` threads until done, paused or out of budget.

        Returns a :class:`RunReport` (it compares equal to its status string):
        ``all_complete``, ``paused``, ``convergence_detected``, ``budget_exhausted``,
        ``waiting_on_claims``, or, with the graph paused and its reason recorded,
        ``model_unavailable`` (the model could not be reached or failed every
        call), ``seed_failed`` or ``synthesis_failed`` (the model failed the
        syntheses left on every try: run again, or harvest). A paused graph is resumed first.
        A ``budget_exhausted`` graph is terminal for resume: ``run()`` and
        ``run(resume=True)`` refuse it, naming the way on, :meth:`new_budget`; a run
        given a limit the graph has not reached (``max_tokens``, ``max_cost`` or
        ``max_wall_s``) makes that move itself, and ``harvest()`` finishes it as it stands.

        Budgets (docs/notebook.md, "Budgets"), kept with the graph for its later runs:
        ``max_tokens`` and ``max_cost`` (with ``prices``: {model: (input, output)}
        per million tokens) for the graph's whole call log, ``max_wall_s`` for
        this run, ``node_timeout_s`` for each node's model calls. Reaching one
        ends the run as ``budget_exhausted`` with the reason. ``solve_time_s`` (a thinkon
        graph's) ends only the sub-goal past it, with its partial state; the run goes on.
        ``on_step`` is called (from worker threads) after each node, once its
        writes are committed; if it raises, the run stops and the error is raised
        here, the graph left as it is (it is the caller's error, not the engine's).

        Every argument is checked before anything changes: a refused call leaves
        the graph as it was. A graph in ``error`` (an engine failure, its reason
        recorded) runs again only with ``resume=True``, once the cause is gone.
        """
        workers = self._state.budget.max_agents if max_workers is None else max_workers
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise InvalidInputError(f"max_workers must be an integer >= 1, not {max_workers!r}")
        require_flag(progress, "progress")
        require_flag(resume, "resume")
        if on_step is not None and not callable(on_step):
            raise InvalidInputError(
                f"on_step must be a function called with each StepRecord, or None, not {on_step!r}"
            )
        asked = Limits.parse(
            max_tokens=max_tokens,
            max_cost=max_cost,
            prices=prices,
            max_wall_s=max_wall_s,
            node_timeout_s=node_timeout_s,
            solve_time_s=solve_time_s,
        )
        return self._runner.run(workers, asked, progress=progress, on_step=on_step, resume=resume)

    def step(self, n: int = 1) -> list[StepRecord]:
        """Process up to ``n`` nodes in this thread (the seed phase counts as one); returns them.

        Stops early when nothing is claimable, and, as a run's workers do, when the
        model is down or a spend budget is reached (``engine/outcome.py``'s
        ``held_back``): the step that met it is the last one returned. With no
        question left, the syntheses the climbs left are made (or tried: a failed one
        goes back) and returned as one record whose ``question`` is :data:`fractal_nb.engine.LEFTOVERS`,
        so ``while ex.step(n): ...`` goes on until nothing is left to do.
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InvalidInputError(f"n must be an integer >= 1, not {n!r}")
        return self._runner.step(n)

    def seed(self) -> StepRecord | None:
        """Only the seed phase: the root's plan and its seed questions, written for workers to claim.

        For workers in other processes (``fractal-nb worker``, MCP agents): they work a
        seeded graph and never seed one. Returns the seed phase's record (its ``error``
        says why the model failed it; the root stays open for the next try), or None
        when the graph is seeded already. ``fractal-nb seed`` is this from the shell.
        """
        return self._runner.seed()

    def pause(self) -> None:
        """Ask a running ``run()`` to stop: nodes in flight finish, no new claims are made."""
        self._runner.pause()

    def approve(self, node_ids: list[str] | None = None) -> dict[str, Any]:
        """Open gated questions (all when None); a paused graph becomes active again.

        Each node is checked before the graph is resumed: an unknown or ungated one changes nothing.
        """
        if node_ids is not None and (
            not isinstance(node_ids, list | tuple) or not all(isinstance(n, str) for n in node_ids)
        ):
            raise InvalidInputError(f"node_ids must be a list of node ids or None, not {node_ids!r}")
        return self._runner.approve(node_ids)

    def choose(self, node_id: str, choice: int | str) -> Chosen:
        """Answer a question a worker held for you; it reopens with your choice.

        See docs/architecture/engine.md, "Halts".

        For an ambiguity, ``choice`` is an option's index (from 0, as ``gates``
        lists them), an option's text or your own answer; for a confusion, your
        clarification. The question's next answer is written with it in its
        prompt. A question no halt holds, an empty choice or an index out of range
        is refused before anything changes; a paused graph becomes active again.
        """
        check_writable(self.store)
        node = self.store.get_node(self.graph_id, node_id)["node"]
        halt = refuse_not_held(node["node_id"], node["status"], node["metadata"], self.graph_id)
        resolve_choice(halt, choice)  # refused here, before the graph is resumed
        self._runner.activate()  # a budget_exhausted graph: refused, the way on named
        return self.store.choose(self.graph_id, node_id, choice)

    def prune(self, node_id: str) -> Saturated:
        """Cut a branch: the node and its unfinished questions become saturated (``pruned``).

        The node is checked before the graph is resumed: one that cannot be pruned changes nothing.
        """
        check_writable(self.store)
        node = self.store.get_node(self.graph_id, node_id)["node"]
        root = self.store.get_graph(self.graph_id)["root_node_id"]
        if node["node_id"] == root or (node["node_type"] == NodeType.ANSWER and node["parent_id"] == root):
            raise InvalidInputError(
                f"node {node['node_id']} is the root or its answer: pruning it would end the exploration "
                "with no result. To stop, pause or harvest it; to drop the work below, prune its seed "
                "questions",
                graph_id=self.graph_id,
                node_id=node["node_id"],
            )
        check_node_transition(node["node_id"], node["node_type"], node["status"], NodeStatus.SATURATED)
        if self.status != GraphStatus.BUDGET_EXHAUSTED:  # which a prune leaves so: it spends nothing
            self._runner.activate()
        return self.store.prune_branch(self.graph_id, node_id)

    def recover(self) -> Recovered:
        """Reopen the questions the model failed on and claims stuck past their lease, for Step or Run.

        A failed question (``error``, or saturated as failed by a harvest) opens again,
        and the weak syntheses built on it are written again once it is answered
        (docs/notebook.md, "Facts, assumptions, unknowns"). A finished graph or a file opened
        ``read_only`` is refused, changing nothing. Returns the ids reopened.
        """
        check_writable(self.store)
        return self.store.recover_stuck(self.graph_id, include_errors=True)

    def harvest(self, *, finish: bool = False, aggregate: bool = False) -> FractalResult:
        """Finish the exploration (freeze what is left as gaps, synthesize up to the root); its result.

        A graph with work left (questions open, claimed or gated, or ready to
        synthesize) that is not ``budget_exhausted`` is finished only when asked:
        ``harvest(finish=True)``; :meth:`report` shows it as it stands instead.
        A finished graph is read back without calling the model.

        ``aggregate=True`` (a fractal graph) builds the synthesis object a tracks graph
        has (``result.synthesis``: unified, nuances, open questions, confidence) from the
        seed questions' syntheses, with one more model call; kept with the harvest that
        finishes the graph (on a graph harvested before, built and returned, not kept).
        """
        require_flag(finish, "finish")
        require_flag(aggregate, "aggregate")
        return self._runner.harvest(finish=finish, aggregate=aggregate)

    def preview(self) -> FractalResult:
        """The result as the graph stands now, read-only: no model call, no change to the graph.

        The synthesis chain so far, the gaps and counts; the summary is the root's
        synthesis once there is one (the stored harvest's findings too, once harvested).
        """
        return preview(self._state)

    def report(self) -> MarkdownText:
        """The :meth:`preview` as Markdown: a look that never ends the work (``harvest()`` does)."""
        return MarkdownText(self.preview().to_markdown())

    def gaps(self) -> pd.DataFrame:
        """Every unexplored, pruned, failed or budget-cut question, one row each, with why."""
        rows = gap_rows(self.store.get_snapshot(self.graph_id)["nodes"])  # superseded nodes are no gaps
        return pd.DataFrame(rows, columns=GAP_COLUMNS)

    @property
    def gates(self) -> pd.DataFrame:
        """Gated questions: awaiting approval, or held for your answer (``choose``).

        Beside the node columns, ``held`` is the halt's kind (``ambiguity`` or
        ``confusion``; None for a checkpoint's gate, which ``approve`` opens),
        ``asks`` what the worker asks you and ``options`` the ambiguity's options
        (``{option, tradeoffs}``, numbered from 0 for ``choose``).
        """
        return gate_frame(self.nodes(), self.store.list_gates(self.graph_id)["gates"])

    def held(self) -> list[dict[str, Any]]:
        """Questions a worker holds for your answer (``choose``): node_id, question, kind, asks, options."""
        return held_rows(self.store.list_gates(self.graph_id)["gates"])

    # -- data frames ------------------------------------------------------------------

    def nodes(self) -> pd.DataFrame:
        """Every node, in creation order, metadata flattened into ``meta_*`` columns."""
        return node_frame(self.store.get_snapshot(self.graph_id)["nodes"])

    def edges(self) -> pd.DataFrame:
        """Every edge (tree and links), in creation order."""
        return edge_frame(self.store.get_snapshot(self.graph_id)["edges"])

    def syntheses(self) -> pd.DataFrame:
        """Synthesized questions with their synthesis text, root first, deepest last.

        ``track`` (a track's name, else None), ``findings`` (how many findings a track
        documented, 0 for others; ``inspect(node_id)`` shows them with their checked
        citations and ``support``) and ``support`` (a track's: supported
        when a finding is, unsupported when none is while the graph has sources,
        no_sources without them; None for others).
        """
        return synthesis_frame(self.store.get_snapshot(self.graph_id)["nodes"])

    def events(self, since: int = 0) -> pd.DataFrame:
        """The event log (one row per mutation) after ``since``."""
        return event_frame(self.store.get_events(self.graph_id, since=since)["events"])

    def llm_calls(self) -> pd.DataFrame:
        """Every model call: role, node, worker, model, tokens, latency, outcome, error."""
        return call_frame(self.store.get_llm_calls(self.graph_id)["calls"])

    def inspect(self, node_id: str) -> dict[str, Any]:
        """One node: its fields, direct children, links, and the model calls made for it.

        A question's ``sub_questions`` (they hang under its answers) come with their
        status and synthesis; ``evidence`` holds its citations (and its answers') with
        the stored lines each names, their support, a track's name and cited findings.
        """
        details: dict[str, Any] = dict(self.store.get_node(self.graph_id, node_id))
        details["evidence"] = node_evidence(self.store, self.graph_id, details["node"], details["children"])
        details["sub_questions"] = (
            self.store.get_synthesis_inputs(self.graph_id, node_id)["sub_questions"]
            if details["node"]["node_type"] == "question"
            else []
        )
        calls = self.store.get_llm_calls(self.graph_id, node_id=details["node"]["node_id"])["calls"]
        details["llm_calls"] = call_frame(calls)
        return details

    def payload(self, node_id: str) -> dict[str, Any]:
        """One node's whole record as JSON-ready data: what ``fractal-nb payload`` prints.

        :meth:`inspect`'s fields (the node's row and metadata, its claims among them,
        children, links, evidence with each citation's status, sub-questions) with the
        model calls made for it as rows (role, model, tokens, outcome, error). Prompts
        and replies are not kept per node (docs/architecture/facade.md, "Inspecting a
        file"): ``kept`` says so. An unknown node raises :class:`~fractal_nb.NotFoundError`.
        """
        details = self.inspect(node_id)
        calls = details["llm_calls"]
        rows = json.loads(calls.to_json(orient="records", date_format="iso")) if len(calls) else []
        return {**details, "llm_calls": rows, "kept": PAYLOAD_KEPT}

    def usage(self) -> Usage:
        """What the graph's model calls spent: ``calls``, ``tokens``, and ``cost`` (None without prices)."""
        return self._runner.usage(self.store.llm_spend(self.graph_id))

    def to_networkx(self) -> nx.MultiDiGraph:
        """The graph for networkx: node and edge fields as attributes, edges keyed by type."""
        return to_networkx(self.store.get_snapshot(self.graph_id))

    def to_html(self, path: str | Path) -> Path:
        """Write the graph as one self-contained page: the question tree, legend, search, details; offline.

        Below the tree, the result as ``report()`` shows it (a degraded one says so above the tree).
        The page is :meth:`render_html`'s, written whole or not at all.
        """
        from ..views.html_export import write_html  # a face: loaded when asked for (docs/architecture.md)

        return write_html(path=path, **self._page())

    def render_html(self) -> str:
        """The page :meth:`to_html` writes, as a string: nothing is written, the graph is only read.

        What a download hands a reader (``views/downloads.py``), or a web app serves.
        """
        from ..views.html_export import render_html  # a face: loaded when asked for (docs/architecture.md)

        return render_html(**self._page())

    def _page(self) -> dict[str, Any]:
        """What the page shows: the graph's rows, its seed, the result as it stands and the evidence."""
        items = self.store.get_question_items(self.graph_id)
        evidence = evidence_of(self.store, self.graph_id, cited=items["cited"])
        return {
            "items": items,
            "heading": self._state.seed,
            "result": self.preview(),
            "evidence": evidence,
        }

    def evidence(self) -> Evidence:
        """The graph's evidence as the faces show it (docs/architecture/faces.md, "Evidence in the faces").

        Cited answers and their support counts, the harvest's findings (the unsupported
        apart), the tracks, the synthesis object; each citation with its status and the
        stored lines it names.
        """
        return evidence_of(self.store, self.graph_id)

    # -- the notebook face ------------------------------------------------------------

    @property
    def budget(self) -> Budget:
        """The intensity's ceilings: workers, depth, seed-question range."""
        return self._state.budget

    # -- shell: SQL over the graph (docs/architecture/facade.md, "Inspecting a file") --

    def sql(self, query: str, params: SqlParams = None) -> pd.DataFrame:
        """Run one ``SELECT`` over this graph's tables; the result as a DataFrame.

        The tables are ``nodes``, ``edges``, ``events``, ``llm_calls``, ``gaps``, ``turns``
        and ``heads`` (``metadata`` and ``payload`` typed JSON: ``metadata->>'synthesis'``), this
        graph's rows only, copied into a private in-memory DuckDB database without
        file or network access: the query cannot change or read the file, another
        graph or the disk. ``params`` fills ``?`` (a list) or ``$name`` (a dict)
        placeholders. Anything but one SELECT, or a failing query, raises
        :class:`~fractal_nb.InvalidInputError`.

        >>> from fractal_nb import Exploration, SimulatedLLM
        >>> ex = Exploration.create("Why do cities grow?", intensity="pulse", llm=SimulatedLLM())
        >>> ex.sql("SELECT node_type, count(*) AS n FROM nodes GROUP BY node_type").to_dict("records")
        [{'node_type': 'question', 'n': 1}]
        >>> ex.sql("SELECT text FROM nodes WHERE depth = ?", [0])["text"].tolist()
        ['Why do cities grow?']
        """
        return run_sql(self, query, params)

    # -- history --
    # Time travel and forks (docs/architecture/store.md, "History and forks";
    # fractal_nb/exploration/history.py).

    def at(self, event_id: int | Mapping[str, Any] | pd.Series) -> GraphAt:
        """The graph as it was at ``event_id`` (an id from :meth:`events`), rebuilt from its history.

        ``event_id`` may also be a head: a dict or :meth:`heads` row with ``head_event``.
        Its ``nodes()`` / ``edges()`` equal what :meth:`nodes` / :meth:`edges` gave when that
        event was the graph's last. An event of another graph, one past the last, or one before
        the graph's history starts (a file written by an older version) is refused.

        >>> from fractal_nb import SimulatedLLM
        >>> ex = Exploration.create("Why do cities grow?", intensity="pulse", llm=SimulatedLLM())
        >>> first = int(ex.events()["event_id"].max())
        >>> _ = ex.run(progress=False)
        >>> len(ex.at(first).nodes()), ex.at(first).status
        (1, 'active')
        """
        event = own_event(self.store, self.graph_id, event_point(event_id, "event_id"))
        return GraphAt.from_snapshot(self.store.get_state_at(self.graph_id, event))

    def fork(self, at: int | Mapping[str, Any] | pd.Series) -> Exploration:
        """A new exploration in the same file holding this graph's state at ``at``; this one never changes.

        ``at`` is an event id (from :meth:`events`) or a head: a dict or ``heads()`` row with
        ``head_event``. The fork keeps nodes, statuses, links, syntheses and the call log as they
        were (questions claimed then are open in it); its lineage records where it came from.
        It uses this exploration's model; in a file it opens its own store (close it when done).

        >>> from fractal_nb import SimulatedLLM
        >>> ex = Exploration.create("Why do cities grow?", intensity="pulse", llm=SimulatedLLM())
        >>> seeded = int(ex.events()["event_id"].max())
        >>> fork = ex.fork(at=seeded)
        >>> fork.lineage()["forked_from"].tolist() == [None, ex.graph_id]
        True
        >>> len(fork.nodes()), fork.status
        (1, 'active')
        """
        event = own_event(self.store, self.graph_id, event_point(at))
        forked = self.store.fork_graph(self.graph_id, event)
        if self.store.path is None:  # an in-memory or PostgreSQL store is shared: no file to reopen
            return Exploration(self.store, forked["graph_id"], self.llm, clock=self._clock)
        store = open_store(self.store.path)
        return Exploration(store, forked["graph_id"], self.llm, clock=self._clock, owns_store=True)

    def attach(
        self, at: int | Mapping[str, Any] | pd.Series, question: str, under: str | None = None
    ) -> Exploration:
        """Continue from an earlier point with a narrower question, leaving this exploration as it is.

        A :meth:`fork` at ``at`` (an event id or a head) whose new turn (kind ``attach``) asks
        ``question`` under the root's answer or ``under`` a node of the fork (ids of the fork:
        see its ``nodes()``). ``run()`` and ``harvest()`` the returned exploration; this one
        never moves. A refused question (asked already, an unknown ``under``) leaves no fork.

        >>> from fractal_nb import SimulatedLLM
        >>> ex = Exploration.create("Why do cities grow?", intensity="pulse", llm=SimulatedLLM())
        >>> _ = ex.run(progress=False); _ = ex.harvest()
        >>> narrow = ex.attach(ex.heads().iloc[0], "Which harbour cities grew fastest?")
        >>> narrow.turns()[["turn", "kind"]].values.tolist(), ex.status
        ([[1, 'seed'], [2, 'attach']], 'completed')
        """
        require_text(question, "question")
        if under is not None:
            require_id(under, "under")
        forked = self.fork(at=at)
        try:
            forked._steering.attach(question, under)
        except BaseException:  # refused (a question the fork asks already, an unknown node): no fork left
            forked.store.delete_graph(forked.graph_id)
            forked.close()
            raise
        return forked

    def lineage(self) -> pd.DataFrame:
        """The lineage of this graph: its original and every fork of it, oldest first.

        :meth:`family` lists every graph of the file.
        """
        return lineage_frame(self.store.get_lineage(self.graph_id))

    @staticmethod
    def family(path: str | Path, *, read_only: bool = False) -> pd.DataFrame:
        """Every graph in the file and where it was forked from, oldest first.

        Columns: ``graph_id``, ``forked_from`` and ``forked_at`` (None / <NA> for an original),
        ``seed``, ``status``, ``created``. ``read_only=True`` reads the file without writing
        it, beside other readers (as :meth:`graphs`).
        """
        require_flag(read_only, "read_only")
        where = check_store_target(path, must_exist=True)
        with open_store(where, read_only=read_only) as store:
            return lineage_frame(store.list_family())

    # -- turns (fractal_nb/exploration/steering.py; docs/architecture/store.md, "Turns and heads") --

    def ask(self, question: str, under: str | None = None) -> TurnStep:
        """A follow-up question, under the root's answer or ``under`` a node (a question: its current answer).

        Joins the open turn or opens the next (a completed graph becomes active);
        ``run()`` answers it, re-synthesizing upward, and ``harvest()`` ends the turn in a head.
        A question already asked in the graph is refused (rule 10), as is one past the depth.
        """
        check_writable(self.store)
        return self._steering.ask(question, under)

    def deepen(self, node_id: str, levels: int = 1) -> TurnStep:
        """Let the branch under ``node_id`` go ``levels`` (1-4) past the intensity's depth for this turn.

        Its leaf questions at the old bottom are reopened for decomposition, their old answers superseded.
        """
        check_writable(self.store)
        return self._steering.deepen(node_id, levels)

    def widen(self, n: int) -> TurnStep:
        """``n`` (1-12) more seed questions the existing ones do not cover (one model call, budgets hold)."""
        check_writable(self.store)  # before widen's model call too
        return self._steering.widen(n)

    def redecompose(self, node_id: str, hint: str | None = None) -> TurnStep:
        """Answer a question again with a different decomposition; the old answer and sub-tree are superseded.

        Superseded nodes stay in the graph (``nodes()``' ``superseded_turn``), never in syntheses or gaps.
        """
        check_writable(self.store)
        return self._steering.redecompose(node_id, hint)

    def note(self, node_id: str, text: str) -> TurnStep:
        """A person's evidence or correction under a question; its synthesis and those above are redone."""
        check_writable(self.store)
        return self._steering.note(node_id, text)

    # -- sources (exploration/source_inputs.py; docs/architecture/store.md, "Sources and citations") --

    def add_sources(self, *items: object) -> pd.DataFrame:
        """Add evidence the answers may cite: folders, paths, ``Snippet``, a column, ``Table``.

        Returns the sources added (a row each, as :meth:`sources`). Every item is read
        and checked first; a refused one (no such path, a PDF, a name already holding
        other content) adds nothing.
        """
        check_writable(self.store)
        texts = source_texts(items, self.store.table_lines)
        return source_frame(self.store.add_sources(self.graph_id, texts))

    def sources(self) -> pd.DataFrame:
        """The graph's sources, a row each, in the order they were added.

        Columns: ``source_id``, ``name``, ``kind``, ``location``, ``lines``, ``chunks``,
        ``content_hash`` and ``changed`` (True: the file on disk no longer hashes the same, or is
        gone; None: not a file). Citations always check against the text as it was added.
        """
        return source_frame(self.store.list_sources(self.graph_id))

    def turns(self) -> pd.DataFrame:
        """One row per turn (the seed is turn 1): its kind, what it asked, where it started and its head.

        ``kind`` is the turn's first request's; ``asked`` lists them all. ``status``, ``tokens``
        and ``cost`` are those of its head (None while the turn is open); see :meth:`heads`.
        """
        return self._steering.turns()

    def heads(self) -> pd.DataFrame:
        """One row per head (a turn's end at harvest): event, status, root synthesis, counts, spend, asks.

        ``tokens`` and ``cost`` are the graph's spend up to the head (every turn before it
        included): the difference of two rows is what the later turn spent.

        The last row is the current head: ``run(resume=True)`` and a new turn continue from it.
        In a fork, the heads up to the fork point are the source's (their events are the
        source's: read them with the source's :meth:`at`).
        """
        return self._steering.heads()

    # -- state (exploration/state.py; docs/architecture/facade.md, "The state of an exploration") --

    def state(self) -> ExplorationState:
        """Where this exploration stands, from its stored state alone (no model call, nothing replayed).

        The line of work (turn by turn, and where a fork came from); the branches and why
        each exists; the verified (a citation the store checked says it), stated (on the
        model's own word), assumed, missing and failed values with their node ids;
        the head resume would use; the earlier heads worth attaching from; and the checks
        that support the result. ``to_dict()`` is the JSON of ``fractal-nb state FILE --json``.
        """
        return exploration_state(self.store, self.graph_id)

    def view(self, *, height: str = "520px", published: bool | None = None) -> ExplorationView:
        """The live question tree and its controls: step, run, pause, harvest, report, gates, inspector.

        ``published=True`` (None: found in a Voila kernel) is for a page read by people whose
        kernel this is not: its Export tab offers browser downloads only, never a file
        written on the server or a variable set in its kernel.
        """
        from ..views import ExplorationView  # widgets load when a view is asked for, not on import

        return ExplorationView(self, height=height, published=published)

    def serve_mcp(self, port: int = 0, *, host: str = "127.0.0.1", token: str | None = None) -> str:
        """Serve this store's graphs as MCP tools over HTTP from a background thread; returns the URL.

        The server runs on its own thread and event loop (not the kernel's), in this
        process, which owns the DuckDB file: worker processes and agents connect to
        the URL while the notebook watches. ``stop_mcp()`` ends it.

        Bound beyond loopback (e.g. ``host="0.0.0.0"``), every request needs the
        bearer token: ``token``, else ``$FRACTAL_NB_TOKEN``, else a generated one;
        :attr:`mcp_token` holds it for ``fractal-nb worker --token``. On loopback a
        token is optional (given, it is required all the same).
        """
        from ..mcp.server import BackgroundServer

        if self._mcp is not None:
            return self._mcp.url
        server = BackgroundServer(self.store, host=host, port=port, token=token)
        url = server.start()
        self._mcp = server
        return url

    @property
    def mcp_token(self) -> str | None:
        """The bearer token the ``serve_mcp()`` server requires (None: none, or no server runs)."""
        return self._mcp.token if self._mcp is not None else None

    def stop_mcp(self) -> None:
        """Stop the server ``serve_mcp()`` started (no-op when none runs)."""
        if self._mcp is not None:
            self._mcp.stop()
            self._mcp = None


def recovers_failures(exploration: Exploration) -> bool:
    """Whether ``exploration.recover()`` reopens failed questions: not a chain's failed levels."""
    return not is_chain(exploration._state.strategy)
