"""A tool call the model makes (``OpenAILLM.complete_with_tools``): run, reported, carried back.

docs/architecture/engine.md "Tool calls": each call the model makes is run through the
:class:`~fractal_nb.llm.protocol.ToolBox` (a refusal's message is the result the
model reads), reported to the meter, cut to the box's bound, and carried in the
conversation as the assistant's calls and the tool's results.
"""

from __future__ import annotations

import json
import time
from typing import Any, cast

from ..errors import FractalError, InvalidInputError
from .protocol import Message, ToolBox, ToolCall, report_tool_call

_CUT = " …[cut]"  # ends a tool result longer than the tool box allows


def run_tool(tools: ToolBox, call: dict[str, Any]) -> str:
    """Run one tool call; the text the model reads back (a refusal's message too), cut to the box's bound."""
    started = time.perf_counter()
    arguments: Any = None
    error: str | None
    try:
        arguments = json.loads(call["arguments"] or "{}")
        if not isinstance(arguments, dict):
            raise InvalidInputError(f"the arguments of {call['name']} must be a JSON object")
        text, error = tools.run(call["name"], arguments), None
    except json.JSONDecodeError as exc:
        text = error = f"the arguments of {call['name']} were not JSON: {exc}"
    except FractalError as exc:
        text = error = f"error: {exc}"
    if len(text) > tools.max_result_chars:
        text = text[: max(0, tools.max_result_chars - len(_CUT))] + _CUT
    report_tool_call(
        ToolCall(
            name=str(call["name"])[:100],
            arguments=arguments if isinstance(arguments, dict) else {"raw": str(call["arguments"])[:500]},
            ok=error is None,
            error=error,
            result_chars=len(text),
            latency_s=time.perf_counter() - started,
        )
    )
    return text


def assistant_calls(text: str, calls: list[dict[str, Any]]) -> Message:
    """The model's reply that made ``calls``, as the conversation resends it."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls
        ],
    }
    return cast(Message, message)


def tool_result(call: dict[str, Any], text: str) -> Message:
    """A tool call's result, as the conversation carries it back to the model."""
    return cast(Message, {"role": "tool", "tool_call_id": call["id"], "content": text})
