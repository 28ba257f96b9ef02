"""The strategy protocol: what a way of thinking supplies to the engine.

See docs/architecture/engine.md, "Strategies".

The engine's machinery (the dispatcher, the cascade, the harvest) is the same for
every strategy; where they differ it asks the graph's part, never its name. A
part is registered under the name a graph keeps in its metadata (``strategy``)
by :func:`fractal_nb.engine.strategies.register`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ...llm.schemas import Finding, HarvestFindings
    from ...results.result import StepRecord
    from ...store.records import Claim, NodeRecord, SynthesisClaim
    from ..run_state import RunState


class StrategyPart(Protocol):
    """One way of thinking: its seed, its claims, its step, its synthesis and its result."""

    @property
    def name(self) -> str:
        """The graph's metadata ``strategy`` this part serves."""
        ...

    @property
    def claims_context(self) -> bool:
        """Whether a claimed question comes with its context (the branch, siblings, candidates)."""
        ...

    def seed(self, run: RunState) -> StepRecord | None:
        """The seed phase: the root's answer and the first questions (None: nothing to do, or no seed)."""
        ...

    def step(self, run: RunState, claim: Claim, worker: str) -> StepRecord:
        """One claimed question worked: the model asked, the result written."""
        ...

    def question_note(self, metadata: Mapping[str, Any]) -> str:
        """What a question's answer prompt adds for this strategy ("" for none)."""
        ...

    def synthesize(self, run: RunState, claim: SynthesisClaim, worker: str) -> SynthesisClaim | None:
        """A held synthesis written; returns the one it made ready above and claimed with it, if any."""
        ...

    def leftovers(self, run: RunState, worker: str, given_back: list[str] | None) -> tuple[str, ...]:
        """The syntheses a climb left, taken from the whole graph (a chain has none)."""
        ...

    def answer_is_synthesis(self, metadata: Mapping[str, Any]) -> bool:
        """Whether an answered leaf the harvest finds may take its answer as its synthesis."""
        ...

    def finish(self, run: RunState, spent: str | None, stopped: str | None) -> None:
        """The harvest's settling of a graph that will take no more work (``spent``: why no model call)."""
        ...

    def harvested(
        self, run: RunState, nodes: list[NodeRecord], gaps: list[str], spent: str | None
    ) -> HarvestFindings:
        """The result's findings and gaps; raises LLMError when its model call fails.

        Never the summary: that is the root's synthesis, whatever the strategy.
        """
        ...

    def findings(self, nodes: list[NodeRecord]) -> list[Finding] | None:
        """The result's findings when the strategy has its own (None: :meth:`harvested`'s)."""
        ...

    def steps_per_worker(self, run: RunState) -> int:
        """Steps one worker makes in one run before its circuit breaker stops it."""
        ...
