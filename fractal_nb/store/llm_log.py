"""Model calls kept in the store: the call log (cost, failures) and the record/replay cache."""

from __future__ import annotations

import json
from typing import Any

from ..errors import InvalidInputError
from .base import StoreBase, require_id
from .records import ModelSpend
from .rows import iso

_CALL_COLUMNS = (
    "call_id, graph_id, node_id, worker, role, model, prompt_tokens, completion_tokens, "
    "attempts, corrections, queue_s, latency_s, mode, outcome, error, created_at"
)
OUTCOMES = ("ok", "cached", "error", "discarded")  # discarded: paid for, then refused by the store


class LLMLog(StoreBase):
    """Append-only log of model calls and a completion cache."""

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

    def record_llm_calls(self, calls: list[dict[str, Any]]) -> int:
        """Append several calls (dicts of :meth:`record_llm_call`'s fields) in one statement.

        Inside :meth:`batch` they land with the node's other writes.
        """
        for call in calls:
            if call.get("outcome") not in OUTCOMES:
                raise InvalidInputError(
                    f"invalid outcome {call.get('outcome')!r}; valid values: {', '.join(OUTCOMES)}"
                )
        if not calls:
            return 0
        now = self.clock()
        rows = ", ".join("(nextval('call_seq'), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" for _ in calls)
        self._db.write_one(
            f"INSERT INTO llm_calls ({_CALL_COLUMNS}) VALUES {rows}",
            [
                v
                for c in calls
                for v in (
                    c["graph_id"],
                    c["node_id"],
                    c["worker"],
                    c["role"],
                    c["model"],
                    c["prompt_tokens"],
                    c["completion_tokens"],
                    c["attempts"],
                    c.get("corrections", 0),
                    c.get("queue_s", 0.0),
                    c["latency_s"],
                    c.get("mode"),
                    c["outcome"],
                    c.get("error"),
                    now,
                )
            ],
        )
        return len(calls)

    def get_llm_calls(self, graph_id: str, node_id: str | None = None) -> dict[str, Any]:
        """Every logged call of a graph (or of one of its nodes), in order."""
        gid = require_id(graph_id, "graph_id")
        where, params = "graph_id = ?", [gid]
        if node_id is not None:
            where, params = where + " AND node_id = ?", [gid, require_id(node_id, "node_id")]
        rows = self._db.fetchall(
            f"SELECT {_CALL_COLUMNS} FROM llm_calls WHERE {where} ORDER BY call_id", params
        )
        names = [c.strip() for c in _CALL_COLUMNS.split(",")]
        calls = [dict(zip(names, row, strict=True)) for row in rows]
        for call in calls:
            call["created_at"] = iso(call["created_at"])
        return {"graph_id": gid, "calls": calls, "count": len(calls)}

    def count_replies(self, graph_id: str) -> dict[str, int]:
        """How a graph's model calls went, by kind.

        ``accepted`` at once, ``corrected`` after a round trip, ``rejected`` (replies
        that were junk or invalid, llm/quality.py), ``failed`` (no reply at all).
        """
        gid = require_id(graph_id, "graph_id")
        row = self._db.fetchone(
            "SELECT count(*) FILTER (outcome <> 'error' AND corrections = 0), "
            "count(*) FILTER (outcome <> 'error' AND corrections > 0), "
            "count(*) FILTER (outcome = 'error' AND error LIKE 'LLMOutputError%'), "
            "count(*) FILTER (outcome = 'error' AND error NOT LIKE 'LLMOutputError%') "
            "FROM llm_calls WHERE graph_id = ?",
            [gid],
        )
        accepted, corrected, rejected, failed = row if row is not None else (0, 0, 0, 0)
        return {"accepted": accepted, "corrected": corrected, "rejected": rejected, "failed": failed}

    def llm_spend(self, graph_id: str) -> list[ModelSpend]:
        """What a graph's model calls spent, per model: calls, prompt_tokens, completion_tokens.

        Every row counts (failed and discarded calls were paid for too) but
        replayed ones (``cached``).
        """
        gid = require_id(graph_id, "graph_id")
        rows = self._db.fetchall(
            "SELECT model, count(*), coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0) "
            "FROM llm_calls WHERE graph_id = ? AND outcome <> 'cached' GROUP BY model ORDER BY model",
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
            "INSERT OR REPLACE INTO llm_cache VALUES (?, ?, ?, ?, ?)",
            [cache_key, model, role, json.dumps(response), self.clock()],
        )
