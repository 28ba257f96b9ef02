"""``WorkerStore``: the store methods a worker's loop uses, the seam between the engine and a store.

A worker reads the graph's sources through it too (``search_sources``, ``read_source``), so
remote workers gather evidence as local ones do.

:class:`~fractal_nb.store.GraphStore` (DuckDB, in this process) and
:class:`~fractal_nb.remote.RemoteStore` (another process's store, over MCP) both
satisfy it, and a second backend implements it to run the engine's workers
(docs/architecture.md, "Layers"). Seeding, settling a run and the harvest need
the whole local store (``RunState.local``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..model import ThinkonOutcome
from .holders import HolderInfo
from .records import (
    AnswerSubmitted,
    CallRows,
    Claim,
    ClaimableList,
    ClaimRecord,
    ClaimReleased,
    GraphRecord,
    Halted,
    Heartbeat,
    NodeUpdated,
    QuestionContext,
    ReadyList,
    Recovered,
    Saturated,
    SourceHit,
    SourceLines,
    SourceRecord,
    SynthesisClaim,
    SynthesisInputs,
    SynthesisReleased,
    Synthesized,
    ThinkonLevel,
)


class WorkerStore(Protocol):
    """Claims, context, the worker's one write, syntheses, releases and the call log."""

    holder: HolderInfo  # who holds the claims made through this store

    lease_s: float  # how long a claim holds without a heartbeat

    def get_graph(self, graph_id: str) -> GraphRecord:
        """See :meth:`GraphStore.get_graph`."""

    def claim_work(
        self,
        graph_id: str,
        worker_id: str,
        *,
        holder: HolderInfo | dict[str, Any] | str | None = "store",
        with_context: bool = False,
    ) -> Claim:
        """See :meth:`GraphStore.claim_work`."""

    def get_claimable_work(self, graph_id: str, worker_id: str | None = None) -> ClaimableList:
        """See :meth:`GraphStore.get_claimable_work`."""

    def recover_stuck(
        self,
        graph_id: str,
        older_than_s: float | None = None,
        *,
        include_errors: bool = False,
        worker_id: str | None = None,
    ) -> Recovered:
        """See :meth:`GraphStore.recover_stuck`."""

    def heartbeat(self, holder_id: str) -> Heartbeat:
        """See :meth:`GraphStore.heartbeat`."""

    def get_context(
        self, graph_id: str, node_id: str, *, limit: int = 6, candidates: int = 8
    ) -> QuestionContext:
        """See :meth:`GraphStore.get_context`."""

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
        """See :meth:`GraphStore.submit_answer`."""

    def submit_halt(
        self,
        graph_id: str,
        node_id: str,
        halt: dict[str, Any] | str,
        *,
        owner: str,
        calls: CallRows | None = None,
    ) -> Halted:
        """See :meth:`GraphStore.submit_halt`."""

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
        """See :meth:`GraphStore.release_claim`."""

    def update_node(self, graph_id: str, node_id: str, metadata: dict[str, Any] | str) -> NodeUpdated:
        """See :meth:`GraphStore.update_node`."""

    def mark_saturated(self, graph_id: str, node_id: str, reason: str) -> Saturated:
        """See :meth:`GraphStore.mark_saturated`."""

    def get_ready_to_synthesize(self, graph_id: str) -> ReadyList:
        """See :meth:`GraphStore.get_ready_to_synthesize`."""

    def get_synthesis_inputs(self, graph_id: str, node_id: str) -> SynthesisInputs:
        """See :meth:`GraphStore.get_synthesis_inputs`."""

    def claim_synthesis(
        self,
        graph_id: str,
        worker_id: str,
        *,
        holder: HolderInfo | dict[str, Any] | str | None = "store",
        skip: list[str] | None = None,
        with_inputs: bool = False,
    ) -> SynthesisClaim:
        """See :meth:`GraphStore.claim_synthesis`."""

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
        """See :meth:`GraphStore.submit_synthesis`."""

    def release_synthesis(self, graph_id: str, node_id: str, worker_id: str) -> SynthesisReleased:
        """See :meth:`GraphStore.release_synthesis`."""

    def record_llm_calls(self, calls: CallRows) -> int:
        """See :meth:`GraphStore.record_llm_calls`."""

    def list_sources(self, graph_id: str) -> list[SourceRecord]:
        """See :meth:`GraphStore.list_sources`."""

    def search_sources(self, graph_id: str, query: str, k: int = 5) -> list[SourceHit]:
        """See :meth:`GraphStore.search_sources` (a worker gathers evidence: engine/evidence_tools.py)."""

    def read_source(self, graph_id: str, source: str, line_start: int, line_end: int) -> SourceLines:
        """See :meth:`GraphStore.read_source`."""

    # -- the thinkon strategy (store/thinkon.py) ----------------------------------------

    def thinkon_level(self, graph_id: str, node_id: str) -> ThinkonLevel:
        """See :meth:`GraphStore.thinkon_level`."""

    def thinkon_chain(self, graph_id: str) -> list[ThinkonLevel]:
        """See :meth:`GraphStore.thinkon_chain`."""

    def thinkon_plan(self, graph_id: str, node_id: str, todo: str, *, worker_id: str) -> ThinkonLevel:
        """See :meth:`GraphStore.thinkon_plan`."""

    def thinkon_call(self, graph_id: str, node_id: str, goal: str, *, worker_id: str) -> ThinkonLevel:
        """See :meth:`GraphStore.thinkon_call`."""

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
        """See :meth:`GraphStore.thinkon_return`."""
