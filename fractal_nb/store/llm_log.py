"""Model calls kept in the store: the call log (cost, failures) and the record/replay cache.

The call log is the ledger budgets count (engine/limits.py), and rows also come from
outside (MCP's ``fractal_record_llm_calls``): each row is checked before any lands,
and a batch with one bad row is refused whole.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, cast

from ..checks import optional_name, require_id
from ..errors import InvalidInputError, NotFoundError
from ..vocabulary import MAX_CALL_TOKENS, TOOL_NAME, TOOL_NAMES, CallOutcome
from .base import StoreCore
from .records import CallRow, CallRows, ModelSpend
from .rows import iso

_CALL_COLUMNS = (
    "call_id, graph_id, node_id, worker, role, model, prompt_tokens, completion_tokens, tokens_estimated, "
    "attempts, corrections, queue_s, latency_s, mode, outcome, error, retry_sampling, refused_usage, "
    "created_at"
)
# NULL when read from a file older than them
_LATER_COLUMNS = ("tokens_estimated", "retry_sampling", "refused_usage")
OUTCOMES = tuple(CallOutcome)
ROLES = (
    "seed",
    "answer",
    "connect",
    "synthesize",
    "harvest",
    "widen",
    # a model's tool calls, a row each (docs/architecture/engine.md, "Tool calls")
    *(f"tool:{name}" for name in (*TOOL_NAMES, "unknown")),
    "tracks_seed",
    "track_synthesis",
    "aggregate",
    "think",
    "eval",
    "single",
    "judge",
)  # llm/schemas.py role_of, one per schema
_MODEL_CALL = "role NOT LIKE 'tool:%'"  # a row of a model call, not of one of its tool calls
MAX_CALL_TRIES = 1_000  # attempts or corrections of one call
MAX_CALL_SECONDS = 1e6  # latency or queue time of one call
MAX_CALLS = 1_000  # rows per batch
_REQUIRED = (
    "graph_id",
    "role",
    "model",
    "prompt_tokens",
    "completion_tokens",
    "attempts",
    "latency_s",
    "outcome",
)
_OPTIONAL = (
    "node_id",
    "worker",
    "corrections",
    "queue_s",
    "mode",
    "error",
    "tokens_estimated",
    "retry_sampling",
    "refused_usage",
)
_TEXT_LIMITS = {"model": 500, "mode": 50, "error": 2000, "retry_sampling": 2000, "refused_usage": 2000}


class LLMLog:
    """Append-only log of model calls and a completion cache."""

    def __init__(self, core: StoreCore) -> None:
        self._core = core
        self._db = core.db

    def record_llm_call(
        self,
        *,
        graph_id: str | None,
        node_id: str | None,
        worker: str | None,
        role: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        attempts: int,
        latency_s: float,
        outcome: str,
        error: str | None = None,
    ) -> dict[str, Any]:
        """Append one call to the log (failed calls too: ``outcome="error"``)."""
        call = {
            "graph_id": graph_id,
            "node_id": node_id,
            "worker": worker,
            "role": role,
            "model": model,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "attempts": attempts,
            "latency_s": latency_s,
            "outcome": outcome,
            "error": error,
        }
        self.record_llm_calls([call])
        return {"graph_id": graph_id, "node_id": node_id, "role": role, "outcome": outcome}

    def record_llm_calls(self, calls: CallRows) -> int:
        """Append several calls (dicts of :meth:`record_llm_call`'s fields) in one statement.

        Each row is checked first (``_checked_call``): a known graph and role, a node
        of that graph or None, whole non-negative token counts of at most
        ``MAX_CALL_TOKENS``, bounded text; one bad row refuses the batch with
        InvalidInputError and nothing lands. Inside :meth:`batch` they land with the
        node's other writes.
        """
        return self.land(calls)

    def land(self, calls: CallRows, graph_id: str | None = None, known: Sequence[str] = ()) -> int:
        """:meth:`record_llm_calls` inside a step's write: ``known`` nodes of ``graph_id`` need no read.

        The step holds those rows already (the question it answers, the answer it
        wrote), so a log naming only them is checked without a query.
        """
        if not isinstance(calls, list | tuple):
            raise InvalidInputError(
                f"calls must be a list of call records (objects), not {type(calls).__name__}"
            )
        if len(calls) > MAX_CALLS:
            raise InvalidInputError(f"{len(calls):,} calls in one batch; at most {MAX_CALLS:,}")
        rows = [_checked_call(i, call) for i, call in enumerate(calls)]
        self._check_places(rows, graph_id, set(known))
        if not rows:
            return 0
        now = self._core.clock()
        values = ", ".join(
            "(nextval('call_seq'), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" for _ in rows
        )
        self._db.write_one(
            f"INSERT INTO llm_calls ({_CALL_COLUMNS}) VALUES {values}",
            [
                v
                for c in rows
                for v in (
                    c["graph_id"],
                    c["node_id"],
                    c["worker"],
                    c["role"],
                    c["model"],
                    c["prompt_tokens"],
                    c["completion_tokens"],
                    c["tokens_estimated"],
                    c["attempts"],
                    c["corrections"],
                    c["queue_s"],
                    c["latency_s"],
                    c["mode"],
                    c["outcome"],
                    c["error"],
                    c["retry_sampling"],
                    c["refused_usage"],
                    now,
                )
            ],
        )
        return len(rows)

    def _check_places(self, rows: list[CallRow], graph_id: str | None, known: set[str]) -> None:
        """Every row's graph exists and its node (when it names one) is a node of that graph."""
        for gid in dict.fromkeys(r["graph_id"] for r in rows):
            try:
                self._core.known_graph(gid)
            except NotFoundError as exc:
                raise InvalidInputError(f"call records name {exc}") from None
            named = sorted(
                {r["node_id"] for r in rows if r["graph_id"] == gid and r["node_id"] is not None}
                - (known if gid == graph_id else set())
            )
            missing = self._core.missing(gid, named)
            if missing:
                listed = ", ".join(map(repr, missing[:5]))
                raise InvalidInputError(f"call records name node(s) {listed} that are not in graph {gid}")

    def get_llm_calls(self, graph_id: str, node_id: str | None = None) -> dict[str, Any]:
        """Every logged call of a graph (or of one of its nodes), in order."""
        gid = require_id(graph_id, "graph_id")
        where, params = "graph_id = ?", [gid]
        if node_id is not None:
            where, params = where + " AND node_id = ?", [gid, require_id(node_id, "node_id")]
        columns = _CALL_COLUMNS
        if self._db.read_only:  # a file older than some columns, opened read-only: they read as NULL
            present = {
                row[0]
                for row in self._db.fetchall(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = 'llm_calls' "
                    "AND table_catalog = current_database() AND table_schema = current_schema()"
                )
            }
            for later in _LATER_COLUMNS:
                if later not in present:
                    columns = columns.replace(later, f"NULL AS {later}")
        rows = self._db.fetchall(f"SELECT {columns} FROM llm_calls WHERE {where} ORDER BY call_id", params)
        names = [c.strip() for c in _CALL_COLUMNS.split(",")]
        calls = [dict(zip(names, row, strict=True)) for row in rows]
        for call in calls:
            call["created_at"] = iso(call["created_at"])
        return {"graph_id": gid, "calls": calls, "count": len(calls)}

    def count_replies(self, graph_id: str) -> dict[str, int]:
        """How a graph's model calls went, by kind.

        ``accepted`` at once, ``corrected`` after a round trip, ``rejected`` (replies
        that were junk or invalid, llm/quality.py), ``failed`` (no reply at all).
        A model's tool calls are rows of their own, not calls of the model.
        """
        gid = require_id(graph_id, "graph_id")
        row = self._db.fetchone(
            "SELECT count(*) FILTER (WHERE outcome <> 'error' AND corrections = 0), "
            "count(*) FILTER (WHERE outcome <> 'error' AND corrections > 0), "
            "count(*) FILTER (WHERE outcome = 'error' AND error LIKE 'LLMOutputError%'), "
            "count(*) FILTER (WHERE outcome = 'error' AND error NOT LIKE 'LLMOutputError%') "
            f"FROM llm_calls WHERE graph_id = ? AND {_MODEL_CALL}",
            [gid],
        )
        accepted, corrected, rejected, failed = row if row is not None else (0, 0, 0, 0)
        return {"accepted": accepted, "corrected": corrected, "rejected": rejected, "failed": failed}

    def llm_spend(self, graph_id: str) -> list[ModelSpend]:
        """What a graph's model calls spent, per model: calls, prompt_tokens, completion_tokens.

        Every row counts (failed and discarded calls were paid for too) but
        replayed ones (``cached``) and tool calls (their tokens are their model call's).
        """
        gid = require_id(graph_id, "graph_id")
        rows = self._db.fetchall(
            "SELECT model, count(*), coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0) "
            f"FROM llm_calls WHERE graph_id = ? AND outcome <> 'cached' AND {_MODEL_CALL} "
            "GROUP BY model ORDER BY model",
            [gid],
        )
        return [
            {"model": m, "calls": c, "prompt_tokens": int(p), "completion_tokens": int(t)}
            for m, c, p, t in rows
        ]

    def cache_get(self, cache_key: str) -> dict[str, Any] | None:
        """A recorded completion, or None."""
        row = self._db.fetchone("SELECT response FROM llm_cache WHERE cache_key = ?", [cache_key])
        if row is None:
            return None
        value: dict[str, Any] = json.loads(row[0])
        return value

    def cache_put(self, cache_key: str, *, model: str, role: str, response: dict[str, Any]) -> None:
        """Record (or re-record) a completion."""
        self._db.write_one(
            "INSERT INTO llm_cache (cache_key, model, role, response, created_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (cache_key) DO UPDATE SET model = excluded.model, role = excluded.role, "
            "response = excluded.response, created_at = excluded.created_at",
            [cache_key, model, role, json.dumps(response), self._core.clock()],
        )


def _caller_tool(role: object) -> bool:
    """Whether ``role`` is ``tool:<name>``: a call of a caller's own tool.

    docs/architecture/engine.md, "Tool calls".
    """
    return isinstance(role, str) and role.startswith("tool:") and TOOL_NAME.fullmatch(role[5:]) is not None


def _checked_call(index: int, call: object) -> CallRow:
    """One call record as the ledger keeps it, or InvalidInputError saying what is wrong and allowed."""
    where = f"calls[{index}]"
    row = _fields(where, call)
    row["graph_id"] = require_id(row["graph_id"], f"{where}.graph_id")
    row["node_id"] = None if row["node_id"] is None else require_id(row["node_id"], f"{where}.node_id")
    row["worker"] = optional_name(row["worker"], f"{where}.worker")
    if row["role"] not in ROLES and not _caller_tool(row["role"]):
        raise InvalidInputError(
            f"{where}.role {row['role']!r} is not a role; roles: {', '.join(ROLES)}, or tool:<name> "
            "for a call of a caller's own tool"
        )
    if row["outcome"] not in OUTCOMES:
        raise InvalidInputError(
            f"{where}.outcome {row['outcome']!r} is invalid; valid values: {', '.join(OUTCOMES)}"
        )
    _check_counts(where, row)
    _check_seconds(where, row)
    for name, most in _TEXT_LIMITS.items():
        value = row[name]
        if value is None and name != "model":
            continue
        if not isinstance(value, str) or not value or len(value) > most or "\x00" in value:
            raise InvalidInputError(
                f"{where}.{name} must be text of 1 to {most:,} characters without NUL, not {value!r:.60}"
            )
    if not isinstance(row["tokens_estimated"] or False, bool):
        raise InvalidInputError(
            f"{where}.tokens_estimated must be true or false, not {row['tokens_estimated']!r}"
        )
    row["tokens_estimated"] = bool(row["tokens_estimated"])
    return cast(CallRow, row)  # every field checked above


def _fields(where: str, call: object) -> dict[str, Any]:
    """The record's fields, each of the ledger's present (an optional one as None); refused if one is not."""
    if not isinstance(call, Mapping):
        raise InvalidInputError(
            f"{where} must be an object with {', '.join(_REQUIRED)} (and optionally "
            f"{', '.join(_OPTIONAL)}), not {type(call).__name__} {call!r:.80}"
        )
    unknown = sorted(set(map(str, call)) - set(_REQUIRED) - set(_OPTIONAL))
    missing = [k for k in _REQUIRED if k not in call]
    if unknown or missing:
        problem = f"lacks {', '.join(missing)}" if missing else f"has unknown field(s) {', '.join(unknown)}"
        raise InvalidInputError(
            f"{where} {problem}; fields: {', '.join(_REQUIRED)} (required), {', '.join(_OPTIONAL)} (optional)"
        )
    return {k: call.get(k) for k in (*_REQUIRED, *_OPTIONAL)}


def _check_counts(where: str, row: dict[str, Any]) -> None:
    """Tokens and tries: whole numbers within their bounds (a missing ``corrections`` is 0)."""
    for name, most in (
        ("prompt_tokens", MAX_CALL_TOKENS),
        ("completion_tokens", MAX_CALL_TOKENS),
        ("attempts", MAX_CALL_TRIES),
        ("corrections", MAX_CALL_TRIES),
    ):
        value = 0 if row[name] is None and name == "corrections" else row[name]
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
            raise InvalidInputError(
                f"{where}.{name} must be a whole number from 0 to {most:,}, not {value!r:.40}"
            )
        row[name] = value


def _check_seconds(where: str, row: dict[str, Any]) -> None:
    """Latency and queueing: finite seconds within the bound (a missing ``queue_s`` is 0)."""
    for name in ("latency_s", "queue_s"):
        value = 0.0 if row[name] is None and name == "queue_s" else row[name]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not 0 <= value <= MAX_CALL_SECONDS
        ):
            raise InvalidInputError(
                f"{where}.{name} must be seconds from 0 to {MAX_CALL_SECONDS:g}, not {value!r:.40}"
            )
        row[name] = float(value)
