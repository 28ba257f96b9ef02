"""The thinkon strategy's step: one Think or one Eval on the level the chain is at.

A chain is solved depth first, one level acting at a time (docs/architecture/engine.md,
"Thinkon"). A new level's Think returns its result or writes its plan (``todo``);
its Eval, reading the plan and what the sub-goals returned (``done``), calls the
next sub-goal (a redo or a repair is a call too) or returns the level's result.
The store keeps the rules (store/chain.py); this module asks the model and
keeps the limits:

- **depth**: a call the store refuses for the depth budget returns the level's state instead;
- **width**: a level calls at most ``MAX_CHILDREN`` sub-goals (the store's bound on a node's
  children, issue 37); its next call returns the level's state instead;
- **repeats**: a sub-goal called again after :data:`MAX_REPEATS` redos, or again
  after two returns that said the same thing, returns the level's state (a loop);
- **tokens, cost, time**: the graph's budgets (engine/limits.py), checked before
  each call; a call the budget refuses returns the level's state, and the run's
  harvest unwinds the rest of the chain the same way (:func:`unwind`);
- **a sub-goal's Solve time** (``solve_time_s``): checked before each Think or Eval of its
  subtree; past it, the sub-goal and the levels below it return their state, and its
  parent's Eval goes on (thinkon_time.py);
- **a reply that is no valid Think or Eval** (after the correction round trip)
  ends that level only: it returns failed into its parent's ``done``, and the
  parent's Eval goes on.

A level's state, when a limit returns it, is its goal and what its sub-goals
returned so far: the partial result, marked (saturated ``budget_exhausted``, the
limit as ``budget_reason``), so the result says it is degraded.
"""

from __future__ import annotations

from collections.abc import Mapping
from difflib import SequenceMatcher
from string import Template
from typing import TYPE_CHECKING, Any

from ...errors import (
    BudgetError,
    BudgetExhaustedError,
    FractalError,
    InvalidInputError,
    LLMError,
    LLMUnavailableError,
    NodeTimeLimitError,
    StateError,
)
from ...llm.schemas import Eval, EvalChoice, Finding, HarvestFindings, Think, ThinkChoice
from ...prompts import chat, own_chat
from ...results.result import StepRecord
from ...store.chain import level_state
from ...store.records import Claim, DoneEntry, NodeRecord, SynthesisClaim, ThinkonLevel
from ...text import clip, normalize
from ...vocabulary import MAX_CHILDREN, ThinkonOutcome, ThinkonPhase
from ..caller_tools import offered_tools
from .thinkon_time import past_solve_time

if TYPE_CHECKING:
    from ...llm.protocol import Message
    from ..run_state import RunState

MAX_REPEATS = 2
"""Redos of one sub-goal a level may call; one more call of it is a loop."""
SIMILAR = 0.9
"""Two sub-goals are the same when their normalized texts match this closely (difflib's ratio)."""
MAX_CHAIN_STEPS = 500
"""Steps one worker makes in one run of a chain (a circuit breaker: the limits above stop a chain first)."""
UNWIND_WORKER = "thinkon-unwind"
"""The actor of the returns :func:`unwind` makes (no model call: the chain's state as it stands)."""
DONE_CHARS = 1500  # a sub-goal's result as an Eval prompt shows it
# The caller's own Prompt_t and Prompt_e (``Exploration.create(prompts=...)``): the template each
# stands for, the values it may name, and those it must (Eval decides from what returned).
OWN_PROMPTS: Mapping[str, tuple[str, frozenset[str], frozenset[str]]] = {
    "think": ("thinkon_think", frozenset({"goal", "parent", "depth", "max_depth"}), frozenset({"goal"})),
    "eval": (
        "thinkon_eval",
        frozenset({"goal", "parent", "depth", "max_depth", "todo", "done"}),
        frozenset({"goal", "done"}),
    ),
}


def own_prompts(prompts: object) -> dict[str, str]:
    """The caller's Prompt_t and Prompt_e, checked: ``{"think": ..., "eval": ...}``, either or both.

    Each is a template (``$goal``, ``$done``…, as prompts/thinkon_*.txt); the engine adds
    the reply format. InvalidInputError naming what is wrong.

    >>> own_prompts({"think": "Solve $goal, or plan it."})
    {'think': 'Solve $goal, or plan it.'}
    >>> own_prompts({"eval": "Judge $goal."})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    fractal_nb.errors.InvalidInputError: prompts['eval'] must name $done (it may name $depth, ...)
    """
    if not isinstance(prompts, Mapping) or not prompts:
        raise InvalidInputError(f"prompts must be a dict of 'think' and/or 'eval' templates, not {prompts!r}")
    checked: dict[str, str] = {}
    for step, text in prompts.items():
        if step not in OWN_PROMPTS:
            raise InvalidInputError(f"prompts names {step!r}: the thinkon strategy's are 'think' and 'eval'")
        _, allowed, needed = OWN_PROMPTS[step]
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError(f"prompts[{step!r}] must be a template text, not {text!r}")
        try:
            named = {m.group("named") or m.group("braced") for m in Template.pattern.finditer(text)} - {None}
            Template(text).substitute(dict.fromkeys(allowed, ""))
        except (KeyError, ValueError) as exc:
            raise InvalidInputError(
                f"prompts[{step!r}] names ${exc.args[0]}, no value it may name ({', '.join(sorted(allowed))})"
                if isinstance(exc, KeyError)
                else f"prompts[{step!r}] is no template: {exc} (write $$ for a dollar sign)"
            ) from None
        if not needed <= named:
            raise InvalidInputError(
                f"prompts[{step!r}] must name {', '.join('$' + n for n in sorted(needed - named))} "
                f"(it may name {', '.join('$' + n for n in sorted(allowed))})"
            )
        checked[step] = text
    return checked


def _messages(run: RunState, step: str, **values: object) -> list[Message]:
    """Think's or Eval's prompt: the caller's own when the graph keeps one, else the package's."""
    name = OWN_PROMPTS[step][0]
    own = run.prompts.get(step)
    return own_chat(own, name, **values) if own else chat(name, **values)


def advance(run: RunState, claim: Claim, worker: str) -> StepRecord:
    """One step of the chain on the level ``worker`` claimed: its Think, or its Eval."""
    node_id = claim["node_id"]
    assert node_id is not None, "callers pass only claims that found a level"
    started = run.clock.now()
    level = run.store.thinkon_level(run.graph_id, node_id)
    try:
        if (past := past_solve_time(run, level)) is not None:  # before the call (thinkon_time.py)
            return _past_solve_time(run, level, worker, *past)
        if level["phase"] == ThinkonPhase.THINK:
            return _think(run, level, worker, started)
        return _eval(run, level, worker, started)
    except FractalError as exc:  # pruned, taken over, cut by a harvest or stopped meanwhile: refused whole
        return StepRecord(node_id, worker, level["goal"], error=f"write refused: {exc}")


def _where(run: RunState, level: ThinkonLevel) -> dict[str, object]:
    """What both prompts say of a level: its goal, the level above, its depth and the deepest allowed."""
    return {
        "goal": level["goal"],
        "parent": level["parent_goal"] or "(none: this is the whole task)",
        "depth": level["depth"],
        "max_depth": run.budget.max_depth - 1,
    }


def _think(run: RunState, level: ThinkonLevel, worker: str, started: float) -> StepRecord:
    """Think, with the tools (the sources', the caller's) for a model that takes them ("Tool calls")."""
    prompt = _messages(run, "think", **_where(run, level))
    tools = offered_tools(run)
    try:
        with run.call.time_limit(run.limits.node_timeout_s):
            reply = run.call(Think, prompt, node_id=level["node_id"], worker=worker, tools=tools)
    except LLMError as exc:
        return _failed_call(run, level, worker, exc, run.clock.now() - started)
    spent = run.clock.now() - started
    if reply.type == ThinkChoice.RETURN:
        return _return(run, level, worker, reply.description, spent)
    run.store.thinkon_plan(run.graph_id, level["node_id"], reply.description, worker_id=worker, spent_s=spent)
    run.announce_work()
    return StepRecord(level["node_id"], worker, level["goal"], thinkon="plan")


def _eval(run: RunState, level: ThinkonLevel, worker: str, started: float) -> StepRecord:
    prompt = _messages(
        run,
        "eval",
        **_where(run, level),
        todo=level["todo"] or "(no plan)",
        done=done_listing(level["done"]),
    )
    try:
        with run.call.time_limit(run.limits.node_timeout_s):
            reply = run.call(Eval, prompt, node_id=level["node_id"], worker=worker)
    except LLMError as exc:
        return _failed_call(run, level, worker, exc, run.clock.now() - started)
    spent = run.clock.now() - started
    if reply.type == EvalChoice.RETURN:
        return _return(run, level, worker, reply.description, spent)
    loop = repeated(level["done"], reply.description)
    if loop is not None:
        return _cut(run, level, worker, loop, spent=spent)
    if len(level["done"]) >= MAX_CHILDREN:  # each call is a child of the plan, and each returned
        width = f"width limit: {len(level['done'])} sub-goals called, at most {MAX_CHILDREN}"
        return _cut(run, level, worker, width, spent=spent)
    try:
        child = run.store.thinkon_call(
            run.graph_id, level["node_id"], reply.description, worker_id=worker, spent_s=spent
        )
    except BudgetError as exc:  # the depth budget (the store's rule, a deepened branch's ceiling included)
        return _cut(run, level, worker, f"depth limit: {exc}", spent=spent)
    run.announce_work()
    return StepRecord(
        level["node_id"], worker, level["goal"], sub_questions=(child["node_id"],), thinkon="call"
    )


def _return(run: RunState, level: ThinkonLevel, worker: str, result: str, spent: float) -> StepRecord:
    run.store.thinkon_return(run.graph_id, level["node_id"], result, worker_id=worker, spent_s=spent)
    run.announce_work()
    return StepRecord(
        level["node_id"], worker, level["goal"], synthesized=(level["node_id"],), thinkon="return"
    )


def _cut(
    run: RunState,
    level: ThinkonLevel,
    worker: str,
    reason: str,
    *,
    budget: str | None = None,
    spent: float = 0.0,
) -> StepRecord:
    run.store.thinkon_return(
        run.graph_id,
        level["node_id"],
        state_of(level, reason),
        worker_id=worker,
        outcome=ThinkonOutcome.CUT,
        reason=reason,
        spent_s=spent,
    )
    run.announce_work()
    return StepRecord(
        level["node_id"],
        worker,
        level["goal"],
        saturated="budget_exhausted",
        budget_reached=budget,
        thinkon="cut",
    )


def _past_solve_time(
    run: RunState, level: ThinkonLevel, worker: str, levels: list[ThinkonLevel], reason: str
) -> StepRecord:
    """The sub-goal past its Solve time returns its state, the levels below it (``level`` first) before it.

    No model call; the parent's Eval goes on (thinkon_time.py). ``level`` is the worker's; the
    levels above it are open once the one below returned, so this worker returns them too.
    """
    record = _cut(run, level, worker, reason)
    for above in levels[1:]:
        _cut(run, run.store.thinkon_level(run.graph_id, above["node_id"]), worker, reason)
    return record


def _failed_call(
    run: RunState, level: ThinkonLevel, worker: str, exc: LLMError, spent: float = 0.0
) -> StepRecord:
    """A call that failed: the level given back, cut, or ended.

    The model unreachable gives the level back (open, resumable); a spent budget or
    the time limit returns its state; any other failure (a reply that is no valid
    Think or Eval after the correction round trip) ends it, failed.
    """
    error = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, LLMUnavailableError):  # not the level's fault: open again, resumable
        try:
            run.store.release_claim(run.graph_id, level["node_id"], worker, error, failed=False)
        except FractalError:  # taken over meanwhile
            pass
        return StepRecord(level["node_id"], worker, level["goal"], error=error)
    if isinstance(exc, BudgetExhaustedError):
        return _cut(run, level, worker, str(exc), budget=str(exc), spent=spent)
    if isinstance(exc, NodeTimeLimitError):
        return _cut(run, level, worker, str(exc), budget=f"{exc} (on {level['node_id']})", spent=spent)
    failed = f"Failed: {level['goal']} ({error})"
    run.store.thinkon_return(
        run.graph_id,
        level["node_id"],
        clip(failed, 2000),
        worker_id=worker,
        outcome=ThinkonOutcome.FAILED,
        reason=clip(error, 2000),
        spent_s=spent,
    )
    run.announce_work()
    return StepRecord(level["node_id"], worker, level["goal"], error=error, thinkon="failed")


def repeated(done: list[DoneEntry], goal: str) -> str | None:
    """Why calling ``goal`` again is a loop, or None.

    A loop: more than :data:`MAX_REPEATS` redos of the same sub-goal, or a redo
    after two of its returns said the same.

    >>> entry = {"node_id": "n-1", "goal": "Write the intro.", "result": "Too short.", "outcome": "returned"}
    >>> repeated([entry], "write the intro") is None
    True
    >>> repeated([entry, {**entry, "node_id": "n-2"}], "Write the intro!")
    "loop: 'Write the intro!' called 3 times; its last two returns said the same"
    """
    key = normalize(goal)
    same = [d for d in done if SequenceMatcher(None, normalize(d["goal"]), key).ratio() >= SIMILAR]
    calls = len(same) + 1
    if len(same) > MAX_REPEATS:
        return f"loop: {clip(goal, 200)!r} called {calls} times (at most {MAX_REPEATS + 1})"
    if len(same) >= 2 and normalize(same[-1]["result"]) == normalize(same[-2]["result"]):
        return f"loop: {clip(goal, 200)!r} called {calls} times; its last two returns said the same"
    return None


def done_listing(done: list[DoneEntry]) -> str:
    """A level's ``done`` as an Eval prompt shows it: numbered, each sub-goal with its return."""
    if not done:
        return "(nothing yet: no sub-goal has been called)"
    marks = {ThinkonOutcome.FAILED: " [FAILED]", ThinkonOutcome.CUT: " [CUT SHORT]"}
    return "\n".join(
        f"{i}. {clip(d['goal'], 300)}{marks.get(ThinkonOutcome(d['outcome']), '')}\n"
        f"   -> {clip(d['result'], DONE_CHARS)}"
        for i, d in enumerate(done, 1)
    )


def state_of(level: ThinkonLevel, reason: str) -> str:
    """A level's state as its partial result: its goal, why it stopped, what its sub-goals returned."""
    returned = [f"{d['goal']}: {d['result']}" for d in level["done"]]
    lines = [f"Partial result ({reason}) for: {level['goal']}"]
    lines += [f"{i}. {clip(r, 600)}" for i, r in enumerate(returned, 1)] or ["Nothing was returned yet."]
    return clip("\n".join(lines), 4000)


def unwind(run: RunState, reason: str) -> list[str]:
    """Return every level of the chain that has not returned, deepest first, with its state.

    No model call: what a run that cannot go on (a spent budget, the harvest of a
    stopped graph) leaves as the partial result. A level a worker holds is cut too
    (its own write is refused then). Returns the levels returned, in order.
    """
    returned: list[str] = []
    for level in reversed(run.store.thinkon_chain(run.graph_id)):
        level = run.store.thinkon_level(run.graph_id, level["node_id"])  # with the return just appended
        try:
            run.store.thinkon_return(
                run.graph_id,
                level["node_id"],
                state_of(level, reason),
                worker_id=UNWIND_WORKER,
                outcome=ThinkonOutcome.CUT,
                reason=reason,
            )
        except FractalError:  # the graph stopped taking writes meanwhile: what is left stays as it is
            break
        returned.append(level["node_id"])
    return returned


def harvested(nodes: list[NodeRecord], gaps: list[str]) -> HarvestFindings:
    """A chain's findings without a model call.

    The root's return is its synthesis, the result's summary; each sub-goal the
    root's ``done`` holds as returned (the last return of a redone one) is a
    finding; failed and cut levels are among ``gaps`` already (``gaps.gap_rows``).
    """
    root = next((n for n in nodes if n["node_type"] == "question" and n["depth"] == 0), None)
    if root is None:
        return HarvestFindings.model_construct(findings=[], gaps=gaps)
    returned: dict[str, str] = {}  # one finding per sub-goal, its last good return
    for entry in level_state(root["metadata"])["done"]:
        if entry.get("outcome") == ThinkonOutcome.RETURNED:
            returned[normalize(str(entry.get("goal", "")))] = str(entry.get("result", ""))
    return HarvestFindings.model_construct(
        findings=[
            Finding.model_construct(finding=r, confidence="medium", citations=[]) for r in returned.values()
        ],
        gaps=gaps,
    )


class Thinkon:
    """The thinkon strategy's part: one chain, a level's Think or Eval per step, no synthesis cascade."""

    name = "thinkon"
    claims_context = False  # a level reads its chain (store/chain.py), not a branch's context

    def seed(self, run: RunState) -> StepRecord | None:
        """None: the root is the chain's first level, its Think the first step."""
        return None  # no seed phase: the root is the chain's first level, its Think the first step

    def step(self, run: RunState, claim: Claim, worker: str) -> StepRecord:
        """The level's Think or Eval (:func:`advance`)."""
        return advance(run, claim, worker)

    def question_note(self, metadata: Mapping[str, Any]) -> str:
        """Nothing: a level reads its chain."""
        return ""

    def synthesize(self, run: RunState, claim: SynthesisClaim, worker: str) -> SynthesisClaim | None:
        """Refused: a chain's levels return, nothing is synthesized."""
        raise StateError(
            f"graph {run.graph_id} is a thinkon chain: its levels return, nothing is synthesized"
        )

    def leftovers(self, run: RunState, worker: str, given_back: list[str] | None) -> tuple[str, ...]:
        """None: a chain synthesizes nothing."""
        return ()  # a chain synthesizes nothing

    def answer_is_synthesis(self, metadata: Mapping[str, Any]) -> bool:
        """Never: a level's result is its return."""
        return False  # a level's result is its return

    def finish(self, run: RunState, spent: str | None, stopped: str | None) -> None:
        """Unwind the chain (:func:`unwind`), the budget that stopped it as the reason; no model call."""
        # The chain's partial result, no model call: the budget that stopped it is its reason.
        unwind(run, spent or stopped or "harvested before the chain returned")

    def harvested(
        self, run: RunState, nodes: list[NodeRecord], gaps: list[str], spent: str | None
    ) -> HarvestFindings:
        """What the levels returned (:func:`harvested`), no call."""
        return harvested(nodes, gaps)  # what its levels returned, no call

    def findings(self, nodes: list[NodeRecord]) -> list[Finding] | None:
        """None: :meth:`harvested`'s own."""
        return None

    def steps_per_worker(self, run: RunState) -> int:
        """A chain's own limits bound it: :data:`MAX_CHAIN_STEPS`."""
        return MAX_CHAIN_STEPS  # its own limits bound a chain (the module's docstring)


PART = Thinkon()
