"""The fractal strategy: sub-questions all at once, answered in parallel, synthesized bottom-up.

The default way of thinking (docs/architecture/engine.md, "The worker protocol we follow"). Its
seed poses the root's questions (pooling a small model's usable ones over
several attempts); its step is the recursive primitive (engine/primitive.py);
a question's synthesis is composed from its sub-questions' syntheses only; the
root's synthesis is the result's summary, and the harvest's call draws the findings
from the synthesis chain. The tracks and single
strategies reuse its parts (they subclass :class:`Fractal`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...errors import BudgetExhaustedError, LLMError
from ...llm.schemas import Finding, HarvestFindings, SeedPlan, Synthesis
from ...prompts import chat, render
from ...results.result import StepRecord, synthesis_chain
from ...store.records import Claim, NodeRecord, SubQuestionBrief, SynthesisClaim, SynthesisInputs
from ...text import clip, normalize
from ...vocabulary import NodeStatus
from .. import evidence, grounding, seeding
from ..phases import freeze_and_repair
from ..primitive import cascade, work_question

if TYPE_CHECKING:
    from ..run_state import RunState

POOLED_SEED_ATTEMPTS = 5
"""Seed plans the fractal seed asks at most: it stops once the usable questions pooled so far make the
minimum, so a model that can do the job pays one; a small one pools its few usable questions over
several (the packaged Gemma 3 270M fell short of 3 after 3 attempts; docs/architecture/models.md,
"Small models")."""


def seed(run: RunState) -> StepRecord | None:
    """Answer the root with the seed plan and hang the seed questions under it.

    Returns None when the root is already answered (a resumed graph). The
    number of questions is held to the intensity's range: extra ones are cut,
    and too few trigger a retry that says so. When no attempt reaches the
    minimum, the best plan is kept and the root's answer records the shortfall
    (``seed_minimum``), which marks the result degraded.
    """
    root = run.store.get_synthesis_inputs(run.graph_id, run.root_id)["node"]
    if root["status"] != NodeStatus.OPEN:
        return None
    lo, hi = run.budget.seed_questions
    # The distinct usable questions of every attempt, pooled: a small model's plan keeps two of its
    # four questions (the rest refused), and the next attempt's two new ones make the minimum.
    pooled: dict[str, str] = {}
    plan: SeedPlan | None = None
    refused: list[str] = []
    error, note, attempts = "", "", 0
    for _ in range(POOLED_SEED_ATTEMPTS):
        attempt = seeding.attempt(run, SeedPlan, chat("seed", seed=run.seed + note, lo=lo, hi=hi))
        if isinstance(attempt, StepRecord):
            return attempt
        if isinstance(attempt, LLMError):
            error = seeding.failed(attempt)
            if run.call.outage is not None:  # the model is down: no attempt can land now
                break
            continue
        before = len(pooled)
        for q in attempt.questions:
            pooled.setdefault(normalize(q), q.strip())
        if len(pooled) > before:
            attempts += 1
        if plan is None or len(attempt.questions) > len(plan.questions):
            plan = attempt  # its decomposition names the dimensions
        refused += attempt.refused
        if len(pooled) >= lo:
            break
        note = f"\n(The previous attempts posed {len(pooled)} usable questions; pose between {lo} and {hi}.)"
    if plan is None:  # every attempt failed: the root stays open for the next run
        return StepRecord(root["node_id"], seeding.SEED_WORKER, run.seed, error=error)
    questions = list(pooled.values())[:hi]
    return seeding.write_plan(
        run,
        plan.decomposition,
        {
            "seed_kind": plan.seed_kind,
            "seed_questions": len(questions),
            "seed_minimum": lo,
            **({"seed_attempts_pooled": attempts} if attempts > 1 else {}),
            **({"refused": refused} if refused else {}),
        },
        questions,
    )


def synthesis_inputs(run: RunState, claim: SynthesisClaim) -> SynthesisInputs:
    """What a held synthesis reads: the inputs its claim came with, or read now."""
    node_id = claim["node_id"]
    assert node_id is not None, "callers pass only claims that hold a synthesis"
    return claim["inputs"] if "inputs" in claim else run.store.get_synthesis_inputs(run.graph_id, node_id)


def synthesize(run: RunState, inputs: SynthesisInputs, worker: str) -> SynthesisClaim | None:
    """Compose a held question's synthesis from its sub-questions' syntheses only, and store it.

    Returns the synthesis the write made ready above and claimed for ``worker``
    with itself, with its inputs (None or ``node_id`` None: none).
    """
    node_id = inputs["node"]["node_id"]
    children = "\n".join(
        [
            f"- {c['text']}\n  {_finding(c)}{grounding.listed(c['claims'], '    ')}"
            for c in inputs["sub_questions"]
        ]
        # A person's evidence or correction (a note, store/turn_requests.py) weighs like a finding.
        + [f"- Note from a person: {clip(n['text'], 1200)}" for n in inputs.get("notes", [])]
    )
    answer = " ".join(a["text"] for a in inputs["answers"]) or "(none)"
    answer += "".join(grounding.listed(a["claims"], "  ") for a in inputs["answers"])
    with run.call.pending() as calls:
        result = run.call(
            Synthesis,
            chat(
                "synthesize",
                question=inputs["node"]["text"],
                # The root's synthesis is the conclusion: it must answer the seed (llm/quality.py, on_topic).
                conclusion=render("conclusion") if inputs["node"]["depth"] == 0 else "",
                answer=clip(answer, 1200),
                children=children,
            ),
            node_id=node_id,
            worker=worker,
            pending=calls,
        )
        text = result.synthesis
        if result.tensions:
            text += "\nTensions: " + "; ".join(result.tensions)
        with calls.landing() as rows:
            written = run.store.submit_synthesis(
                run.graph_id,
                node_id,
                text,
                worker_id=worker,
                calls=rows,
                claims=grounding.ground(result.claims, grounding.sources(inputs)),
                claim_next=True,
                with_inputs=True,
            )
    return written.get("next_synthesis")


def _finding(child: SubQuestionBrief) -> str:
    """A sub-question's synthesis, or why it has none (a blocked one: its blocker)."""
    blocked = child.get("blocked")
    if child["synthesis"] is None and blocked is not None:
        return f"blocked, not answered: {clip(blocked['blocker'], 300)}"
    return str(child["synthesis"] or f"saturated ({child['status_reason']}): not explored further")


def harvest_findings(
    run: RunState, nodes: list[NodeRecord], gaps: list[str], spent: str | None
) -> HarvestFindings:
    """The harvest's model call: findings and gaps drawn from the sound part of the synthesis chain."""
    if spent is not None:
        raise BudgetExhaustedError(f"{spent}: the harvest made no model calls")
    # What the model did not write (syntheses joined without it) is never material for findings.
    sound = [c for c in synthesis_chain(nodes) if not c.degraded]
    # With sources, each question's verified citations, for the findings to carry (engine/evidence.py).
    cited = evidence.chain_citations(nodes) if run.has_sources else {}
    chain_text = "\n".join(
        f"{'  ' * c.depth}- {clip(c.question, 200)}: {clip(c.synthesis, 600)}"
        + evidence.cites_lines(cited.get(c.node_id, []), "  " * c.depth + "  ")
        for c in sound[:40]
    )
    return run.call(
        HarvestFindings,
        evidence.with_rule(
            chat(
                "harvest",
                seed=clip(run.seed, 500),
                chain=chain_text or "(empty)",
                gaps="\n".join(f"- {g}" for g in gaps) or "(none)",
            ),
            sources=run.has_sources,
        ),
        node_id=run.root_id,
        worker=None,
    )


class Fractal:
    """The fractal strategy's part (engine/strategies/part.py)."""

    name = "fractal"
    claims_context = True

    def seed(self, run: RunState) -> StepRecord | None:
        """The root's plan: its questions, pooled over attempts (:func:`seed`)."""
        return seed(run)

    def step(self, run: RunState, claim: Claim, worker: str) -> StepRecord:
        """The recursive primitive on the question (engine/primitive.py)."""
        return work_question(run, claim, worker)

    def question_note(self, metadata: Mapping[str, Any]) -> str:
        """Nothing: a fractal question is its own text."""
        return ""

    def synthesize(self, run: RunState, claim: SynthesisClaim, worker: str) -> SynthesisClaim | None:
        """Composed from the sub-questions' syntheses only (:func:`synthesize`)."""
        return synthesize(run, synthesis_inputs(run, claim), worker)

    def leftovers(self, run: RunState, worker: str, given_back: list[str] | None) -> tuple[str, ...]:
        """The cascade, asking the whole graph."""
        return cascade(run, worker, given_back=given_back)

    def answer_is_synthesis(self, metadata: Mapping[str, Any]) -> bool:
        """Always: a leaf's answer is its synthesis."""
        return True

    def finish(self, run: RunState, spent: str | None, stopped: str | None) -> None:
        """Freeze what is left, then synthesize up to the root (with the model unless spent)."""
        freeze_and_repair(run, model=spent is None)

    def harvested(
        self, run: RunState, nodes: list[NodeRecord], gaps: list[str], spent: str | None
    ) -> HarvestFindings:
        """The harvest's call over the synthesis chain (:func:`harvest_findings`)."""
        return harvest_findings(run, nodes, gaps, spent)

    def findings(self, nodes: list[NodeRecord]) -> list[Finding] | None:
        """None: the harvest call's own."""
        return None

    def steps_per_worker(self, run: RunState) -> int:
        """Three times the depth budget."""
        return run.budget.max_depth * 3


PART = Fractal()
