"""What ``Exploration.run()`` hands back: the run's status and the return state of the work phase.

The fields follow the reference's return state (docs/notebook.md, "What a run returns"):
seed 000's exploration state (``graph_id``, ``root_node_id``, ``intensity``, ``checkpoint``,
``budget``, ``seed_count``), then ``workers_dispatched``, ``open_questions_remaining``,
``claimed_nodes_remaining``,
``convergence_points`` and ``worker_reports``, each worker's report with its
convergences, contradictions, saturated branches, boundary questions and exit
reason. A :class:`RunReport` compares equal to its status string, so code that
compared ``run()``'s old return value (``== "all_complete"``) keeps working.
"""

from __future__ import annotations

import html
from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict

from ..text import markdown_escape as _md
from ..vocabulary import BudgetRecord, ExitReason, RunOutcome
from .result import StepRecord


class Usage(TypedDict):
    """What model calls spent: ``cost`` is None without prices, inf when a model has none."""

    calls: int
    tokens: int
    cost: float | None


@dataclass
class WorkerReport:
    """One worker's final stats, as the reference's workers report them."""

    worker: str
    answered: int = 0
    synthesized: int = 0
    sub_questions: int = 0
    failures: int = 0
    exit_reason: ExitReason | None = None  # None: still working
    detail: str = ""  # why, when the exit reason needs one (the model outage, a budget)
    convergences: list[tuple[str, str]] = field(default_factory=list)  # (its answer, the other node)
    contradictions: list[tuple[str, str]] = field(default_factory=list)
    saturated: list[dict[str, str]] = field(default_factory=list)  # {node_id, reason}
    boundary_questions: int = 0

    def count(self, record: StepRecord) -> None:
        """Fold one processed node into the stats."""
        if record.ok:
            self.answered += 1
        else:
            self.failures += 1
        self.sub_questions += len(record.sub_questions)
        self.synthesized += len(record.synthesized)
        self.convergences += record.convergences
        self.contradictions += record.contradictions
        self.boundary_questions += record.boundary_questions
        if record.saturated:
            self.saturated.append({"node_id": record.node_id, "reason": record.saturated})

    def to_dict(self) -> dict[str, Any]:
        """The reference's field names (``worker_id``, ``nodes_answered``, …) with ours beside them."""
        return {
            "worker_id": self.worker,
            "nodes_answered": self.answered,
            "nodes_synthesized": self.synthesized,
            "sub_questions_generated": self.sub_questions,
            "convergences": [list(p) for p in self.convergences],
            "contradictions": [list(p) for p in self.contradictions],
            "saturated_branches": list(self.saturated),
            "boundary_questions": self.boundary_questions,
            "failures": self.failures,
            "exit_reason": str(self.exit_reason or ""),
            "detail": self.detail,
        }


@dataclass(eq=False)
class RunReport:
    """The outcome of one ``run()``: its status, what is left, and what the workers did.

    ``status`` is a :class:`~fractal_nb.vocabulary.RunOutcome` (``all_complete``,
    ``paused``, ``convergence_detected``, ``budget_exhausted``,
    ``waiting_on_claims``, ``model_unavailable``, ``seed_failed``,
    ``synthesis_failed``; ``completed``
    or ``error`` when another process harvested or failed the graph meanwhile),
    equal to its text; ``status_reason`` says why when the graph recorded a
    reason (a budget, a gate, the model outage). ``root_node_id``, ``intensity``,
    ``checkpoint``, ``budget`` (the intensity's ceilings) and ``seed_count`` (the graph's
    current seed questions, depth 1; 0 for a strategy without a seed plan) are seed 000's
    exploration state, which its work phase hands back with the rest.
    """

    status: RunOutcome
    graph_id: str = ""
    root_node_id: str = ""
    intensity: str = ""
    checkpoint: str = ""
    budget: BudgetRecord | None = None
    seed_count: int = 0
    status_reason: str | None = None
    workers_dispatched: int = 0
    open_questions_remaining: int = 0
    claimed_nodes_remaining: int = 0
    gated_questions_remaining: int = 0
    convergence_points: list[dict[str, Any]] = field(default_factory=list)
    contradictions: list[dict[str, Any]] = field(default_factory=list)
    worker_reports: list[WorkerReport] = field(default_factory=list)
    nodes_processed: int = 0
    model_calls: int = 0
    tokens: int = 0
    cost: float | None = None  # with a price table only
    wall_s: float = 0.0

    # -- comparable with the status string run() used to return ------------------------

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return self.status == other
        if isinstance(other, RunReport):
            return self.to_dict() == other.to_dict()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.status)

    def __str__(self) -> str:
        return self.status

    def __format__(self, spec: str) -> str:
        return format(self.status, spec)

    # -- views ----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, worker reports under the reference's field names."""
        data = asdict(self)
        data["worker_reports"] = [w.to_dict() for w in self.worker_reports]
        return data

    def headline(self, *, spend: bool = True) -> str:
        """One line: status, reason, what the run did and (with ``spend``) what its model calls cost.

        A run whose questions all wait behind their gates says so, not "processed by 0 worker(s)".
        """
        reason = f" ({self.status_reason})" if self.status_reason else ""
        nodes = f"{self.nodes_processed} node(s) processed"
        if self.workers_dispatched:
            did = f"{nodes} by {self.workers_dispatched} worker(s)"
        elif self.gated_questions_remaining and not self.open_questions_remaining:
            did = f"{nodes} (the seed phase); every question it made waits at a gate, so no worker started"
        else:
            did = f"{nodes}, no worker started"
        if spend:
            cost = f", cost {self.cost:.4f}" if self.cost is not None else ""
            did += f", {self.model_calls} model call(s), {self.tokens:,} tokens{cost}"
        return f"{self.status}{reason}: {did}, {self.wall_s:.1f} s; left: {self._left()}"

    def _left(self) -> str:
        return (
            f"{self.open_questions_remaining} open, {self.claimed_nodes_remaining} claimed, "
            f"{self.gated_questions_remaining} gated"
        )

    def exploration_state(self) -> str:
        """Seed 000's exploration state in one line: graph, root, intensity, checkpoint, budget, seeds."""
        budget = (
            f"{self.budget['max_agents']} agents, depth {self.budget['max_depth']}" if self.budget else "none"
        )
        return (
            f"{self.graph_id} (root {self.root_node_id}), {self.intensity}, checkpoint {self.checkpoint}, "
            f"budget {budget}, {self.seed_count} seed question(s)"
        )

    def to_markdown(self) -> str:
        """The report as Markdown (model text escaped)."""
        lines = [f"**Run:** {_md(self.headline())}"]
        if self.graph_id:
            lines += ["", f"**Graph:** {_md(self.exploration_state())}"]
        if self.convergence_points:
            lines += ["", "**Convergences**", ""]
            lines += [
                f"- {', '.join(c['nodes'])}: {_md(c.get('insight') or '')}" for c in self.convergence_points
            ]
        if self.contradictions:
            lines += ["", "**Contradictions**", ""]
            lines += [
                f"- {', '.join(c['nodes'])}: {_md(c.get('tension') or '')}" for c in self.contradictions
            ]
        if self.worker_reports:
            lines += [
                "",
                "| worker | answered | synthesized | sub-questions | failures | exit |",
                "|---|---|---|---|---|---|",
            ]
            lines += [
                f"| {w.worker} | {w.answered} | {w.synthesized} | {w.sub_questions} | {w.failures} "
                f"| {_md(w.exit_reason or '')}{' (' + _md(w.detail) + ')' if w.detail else ''} |"
                for w in self.worker_reports
            ]
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        return self.to_markdown()

    def _repr_html_(self) -> str:
        esc = html.escape
        rows = "".join(
            f"<tr><td>{esc(w.worker)}</td><td>{w.answered}</td><td>{w.synthesized}</td>"
            f"<td>{w.sub_questions}</td><td>{w.failures}</td><td>{esc(w.exit_reason or '')}"
            f"{' (' + esc(w.detail) + ')' if w.detail else ''}</td></tr>"
            for w in self.worker_reports
        )
        links = "".join(
            f"<li>{esc(', '.join(c['nodes']))}: {esc(c.get('insight') or '')}</li>"
            for c in self.convergence_points
        )
        tensions = "".join(
            f"<li>{esc(', '.join(c['nodes']))}: {esc(c.get('tension') or '')}</li>"
            for c in self.contradictions
        )
        return (
            f"<div class='fractal-run'><p><b>Run:</b> {esc(self.headline())}</p>"
            + (f"<p><b>Graph:</b> {esc(self.exploration_state())}</p>" if self.graph_id else "")
            + (f"<p><b>Convergences</b></p><ul>{links}</ul>" if links else "")
            + (f"<p><b>Contradictions</b></p><ul>{tensions}</ul>" if tensions else "")
            + (
                "<table><tr><th>worker</th><th>answered</th><th>synthesized</th><th>sub-questions</th>"
                f"<th>failures</th><th>exit</th></tr>{rows}</table>"
                if rows
                else ""
            )
            + "</div>"
        )

    def __repr__(self) -> str:
        return f"<RunReport {self.headline()}>"
