"""The tool table: every MCP tool once, from which both the server and ``RemoteStore`` are generated.

Each row names a store method and says how its parameters travel: the tool's
name is ``fractal_`` + the method's, its parameters the method's (a row may
rename one, e.g. ``node_id`` for ``submit_answer``'s ``question_id``), objects
and lists as JSON text, optional text as ``""``. :func:`fractal_nb.mcp.server.build_server`
turns each row into a tool that decodes its arguments and calls the store;
:class:`fractal_nb.mcp.remote.RemoteStore` turns it back into a method with the
store's own signature that encodes them (docs/architecture/store.md, "The graph
contract"). A new store method reaches MCP by one row here, and remote workers by that
row plus its one-line ``remote_method`` in ``RemoteStore`` (kept for the static types; a
test fails when one is missing).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any

from pydantic import Field

from ..errors import InvalidInputError
from ..store.holders import parse_holder
from ..vocabulary import MAX_CHILDREN, MAX_SUB_QUESTIONS


class Wire(Enum):
    """How a parameter travels as an MCP argument."""

    VALUE = "value"  # as it is: ids, text, numbers, booleans, a list of ids
    OPTIONAL_TEXT = "optional_text"  # text or None; "" stands for None
    JSON_OBJECT = "json_object"  # a dict (or its JSON text) as JSON text; "" for None
    JSON_LIST = "json_list"  # a list as JSON text; "[]" for None
    OPTIONAL_JSON_LIST = "optional_json_list"  # a list as JSON text, or "" for None ("[]" is an empty list)
    HOLDER = "holder"  # a claim's holder as JSON text; "" for none


@dataclass(frozen=True)
class Param:
    """One tool parameter: its MCP name, type and description, and how it travels."""

    name: str
    annotation: Any
    wire: Wire = Wire.VALUE
    default: Any = ...  # ...: required
    store_name: str | None = None  # the store method's parameter, when it is named otherwise

    @property
    def arg(self) -> str:
        """The store method's parameter name."""
        return self.store_name or self.name

    def decode(self, value: Any) -> Any:
        """The MCP argument as the store method takes it."""
        if self.wire is Wire.OPTIONAL_TEXT or self.wire is Wire.JSON_OBJECT:
            return value if self.default is ... else value or None  # a required one is checked by the store
        if self.wire is Wire.JSON_LIST:
            return json_list(value, self.name)
        if self.wire is Wire.OPTIONAL_JSON_LIST:
            return json_list(value, self.name) if value else None
        if self.wire is Wire.HOLDER:
            return parse_holder(value) if value else None
        return value

    def encode(self, value: Any) -> Any:
        """A store-method argument as the MCP argument."""
        if self.wire is Wire.OPTIONAL_TEXT:
            return value or ""
        if self.wire is Wire.JSON_OBJECT:  # {} travels as "{}": an empty object is not an absent one
            return "" if value is None else value if isinstance(value, str) else json.dumps(value)
        if self.wire is Wire.JSON_LIST:
            return json.dumps(list(value or []))
        if self.wire is Wire.OPTIONAL_JSON_LIST:
            return "" if value is None else json.dumps(list(value))
        if self.wire is Wire.HOLDER:
            return "" if not value else value if isinstance(value, str) else json.dumps(value)
        return value


@dataclass(frozen=True)
class Tool:
    """One MCP tool: the store method it calls, what the tool says it does, its parameters."""

    method: str
    doc: str
    params: tuple[Param, ...] = ()
    result_key: str | None = None  # a method returning a bare value: the tool wraps it as {key: value}
    # A store method giving the same result as JSON text: a whole graph goes out as DuckDB wrote it,
    # as text only (structured content would send it twice; the tools declare no output schema).
    text_method: str | None = None

    @property
    def name(self) -> str:
        """The tool's MCP name."""
        return f"fractal_{self.method}"


def json_list(text: str, what: str) -> list[Any]:
    """A JSON-list argument, or a clear error."""
    try:
        value = json.loads(text or "[]")
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{what} must be a JSON list: {exc}") from exc
    if not isinstance(value, list):
        raise InvalidInputError(f"{what} must be a JSON list, not {type(value).__name__}")
    return value


def _text(description: str) -> Any:
    return Annotated[str, Field(description=description)]


def _seconds(description: str) -> Any:
    return Annotated[float, Field(description=description, ge=0)]


def _whole(description: str) -> Any:
    """A whole-number parameter, strictly: true, "2" or 2.0 are refused by the schema, not read as 1 or 2."""
    return Annotated[int, Field(description=description, strict=True)]


GRAPH_ID = Param("graph_id", _text("The graph's id, e.g. 'g-3f9c0a1b2c4d5e6f' (from fractal_create_graph)."))
NODE_ID = Param("node_id", _text("A node's id, e.g. 'n-3f9c0a1b2c4d5e6f'."))
WORKER_ID = Param("worker_id", _text("A stable name for the calling worker, e.g. 'worker-1'."))
# Optional strings default to "" rather than None: the SDK parses a JSON-looking string
# meant for an optional parameter into an object, which '{"a": 1}' metadata must not become.
_METADATA = _text(
    'A JSON object as a string, e.g. \'{"proxy_signal": "assumptions"}\'. Keys that make links: '
    "convergence_with / contradiction_with (lists of node ids), with convergence_insight / "
    "contradiction_tension (text)."
)
HOLDER = Param(
    "holder",
    _text(
        'Optional JSON object naming the claiming process: {"holder_id", "host", "pid", "proc_start", '
        '"label"}. The server gives its claims back at once when that process exits (same host), and '
        "fractal_heartbeat renews them."
    ),
    Wire.HOLDER,
    "",
)
CALLS = Param("calls", _text("JSON list of model-call log records behind it."), Wire.JSON_LIST, "[]")
CLAIMS = Param(
    "claims",
    _text(
        "JSON list of the synthesis's claims, each {kind: fact|assumption|unknown, text, support, source}: "
        "a fact only where a sub-question states it as one (source: that node's id)."
    ),
    Wire.JSON_LIST,
    "[]",
)
CLAIM_NEXT = Param(
    "claim_next",
    Annotated[
        bool,
        Field(
            description="Also claim for this worker, in the same transaction, the synthesis this write made "
            "ready above it (the cascade's next step): returned as next_synthesis, node_id null when none.",
            strict=True,
        ),
    ],
    default=False,
)
WITH_CONTEXT = Param(
    "with_context",
    Annotated[
        bool,
        Field(
            description="Also return the claimed question's context (as fractal_get_context reads it) as "
            "context: the claim and the read in one call.",
            strict=True,
        ),
    ],
    default=False,
)
WITH_INPUTS = Param(
    "with_inputs",
    Annotated[
        bool,
        Field(
            description="Also return the claimed synthesis's inputs (as fractal_get_synthesis_inputs reads "
            "them) as inputs: the claim and the read in one call. On a write, only with claim_next true.",
            strict=True,
        ),
    ],
    default=False,
)
FINDINGS = Param(
    "findings",
    _text(
        "Optional JSON list of a track's findings, each {finding, confidence, citations: [{source, "
        "line_start, line_end, quote}]}: the store checks every citation and marks each finding "
        "supported or unsupported. Empty: none."
    ),
    Wire.OPTIONAL_JSON_LIST,
    "",
)
_CITING_METADATA = _text(
    'A JSON object as a string, e.g. \'{"proxy_signal": "assumptions"}\'. Keys that make links: '
    "convergence_with / contradiction_with (lists of node ids), with convergence_insight / "
    "contradiction_tension (text). citations: a list of {source, line_start, line_end, quote} the "
    "store checks against the graph's sources (fractal_read_source shows the lines; the quote must be "
    "found in them); the answer is marked supported or unsupported."
)

TOOLS: tuple[Tool, ...] = (
    Tool(
        "create_graph",
        "Create a graph with its root question; returns graph_id, root_node_id, budget and status.",
        (
            Param("seed", _text("The question to explore.")),
            Param(
                "intensity",
                _text(
                    "pulse | explore | deep: workers, depth and seed-question budget "
                    "(3/2/3-4, 8/4/5-7, 15/6/8-12)."
                ),
                default="explore",
            ),
            Param(
                "checkpoint_mode",
                _text(
                    "autonomous | convergence | interactive | depth:N (questions at depths N, 2N, … wait as "
                    "'gated' until fractal_approve_gate)."
                ),
                default="autonomous",
            ),
            Param(
                "metadata", _text("Optional JSON object (string) kept on the graph."), Wire.JSON_OBJECT, ""
            ),
        ),
    ),
    Tool(
        "resume_graph",
        "Make a paused graph active again; returns the full snapshot.\n\nA budget_exhausted graph is "
        "terminal for resume: refused, naming the way on (fractal_new_budget: a new turn with a new budget; "
        "the harvest finishes it).",
        (GRAPH_ID,),
    ),
    Tool(
        "update_graph_status",
        "Move the graph to another status (finished graphs take no more writes).",
        (
            GRAPH_ID,
            Param("status", _text("active | paused | completed | error | budget_exhausted")),
            Param("reason", _text("Why, for the record (optional)."), Wire.OPTIONAL_TEXT, ""),
        ),
    ),
    Tool("delete_graph", "Delete the graph with its nodes, edges, events and call log.", (GRAPH_ID,)),
    Tool(
        "add_node",
        "Add an answer under a question or a sub-question under an answer; returns the new node.\n\n"
        "Refused beyond the intensity's depth, in a saturated branch, on a finished graph, or past "
        f"{MAX_CHILDREN} children under one node.",
        (
            GRAPH_ID,
            Param(
                "parent_id",
                _text(
                    "For an answer: the question it answers (claimed by you). For a sub-question: the answer "
                    "it follows from."
                ),
            ),
            Param("node_type", _text("answer | question")),
            Param("text", _text("The answer or the question, as plain text.")),
            Param("owner", _text("Your worker_id (for answers)."), Wire.OPTIONAL_TEXT, ""),
            Param(
                "metadata",
                _text('Optional JSON object as a string, e.g. \'{"proxy_signal": "assumptions"}\'.'),
                Wire.JSON_OBJECT,
                "",
            ),
        ),
    ),
    Tool(
        "update_node",
        "Merge metadata into a node; convergence_with / contradiction_with create links (never twice).",
        (GRAPH_ID, NODE_ID, Param("metadata", _METADATA, Wire.JSON_OBJECT)),
    ),
    Tool(
        "mark_saturated",
        "Mark a question's branch done: it and every unfinished question below it become saturated.",
        (
            GRAPH_ID,
            NODE_ID,
            Param(
                "reason",
                _text(
                    "semantic_overlap | derivable | actionable | hollow_questions | budget_exhausted | error"
                ),
            ),
        ),
    ),
    Tool(
        "claim_work",
        "Atomically claim the next open question (branch affinity first); no two workers get the same "
        "one.\n\nReturns the claimed node, or node_id null with graph_done true when nothing is left and no "
        "one holds a claim (stop then), or graph_done false (wait and retry). A claim is a lease (lease_s): "
        "finish within it, or send a holder and renew with fractal_heartbeat. With with_context true the "
        "claim carries the question's context too.",
        (GRAPH_ID, WORKER_ID, HOLDER, WITH_CONTEXT),
    ),
    Tool(
        "synthesize_node",
        "Synthesize an answered question whose sub-questions are all synthesized or saturated.",
        (
            GRAPH_ID,
            NODE_ID,
            Param(
                "synthesis_text",
                _text("What the question's answer and its sub-questions' syntheses add up to."),
            ),
            CLAIMS,
            FINDINGS,
        ),
    ),
    Tool(
        "get_snapshot",
        "The whole graph: its fields, every node and edge in creation order.",
        (GRAPH_ID,),
        text_method="get_snapshot_text",
    ),
    Tool(
        "get_branch",
        "The subtree under a node (itself included) and the edges inside it.",
        (GRAPH_ID, NODE_ID),
    ),
    Tool("get_open_questions", "Questions waiting for a worker (status open).", (GRAPH_ID,)),
    Tool(
        "query_convergence", "Clusters of nodes joined by convergence links, with their insight.", (GRAPH_ID,)
    ),
    Tool(
        "query_contradictions",
        "Pairs of nodes joined by contradiction links, with their tension.",
        (GRAPH_ID,),
    ),
    Tool(
        "get_saturation_status",
        "Per seed-question branch: counts by status and whether it is done; all_saturated, all_complete.",
        (GRAPH_ID,),
    ),
    Tool(
        "get_claimable_work",
        "What fractal_claim_work would hand out, in order (nothing is claimed).",
        (
            GRAPH_ID,
            Param("worker_id", _text("Order by this worker's branch affinity."), Wire.OPTIONAL_TEXT, ""),
        ),
    ),
    Tool(
        "get_ready_to_synthesize",
        "Answered questions whose sub-questions are all done, deepest first: synthesize these next.",
        (GRAPH_ID,),
    ),
    Tool(
        "recover_stuck",
        "Return stuck claims (and optionally errors) to open, e.g. after a worker crashed.",
        (
            GRAPH_ID,
            Param(
                "older_than_s",
                Annotated[
                    float | None,
                    Field(
                        description="Reopen claims older than this many seconds (default: expired leases)."
                    ),
                ],
                default=None,
            ),
            Param(
                "include_errors",
                Annotated[bool, Field(description="Also reopen questions in error.")],
                default=False,
            ),
            Param("worker_id", _text("Only this worker's claims."), Wire.OPTIONAL_TEXT, ""),
        ),
    ),
    Tool(
        "approve_gate",
        "Open gated questions (a depth:N checkpoint) so workers can claim them.",
        (
            GRAPH_ID,
            Param(
                "node_ids",
                Annotated[list[str] | None, Field(description="Gated questions (default all).")],
                default=None,
            ),
        ),
    ),
    Tool(
        "prune_branch",
        "Cut a branch: the question and its unfinished questions below become saturated ('pruned').",
        (GRAPH_ID, NODE_ID),
    ),
    # -- halts: a worker's question to the person, or its blocker (docs/architecture/engine.md, "Halts")
    Tool(
        "list_gates",
        "The gated questions, each with the halt holding it: null for a checkpoint's gate (approve it with "
        "fractal_approve_gate), or {kind: ambiguity|confusion, question, options: [{option, tradeoffs}]} "
        "for a question a worker asks the person (answer it with fractal_choose).",
        (GRAPH_ID,),
    ),
    Tool(
        "choose",
        "Answer a held question: it reopens with the person's choice, which the next answer's prompt "
        "shows. Refused for a question no halt holds, an empty choice or an index out of range.",
        (
            GRAPH_ID,
            NODE_ID,
            Param(
                "choice",
                Annotated[
                    int | str,
                    Field(
                        description="ambiguity: an option's index (a number from 0), an option's text or "
                        "your own answer; confusion: the clarification, as text."
                    ),
                ],
            ),
        ),
    ),
    Tool(
        "submit_halt",
        "A worker's halt on its claimed question instead of an answer, with its call log, in one "
        "transaction: ambiguity or confusion hold it (status gated) until fractal_choose; blocked saturates "
        "it as 'blocked' with the blocker and alternatives (a gap).",
        (
            GRAPH_ID,
            NODE_ID,
            Param(
                "halt",
                _text(
                    'JSON object {"kind": "ambiguity"|"confusion"|"blocked", "question": ..., "options": '
                    '[{"option", "tradeoffs"}] (ambiguity: at least 2), "alternatives": [text] (blocked: '
                    "at least 1)}."
                ),
                Wire.JSON_OBJECT,
            ),
            Param("owner", WORKER_ID.annotation, Wire.OPTIONAL_TEXT),
            CALLS,
        ),
    ),
    # -- turns, heads and history (docs/architecture/store.md, "Turns and heads", "History and forks") ----
    # widen is not a tool: its seed questions come from the notebook's model (Exploration.widen).
    Tool(
        "ask",
        "Take a turn: a follow-up question under the root's answer, or under a node.\n\nJoins the open turn "
        "or opens the next (a completed graph becomes active again); workers (fractal_claim_work, or the "
        "notebook's run()) answer it and re-synthesize upward, and the harvest ends the turn in a head. "
        "Returns the turn, its kind and the node ids created and reopened. A question the graph asks "
        "already, or one past the depth, is refused.",
        (
            GRAPH_ID,
            Param("question", _text("The follow-up question, as plain text.")),
            Param(
                "under",
                _text(
                    "Optional node id to ask under: an answer, or a question (under its current answer). "
                    "Empty: under the root's answer."
                ),
                Wire.OPTIONAL_TEXT,
                "",
            ),
        ),
    ),
    Tool(
        "deepen",
        "Let the branch under a question go past the intensity's depth for this turn.\n\nIts leaf "
        "questions at the old bottom reopen for a decomposition (their old answers superseded).",
        (
            GRAPH_ID,
            Param("node_id", _text("The question whose branch goes deeper, e.g. 'n-3f9c0a1b2c4d5e6f'.")),
            Param(
                "levels",
                _whole("How many levels past the depth: 1-4 (default 1)."),
                default=1,
            ),
        ),
    ),
    Tool(
        "redecompose",
        "Answer a question again with a different decomposition; its old answer and sub-tree stay in the "
        "graph, superseded (not current), never deleted. Not the root (its decomposition is the seed plan).",
        (
            GRAPH_ID,
            Param("node_id", _text("The question to decompose again, e.g. 'n-3f9c0a1b2c4d5e6f'.")),
            Param(
                "hint",
                _text("Optional: what the new decomposition should do differently. Empty: none."),
                Wire.OPTIONAL_TEXT,
                "",
            ),
        ),
    ),
    Tool(
        "add_note",
        "Add a person's evidence or correction under a question, as a node of type note; the syntheses "
        "above it reopen and read it as a finding.",
        (
            GRAPH_ID,
            Param("node_id", _text("The question the note is about, e.g. 'n-3f9c0a1b2c4d5e6f'.")),
            Param("text", _text("The evidence or correction, as plain text.")),
        ),
    ),
    Tool(
        "new_budget",
        "Go on with a budget_exhausted graph (terminal for resume): the limits sent are merged into the "
        "graph's, the stopped turn ends in a head and a new turn of kind budget opens with the graph's "
        "limits as its request; the graph becomes active. A token or cost budget already spent, or any other "
        "status, is refused and nothing is written.",
        (
            GRAPH_ID,
            Param(
                "limits",
                _text(
                    "The new budget, a JSON object of max_tokens, max_cost, max_wall_s, node_timeout_s, "
                    "prices, e.g. '{\"max_tokens\": 400000}'; '{}' keeps the limits (after a circuit "
                    "breaker: each run has its own)."
                ),
                Wire.JSON_OBJECT,
            ),
        ),
    ),
    Tool(
        "list_turns",
        "The graph's turns in order (the seed is turn 1), the open one (head_event null) last: kind, "
        "requests, started_event, and at its head the status, root synthesis, counts and spend.",
        (GRAPH_ID,),
        result_key="turns",
    ),
    Tool(
        "list_heads",
        "The graph's heads: its ended turns in order, the current head last (the one a new turn or "
        "resume continues from). Each: turn, head_event, status, root_synthesis, counts, tokens, requests.",
        (GRAPH_ID,),
        result_key="heads",
    ),
    Tool(
        "get_state_at",
        "The graph as it was at an event (a head_event, or any event_id of its log): its fields, nodes "
        "and edges as fractal_get_snapshot gave them then, rebuilt from its history. Read-only.",
        (
            GRAPH_ID,
            Param(
                "event_id",
                _whole("An event id of this graph, e.g. a head's head_event."),
            ),
        ),
    ),
    Tool(
        "fork_graph",
        "A new graph in this store holding the graph's state at an event (nodes, statuses, links, "
        "syntheses, call log then); the source never changes.\n\nReturns the fork's graph_id and "
        "root_node_id, forked_from and forked_at. Steer and work the fork like any graph.",
        (
            GRAPH_ID,
            Param(
                "at_event",
                _whole("The event to fork at, e.g. a head's head_event."),
            ),
        ),
    ),
    Tool(
        "get_lineage",
        "The family of forks the graph belongs to: its original and every fork of it, oldest first, each "
        "with forked_from and forked_at (null for the original).",
        (GRAPH_ID,),
        result_key="graphs",
    ),
    # -- sources and citations (docs/architecture/faces.md, "Sources over MCP") ----------
    Tool(
        "list_sources",
        "The graph's sources (files, snippets, DataFrame columns, tables) in the order they were added: "
        "source_id, name (what citations name), kind, line_count, chunk_count, content_hash.",
        (GRAPH_ID,),
        result_key="sources",
    ),
    Tool(
        "add_source_text",
        "Add a text snippet as a source of the graph, under a name citations will use; returns the "
        "source.\n\nOver MCP only text travels (files and tables are the notebook's: ex.add_sources). "
        "The same name and text again changes nothing; the same name with another text is refused.",
        (
            GRAPH_ID,
            Param("name", _text("What citations will call it, e.g. 'interview-3.txt'.")),
            Param("text", _text("The snippet's text; its lines are what citations quote.")),
        ),
    ),
    Tool(
        "search_sources",
        "The passages of the graph's sources that best match a query (lexical search): each a chunk "
        "with source, line_start, line_end, text and score, best first.",
        (
            GRAPH_ID,
            Param("query", _text("A few keywords, e.g. 'claim lease expiry'.")),
            Param("k", _whole("How many passages (default 5)."), default=5),
        ),
        result_key="hits",
    ),
    Tool(
        "read_source",
        "Lines of one of the graph's sources, as stored: source, line_start, line_end and lines (a list "
        "of the lines' text). Refused for an unknown source or lines past its end.",
        (
            GRAPH_ID,
            Param("source", _text("The source's name, as fractal_list_sources shows it.")),
            Param("line_start", _whole("The first line, from 1.")),
            Param("line_end", _whole("The last line (inclusive).")),
        ),
    ),
    Tool(
        "glob_sources",
        "The names of the graph's sources that match a glob (fnmatch-style: '**/*.py', '*claim*'), in "
        "the order they were added.",
        (GRAPH_ID, Param("pattern", _text("A glob over the sources' names, e.g. '**/store/*.py'."))),
        result_key="names",
    ),
    Tool(
        "grep_sources",
        "The lines of the graph's sources that match a regular expression (case-insensitive), in source "
        "order: each hit is source, line (its number, as citations use it) and text.",
        (
            GRAPH_ID,
            Param("pattern", _text("A regular expression, e.g. 'def claim|UPDATE'.")),
            Param(
                "glob", _text("Only sources whose names match this glob (optional)."), Wire.OPTIONAL_TEXT, ""
            ),
            Param("k", _whole("The most hits (default 50)."), default=50),
        ),
        result_key="hits",
    ),
    Tool(
        "check_citations",
        "Check citations against the graph's sources without writing anything: each comes back with its "
        "status (verified | no_such_source | no_such_lines | misquoted) and, when it failed, why.",
        (
            GRAPH_ID,
            Param(
                "citations",
                _text("JSON list of citations, each {source, line_start, line_end, quote}."),
                Wire.JSON_LIST,
            ),
        ),
        result_key="citations",
    ),
    # -- for fractal-nb worker processes (fractal-nb worker --mcp-url) -----------------------------
    Tool(
        "get_graph",
        "The graph's own fields (seed, intensity, budget, checkpoint mode, status) without its nodes.",
        (GRAPH_ID,),
    ),
    Tool("list_graphs", "Every graph this server holds (without nodes), oldest first."),
    Tool(
        "get_context",
        "What a worker needs to answer a claimed question, each part capped.\n\nAncestry with answers, "
        "siblings, recent syntheses in the branch, and answers from other branches to link to.",
        (GRAPH_ID, NODE_ID),
    ),
    Tool(
        "submit_answer",
        "A worker's whole write for a claimed question, in one transaction.\n\nThe answer, its "
        "sub-questions (or the leaf's synthesis), the answer's links and its call log: all of it lands or "
        "none does.",
        (
            GRAPH_ID,
            Param("node_id", NODE_ID.annotation, store_name="question_id"),
            Param("owner", WORKER_ID.annotation, Wire.OPTIONAL_TEXT),
            Param("text", _text("The answer to the claimed question.")),
            Param("metadata", _CITING_METADATA, Wire.JSON_OBJECT, ""),
            Param(
                "sub_questions",
                _text(
                    'JSON list of sub-questions: texts, or {"text": ..., "metadata": {...}} objects, at '
                    f'most {MAX_SUB_QUESTIONS}. None ("[]") makes the question a leaf, synthesized from its '
                    "answer."
                ),
                Wire.JSON_LIST,
                "[]",
            ),
            Param("links", _METADATA, Wire.JSON_OBJECT, ""),
            Param(
                "calls", _text("JSON list of model-call log records behind the answer."), Wire.JSON_LIST, "[]"
            ),
            Param(
                "saturation",
                _text(
                    "For a leaf: why the branch needs no more questions (semantic_overlap, derivable, "
                    "actionable, hollow_questions, budget_exhausted, error); it is then saturated with that "
                    "reason, its answer kept as its synthesis. Empty: none."
                ),
                Wire.OPTIONAL_TEXT,
                "",
            ),
            Param(
                "boundary",
                _text(
                    'JSON {"text": ..., "converging_with": <answer id>}: the boundary question on a '
                    "convergence with another branch's answer, placed under the shallower of the two "
                    'answers with {"boundary": true, "converging_nodes": [new, other]}. Empty: none.'
                ),
                Wire.JSON_OBJECT,
                "",
            ),
            CLAIM_NEXT,
            WITH_INPUTS,
        ),
    ),
    Tool(
        "get_synthesis_inputs",
        "A question, its answers and its sub-questions with their syntheses: what a synthesis reads.",
        (GRAPH_ID, NODE_ID),
    ),
    Tool(
        "release_claim",
        "Give back a claim after a failed attempt (the third failure marks the question error).",
        (
            GRAPH_ID,
            NODE_ID,
            WORKER_ID,
            Param("error", _text("Why the attempt failed.")),
            Param(
                "failed",
                Annotated[
                    bool,
                    Field(
                        description="Count it as a failed attempt (false: the model "
                        "was unreachable, not the question's fault)."
                    ),
                ],
                default=True,
            ),
        ),
    ),
    Tool(
        "claim_synthesis",
        "Take the deepest ready question no other worker is synthesizing; node_id null when none.\n\n"
        "Each synthesis goes to one worker at a time, so the model is paid once for it.",
        (
            GRAPH_ID,
            WORKER_ID,
            HOLDER,
            Param(
                "skip",
                _text("JSON list of node ids not to hand out (already failed here)."),
                Wire.JSON_LIST,
                "[]",
            ),
            WITH_INPUTS,
        ),
    ),
    Tool(
        "submit_synthesis",
        "Synthesize a question whose synthesis this worker holds, with its call log, in one transaction.",
        (
            GRAPH_ID,
            NODE_ID,
            WORKER_ID,
            Param("synthesis_text", _text("The question's synthesis.")),
            CALLS,
            CLAIMS,
            FINDINGS,
            Param(
                "extra",
                _text(
                    "Optional JSON object merged into the question's metadata (a track's evidence, "
                    "conclusions and gaps; a root's synthesis_object). Empty: none."
                ),
                Wire.JSON_OBJECT,
                "",
            ),
            CLAIM_NEXT,
            WITH_INPUTS,
        ),
    ),
    Tool(
        "release_synthesis",
        "Give back a synthesis this worker could not compose, so another worker may take it.",
        (GRAPH_ID, NODE_ID, WORKER_ID),
    ),
    Tool(
        "heartbeat",
        "Renew the leases of every claim of a holder (send it a few times per lease_s).",
        (Param("holder_id", _text("The holder_id sent with the claims.")),),
    ),
    Tool(
        "record_llm_calls",
        "Append model-call log records to the ledger budgets count. Each record is an object: "
        "graph_id, role (seed|answer|connect|synthesize|harvest|widen|think|eval|single|judge, or "
        "tool:search_sources|tool:read_source|tool:unknown|tool:<name> of a caller's own tool for a model's "
        "tool call), model, prompt_tokens, "
        "completion_tokens, attempts, latency_s, outcome (ok|cached|error|discarded); optional "
        "node_id (a node of that graph), worker, corrections, queue_s, mode, error, tokens_estimated, "
        "retry_sampling (JSON text), refused_usage (JSON text: usage figures the server reported that no "
        "completion can have). A batch with one invalid record is refused whole.",
        (
            Param(
                "calls",
                _text(
                    "JSON list of model-call records (at most 1,000); token counts are whole "
                    "numbers from 0 to 10,000,000."
                ),
                Wire.JSON_LIST,
            ),
        ),
        result_key="recorded",
    ),
)
# The thinkon strategy (docs/architecture/engine.md, "Thinkon"): an outside agent works the chain with these,
# claiming the level that acts next with fractal_claim_work like any question.
SPENT_S = Param(
    "spent_s",
    _seconds(
        "Seconds this step ran (its model call and write), added to the level's spent_s: what a per-Solve "
        "time limit reads (0 if not timed)."
    ),
    default=0.0,
)
TOOLS += (
    Tool(
        "thinkon_level",
        "A thinkon level's state {goal, parent, todo, done}: its goal, the level above, its phase "
        "(think: Think is next; eval: Eval is next; returned), its plan and every sub-goal's return.",
        (GRAPH_ID, NODE_ID),
    ),
    Tool(
        "thinkon_chain",
        "The thinkon levels that have not returned, root first: the chain as it stands; the last acts next.",
        (GRAPH_ID,),
        result_key="levels",
    ),
    Tool(
        "thinkon_plan",
        "Think's plan for a level this worker claimed in its think phase: written to its todo (only "
        "Think writes a plan); its Eval is next. Returns the level.",
        (
            GRAPH_ID,
            NODE_ID,
            Param("todo", _text("The plan in plain language, e.g. numbered items t1, t2.")),
            WORKER_ID,
            SPENT_S,
        ),
    ),
    Tool(
        "thinkon_call",
        "Eval's call of a sub-goal for a level this worker claimed in its eval phase: a new level under "
        "it, solved before its next Eval (a redo or a repair is a call too). Returns the new level.",
        (
            GRAPH_ID,
            NODE_ID,
            Param("goal", _text("The sub-goal, stated so it can be done on its own.")),
            WORKER_ID,
            SPENT_S,
        ),
    ),
    Tool(
        "thinkon_return",
        "A level's return: its result, appended to its parent's done in the same transaction (the parent "
        "opens for its next Eval). outcome: returned (Think or Eval returned it), failed (no valid reply: "
        "reason says why), cut (a limit returned its state: reason names the limit). Returns the parent's "
        "level, or null for the root.",
        (
            GRAPH_ID,
            NODE_ID,
            Param("result", _text("The level's result (for failed or cut: its state as it stands).")),
            WORKER_ID,
            Param("outcome", _text("returned, failed or cut."), default="returned"),
            Param("reason", _text("Why it failed or was cut; empty for returned."), Wire.OPTIONAL_TEXT, ""),
            SPENT_S,
        ),
        result_key="parent",
    ),
)
TOOLS_BY_METHOD = {tool.method: tool for tool in TOOLS}
