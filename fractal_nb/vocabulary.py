"""Vocabulary of the graph: statuses, budgets, checkpoint modes and the transition table.

Every status change in the store is checked against ``GRAPH_TRANSITIONS``,
``QUESTION_TRANSITIONS`` or ``ANSWER_TRANSITIONS`` here (docs/architecture/store.md, rule 6).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, TypeAlias, TypedDict, TypeVar

from .errors import InvalidInputError, InvalidTransitionError


class Intensity(StrEnum):
    """How far an exploration may go (agents, depth, seed questions)."""

    PULSE = "pulse"
    EXPLORE = "explore"
    DEEP = "deep"


class NodeType(StrEnum):
    """A node is a question, an answer to its parent question, or a person's note on a question."""

    QUESTION = "question"
    ANSWER = "answer"
    NOTE = "note"  # a person's evidence or correction (docs/architecture/store.md, "Turns and heads")


class GraphStatus(StrEnum):
    """Lifecycle of a graph; ``completed`` is a head (a new turn reopens it), ``error`` waits for a resume."""

    ACTIVE = "active"
    PAUSED = "paused"
    COMPLETED = "completed"
    ERROR = "error"
    BUDGET_EXHAUSTED = "budget_exhausted"


class CallOutcome(StrEnum):
    """How one model call ended, as its ledger row (``llm_calls.outcome``) says."""

    OK = "ok"
    CACHED = "cached"  # answered from the completion cache: no request, no spend
    ERROR = "error"
    DISCARDED = "discarded"  # paid for, then refused by the store (its write did not land)


class RunOutcome(StrEnum):
    """How a ``run()`` ended (``RunReport.status``); decided in one place, ``engine/outcome.py``."""

    ALL_COMPLETE = "all_complete"  # nothing left to explore, every ready question synthesized
    PAUSED = "paused"  # pause(), a checkpoint or gates
    SYNTHESIS_FAILED = "synthesis_failed"  # syntheses the model failed on every try: paused, retry or harvest
    CONVERGENCE_DETECTED = "convergence_detected"  # the convergence checkpoint found one
    BUDGET_EXHAUSTED = "budget_exhausted"  # a budget, or the circuit breakers with work left
    WAITING_ON_CLAIMS = "waiting_on_claims"  # only claims held elsewhere (another process, an agent)
    MODEL_UNAVAILABLE = "model_unavailable"  # the model is down: paused, resumable
    SEED_FAILED = "seed_failed"  # the seed phase made nothing to work on
    COMPLETED = "completed"  # harvested meanwhile (by another process)
    ERROR = "error"  # every worker crashed, or in error meanwhile (another process recorded a failure)


# A run the model stopped: paused with the reason, resumable (the shell's exit 3, the panel's red line).
MODEL_FAILED: Final = frozenset(
    {RunOutcome.MODEL_UNAVAILABLE, RunOutcome.SEED_FAILED, RunOutcome.SYNTHESIS_FAILED}
)


class NodeStatus(StrEnum):
    """Lifecycle of a question; answers are ``answered`` or ``saturated``."""

    OPEN = "open"  # waiting for a worker
    GATED = "gated"  # behind a depth:N checkpoint, waiting for a person's approval
    CLAIMED = "claimed"  # a worker holds a lease on it
    ANSWERED = "answered"  # has an answer; sub-questions may still be in progress
    SYNTHESIZED = "synthesized"  # terminal: synthesis text in metadata["synthesis"]
    SATURATED = "saturated"  # terminal: no further exploration (reason recorded)
    ERROR = "error"  # processing failed; recovery reopens it


class EdgeType(StrEnum):
    """Tree edges and the two kinds of cross-branch link."""

    PARENT_CHILD = "parent_child"
    CONVERGENCE = "convergence"
    CONTRADICTION = "contradiction"


class SaturationReason(StrEnum):
    """Why a branch needs no further exploration: the seed skill's six plus a person's prune."""

    SEMANTIC_OVERLAP = "semantic_overlap"
    DERIVABLE = "derivable"
    ACTIONABLE = "actionable"
    HOLLOW_QUESTIONS = "hollow_questions"
    BUDGET_EXHAUSTED = "budget_exhausted"
    ERROR = "error"
    PRUNED = "pruned"
    SUPERSEDED = "superseded"  # replaced by a later turn's decomposition (kept, not current)
    BLOCKED = "blocked"  # the worker could not answer it: the blocker and alternatives in metadata["blocked"]


class TurnKind(StrEnum):
    """What opened a turn (docs/architecture/store.md, "Turns and heads"); the seed is turn 1."""

    SEED = "seed"
    ASK = "ask"
    DEEPEN = "deepen"
    WIDEN = "widen"
    REDECOMPOSE = "redecompose"
    NOTE = "note"
    ATTACH = "attach"
    BUDGET = "budget"  # a new budget for a graph its budget stopped: budget_exhausted is terminal for resume


class ClaimKind(StrEnum):
    """What a claim of an answer or a synthesis is.

    See docs/architecture/engine.md, "Facts, assumptions, unknowns".

    A fact rests on a stated support; an assumption is taken without one; an
    unknown is what the answer could not settle (each unknown is a gap).
    """

    FACT = "fact"
    ASSUMPTION = "assumption"
    UNKNOWN = "unknown"


class Strategy(StrEnum):
    """How a graph thinks (docs/architecture/engine.md, "Tracks", "Thinkon").

    ``fractal``: sub-questions all at once, synthesized bottom-up; ``tracks``:
    at least three orthogonal tracks worked in parallel, each with cited findings,
    aggregated into a synthesis object (unified, nuances, open questions, confidence);
    ``thinkon``: one chain, depth first, each level planning, calling one sub-goal at a
    time and judging what came back (docs/architecture/engine.md, "Thinkon"); ``single``: one
    model call answers the question, the baseline ``compare()`` measures the others by.
    """

    FRACTAL = "fractal"
    TRACKS = "tracks"
    THINKON = "thinkon"
    SINGLE = "single"


DEFAULT_STRATEGY: Final = Strategy.FRACTAL
"""The way a graph thinks when its metadata names none: kept and shown only when another."""


class Preset(StrEnum):
    """A tracks graph's fixed track set, seed 003's (docs/architecture/engine.md, "Tracks": presets).

    ``architecture``: ArchitectureUnderstanding (services, layers, errors, config);
    ``feature``: FeatureInvestigation (models, ui-state, api, errors). Kept as the
    graph's metadata ``preset``; it implies the tracks strategy.
    """

    ARCHITECTURE = "architecture"
    FEATURE = "feature"


class Skill(StrEnum):
    """How a track gathers its evidence over a codebase, run by the engine (engine/skills.py)."""

    PATTERN_SEARCH = "PatternSearch"
    DEPENDENCY_TRACE = "DependencyTrace"
    IMPLEMENTATION_SCAN = "ImplementationScan"
    BOUNDARY_EXPLORE = "BoundaryExplore"


class ExitReason(StrEnum):
    """Why a worker left the worker loop (``WorkerReport.exit_reason``; engine/dispatcher.py)."""

    GRAPH_DONE = "graph_done"  # no question left to claim, and nothing else here to wait for
    NO_WORK = "no_work"  # nothing to claim and nothing in flight here
    NO_WORK_AFTER_RETRIES = "no_work_after_retries"  # nothing came after its backoff tries
    PAUSED = "paused"  # a pause, or a convergence checkpoint
    CYCLE = "cycle"  # the interactive checkpoint: one node, then the person
    CIRCUIT_BREAKER = "circuit_breaker"  # its steps reached the strategy's bound
    BUDGET = "budget"  # a budget of engine/limits.py was reached
    MODEL_UNAVAILABLE = "model_unavailable"  # the model could not be reached, or failed every call
    STORE_UNREACHABLE = "store_unreachable"  # the store's server is gone
    CRASHED = "crashed"  # a bug: its claims went back, the error in its report's detail; the others go on


class GapKind(StrEnum):
    """What kind of gap a gap row is (engine/gaps.py ``gap_rows``; docs/notebook.md, "Gaps")."""

    FAILED = "failed"
    PRUNED = "pruned"
    GATED = "gated"
    HELD = "held"  # a question to the person
    BLOCKED = "blocked"
    UNEXPLORED = "unexplored"  # a budget cut it
    WAITING = "waiting"  # open or claimed: work not done yet
    SYNTHESIS_FAILED = "synthesis_failed"
    UNKNOWN = "unknown"  # an unknown a claim names


class CheckpointKind(StrEnum):
    """The kind of a :class:`CheckpointMode`; ``depth`` carries its N."""

    AUTONOMOUS = "autonomous"
    CONVERGENCE = "convergence"
    INTERACTIVE = "interactive"
    DEPTH = "depth"


def is_chain(strategy: str) -> bool:
    """Whether graphs of ``strategy`` are one chain of levels (thinkon).

    A chain takes no turns, and a failed level stays its failed return: the store's rules
    (``GraphRow.chained``) and the faces, before the model is paid, both ask this.

    >>> is_chain("thinkon"), is_chain("fractal")
    (True, False)
    """
    return strategy == Strategy.THINKON


class ThinkonPhase(StrEnum):
    """What a chain question (the thinkon strategy) waits for next: its Think, or its Eval."""

    THINK = "think"  # a new level: Think returns its result or writes its plan (``todo``)
    EVAL = "eval"  # a plan is written: Eval calls the next sub-goal or returns the level's result
    RETURNED = "returned"  # the level returned (its result is its synthesis)


class ThinkonOutcome(StrEnum):
    """How a chain level returned to its parent's ``done`` (docs/architecture/engine.md, "Thinkon")."""

    RETURNED = "returned"  # Think or Eval returned the level's result
    FAILED = "failed"  # Think or Eval gave no valid reply (after the correction): this branch ends
    CUT = "cut"  # a limit (depth, repeats, tokens, time) returned the level's state as it was


class CitationStatus(StrEnum):
    """What the store found when it checked a citation at write time (store/citations.py).

    ``verified``: the source is one of the graph's, the lines exist and the quote
    is found in them (whitespace-normalized); each other value names the first check that failed.
    """

    VERIFIED = "verified"
    NO_SUCH_SOURCE = "no_such_source"
    NO_SUCH_LINES = "no_such_lines"
    MISQUOTED = "misquoted"


class Support(StrEnum):
    """Whether a finding or an answer rests on checked evidence.

    ``supported``: at least one citation verified and none failed; ``unsupported``:
    its citations failed or are missing while the graph has sources (kept, shown as
    such, never part of a unified answer or a finding of the result); ``no_sources``:
    the graph has no sources, so nothing could be cited.
    """

    SUPPORTED = "supported"
    UNSUPPORTED = "unsupported"
    NO_SOURCES = "no_sources"


TOOL_NAMES = ("search_sources", "read_source", "glob_sources", "grep_sources")
"""The source tools a model may call before it answers (engine/evidence_tools.py); the ledger logs each
call as role ``tool:<name>``, a caller's own tool's too (engine/caller_tools.py), and ``tool:unknown``
one the model made up (docs/architecture/engine.md, "Tool calls")."""
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What a tool's name may be (OpenAI's rule for a function's name): ``tool:<name>`` is its ledger role."""


class HaltKind(StrEnum):
    """Why a worker stopped on a question instead of answering it (docs/architecture/engine.md, "Halts").

    ``ambiguity``: the question forks on a choice the person must make (options
    with their tradeoffs); ``confusion``: it cannot be understood as asked (a
    clarifying question). Both hold the question ``gated`` until the person
    answers (``choose``). ``blocked``: it cannot be answered; it is saturated
    with the blocker and suggested alternatives, a gap.
    """

    AMBIGUITY = "ambiguity"
    CONFUSION = "confusion"
    BLOCKED = "blocked"


class WeakReason(StrEnum):
    """Why a synthesis is weak: what one of the sub-questions it was built on is.

    ``failed`` (an error, or saturated as one), ``budget_cut`` (saturated when a
    budget left it unexplored), ``joined`` (its synthesis joined without the model),
    ``weak`` (its own synthesis weak: the mark goes up the chain), ``blocked``
    (the worker could not answer it: a halt, docs/architecture/engine.md "Halts").
    A track's own
    synthesis (docs/architecture/engine.md, "Tracks") may be marked ``uncited`` (the graph
    has sources and none of its findings' citations checks) or ``off_track`` (its
    conclusions miss the track's question, asked twice).
    """

    FAILED = "failed"
    BUDGET_CUT = "budget_cut"
    JOINED = "joined"
    WEAK = "weak"
    BLOCKED = "blocked"
    UNCITED = "uncited"
    OFF_TRACK = "off_track"


def weakness(status: str, reason: str | None, metadata: Mapping[str, Any]) -> WeakReason | None:
    """What makes a sub-question unsound ground for the synthesis above it; None when it is sound.

    A pruned question or one a worker saturated (settled) is sound: a person's or
    the model's judgement, not a failure.

    >>> weakness("saturated", "error", {}), weakness("synthesized", None, {"weak": [{}]})
    (<WeakReason.FAILED: 'failed'>, <WeakReason.WEAK: 'weak'>)
    >>> weakness("saturated", "pruned", {}) is None
    True
    """
    if status == NodeStatus.ERROR or (status == NodeStatus.SATURATED and reason == SaturationReason.ERROR):
        return WeakReason.FAILED
    if status == NodeStatus.SATURATED and reason == SaturationReason.BUDGET_EXHAUSTED:
        return WeakReason.BUDGET_CUT
    if status == NodeStatus.SATURATED and reason == SaturationReason.BLOCKED:
        return WeakReason.BLOCKED
    if metadata.get("synthesis_failed") is True:
        return WeakReason.JOINED
    if metadata.get("weak"):
        return WeakReason.WEAK
    return None


TERMINAL_GRAPH = frozenset({GraphStatus.COMPLETED, GraphStatus.ERROR})
"""Statuses no worker, view or server resumes on its own (``error`` only by an explicit resume)."""
DONE_QUESTION = frozenset({NodeStatus.SYNTHESIZED, NodeStatus.SATURATED})
UNEXPLORED = {"budget_exhausted": True, "unexplored_reason": "budget limit reached"}
"""The reference's marks on a question a budget left unexplored.

See docs/architecture/engine.md, "The worker protocol we follow": the error table.
"""
PENDING_QUESTION = (NodeStatus.OPEN, NodeStatus.CLAIMED, NodeStatus.GATED)  # work not done yet, in this order


def pending_counts(nodes: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many questions of ``nodes`` (snapshot dicts) are open, claimed and gated."""
    counts = {status.value: 0 for status in PENDING_QUESTION}
    for node in nodes:
        if node["node_type"] == NodeType.QUESTION and node["status"] in counts:
            counts[node["status"]] += 1
    return counts


GRAPH_TRANSITIONS: dict[GraphStatus, frozenset[GraphStatus]] = {
    GraphStatus.ACTIVE: frozenset(
        {
            GraphStatus.PAUSED,
            GraphStatus.COMPLETED,
            GraphStatus.ERROR,
            GraphStatus.BUDGET_EXHAUSTED,
        }
    ),
    GraphStatus.PAUSED: frozenset({GraphStatus.ACTIVE, GraphStatus.COMPLETED}),
    GraphStatus.BUDGET_EXHAUSTED: frozenset({GraphStatus.ACTIVE, GraphStatus.COMPLETED}),
    # A new turn (store/turns.py Turns.open_turn, the only way) reopens a completed graph: a head, not a tomb.
    GraphStatus.COMPLETED: frozenset({GraphStatus.ACTIVE}),
    # An engine failure stopped it; only an explicit resume (run(resume=True)) moves it on.
    GraphStatus.ERROR: frozenset({GraphStatus.ACTIVE}),
}

_S = NodeStatus
QUESTION_TRANSITIONS: dict[NodeStatus, frozenset[NodeStatus]] = {
    _S.OPEN: frozenset({_S.CLAIMED, _S.ANSWERED, _S.SATURATED, _S.ERROR}),
    # A gated question is not being worked on, so it cannot fail; allowing gated -> error
    # would let error -> open (recovery) slip past the gate without an approval.
    _S.GATED: frozenset({_S.OPEN, _S.SATURATED}),
    # claimed -> claimed: another worker takes over a lease that ran out; claimed -> gated: the worker
    # held it on a question to the person (a halt: docs/architecture/engine.md, "Halts"), opened by a choice.
    _S.CLAIMED: frozenset({_S.CLAIMED, _S.ANSWERED, _S.OPEN, _S.SATURATED, _S.ERROR, _S.GATED}),
    _S.ANSWERED: frozenset({_S.SYNTHESIZED, _S.SATURATED, _S.ERROR}),
    _S.ERROR: frozenset({_S.OPEN, _S.SATURATED}),
    # A question added under a synthesized question's answer reopens it (and its synthesized ancestors).
    _S.SYNTHESIZED: frozenset({_S.ANSWERED}),
    # saturated -> open: a question saturated as failed, reopened by recovery (recover_stuck with
    # include_errors); the store refuses it for every other saturation reason.
    _S.SATURATED: frozenset({_S.OPEN}),
}
# Moves only a turn makes (store/reopening.py: redecompose, deepen, note), checked with the table above:
# a question answered again from scratch goes back to open (its old answer superseded), and a
# question a note lands on (its verdict a saturation) is synthesized again from answered.
TURN_TRANSITIONS: dict[NodeStatus, frozenset[NodeStatus]] = {
    _S.ANSWERED: frozenset({_S.OPEN}),
    _S.SYNTHESIZED: frozenset({_S.OPEN}),
    _S.SATURATED: frozenset({_S.OPEN, _S.ANSWERED}),
}
# The one move only a thinkon chain makes (store/chain.py): a level waits answered while its sub-goal
# is solved, and opens again for its next Eval when the sub-goal returns.
CHAIN_TRANSITIONS: dict[NodeStatus, frozenset[NodeStatus]] = {_S.ANSWERED: frozenset({_S.OPEN})}
# An answer is answered from the start; pruning or saturating it is its one move.
ANSWER_TRANSITIONS: dict[NodeStatus, frozenset[NodeStatus]] = {
    _S.ANSWERED: frozenset({_S.SATURATED}),
    _S.SATURATED: frozenset(),
}
# The questions an answer or a sub-question may be added under (a synthesized one is
# reopened only by a new sub-question under its answer, see the store's add_node).
TAKES_CHILDREN = frozenset({_S.OPEN, _S.CLAIMED, _S.ANSWERED})


def check_graph_transition(graph_id: str, current: str, target: str) -> None:
    """Raise unless the graph may move from ``current`` to ``target``."""
    allowed = GRAPH_TRANSITIONS[GraphStatus(current)]
    current, target = str(current), str(target)
    if GraphStatus(target) not in allowed:
        raise InvalidTransitionError(
            f"graph {graph_id} cannot go from {current!r} to {target!r}; "
            f"from {current!r} it may go to: {_listing(allowed)}",
            graph_id=graph_id,
        )


def check_node_transition(
    node_id: str, node_type: str, current: str, target: str, *, turn: bool = False, chain: bool = False
) -> None:
    """Raise unless the node (a question, an answer or a note) may move from ``current`` to ``target``.

    ``turn``: the move is a turn's (``TURN_TRANSITIONS`` allowed too; store/reopening.py only).
    ``chain``: the move is a thinkon chain's (``CHAIN_TRANSITIONS`` allowed too; store/chain.py only).
    """
    table = QUESTION_TRANSITIONS if node_type == NodeType.QUESTION else ANSWER_TRANSITIONS
    allowed = table[NodeStatus(current)]
    if turn and node_type == NodeType.QUESTION:
        allowed = allowed | TURN_TRANSITIONS.get(NodeStatus(current), frozenset())
    if chain and node_type == NodeType.QUESTION:
        allowed = allowed | CHAIN_TRANSITIONS.get(NodeStatus(current), frozenset())
    current, target = str(current), str(target)
    if NodeStatus(target) not in allowed:
        raise InvalidTransitionError(
            f"{node_type} {node_id} is {current!r} and cannot become {target!r}; "
            f"from {current!r} it may become: {_listing(allowed)}",
            node_id=node_id,
        )


def _listing(values: frozenset[StrEnum] | list[str]) -> str:
    names = sorted(str(v) for v in values)
    return ", ".join(names) if names else "nothing (terminal)"


class BudgetRecord(TypedDict):
    """An intensity's ceilings as tool results carry them."""

    max_agents: int
    max_depth: int
    seed_questions: list[int]


@dataclass(frozen=True)
class Budget:
    """Hard ceilings of one intensity: workers, question levels, seed-question range."""

    max_agents: int
    max_depth: int
    seed_questions: tuple[int, int]

    def to_dict(self) -> BudgetRecord:
        """JSON-ready form used in tool results."""
        return {
            "max_agents": self.max_agents,
            "max_depth": self.max_depth,
            "seed_questions": list(self.seed_questions),
        }


BUDGETS: dict[Intensity, Budget] = {
    Intensity.PULSE: Budget(max_agents=3, max_depth=2, seed_questions=(3, 4)),
    Intensity.EXPLORE: Budget(max_agents=8, max_depth=4, seed_questions=(5, 7)),
    Intensity.DEEP: Budget(max_agents=15, max_depth=6, seed_questions=(8, 12)),
}


# Limits on what the store takes (docs/store.md, "Limits"): a refused value changes nothing.
MAX_TEXT_CHARS = 100_000  # a question, answer, synthesis or seed
MAX_METADATA_BYTES = 1_000_000  # a node's or graph's metadata as JSON
MAX_METADATA_DEPTH = 32  # nesting of objects and lists in metadata
NODE_ID_PATTERN = "n-[0-9a-f]{16}"  # store/base.py new_id("n"): how a node id is found in text
MAX_CALL_TOKENS = 10_000_000  # prompt or completion tokens of one call: far past any model's context
MAX_SUB_QUESTIONS = 12  # sub-questions one answer asks (a model proposing more is cut to these)
MAX_CHILDREN = 100  # current children of one node: answers, sub-questions, notes (issue 37)

E = TypeVar("E", bound=StrEnum)


def parse_choice(enum: type[E], value: object, what: str) -> E:
    """Return ``value`` as a member of ``enum`` or raise an error listing the valid values."""
    if isinstance(value, str):
        try:
            return enum(value)
        except ValueError:
            pass
    raise InvalidInputError(f"invalid {what} {value!r}; valid values: {_listing([m.value for m in enum])}")


@dataclass(frozen=True)
class CheckpointMode:
    """``autonomous``, ``convergence``, ``interactive`` or ``depth:N`` (gates every N levels)."""

    kind: CheckpointKind
    every: int | None = None

    VALID = "autonomous, convergence, interactive, depth:N (N a positive integer)"

    @classmethod
    def parse(cls, value: object, intensity: Intensity | str | None = None) -> CheckpointMode:
        """Parse a checkpoint string, refusing anything outside the four modes.

        With ``intensity``, ``depth:N`` must also gate a level that exists: N below
        the intensity's ``max_depth`` (questions sit at depths 0 to max_depth - 1).
        """
        if isinstance(value, str):
            if value in (CheckpointKind.AUTONOMOUS, CheckpointKind.CONVERGENCE, CheckpointKind.INTERACTIVE):
                return cls(CheckpointKind(value))
            match = re.fullmatch(r"depth:([0-9]{1,9})", value)
            if match and int(match.group(1)) >= 1:
                mode = cls(CheckpointKind.DEPTH, int(match.group(1)))
                if intensity is not None:
                    mode.check_depth(Intensity(intensity))
                return mode
        raise InvalidInputError(f"invalid checkpoint_mode {value!r}; valid values: {cls.VALID}")

    def check_depth(self, intensity: Intensity) -> None:
        """Refuse ``depth:N`` when no question of ``intensity`` could sit at depth N."""
        deepest = BUDGETS[intensity].max_depth - 1
        if self.every is not None and self.every > deepest:
            raise InvalidInputError(
                f"checkpoint_mode {str(self)!r} would never gate: intensity {intensity.value!r} has "
                f"questions at depths 0-{deepest}, so N may be 1-{deepest}"
            )

    def gates(self, depth: int) -> bool:
        """Whether a question created at ``depth`` waits behind a gate."""
        return self.every is not None and depth > 0 and depth % self.every == 0

    def __str__(self) -> str:
        return f"depth:{self.every}" if self.kind == CheckpointKind.DEPTH else self.kind.value


TRACK_KEY = "track"
"""The metadata key of a track question (the tracks strategy): its name, focus, approach and deliverable."""


def track_of(metadata: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The track a question is (its metadata's :data:`TRACK_KEY`), or None for a question that is no track.

    >>> track_of({"track": {"name": "errors"}}), track_of({"synthesis": "..."})
    ({'name': 'errors'}, None)
    """
    track = metadata.get(TRACK_KEY)
    return track if isinstance(track, Mapping) else None


def track_name(metadata: Mapping[str, Any]) -> str | None:
    """A track question's name, None for any other question (or a track without one)."""
    track = track_of(metadata)
    name = track.get("name") if track is not None else None
    return str(name) if name else None


JsonArgument: TypeAlias = dict[str, Any] | str
"""A JSON object, or its text (what an MCP client sends): :func:`parse_metadata` reads either."""


def parse_metadata(value: object, what: str = "metadata") -> dict[str, Any]:
    """Accept a dict or a JSON-object string; refuse anything else (docs/architecture/store.md, rule 7).

    The result is a deep copy that survives a JSON round trip, so what is stored
    is exactly what a later read returns.
    """
    if value is None:
        return {}
    if isinstance(value, str):
        if len(value) > MAX_METADATA_BYTES:
            raise InvalidInputError(
                f"{what} is {len(value):,} characters of JSON; the limit is {MAX_METADATA_BYTES:,}"
            )
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{what} is not valid JSON ({exc.msg}); send a JSON object") from None
        except RecursionError:
            raise InvalidInputError(
                f"{what} is nested too deeply; the limit is {MAX_METADATA_DEPTH} levels"
            ) from None
    if not isinstance(value, dict):
        raise InvalidInputError(f"{what} must be a JSON object (a dict), not {type(value).__name__}")
    if any(not isinstance(key, str) for key in value):
        raise InvalidInputError(f"{what} keys must be strings")
    _check_tree(value, what)
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{what} is not JSON-serialisable: {exc}") from None
    if len(text) > MAX_METADATA_BYTES:
        raise InvalidInputError(
            f"{what} is {len(text):,} characters as JSON; the limit is {MAX_METADATA_BYTES:,}"
        )
    decoded: dict[str, Any] = json.loads(text)
    return decoded


def _check_tree(value: dict[str, Any], what: str) -> None:
    """Refuse metadata nested too deeply, or with a NUL character in a key or a string.

    Deeper than ``MAX_METADATA_DEPTH`` levels; NUL as text fields refuse it (issue 37).
    Walked without recursion.
    """
    stack: list[tuple[object, int, tuple[object, ...]]] = [(value, 1, ())]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise InvalidInputError(
                    f"{what}{_path(path)} contains a NUL character (\\x00); send text without it"
                )
            continue
        if depth > MAX_METADATA_DEPTH:
            raise InvalidInputError(
                f"{what} is nested more than {MAX_METADATA_DEPTH} levels deep; flatten it"
            )
        if isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and "\x00" in key:
                    raise InvalidInputError(
                        f"{what}{_path(path)} has a key with a NUL character (\\x00), {key!r:.60}; "
                        "send text without it"
                    )
                if isinstance(child, str | dict | list | tuple):
                    stack.append((child, depth + 1, (*path, key)))
        elif isinstance(item, list | tuple):
            stack.extend(
                (child, depth + 1, (*path, i))
                for i, child in enumerate(item)
                if isinstance(child, str | dict | list | tuple)
            )


def _path(path: tuple[object, ...]) -> str:
    """Where a value sits in metadata, as a subscript: ``['notes'][2]`` (empty at the top)."""
    return "".join(f"[{step!r}]" for step in path)
