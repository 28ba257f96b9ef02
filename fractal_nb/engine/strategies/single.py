"""The single strategy: one model call answers the whole question (the baseline of ``compare()``).

Its seed phase is the one call (``SingleAnswer``, ``prompts/single.txt``; with
sources, the passages closest to the question and the rule to cite them): the
answer is the root's answer and, as a leaf's, its synthesis; its findings and
gaps are kept on the answer (metadata ``single``), and the harvest makes them the
result's with no further call (docs/architecture/facade.md, "Comparing strategies").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...llm.quality import STORED
from ...llm.schemas import MAX_CITATIONS, Finding, HarvestFindings, SingleAnswer
from ...prompts import chat, render
from ...results.result import StepRecord
from ...store.records import NodeRecord
from ...text import clip
from ...vocabulary import NodeStatus
from .. import evidence, seeding
from .fractal import Fractal

if TYPE_CHECKING:
    from ..run_state import RunState

KEY = "single"
"""The answer's metadata key holding the call's findings and gaps."""


def seed(run: RunState) -> StepRecord | None:
    """The one call, written as the root's answer; None when the root is answered already."""
    root = run.store.get_synthesis_inputs(run.graph_id, run.root_id)["node"]
    if root["status"] != NodeStatus.OPEN:
        return None
    citing = ""
    if run.has_sources:
        hits = evidence.gather(run.store, run.graph_id, run.seed)
        citing = "\n\n" + render(  # render() strips the blank lines that set the section apart
            "single_citing",
            passages=evidence.passages(hits) or "(no passage matches)",
            most=MAX_CITATIONS,
        )
    messages = chat(
        "single", question=clip(run.seed, 4000), evidence=citing, citing=", and citations" if citing else ""
    )
    reply = seeding.attempt(run, SingleAnswer, messages)
    if isinstance(reply, StepRecord):
        return reply
    if not isinstance(reply, SingleAnswer):  # the model failed: the root stays open for the next run
        return StepRecord(run.root_id, seeding.SEED_WORKER, run.seed, error=seeding.failed(reply))
    kept = {KEY: {"findings": [f.model_dump(mode="json") for f in reply.findings], "gaps": list(reply.gaps)}}
    written = run.local.add_answer(
        run.graph_id, run.root_id, reply.answer, owner=seeding.SEED_WORKER, metadata=kept, synthesize=True
    )
    return StepRecord(
        run.root_id,
        seeding.SEED_WORKER,
        run.seed,
        answer_id=written["answer"]["node_id"],
        synthesized=(run.root_id,),
    )


def harvested(nodes: list[NodeRecord], gaps: list[str]) -> HarvestFindings:
    """The result of the one call: its findings, its gaps after the graph's (its answer is the root's)."""
    root = next((n for n in nodes if n["node_type"] == "question" and n["depth"] == 0), None)
    answer = next(
        (
            n
            for n in nodes
            if root is not None and n["node_type"] == "answer" and n["parent_id"] == root["node_id"]
        ),
        None,
    )
    kept: dict[str, Any] = answer["metadata"].get(KEY, {}) if answer is not None else {}
    findings = [Finding.model_validate(f, context=STORED) for f in kept.get("findings", [])]
    named = [str(g) for g in kept.get("gaps", []) if str(g) not in gaps]
    return HarvestFindings.model_construct(
        findings=findings,
        gaps=[*gaps, *named],
    )


class Single(Fractal):
    """The single strategy's part: its seed is the one call, its result that call's findings and gaps."""

    name = "single"

    def seed(self, run: RunState) -> StepRecord | None:
        """The one call (:func:`seed`)."""
        return seed(run)

    def harvested(
        self, run: RunState, nodes: list[NodeRecord], gaps: list[str], spent: str | None
    ) -> HarvestFindings:
        """The one call's findings and gaps (:func:`harvested`), no further call."""
        return harvested(nodes, gaps)  # no further call


PART = Single()
