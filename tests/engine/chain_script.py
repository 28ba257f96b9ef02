"""Replies for a scripted thinkon chain, and the checks a chain's event log must pass."""

from __future__ import annotations

from typing import Any

JUNK: dict[str, Any] = {"type": "MAYBE", "description": ""}
"""A reply no Think or Eval accepts: a model's invalid output."""
Reply = dict[str, Any]


def todo(plan: str) -> Reply:
    return {"type": "TODO", "description": plan}


def ret(text: str) -> Reply:
    return {"type": "RETURN", "description": text}


def call(goal: str) -> Reply:
    return {"type": "CALL", "description": goal}


CHAIN_KINDS = {"thinkon_planned", "thinkon_called", "thinkon_returned", "done_appended"}


def chain_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] in CHAIN_KINDS]


def assert_chain_invariant(events: list[dict[str, Any]], parent_of: dict[str, str | None]) -> None:
    """The strong invariant on the event log: a child's return is in its parent's ``done`` before the
    parent acts again (a call, or its own return), and every return is appended exactly once."""
    pending: dict[str, set[str]] = {}  # parent -> children returned, not yet appended
    appended: set[str] = set()
    for event in chain_events(events):
        node, kind, payload = event["node_id"], event["kind"], event["payload"]
        if kind in ("thinkon_called", "thinkon_returned"):  # ``node`` acted: nothing of it may be pending
            assert not pending.get(node), f"{node} acted before {pending.get(node)} reached its done"
        if kind == "thinkon_returned" and parent_of.get(node) is not None:
            pending.setdefault(str(parent_of[node]), set()).add(node)
        if kind == "done_appended":
            child = payload["child"]
            assert child in pending.get(node, set()), f"{child} appended to {node} before it returned"
            assert child not in appended, f"{child} appended twice"
            pending[node].discard(child)
            appended.add(child)
    assert not any(pending.values()), f"returns never appended: {pending}"
