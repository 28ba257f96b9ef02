"""How a function is served as an MCP tool: its JSON result, and the signature the SDK reads.

docs/architecture/faces.md, "Inspection over MCP": the store's tools (:mod:`.server`) and
the read tools (:mod:`.reads`) are served alike: a value comes back as JSON (text and
structured), a refusal as ``{"error": ..., "error_type": ...}`` with ``is_error`` set.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Sequence
from typing import Any

from mcp.types import CallToolResult, TextContent

from ..errors import FractalError
from .tools import Param


def answered(value: dict[str, Any]) -> CallToolResult:
    """``value`` as a tool's result: JSON text and structured content."""
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(value))], structured_content=value
    )


def refused(exc: FractalError) -> CallToolResult:
    """A refusal as a tool's error result: ``{"error": ..., "error_type": ...}``; nothing was changed."""
    value = {"error": str(exc), "error_type": type(exc).__name__}
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(value))], structured_content=value, is_error=True
    )


def shaped(
    call: Callable[..., CallToolResult], name: str, doc: str, params: Sequence[Param]
) -> Callable[..., CallToolResult]:
    """``call`` named ``name``, documented ``doc``, with the keyword-only signature of ``params``."""
    call.__name__ = name
    call.__doc__ = doc
    call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(
                p.name,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=p.annotation,
                default=inspect.Parameter.empty if p.default is ... else p.default,
            )
            for p in params
        ],
        return_annotation=CallToolResult,
    )
    return call
