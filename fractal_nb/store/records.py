"""What the store returns: the graph contract's results as TypedDicts.

Each is a plain JSON-ready dict at run time (the MCP server sends it as it is),
typed here so the engine, the views and a second store backend agree on its keys
(docs/architecture/store.md, "The graph contract"). ``NotRequired`` keys are present
only in one of a result's shapes (a claim that found work, say).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict

from ..vocabulary import BudgetRecord


class NodeFields(TypedDict):
    """What every form of a node carries: its place in the tree, its text and its status."""

    node_id: str
    parent_id: str | None
    node_type: str
    text: str
    depth: int
    status: str
    status_reason: str | None
    owner: str | None
    seq: int


class NodeRecord(NodeFields):
    """A node: a question or an answer, with its status and metadata (times as ISO-8601 UTC)."""

    graph_id: str
    inherited_from: str | None
    branch_id: str | None
    superseded_turn: int | None  # the turn that replaced it (docs/architecture/store.md, "Turns and heads")
    metadata: dict[str, Any]
    claimed_at: str | None
    created_at: str | None
    updated_at: str | None


class EdgeRecord(TypedDict):
    """A tree edge (parent_child) or a cross-branch link (convergence, contradiction)."""

    from_node: str
    to_node: str
    edge_type: str
    metadata: dict[str, Any]
    created_at: str | None


class GraphRecord(TypedDict):
    """A graph's own fields, without its nodes."""

    graph_id: str
    seed: str
    intensity: str
    checkpoint_mode: str
    budget: BudgetRecord
    status: str
    status_reason: str | None
    root_node_id: str
    metadata: dict[str, Any]
    created_at: str | None
    updated_at: str | None


class Snapshot(GraphRecord):
    """The whole graph: its fields, every node and edge in creation order."""

    nodes: list[NodeRecord]
    edges: list[EdgeRecord]


class SnapshotAt(Snapshot):
    """The graph as it was at an event (store/replay.py): a snapshot and the event it is at."""

    event_id: int


class Forked(TypedDict):
    """``fork``: the new graph, where it came from, and the event it logged."""

    graph_id: str
    root_node_id: str
    forked_from: str
    forked_at: int
    nodes: int
    event_id: int


class LineageRecord(TypedDict):
    """One graph of a file's family of forks: where it came from (None: an original)."""

    graph_id: str
    forked_from: str | None
    forked_at: int | None
    seed: str
    status: str
    created: str | None


class Claim(TypedDict):
    """``claim_work``'s result: the claimed question, or ``node_id`` None with whether the graph is done."""

    node_id: str | None
    graph_done: bool
    graph_status: str
    graph_id: NotRequired[str]
    text: NotRequired[str]
    depth: NotRequired[int]
    parent_id: NotRequired[str | None]
    metadata: NotRequired[dict[str, Any]]
    lease_s: NotRequired[float]
    context: NotRequired[QuestionContext]  # claim_work(with_context=True)
    busy_workers: NotRequired[
        int
    ]  # nothing claimed: this many other workers hold the agent ceiling (rule 17)


class SynthesisClaim(TypedDict):
    """``claim_synthesis``'s result: the question whose synthesis is held, or ``node_id`` None."""

    node_id: str | None
    graph_id: str
    graph_status: str
    text: NotRequired[str]
    depth: NotRequired[int]
    lease_s: NotRequired[float]
    inputs: NotRequired[SynthesisInputs]  # with_inputs=True
    busy_workers: NotRequired[
        int
    ]  # nothing claimed: this many other workers hold the agent ceiling (rule 17)


class AncestorRecord(TypedDict):
    """One question above the claimed one, with its answer."""

    node_id: str
    depth: int
    question: str
    answer: str | None


class QuestionBrief(TypedDict):
    """A sibling question, or a synthesized one of the branch."""

    node_id: str
    text: str
    status: str
    synthesis: str | None


class Candidate(TypedDict):
    """An answer the worker may link its own to."""

    node_id: str
    text: str
    relation: str  # "sibling" or "other_branch"
    depth: int


class QuestionContext(TypedDict):
    """``get_context``: what a worker reads to answer a claimed question, each part capped."""

    graph_id: str
    seed: str
    node: NodeRecord
    ancestry: list[AncestorRecord]
    siblings: list[QuestionBrief]
    syntheses: list[QuestionBrief]
    candidates: list[Candidate]
    max_depth: int  # questions may sit above this depth only (a deepened branch's, store/turn_requests.py)


class ClaimRecord(TypedDict):
    """A claim as ``metadata["claims"]`` holds it.

    See docs/architecture/engine.md, "Facts, assumptions, unknowns".

    ``kind`` is a :class:`~fractal_nb.vocabulary.ClaimKind`; ``support`` what a fact rests
    on ("" for the others). A synthesis's claims name ``source``: the node whose
    claim it carries up (None for one only the synthesis states).
    """

    kind: str
    text: str
    support: str
    source: NotRequired[str | None]


class WeakMark(TypedDict):
    """One reason a synthesis is weak (``metadata["weak"]``): a sub-question and what it is."""

    node_id: str
    reason: str  # a WeakReason: failed, budget_cut, joined, weak


class NoteBrief(TypedDict):
    """A person's note: its id and text (no claims: a note is the person's evidence as written)."""

    node_id: str
    text: str


class AnswerBrief(TypedDict):
    """An answer's id, text and claims."""

    node_id: str
    text: str
    claims: list[ClaimRecord]


class SubQuestionBrief(QuestionBrief):
    """A sub-question with its synthesis (and the claims it carries), or why it has none."""

    status_reason: str | None
    claims: list[ClaimRecord]
    blocked: NotRequired[BlockedRecord]  # a blocked question's blocker and alternatives ("Halts")


class SynthesisInputs(TypedDict):
    """``get_synthesis_inputs``: a question, its answers and its sub-questions."""

    graph_id: str
    node: NodeRecord
    answers: list[AnswerBrief]
    sub_questions: list[SubQuestionBrief]
    notes: list[NoteBrief]  # a person's notes on the question (store/turn_requests.py), in creation order


class AddedNode(TypedDict):
    """A node just added."""

    node_id: str
    graph_id: str
    parent_id: str | None
    depth: int
    node_type: str
    status: str


class RepeatedQuestion(TypedDict):
    """A sub-question left out because the graph asks it already (``asked_at``; None: twice in one answer)."""

    text: str
    asked_at: str | None


class AnswerWritten(TypedDict):
    """``add_answer``: the answer, its sub-questions and the question's status after it."""

    answer: AddedNode
    sub_questions: list[AddedNode]
    status: str
    status_reason: str | None


class AnswerSubmitted(AnswerWritten):
    """``submit_answer``: :class:`AnswerWritten` plus links made, repeats left out, the boundary question."""

    edges_created: int
    repeated: list[RepeatedQuestion]
    boundary: str | None
    next_synthesis: NotRequired[SynthesisClaim]  # with claim_next=True: the cascade's first step


class ReadyList(TypedDict):
    """``get_ready_to_synthesize``: answered questions whose sub-questions are done, deepest first."""

    graph_id: str
    ready_nodes: list[NodeRecord]
    count: int


class ClaimableList(TypedDict):
    """``get_claimable_work``: what ``claim_work`` would hand out, in order."""

    graph_id: str
    claimable: list[NodeRecord]
    count: int


class OpenQuestions(TypedDict):
    """``get_open_questions``."""

    graph_id: str
    open_questions: list[NodeRecord]
    count: int


class GraphList(TypedDict):
    """``list_graphs``: every graph, oldest first."""

    graphs: list[GraphRecord]
    count: int


class Recovered(TypedDict):
    """``recover_stuck``: the questions reopened."""

    graph_id: str
    recovered: list[str]
    count: int


class Heartbeat(TypedDict):
    """``heartbeat``: how many claims were renewed, and the lease they hold."""

    holder_id: str
    renewed: int
    lease_s: float


class ClaimReleased(TypedDict):
    """``release_claim``: the question's status after it, and its failed attempts."""

    node_id: str
    status: str
    failures: int


class SynthesisReleased(TypedDict):
    """``release_synthesis``: whether this worker held it."""

    node_id: str
    released: bool


class Synthesized(TypedDict):
    """``synthesize_node`` / ``submit_synthesis``."""

    node_id: str
    status: str
    # submit_synthesis with claim_next=True: the cascade's next step
    next_synthesis: NotRequired[SynthesisClaim]


class StatusChanged(TypedDict):
    """``update_graph_status``."""

    graph_id: str
    status: str
    previous_status: str


class NodeUpdated(TypedDict):
    """``update_node``: the merged metadata and the links it made."""

    node_id: str
    metadata: dict[str, Any]
    edges_created: int


class Saturated(TypedDict):
    """``mark_saturated`` / ``prune_branch``: the node and the questions below that inherited it."""

    node_id: str
    status: str
    reason: str
    cascaded: list[str]


class CallRow(TypedDict):
    """One model call as the ledger (``llm_calls``) keeps it: made by engine/calls.py, checked by LLMLog."""

    graph_id: str
    node_id: str | None
    worker: str | None
    role: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    tokens_estimated: bool
    attempts: int
    corrections: int
    queue_s: float
    latency_s: float
    mode: str | None
    outcome: str  # a CallOutcome
    error: str | None
    retry_sampling: str | None
    refused_usage: str | None  # JSON: usage figures the server reported that were not taken (issue 37)


# The call log a write lands with it: the engine's CallRows, or an outside client's objects (checked).
CallRows = Sequence[Mapping[str, Any]]


class ModelSpend(TypedDict):
    """``llm_spend``: one model's calls and tokens in a graph."""

    model: str
    calls: int
    prompt_tokens: int
    completion_tokens: int


class FeedNode(NodeFields):
    """A node as the live view's feed carries it (synthesis and failure marks pulled out of the metadata)."""

    synthesis: str | None
    last_error: str | None  # the last failed attempt's error (metadata ``last_error``)
    synthesis_failed: bool  # its synthesis was joined from sub-findings without the model
    weak: list[WeakMark]  # why its synthesis is weak (metadata ``weak``), [] when it is sound
    support: str | None  # an answer's support (metadata ``support``, a Support value), else None
    track: str | None  # a track question's name (metadata ``track.name``), else None


class FeedLink(TypedDict):
    """A cross-branch link as the feed carries it."""

    from_node: str
    to_node: str
    edge_type: str
    metadata: dict[str, Any]


class Changes(TypedDict):
    """``get_changes``: what changed after an event id, read at one moment (the live view's feed)."""

    graph_id: str
    status: str
    root_node_id: str
    since: int
    last_event_id: int
    nodes: list[FeedNode]
    links: list[FeedLink]


class DoneEntry(TypedDict):
    """One return in a thinkon level's ``done``: the sub-goal called, what it returned and how."""

    node_id: str  # the sub-goal's question
    goal: str
    result: str
    outcome: str  # a ThinkonOutcome value


class ThinkonLevel(TypedDict):
    """A thinkon level, ``S = {goal, parent, todo, done}`` (docs/architecture/engine.md, "Thinkon")."""

    node_id: str
    graph_id: str
    goal: str
    parent_id: str | None  # the level above (None: the root)
    parent_goal: str | None
    depth: int
    status: str
    phase: str  # a ThinkonPhase value
    todo: str | None  # the plan, written only by Think
    spent_s: float  # the running time of its steps and its returned sub-goals (store/chain.py)
    done: list[DoneEntry]  # every sub-goal's return, in order


class QuestionItems(TypedDict):
    """``get_question_items``: a whole graph as the live view's question items, JSON written by DuckDB.

    ``questions`` and ``links`` are JSON arrays (text) of the items views/question_tree.py
    types as ``QuestionItem`` and ``LinkItem``; ``counts`` is what ``QuestionTree.counts``
    gives for the same graph (store/question_items.py).
    """

    graph_id: str
    status: str
    last_event_id: int
    questions: str
    question_count: int
    links: str
    link_count: int
    counts: dict[str, int]
    cited: bool  # some answer carries a support value or some question a track


class TurnRequest(TypedDict):
    """One steering request of a turn (store/turns.py): what it asked and the nodes it created or reopened."""

    turn: int
    kind: str  # vocabulary.TurnKind
    arguments: dict[str, Any]
    created: list[str]
    reopened: list[str]


class TurnRecord(TypedDict):
    """A turn, and its head once it ended (docs/architecture/store.md, "Turns and heads")."""

    graph_id: str
    turn: int
    kind: str
    requests: list[TurnRequest]
    started_event: int
    head_event: int | None  # None: the open turn
    status: str | None  # the graph's status at the head
    root_synthesis: str | None
    counts: dict[str, int]
    tokens: int | None
    cost: float | None
    created_at: float
    ended_at: float | None


class SourceRecord(TypedDict):
    """A source of a graph: file, snippet, column or table.

    See docs/architecture/store.md, "Sources and citations".
    """

    graph_id: str
    source_id: str  # stable: the same name and content give the same id
    name: str  # what citations name: a file's path relative to where it was added, or a label
    kind: str  # file | snippet | dataframe | table
    location: str | None  # a file's absolute path (NULL for a snippet, a column or a table's rows)
    content_hash: str  # sha256 of the text as stored
    line_count: int
    chunk_count: int
    added_at: str | None


class ChunkRecord(TypedDict):
    """A span of a source's lines, the unit of retrieval; ids are stable (source id and line span)."""

    chunk_id: str
    source_id: str
    source: str  # the source's name
    line_start: int  # 1-based, inclusive
    line_end: int
    text: str


class CitationRecord(TypedDict):
    """A citation as stored, with what the store's check found (``status``, a CitationStatus)."""

    source: str
    line_start: int
    line_end: int
    quote: str
    status: str
    detail: NotRequired[str]  # why a check failed, or that the file on disk changed since it was added


class SourceText(TypedDict):
    """A text to add as a source (``add_sources``): the facade's file, snippet, column or table."""

    name: str  # what citations will name; one content per name in a graph
    kind: str  # file | snippet | dataframe | table
    location: str | None  # a file's absolute path (None: not a file)
    text: str


class SourceLines(TypedDict):
    """``read_source``: a span of a source's lines as stored (1-based, inclusive)."""

    source: str
    line_start: int
    line_end: int
    lines: list[str]


class GrepHit(TypedDict):
    """``grep_sources``: one line of a source that matches, by its number (1-based)."""

    source: str
    line: int
    text: str


class SourceHit(ChunkRecord):
    """``search_sources``: a chunk and its retrieval score (higher: more relevant)."""

    score: float


# -- halts (docs/architecture/engine.md, "Halts") -------------------------------------------------------


class HaltOptionRecord(TypedDict):
    """One option of an ambiguity halt: the choice and its tradeoffs."""

    option: str
    tradeoffs: str


class HaltRecord(TypedDict):
    """``metadata["halt"]`` of a held question: what the worker asks the person."""

    kind: str  # a HaltKind value
    question: str  # ambiguity: what is ambiguous; confusion: the clarifying question; blocked: the blocker
    options: list[HaltOptionRecord]  # ambiguity: at least two
    alternatives: list[str]  # blocked: at least one


class BlockedRecord(TypedDict):
    """``metadata["blocked"]`` of a question saturated as ``blocked``."""

    blocker: str
    alternatives: list[str]


class ChoiceRecord(TypedDict):
    """``metadata["choice"]`` of a question a person's choice reopened."""

    kind: str
    text: str
    asked: str  # the halt's question it answers


class Halted(TypedDict):
    """``submit_halt``: the question held (status gated) or blocked (status saturated)."""

    node_id: str
    status: str
    kind: str


class Chosen(TypedDict):
    """``choose``: the held question reopened with the person's choice."""

    node_id: str
    status: str
    choice: ChoiceRecord


class GateRecord(TypedDict):
    """One gated question of ``list_gates``; ``halt`` when a worker's halt holds it (else None)."""

    node_id: str
    depth: int
    text: str
    halt: HaltRecord | None


class GateList(TypedDict):
    """``list_gates``: the graph's gated questions in creation order."""

    graph_id: str
    gates: list[GateRecord]
    count: int
    held: int  # how many of them a halt holds (answered with choose, not approve_gate)
