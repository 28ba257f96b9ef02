"""What the workers of one graph share: its store, model, budget, strategy and in-process signals."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import StateError
from ..llm.protocol import LLM
from ..store import Store, WorkerStore
from ..store.records import GraphRecord
from ..vocabulary import BUDGETS, DEFAULT_STRATEGY, Budget, CheckpointMode, Intensity
from . import evidence
from .calls import ModelCaller
from .dispatcher import Clock, RealClock
from .limits import Limits
from .strategies import StrategyPart, strategy_part

if TYPE_CHECKING:
    from .caller_tools import CallerTool


@dataclass
class RunState:
    """What the workers of one graph share: store, model, budget, and in-process signals."""

    store: WorkerStore
    graph_id: str
    root_id: str
    seed: str
    budget: Budget
    checkpoint: CheckpointMode
    call: ModelCaller
    part: StrategyPart  # the graph's way of thinking (docs/architecture/engine.md, "Strategies")
    work_added: threading.Condition = field(default_factory=threading.Condition)
    # Work other processes added (the store's watch: PostgreSQL's NOTIFY), counted so a worker
    # woken by it does not count the wait as one of its backoff tries (engine/dispatcher.py).
    added_elsewhere: int = 0
    convergence_found: threading.Event = field(default_factory=threading.Event)
    # A synthesis was given back (its call failed): a worker with no question to claim asks the whole graph.
    synthesis_given_back: threading.Event = field(default_factory=threading.Event)
    has_sources: bool = False  # answers gather evidence first (engine/evidence.py); read by arm()
    # The caller's own prompt templates the graph keeps (thinkon's Prompt_t and Prompt_e): step -> text.
    prompts: Mapping[str, str] = field(default_factory=dict)
    # The whole local store behind ``store`` (``local``); None for a worker's store (mcp/remote/worker.py).
    whole: Store | None = None
    # The caller's own tools for this process's runs (engine/caller_tools.py): code, never in the file.
    tools: tuple[CallerTool, ...] = ()
    # The run's clock: what a thinkon level's steps are timed by (engine/strategies/thinkon_time.py).
    clock: Clock = field(default_factory=RealClock)

    @classmethod
    def for_graph(
        cls,
        store: WorkerStore,
        graph: GraphRecord,
        llm: LLM,
        *,
        limits: Limits | None = None,
        whole: Store | None = None,
        tools: tuple[CallerTool, ...] = (),
        clock: Clock | None = None,
    ) -> RunState:
        """The run state of ``graph`` (a ``get_graph`` record) on ``store`` with ``llm``.

        ``whole``: the same store as a whole local :class:`~fractal_nb.store.Store`, in the
        process that owns the graph's file (``local``); None for a worker's store. Without
        ``limits``, the graph's per-Solve limit still holds (a worker in another process
        applies it: it needs no whole store). ``tools``: the caller's (``caller_tools``).
        """
        kept = Limits.from_metadata(graph["metadata"])
        state = cls(
            store=store,
            whole=whole,
            graph_id=graph["graph_id"],
            root_id=graph["root_node_id"],
            seed=graph["seed"],
            budget=BUDGETS[Intensity(graph["intensity"])],
            checkpoint=CheckpointMode.parse(graph["checkpoint_mode"]),
            call=ModelCaller(llm, store, graph["graph_id"]),
            part=strategy_part(graph["metadata"].get("strategy", DEFAULT_STRATEGY)),
            prompts=dict(graph["metadata"].get("prompts") or {}),
            tools=tools,
            clock=clock or RealClock(),
        )
        state.arm(limits or Limits(solve_time_s=kept.solve_time_s))
        return state

    @property
    def strategy(self) -> str:
        """The graph's strategy, as its metadata names it."""
        return self.part.name

    @property
    def limits(self) -> Limits:
        """What the graph may spend (:mod:`.limits`); its model calls are admitted against them (``arm``)."""
        return self.call.allowance.limits

    def arm(self, limits: Limits | None = None) -> None:
        """Admit the model calls from now on against ``limits`` (None: the current ones).

        Spend budgets count the graph's whole ledger: it is read now (call this
        while none of the graph's calls is in flight here), and so is whether
        the graph has sources (``refresh_sources``).
        """
        limits = self.limits if limits is None else limits
        self.refresh_sources()
        self.call.arm(limits, self.local.llm_spend(self.graph_id) if limits.spends() else [])

    def refresh_sources(self) -> None:
        """Read whether the graph has sources now (``has_sources``): a run's start, a step's, a harvest's."""
        self.has_sources = evidence.has_sources(self.store, self.graph_id)

    @property
    def local(self) -> Store:
        """The whole local store (``whole``): what seeding, settling a run and the harvest need."""
        if self.whole is None:
            raise StateError(
                f"{self.store!r} is a worker's store: seeding, settling and harvesting a graph run in the "
                "process that owns its file"
            )
        return self.whole

    def announce_work(self) -> None:
        """Wake workers waiting for new questions."""
        with self.work_added:
            self.work_added.notify_all()

    def work_elsewhere(self) -> None:
        """Another process added work to the graph: wake the waiting workers, sparing their tries."""
        with self.work_added:
            self.added_elsewhere += 1
            self.work_added.notify_all()
