"""The recursive primitive on one claimed question: answer, decompose, connect, synthesize.

One loop readable in one sitting (docs/architecture/engine.md, "The worker
protocol we follow"): the model answers and proposes sub-questions; the answer
is compared with nearby answers of other branches; then everything is written in
one transaction (answer, sub-questions under the depth budget, links, boundary
questions, and the leaf's own synthesis); last, the synthesis cascade runs
deepest first. Model failures are data: the claim is released for another try
and the failure is logged.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from ..errors import (
    BudgetExhaustedError,
    FractalError,
    LLMError,
    LLMUnavailableError,
    NodeTimeLimitError,
)
from ..llm.schemas import (
    Answer,
    Connections,
    Halt,
    LeafAnswer,
    StatedClaim,
    SubQuestion,
    connections_among,
)
from ..prompts import chat, render
from ..results.result import StepRecord
from ..store import WorkerStore
from ..store.records import Claim, QuestionContext, SynthesisClaim
from ..text import clip, normalize
from ..vocabulary import MAX_SUB_QUESTIONS, UNEXPLORED, CheckpointKind, HaltKind, NodeStatus, SaturationReason
from . import evidence
from .caller_tools import offered_tools
from .calls import PendingCalls

if TYPE_CHECKING:
    from .run_state import RunState

MAX_LINKS = 2  # links kept per answer and kind: a few strong ones beat many weak ones
# Other branches' answers an answer shows (docs/architecture/engine.md, "Context from the whole graph")
ELSEWHERE = 3
ELSEWHERE_CHARS = 300  # each cut there: the section stays under a thousand characters


def claim_question(run: RunState, worker: str) -> Claim:
    """Claim the next question for ``worker``, with its context in the same call.

    A strategy that reads no context (a thinkon level reads its chain) takes none.
    """
    return run.store.claim_work(run.graph_id, worker, with_context=run.part.claims_context)


def process(run: RunState, claim: Claim, worker: str) -> StepRecord:
    """Work a claimed question the graph's strategy's way and return what it did."""
    return run.part.step(run, claim, worker)


def work_question(run: RunState, claim: Claim, worker: str) -> StepRecord:
    """The recursive primitive on a claimed question (the fractal step; the tracks and single ones too)."""
    node_id, question = claim["node_id"], claim.get("text")
    assert node_id is not None and question is not None, "callers pass only claims that found a question"
    context = claim["context"] if "context" in claim else run.store.get_context(run.graph_id, node_id)
    # No sub-question can follow: the intensity's depth, or a deepened branch's (store/turn_requests.py).
    last_level = context["node"]["depth"] + 1 >= context.get("max_depth", run.budget.max_depth)
    with run.call.pending() as calls:  # the node's call log, written with its transaction
        with run.call.time_limit(run.limits.node_timeout_s):  # the answer and its links (limits.py)
            try:
                answer = run.call(
                    LeafAnswer if last_level else Answer,
                    chat("answer", **_answer_prompt(run, context, last_level)),
                    node_id=node_id,
                    worker=worker,
                    pending=calls,
                    tools=offered_tools(
                        run
                    ),  # the sources and the caller's tools, for a model that takes tools
                )
            except LLMError as exc:
                return _release(run, node_id, question, worker, exc)
            # A question for the person, or a blocker, instead of an answer
            # (docs/architecture/engine.md, "Halts").
            if answer.halt is not None:
                return _halt(run, node_id, question, worker, answer.halt, calls)
            subs = _sub_questions(context, answer, last_level)
            links = _connect(run, context, answer, worker, calls) if context["candidates"] else Connections()
        try:
            relation = {c["node_id"]: c["relation"] for c in context["candidates"]}
            written = _write(run, node_id, question, worker, answer, subs, links, calls, relation)
        except FractalError as exc:  # pruned or saturated meanwhile: the write is refused whole
            return StepRecord(node_id, worker, question, error=f"write refused: {exc}")
    if written["questions"]:
        # New sub-questions: this node now waits on them, and nothing else got closer
        # to synthesis, so the cascade has nothing new to do.
        run.announce_work()
        synthesized: tuple[str, ...] = ()
    else:  # the cascade from the synthesis this answer made ready (claimed with it), if any
        synthesized = tuple(written["synthesized"]) + cascade(run, worker, written["next_synthesis"])
    return StepRecord(
        node_id,
        worker,
        question,
        answer_id=written["answer_id"],
        sub_questions=tuple(written["questions"]),
        synthesized=synthesized,
        links=written["links"],
        depth_limited=subs.depth_limited,
        convergences=written["convergences"],
        contradictions=written["contradictions"],
        boundary_questions=written["boundary_questions"],
        saturated=written["saturated"],
    )


def cascade(
    run: RunState, worker: str, first: SynthesisClaim | None = None, *, given_back: list[str] | None = None
) -> tuple[str, ...]:
    """Synthesize ready questions until the store hands this worker no more.

    The store hands each synthesis to one worker, whatever the process, so the model
    is paid once per synthesis. Without ``first`` the cascade asks the whole graph
    (``claim_synthesis``: deepest first); from ``first``, a synthesis a write claimed
    with itself, it climbs: each synthesis claims the one it made ready above it in
    its own write (``claim_next``), and the cascade ends where that is none
    (docs/architecture/engine.md, "The cascade"). What a climb leaves (a synthesis given
    back, a question a person's prune made ready) is handed out by a cascade that
    asks the whole graph: a worker finding no question after one was given back,
    a worker leaving a finished graph, and the run's end. ``given_back`` collects
    the syntheses that failed and went back.
    """
    done: list[str] = []
    failed: list[str] = [] if given_back is None else given_back
    climbing = first is not None
    claim = first
    while True:
        if run.call.outage is not None:  # the run pauses: a synthesis held and not worked goes back
            if claim is not None and claim["node_id"] is not None:
                _give_back(run, claim["node_id"], worker)
            break
        if claim is None or claim["node_id"] is None:
            if climbing:
                break
            claim = run.store.claim_synthesis(run.graph_id, worker, skip=failed, with_inputs=True)
        node_id = claim["node_id"]
        if node_id is None:
            break
        try:
            claim = run.part.synthesize(run, claim, worker)
            done.append(node_id)
        except (LLMError, FractalError):  # logged; harvest repairs what is left behind
            failed.append(node_id)
            claim = None
            _give_back(run, node_id, worker)
    return tuple(done)


def _give_back(run: RunState, node_id: str, worker: str) -> None:
    """Release a synthesis this worker holds, so another cascade (or the next run) takes it."""
    run.synthesis_given_back.set()
    with suppress(FractalError):  # taken over or finished meanwhile
        run.store.release_synthesis(run.graph_id, node_id, worker)


def leftovers(run: RunState, worker: str, *, given_back: list[str] | None = None) -> tuple[str, ...]:
    """Synthesize what the cascades' climbs left by asking the whole graph, as the strategy does.

    A synthesis given back, a question a person's prune made ready (docs/architecture/engine.md,
    "The cascade"); a thinkon chain synthesizes nothing. ``given_back``: as :func:`cascade`.
    """
    return run.part.leftovers(run, worker, given_back)


def freeze_unexplored(store: WorkerStore, graph_id: str, node_id: str, reason: str | None = None) -> None:
    """The budget protocol's marks on one pending question.

    See docs/architecture/engine.md, "The worker protocol we follow".

    Marked unexplored, with the budget's ``reason`` when given; the dispatcher
    leaves it open for a resumed run, the harvest saturates it next.
    """
    store.update_node(graph_id, node_id, {**UNEXPLORED, "budget_reason": reason} if reason else UNEXPLORED)


# -- the steps of process() ---------------------------------------------------------------


def _answer_prompt(run: RunState, context: QuestionContext, last_level: bool) -> dict[str, Any]:
    node = context["node"]
    ancestry = "\n".join(
        f"{'  ' * a['depth']}- Q: {clip(a['question'], 300)}\n{'  ' * a['depth']}  A: "
        f"{clip(a['answer'] or '(not yet answered)', 500)}"
        for a in context["ancestry"]
    )
    siblings = "\n".join(f"- {clip(s['text'], 200)} ({s['status']})" for s in context["siblings"])
    syntheses = "\n".join(
        f"- {clip(s['text'], 150)}: {clip(s['synthesis'] or '', 400)}" for s in context["syntheses"]
    )
    # The whole graph's most related answers (store/answer_index.py), bounded like the rest.
    elsewhere = "\n".join(
        f"- {clip(c['text'], ELSEWHERE_CHARS)}"
        for c in [c for c in context["candidates"] if c["relation"] == "other_branch"][:ELSEWHERE]
    )
    return {
        "seed": clip(run.seed, 500),
        "ancestry": ancestry or "(this is a seed question)",
        "depth": node["depth"],
        "max_depth": context.get("max_depth", run.budget.max_depth),
        "question": node["text"]
        + _redecompose_note(node["metadata"])
        + _choice_note(node["metadata"])
        + run.part.question_note(node["metadata"]),
        "siblings": siblings or "(none)",
        "syntheses": syntheses or "(none yet)",
        "elsewhere": elsewhere or "(none yet)",
        # With sources, the task ends with the passages closest to the question (engine/evidence.py).
        # The halt's rule first: the reply's worked example closes the instructions (prompts/answer_*.txt).
        "task": render("halt")
        + "\n\n"
        + render("answer_leaf" if last_level else "answer_branch")
        + (
            evidence.section(evidence.gather(run.store, run.graph_id, node["text"]))
            if run.has_sources
            else ""
        ),
    }


def _choice_note(meta: dict[str, Any]) -> str:
    r"""What a question held by a halt adds once the person answered it (``choose``): their choice.

    >>> _choice_note({"choice": {"kind": "ambiguity", "text": "Paris, France", "asked": "Which Paris?"}})
    '\n(You asked the person: Which Paris?)\nThe person chose: Paris, France'
    """
    chosen = [c for c in [*(meta.get("choices_before") or []), meta.get("choice")] if isinstance(c, dict)]
    lines = []
    for choice in chosen[-3:]:
        if choice.get("asked"):
            lines.append(f"(You asked the person: {clip(str(choice['asked']), 300)})")
        said = "clarified" if choice.get("kind") == HaltKind.CONFUSION else "chose"
        lines.append(f"The person {said}: {clip(str(choice.get('text', '')), 500)}")
    return "".join("\n" + line for line in lines)


def _redecompose_note(meta: dict[str, Any]) -> str:
    """What a redecomposed question's prompt adds (store/turn_requests.py): the hint and what to avoid."""
    asked = meta.get("redecompose")
    if not isinstance(asked, dict):
        return ""
    lines = ["", "(A person asked for a different decomposition of this question.)"]
    if asked.get("hint"):
        lines.append(f"Their hint: {clip(str(asked['hint']), 500)}")
    avoid = [clip(str(t), 200) for t in asked.get("avoid") or []][:12]
    if avoid:
        lines.append("Do not ask these sub-questions again: " + "; ".join(avoid))
    return "\n".join(lines)


class Written(TypedDict):
    """What one answer's write made: the ids and counts the step's record carries."""

    answer_id: str
    questions: list[str]  # the sub-questions it added (new to the graph)
    synthesized: list[str]  # the question itself, when the answer settled it (a leaf, or saturated)
    next_synthesis: SynthesisClaim | None  # the synthesis it made ready above, claimed with it
    links: int
    saturated: str | None  # the saturation reason, when the answer saturated its question
    convergences: tuple[tuple[str, str], ...]
    contradictions: tuple[tuple[str, str], ...]
    boundary_questions: int


@dataclass(frozen=True)
class SubQuestions:
    """The sub-questions an answer asks, and what it does not ask: the depth's cut, the bound's."""

    kept: list[SubQuestion] = field(default_factory=list)
    depth_limited: bool = False  # the last level: the branch cut short by the depth budget
    proposed: int = 0  # distinct new ones the model proposed; past MAX_SUB_QUESTIONS the rest were cut

    def cut(self) -> dict[str, Any] | None:
        """What the answer's metadata records of the bound's cut (None: nothing was cut)."""
        if self.proposed <= len(self.kept):
            return None
        return {
            "proposed": self.proposed,
            "kept": len(self.kept),
            "reason": f"an answer asks at most {MAX_SUB_QUESTIONS} sub-questions: the model proposed "
            f"{self.proposed:,} new ones, the first {len(self.kept)} were kept",
        }


def _sub_questions(context: QuestionContext, answer: LeafAnswer, last_level: bool) -> SubQuestions:
    """The answer's distinct sub-questions, at most ``MAX_SUB_QUESTIONS`` of them, in the model's order.

    At the last level the model is asked for an answer only (no sub-questions to
    pay for and drop); unless it says the branch is saturated, the branch counts
    as cut by depth. A model proposing more than the bound is cut to it, the cut
    recorded on the answer (issue 37: 10,000 proposed made 10,000 children).
    Repeats of questions elsewhere in the graph are dropped by the store when the
    answer is written.
    """
    if last_level:
        return SubQuestions(depth_limited=answer.saturation is None)
    known = {normalize(a["question"]) for a in context["ancestry"]} | {normalize(context["node"]["text"])}
    known |= {normalize(s["text"]) for s in context["siblings"]}
    distinct = []
    for sub in answer.sub_questions if isinstance(answer, Answer) else []:
        if normalize(sub.text) not in known:
            known.add(normalize(sub.text))
            distinct.append(sub)
    return SubQuestions(distinct[:MAX_SUB_QUESTIONS], proposed=len(distinct))


def _connect(
    run: RunState, context: QuestionContext, answer: LeafAnswer, worker: str, calls: PendingCalls
) -> Connections:
    candidates = "\n".join(
        f"- [{c['node_id']}] ({c['relation'].replace('_', ' ')}) {clip(c['text'], 300)}"
        for c in context["candidates"]
    )
    schema = connections_among(tuple(c["node_id"] for c in context["candidates"]))
    try:
        found = run.call(
            schema,
            chat(
                "connect",
                question=context["node"]["text"],
                node_id="new",
                answer=clip(answer.answer, 1500),
                candidates=candidates,
            ),
            node_id=context["node"]["node_id"],
            worker=worker,
            pending=calls,
        )
    except LLMError:  # logged; links are a bonus, the answer still lands
        return Connections()
    valid = {c["node_id"] for c in context["candidates"]}
    return Connections(
        convergences=[link for link in found.convergences if link.node_id in valid][:MAX_LINKS],
        contradictions=[link for link in found.contradictions if link.node_id in valid][:MAX_LINKS],
    )


def _write(
    run: RunState,
    q: str,
    question: str,
    worker: str,
    answer: LeafAnswer,
    subs: SubQuestions,
    links: Connections,
    calls: PendingCalls,
    relation: dict[str, str],
) -> Written:
    """Write the node's results in one transaction; a refusal rolls all of it back."""
    store, g = run.store, run.graph_id
    meta = _answer_metadata(run, answer, subs)
    questions = [{"text": sub.text, "metadata": {"proxy_signal": sub.proxy_signal}} for sub in subs.kept]
    boundary = _boundary(question, links, relation)
    with calls.landing() as rows:
        written = store.submit_answer(
            g,
            q,
            answer.answer,
            owner=worker,
            metadata=meta,
            sub_questions=questions,
            links=_link_metadata(links) or None,
            calls=rows,
            saturation=answer.saturation,
            boundary=boundary,
            claim_next=True,
            with_inputs=True,
        )
    answer_id, created = written["answer"]["node_id"], written["edges_created"]
    boundaries = int(written["boundary"] is not None)
    if links.convergences and run.checkpoint.kind == CheckpointKind.CONVERGENCE:
        run.convergence_found.set()
    return {
        "answer_id": answer_id,
        "questions": [q_["node_id"] for q_ in written["sub_questions"]],
        "synthesized": [q] if written["status"] in ("synthesized", "saturated") else [],
        "next_synthesis": written.get("next_synthesis"),
        "links": created,
        "saturated": written["status_reason"] if written["status"] == "saturated" else None,
        "convergences": tuple((answer_id, link.node_id) for link in links.convergences),
        "contradictions": tuple((answer_id, link.node_id) for link in links.contradictions),
        "boundary_questions": boundaries,
    }


def _answer_metadata(run: RunState, answer: LeafAnswer, subs: SubQuestions) -> dict[str, Any]:
    """What an answer keeps beside its text: confidence, saturation, cuts, refusals, claims, citations."""
    meta: dict[str, Any] = {"confidence": answer.confidence}
    if answer.saturation:
        meta["saturation"] = answer.saturation
    if subs.depth_limited:
        meta["depth_limited"] = True
    if cut := subs.cut():
        meta["sub_questions_cut"] = cut
    if answer.refused:  # sub-questions and claims a gate dropped, the answer kept (llm/schemas.py)
        meta["refused"] = answer.refused
    # facts, assumptions and unknowns kept apart (docs/architecture/engine.md, "Facts,
    # assumptions, unknowns")
    if answer.claims:
        meta["claims"] = [
            {"kind": c.kind.value, "text": c.text, "support": c.support} for c in _distinct(answer.claims)
        ]
    if run.has_sources or answer.citations:  # raw: the store checks them and sets the answer's support
        meta["citations"] = evidence.raw(answer.citations)
    return meta


def _boundary(question: str, links: Connections, relation: dict[str, str]) -> dict[str, Any] | None:
    """A boundary question on the strongest convergence with another branch.

    See docs/architecture/engine.md, "The worker protocol we follow".

    The store places it under the shallower of the two answers; None without such a convergence.
    """
    across = [link for link in links.convergences if relation.get(link.node_id) == "other_branch"]
    if not across:
        return None
    return {
        "text": render(
            "boundary", question=clip(question, 200), other=across[0].node_id, insight=across[0].note
        ),
        "converging_with": across[0].node_id,
    }


def _link_metadata(links: Connections) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if links.convergences:
        meta["convergence_with"] = [link.node_id for link in links.convergences]
        meta["convergence_insight"] = "; ".join(link.note for link in links.convergences)
    if links.contradictions:
        meta["contradiction_with"] = [link.node_id for link in links.contradictions]
        meta["contradiction_tension"] = "; ".join(link.note for link in links.contradictions)
    return meta


def _halt(
    run: RunState, node_id: str, question: str, worker: str, halt: Halt, calls: PendingCalls
) -> StepRecord:
    """Write a halt instead of an answer: the question held for the person, or saturated as blocked.

    One transaction with the call log (``submit_halt``); no answer node. A blocked
    question is done, so the cascade may synthesize its parent (weak: it rests on a
    question nobody could answer).
    """
    try:
        with calls.landing() as rows:
            written = run.store.submit_halt(
                run.graph_id, node_id, halt.model_dump(mode="json"), owner=worker, calls=rows
            )
    except FractalError as exc:  # pruned or taken over meanwhile: the write is refused whole
        return StepRecord(node_id, worker, question, error=f"write refused: {exc}")
    blocked = written["status"] == NodeStatus.SATURATED
    return StepRecord(
        node_id,
        worker,
        question,
        synthesized=cascade(run, worker) if blocked else (),
        saturated=SaturationReason.BLOCKED.value if blocked else None,
        halted=halt.kind.value,
    )


def _release(run: RunState, node_id: str, question: str, worker: str, exc: LLMError) -> StepRecord:
    # A model that cannot be reached, a run's time limit or a spent budget is not the question's
    # fault: it is open again with its tries.
    over_time = isinstance(exc, NodeTimeLimitError)
    spent = isinstance(exc, BudgetExhaustedError)
    failed = not isinstance(exc, LLMUnavailableError) and not over_time and not spent
    try:
        run.store.release_claim(run.graph_id, node_id, worker, f"{type(exc).__name__}: {exc}", failed=failed)
    except FractalError:  # pruned or taken over meanwhile: nothing of ours to release
        pass
    run.announce_work()
    return StepRecord(
        node_id,
        worker,
        question,
        error=f"{type(exc).__name__}: {exc}",
        budget_reached=f"{exc} (on {node_id})" if over_time else str(exc) if spent else None,
    )


def _distinct(claims: list[StatedClaim]) -> list[StatedClaim]:
    """An answer's claims without repeats (by normalized text), in the model's order."""
    kept: dict[str, StatedClaim] = {}
    for claim in claims:
        kept.setdefault(normalize(claim.text), claim)
    return list(kept.values())
