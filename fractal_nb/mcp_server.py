"""The fractal tool contract over MCP: one store, served to outside agents and worker processes.

Tool names, parameters and results are the seed skill's (``fractal_`` + the
store method; metadata passed as a JSON string). A refused call comes back as
``{"error": "<the store's message>"}`` with ``isError`` set, and changes
nothing, as in the store itself.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Annotated, Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from .errors import FractalError, InvalidInputError
from .loopback import is_loopback
from .mcp_auth import (
    auth_settings,
    beyond_loopback_warning,
    client_url,
    http_app,
    resolve_token,
    token_verifier,
    transport_security,
)
from .store import GraphStore
from .store.holders import HolderInfo, parse_holder

INSTRUCTIONS = """\
A fractal-thinking graph: questions are broken into sub-questions, answered, and
synthesized bottom-up into one conclusion. The graph is the work queue.

A worker's loop: fractal_claim_work(graph_id, worker_id) → read context
(fractal_get_branch / fractal_get_snapshot) → fractal_add_node(node_type="answer")
under the claimed question → either fractal_add_node(node_type="question") under
that answer for each sub-question worth asking, or, for a leaf,
fractal_synthesize_node on the question → then cascade: call
fractal_get_ready_to_synthesize and synthesize what it lists, deepest first, until
it lists nothing. Stop when fractal_claim_work returns graph_done: true.
With several workers, take each synthesis with fractal_claim_synthesis (it hands a
ready question to one worker at a time, so each is paid for once) and write it with
fractal_submit_synthesis. A claim is a lease: send a holder with fractal_claim_work
and call fractal_heartbeat a few times per lease to keep long work.
Errors come back as {"error": "..."} and change nothing."""

GraphId = Annotated[
    str, Field(description="The graph's id, e.g. 'g-3f9c0a1b2c4d5e6f' (from fractal_create_graph).")
]
NodeId = Annotated[str, Field(description="A node's id, e.g. 'n-3f9c0a1b2c4d5e6f'.")]
WorkerId = Annotated[str, Field(description="A stable name for the calling worker, e.g. 'worker-1'.")]
# Optional strings default to "" rather than None: the SDK parses a JSON-looking string
# meant for an optional parameter into an object, which '{"a": 1}' metadata must not become.
Metadata = Annotated[
    str,
    Field(
        description=(
            'A JSON object as a string, e.g. \'{"proxy_signal": "assumptions"}\'. Keys that make links: '
            "convergence_with / contradiction_with (lists of node ids), with convergence_insight / "
            "contradiction_tension (text)."
        )
    ),
]

HolderArg = Annotated[
    str,
    Field(
        description=(
            'Optional JSON object naming the claiming process: {"holder_id", "host", "pid", "proc_start", '
            '"label"}. The server gives its claims back at once when that process exits (same host), and '
            "fractal_heartbeat renews them."
        )
    ),
]
IntensityArg = Annotated[
    str,
    Field(
        description=(
            "pulse | explore | deep: workers, depth and seed-question budget (3/2/3-4, 8/4/5-7, 15/6/8-12)."
        )
    ),
]
CheckpointArg = Annotated[
    str,
    Field(
        description=(
            "autonomous | convergence | interactive | depth:N (questions at depths N, 2N, … wait as 'gated' "
            "until fractal_approve_gate)."
        )
    ),
]
ParentId = Annotated[
    str,
    Field(
        description=(
            "For an answer: the question it answers (claimed by you). For a sub-question: the answer it "
            "follows from."
        )
    ),
]
ReasonArg = Annotated[
    str,
    Field(
        description=(
            "semantic_overlap | derivable | actionable | hollow_questions | budget_exhausted | error"
        )
    ),
]


def _result(call: Callable[[], dict[str, Any]]) -> CallToolResult:
    """The store's answer as JSON (text and structured), or its refusal as ``{"error": ...}``."""
    value: dict[str, Any]
    try:
        value, failed = call(), False
    except FractalError as exc:
        value, failed = {"error": str(exc), "error_type": type(exc).__name__}, True
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(value))], structured_content=value, is_error=failed
    )


def _holder(text: str) -> HolderInfo | None:
    """The optional holder parameter (a JSON object as text); none makes a plain lease."""
    return parse_holder(text) if text else None


def _json_list(text: str, what: str) -> list[Any]:
    """A JSON-list parameter, or a clear error."""
    try:
        value = json.loads(text or "[]")
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{what} must be a JSON list: {exc}") from exc
    if not isinstance(value, list):
        raise InvalidInputError(f"{what} must be a JSON list, not {type(value).__name__}")
    return value


def recover_claims(store: GraphStore) -> int:
    """Return to open the claims of gone holders (and expired leases) in every unfinished graph."""
    return sum(
        store.recover_stuck(g["graph_id"])["count"]
        for g in store.list_graphs()["graphs"]
        if g["status"] not in ("completed", "error")
    )


def build_server(store: GraphStore, *, name: str = "fractal-nb", token: str | None = None) -> MCPServer:
    """An MCP server whose tools are the store's contract (the store stays the caller's to close).

    A server that starts first gives back the claims of holders that are gone (a
    restarted server's dead workers: at once on this host).

    With a ``token``, its HTTP app answers 401 to any request without
    ``Authorization: Bearer <token>`` (stdio is unaffected).
    """
    server = MCPServer(
        name,
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        token_verifier=token_verifier(token),
        auth=auth_settings(token),
    )
    recover_claims(store)
    tool = server.tool

    @tool(name="fractal_create_graph")
    def create_graph(
        seed: Annotated[str, Field(description="The question to explore.")],
        intensity: IntensityArg = "explore",
        checkpoint_mode: CheckpointArg = "autonomous",
        metadata: Annotated[str, Field(description="Optional JSON object (string) kept on the graph.")] = "",
    ) -> CallToolResult:
        """Create a graph with its root question; returns graph_id, root_node_id, budget and status."""
        return _result(lambda: store.create_graph(seed, intensity, checkpoint_mode, metadata or None))

    @tool(name="fractal_resume_graph")
    def resume_graph(graph_id: GraphId) -> CallToolResult:
        """Make a paused or budget-exhausted graph active again; returns the full snapshot."""
        return _result(lambda: store.resume_graph(graph_id))

    @tool(name="fractal_update_graph_status")
    def update_graph_status(
        graph_id: GraphId,
        status: Annotated[str, Field(description="active | paused | completed | error | budget_exhausted")],
        reason: Annotated[str, Field(description="Why, for the record (optional).")] = "",
    ) -> CallToolResult:
        """Move the graph to another status (finished graphs take no more writes)."""
        return _result(lambda: store.update_graph_status(graph_id, status, reason or None))

    @tool(name="fractal_delete_graph")
    def delete_graph(graph_id: GraphId) -> CallToolResult:
        """Delete the graph with its nodes, edges, events and call log."""
        return _result(lambda: store.delete_graph(graph_id))

    @tool(name="fractal_add_node")
    def add_node(
        graph_id: GraphId,
        parent_id: ParentId,
        node_type: Annotated[str, Field(description="answer | question")],
        text: Annotated[str, Field(description="The answer or the question, as plain text.")],
        owner: Annotated[str, Field(description="Your worker_id (for answers).")] = "",
        metadata: Annotated[
            str,
            Field(description='Optional JSON object as a string, e.g. \'{"proxy_signal": "assumptions"}\'.'),
        ] = "",
    ) -> CallToolResult:
        """Add an answer under a question or a sub-question under an answer; returns the new node.

        Refused beyond the intensity's depth, in a saturated branch, or on a finished graph.
        """
        return _result(
            lambda: store.add_node(graph_id, parent_id, node_type, text, owner or None, metadata or None)
        )

    @tool(name="fractal_update_node")
    def update_node(graph_id: GraphId, node_id: NodeId, metadata: Metadata) -> CallToolResult:
        """Merge metadata into a node; convergence_with / contradiction_with create links (never twice)."""
        return _result(lambda: store.update_node(graph_id, node_id, metadata))

    @tool(name="fractal_mark_saturated")
    def mark_saturated(
        graph_id: GraphId,
        node_id: NodeId,
        reason: ReasonArg,
    ) -> CallToolResult:
        """Mark a question's branch done: it and every unfinished question below it become saturated."""
        return _result(lambda: store.mark_saturated(graph_id, node_id, reason))

    @tool(name="fractal_claim_work")
    def claim_work(graph_id: GraphId, worker_id: WorkerId, holder: HolderArg = "") -> CallToolResult:
        """Atomically claim the next open question (branch affinity first); no two workers get the same one.

        Returns the claimed node, or node_id null with graph_done true when nothing is left
        and no one holds a claim (stop then), or graph_done false (wait and retry). A claim
        is a lease (lease_s): finish within it, or send a holder and renew with fractal_heartbeat.
        """
        return _result(lambda: store.claim_work(graph_id, worker_id, holder=_holder(holder)))

    @tool(name="fractal_synthesize_node")
    def synthesize_node(
        graph_id: GraphId,
        node_id: NodeId,
        synthesis_text: Annotated[
            str, Field(description="What the question's answer and its sub-questions' syntheses add up to.")
        ],
    ) -> CallToolResult:
        """Synthesize an answered question whose sub-questions are all synthesized or saturated."""
        return _result(lambda: store.synthesize_node(graph_id, node_id, synthesis_text))

    @tool(name="fractal_get_snapshot")
    def get_snapshot(graph_id: GraphId) -> CallToolResult:
        """The whole graph: its fields, every node and edge in creation order."""
        return _result(lambda: store.get_snapshot(graph_id))

    @tool(name="fractal_get_branch")
    def get_branch(graph_id: GraphId, node_id: NodeId) -> CallToolResult:
        """The subtree under a node (itself included) and the edges inside it."""
        return _result(lambda: store.get_branch(graph_id, node_id))

    @tool(name="fractal_get_open_questions")
    def get_open_questions(graph_id: GraphId) -> CallToolResult:
        """Questions waiting for a worker (status open)."""
        return _result(lambda: store.get_open_questions(graph_id))

    @tool(name="fractal_query_convergence")
    def query_convergence(graph_id: GraphId) -> CallToolResult:
        """Clusters of nodes joined by convergence links, with their insight."""
        return _result(lambda: store.query_convergence(graph_id))

    @tool(name="fractal_query_contradictions")
    def query_contradictions(graph_id: GraphId) -> CallToolResult:
        """Pairs of nodes joined by contradiction links, with their tension."""
        return _result(lambda: store.query_contradictions(graph_id))

    @tool(name="fractal_get_saturation_status")
    def get_saturation_status(graph_id: GraphId) -> CallToolResult:
        """Per seed-question branch: counts by status and whether it is done; all_saturated, all_complete."""
        return _result(lambda: store.get_saturation_status(graph_id))

    @tool(name="fractal_get_claimable_work")
    def get_claimable_work(
        graph_id: GraphId,
        worker_id: Annotated[str, Field(description="Order by this worker's branch affinity.")] = "",
    ) -> CallToolResult:
        """What fractal_claim_work would hand out, in order (nothing is claimed)."""
        return _result(lambda: store.get_claimable_work(graph_id, worker_id or None))

    @tool(name="fractal_get_ready_to_synthesize")
    def get_ready_to_synthesize(graph_id: GraphId) -> CallToolResult:
        """Answered questions whose sub-questions are all done, deepest first: synthesize these next."""
        return _result(lambda: store.get_ready_to_synthesize(graph_id))

    @tool(name="fractal_recover_stuck")
    def recover_stuck(
        graph_id: GraphId,
        older_than_s: Annotated[
            float | None,
            Field(description="Reopen claims older than this many seconds (default: expired leases only)."),
        ] = None,
        include_errors: Annotated[bool, Field(description="Also reopen questions in error.")] = False,
        worker_id: Annotated[str, Field(description="Only this worker's claims.")] = "",
    ) -> CallToolResult:
        """Return stuck claims (and optionally errors) to open, e.g. after a worker crashed."""
        return _result(
            lambda: store.recover_stuck(
                graph_id, older_than_s, include_errors=include_errors, worker_id=worker_id or None
            )
        )

    @tool(name="fractal_approve_gate")
    def approve_gate(
        graph_id: GraphId,
        node_ids: Annotated[list[str] | None, Field(description="Gated questions (default all).")] = None,
    ) -> CallToolResult:
        """Open gated questions (a depth:N checkpoint) so workers can claim them."""
        return _result(lambda: store.approve_gate(graph_id, node_ids))

    @tool(name="fractal_prune_branch")
    def prune_branch(graph_id: GraphId, node_id: NodeId) -> CallToolResult:
        """Cut a branch: the question and its unfinished questions below become saturated ('pruned')."""
        return _result(lambda: store.prune_branch(graph_id, node_id))

    # -- for fractal-nb worker processes (fractal-nb worker --mcp-url) ------------------------

    @tool(name="fractal_get_graph")
    def get_graph(graph_id: GraphId) -> CallToolResult:
        """The graph's own fields (seed, intensity, budget, checkpoint mode, status) without its nodes."""
        return _result(lambda: store.get_graph(graph_id))

    @tool(name="fractal_list_graphs")
    def list_graphs() -> CallToolResult:
        """Every graph this server holds (without nodes), oldest first."""
        return _result(store.list_graphs)

    @tool(name="fractal_get_context")
    def get_context(graph_id: GraphId, node_id: NodeId) -> CallToolResult:
        """What a worker needs to answer a claimed question, each part capped.

        Ancestry with answers, siblings, recent syntheses in the branch, and answers
        from other branches to link to.
        """
        return _result(lambda: store.get_context(graph_id, node_id))

    @tool(name="fractal_submit_answer")
    def submit_answer(
        graph_id: GraphId,
        node_id: NodeId,
        owner: WorkerId,
        text: Annotated[str, Field(description="The answer to the claimed question.")],
        metadata: Metadata = "",
        sub_questions: Annotated[
            str,
            Field(
                description=(
                    'JSON list of sub-questions: texts, or {"text": ..., "metadata": {...}} objects. '
                    'None ("[]") makes the question a leaf, synthesized from its answer.'
                )
            ),
        ] = "[]",
        links: Metadata = "",
        calls: Annotated[
            str, Field(description="JSON list of model-call log records behind the answer.")
        ] = "[]",
        saturation: Annotated[
            str,
            Field(
                description=(
                    "For a leaf: why the branch needs no more questions (semantic_overlap, derivable, "
                    "actionable, hollow_questions, budget_exhausted, error); it is then saturated with that "
                    "reason, its answer kept as its synthesis. Empty: none."
                )
            ),
        ] = "",
        boundary: Annotated[
            str,
            Field(
                description=(
                    'JSON {"text": ..., "converging_with": <answer id>}: the boundary question on a '
                    "convergence with another branch's answer, placed under the shallower of the two "
                    'answers with {"boundary": true, "converging_nodes": [new, other]}. Empty: none.'
                )
            ),
        ] = "",
    ) -> CallToolResult:
        """A worker's whole write for a claimed question, in one transaction.

        The answer, its sub-questions (or the leaf's synthesis), the answer's links
        and its call log: all of it lands or none does.
        """

        def submit() -> dict[str, Any]:
            subs, records = _json_list(sub_questions, "sub_questions"), _json_list(calls, "calls")
            return store.submit_answer(
                graph_id,
                node_id,
                text,
                owner=owner,
                metadata=metadata or None,
                sub_questions=subs,
                links=links or None,
                calls=records,
                saturation=saturation or None,
                boundary=boundary or None,
            )

        return _result(submit)

    @tool(name="fractal_get_synthesis_inputs")
    def get_synthesis_inputs(graph_id: GraphId, node_id: NodeId) -> CallToolResult:
        """A question, its answers and its sub-questions with their syntheses: what a synthesis reads."""
        return _result(lambda: store.get_synthesis_inputs(graph_id, node_id))

    @tool(name="fractal_release_claim")
    def release_claim(
        graph_id: GraphId,
        node_id: NodeId,
        worker_id: WorkerId,
        error: Annotated[str, Field(description="Why the attempt failed.")],
        failed: Annotated[
            bool,
            Field(
                description="Count it as a failed attempt (false: the model "
                "was unreachable, not the question's fault)."
            ),
        ] = True,
    ) -> CallToolResult:
        """Give back a claim after a failed attempt (the third failure marks the question error)."""
        return _result(lambda: store.release_claim(graph_id, node_id, worker_id, error, failed=failed))

    @tool(name="fractal_claim_synthesis")
    def claim_synthesis(
        graph_id: GraphId,
        worker_id: WorkerId,
        holder: HolderArg = "",
        skip: Annotated[
            str, Field(description="JSON list of node ids not to hand out (already failed here).")
        ] = "[]",
    ) -> CallToolResult:
        """Take the deepest ready question no other worker is synthesizing; node_id null when none.

        Each synthesis goes to one worker at a time, so the model is paid once for it.
        """
        return _result(
            lambda: store.claim_synthesis(
                graph_id, worker_id, holder=_holder(holder), skip=_json_list(skip, "skip")
            )
        )

    @tool(name="fractal_submit_synthesis")
    def submit_synthesis(
        graph_id: GraphId,
        node_id: NodeId,
        worker_id: WorkerId,
        synthesis_text: Annotated[str, Field(description="The question's synthesis.")],
        calls: Annotated[str, Field(description="JSON list of model-call log records behind it.")] = "[]",
    ) -> CallToolResult:
        """Synthesize a question whose synthesis this worker holds, with its call log, in one transaction."""
        return _result(
            lambda: store.submit_synthesis(
                graph_id, node_id, synthesis_text, worker_id=worker_id, calls=_json_list(calls, "calls")
            )
        )

    @tool(name="fractal_release_synthesis")
    def release_synthesis(graph_id: GraphId, node_id: NodeId, worker_id: WorkerId) -> CallToolResult:
        """Give back a synthesis this worker could not compose, so another worker may take it."""
        return _result(lambda: store.release_synthesis(graph_id, node_id, worker_id))

    @tool(name="fractal_heartbeat")
    def heartbeat(
        holder_id: Annotated[str, Field(description="The holder_id sent with the claims.")],
    ) -> CallToolResult:
        """Renew the leases of every claim of a holder (send it a few times per lease_s)."""
        return _result(lambda: store.heartbeat(holder_id))

    @tool(name="fractal_record_llm_calls")
    def record_llm_calls(
        calls: Annotated[str, Field(description="JSON list of model-call log records.")],
    ) -> CallToolResult:
        """Append model-call log records (role, node, worker, model, tokens, latency, outcome, error)."""
        return _result(lambda: {"recorded": store.record_llm_calls(_json_list(calls, "calls"))})

    return server


class BackgroundServer:
    """Streamable HTTP on a thread with its own event loop: never the notebook kernel's loop.

    Parameters
    ----------
    store : GraphStore
        The store served (it stays the caller's to close).
    host : str
        The address to bind (default loopback). Beyond loopback every request
        needs the bearer token, and starting prints a warning line to stderr.
    port : int
        The port (0: one the system picks; see :attr:`port` after :meth:`start`).
    token : str, optional
        The bearer token every request must carry; else ``$FRACTAL_NB_TOKEN``;
        else, beyond loopback only, a generated one (see :attr:`token`).
    allow_hosts : Iterable[str]
        Extra Host names to answer to beyond loopback, e.g. ``["myhost.example.org"]``;
        ``"*"`` turns the Host check off (see :func:`fractal_nb.mcp_auth.transport_security`).

    Attributes
    ----------
    token : str or None
        The token required (None: none is, on loopback).
    token_generated : bool
        Whether :attr:`token` was generated here, for the caller to hand out.
    """

    def __init__(
        self,
        store: GraphStore,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        allow_hosts: Iterable[str] = (),
    ) -> None:
        self.token, self.token_generated = resolve_token(token, host=host)
        self._security = transport_security(host, allow_hosts=allow_hosts)
        app = http_app(build_server(store, token=self.token), host=host, security=self._security)
        self._server = uvicorn.Server(
            uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        )
        self._thread = threading.Thread(target=self._server.run, name="fractal-nb mcp", daemon=True)
        self.host = host
        self.port = port

    @property
    def url(self) -> str:
        """The MCP endpoint, e.g. ``http://127.0.0.1:8765/mcp`` (loopback for a 0.0.0.0 bind)."""
        return client_url(self.host, self.port)

    def start(self, timeout_s: float = 15.0) -> str:
        """Start serving; returns the URL (the port chosen by the system when 0 was asked)."""
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the MCP server did not start on {self.host}:{self.port}")
            time.sleep(0.01)
        self.port = int(self._server.servers[0].sockets[0].getsockname()[1])
        if not is_loopback(self.host):
            hint = (
                "generated: read it from the server's .token, ex.mcp_token in a notebook"
                if self.token_generated
                else "the one given or $FRACTAL_NB_TOKEN"
            )
            print(
                beyond_loopback_warning(self.host, self.port, security=self._security, token_hint=hint),
                file=sys.stderr,
                flush=True,
            )
        return self.url

    def stop(self, timeout_s: float = 15.0) -> None:
        """Stop serving and wait for the thread (idempotent)."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout_s)
