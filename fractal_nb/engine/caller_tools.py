"""The caller's own tools: Python functions a model may call, beside the source tools.

docs/architecture/engine.md, "Tool calls": ``Exploration.create(..., tools=[fn, ...])`` (or
``open``) registers functions for the runs of that Exploration, in this process: tools are
code, so the file never keeps them. Each function's name, docstring and type-annotated
parameters give its OpenAI tool definition (the parameters' JSON schema built by pydantic
from the signature); a function without a docstring or an annotation, or with one pydantic
cannot describe, is refused before anything runs (:func:`caller_tools`). Called by the
model, its arguments are validated against that schema, and its result is ``str()`` of what
it returned (cut to :data:`~.evidence_tools.MAX_RESULT_CHARS`); what it raises becomes an
error text the model reads, as a source tool's refusal does.

:func:`offered_tools` is what a call offers a model that takes tools: the graph's sources
(:class:`~.evidence_tools.SourceTools`) when it has any, and the caller's tools.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, PydanticUserError, ValidationError, create_model

from ..errors import FractalError, InvalidInputError
from ..llm.protocol import ToolBox, ToolUsingLLM
from ..text import clip
from ..vocabulary import TOOL_NAME, TOOL_NAMES
from .evidence_tools import MAX_RESULT_CHARS, SourceTools

if TYPE_CHECKING:
    from .run_state import RunState

MAX_TOOLS = 32  # caller's tools one run may register
MAX_DESCRIPTION = 1024  # characters of a docstring a definition carries
MAX_CALLS = 4  # tool calls one model call may make, as SourceTools' default
RESERVED = (*TOOL_NAMES, "unknown")  # the source tools' names, and the ledger's role for a made-up tool
_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


@dataclass(frozen=True)
class CallerTool:
    """One registered function: its name, what it does, its arguments' model, and the function."""

    name: str
    description: str
    arguments: type[BaseModel]
    function: Callable[..., object]

    def definition(self) -> dict[str, Any]:
        """The OpenAI tool definition: the name, the docstring, the parameters' JSON schema."""
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": schema},
        }

    def call(self, arguments: dict[str, Any]) -> str:
        """Run the function on ``arguments``; its result as text, or a FractalError the model reads."""
        try:
            checked = self.arguments.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            raise InvalidInputError(f"the arguments of {self.name} are refused: {problems}") from None
        try:
            return str(self.function(**dict(checked)))
        except Exception as exc:  # noqa: BLE001 - the caller's code: its failure is text the model reads
            raise FractalError(f"{self.name} raised {type(exc).__name__}: {clip(str(exc), 1000)}") from None


def caller_tools(tools: object) -> tuple[CallerTool, ...]:
    """The caller's tools, checked: a list of functions (or of :class:`CallerTool`), or None.

    InvalidInputError names the first one refused and why.

    >>> def rivers(name: str, k: int = 3) -> str:
    ...     '''The k longest tributaries of a river.'''
    ...     return "..."
    >>> (tool,) = caller_tools([rivers])
    >>> tool.definition()["function"]["parameters"]["required"]
    ['name']
    >>> caller_tools([lambda x: x])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    fractal_nb.errors.InvalidInputError: tools[0]: a tool's name must be ... not '<lambda>'...
    """
    if tools is None:
        return ()
    if isinstance(tools, str | bytes) or not isinstance(tools, Sequence) or callable(tools):
        raise InvalidInputError(f"tools must be a list of functions, not {type(tools).__name__}")
    if len(tools) > MAX_TOOLS:
        raise InvalidInputError(f"tools holds {len(tools)} functions; at most {MAX_TOOLS}")
    checked = [t if isinstance(t, CallerTool) else _tool(i, t) for i, t in enumerate(tools)]
    names = [t.name for t in checked]
    if len(set(names)) < len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise InvalidInputError(
            f"tools names {', '.join(twice)} more than once: each tool needs its own name"
        )
    return tuple(checked)


def _tool(index: int, function: object) -> CallerTool:
    """One function as a tool, or InvalidInputError saying what keeps it from being one."""
    where = f"tools[{index}]"
    if not callable(function):
        raise InvalidInputError(f"{where} must be a function, not {function!r:.80}")
    name = getattr(function, "__name__", None)
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name) or name in RESERVED:
        raise InvalidInputError(
            f"{where}: a tool's name must be 1-64 letters, digits, _ or -, and none of "
            f"{', '.join(RESERVED)}, not {name!r} (a lambda has none: def a named function)"
        )
    description = inspect.getdoc(function)
    if not description or not description.strip():
        raise InvalidInputError(
            f"{where}: {name} has no docstring; the model reads it to know what the tool does"
        )
    return CallerTool(
        name, clip(description.strip(), MAX_DESCRIPTION), _arguments(where, name, function), function
    )


def _arguments(where: str, name: str, function: Callable[..., object]) -> type[BaseModel]:
    """The model of a function's arguments, from its signature and its annotations."""
    try:
        signature = inspect.signature(function)
        hints = typing.get_type_hints(function)
    except (TypeError, ValueError, NameError) as exc:
        raise InvalidInputError(f"{where}: the signature of {name} cannot be read: {exc}") from None
    fields: dict[str, Any] = {}
    for parameter in signature.parameters.values():
        if parameter.kind not in _KINDS:
            raise InvalidInputError(
                f"{where}: {name}'s parameter {parameter} cannot be passed by name; "
                "a tool takes named arguments"
            )
        if parameter.name not in hints:
            raise InvalidInputError(
                f"{where}: {name}'s parameter {parameter.name!r} has no type annotation; "
                "the model needs its type"
            )
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        fields[parameter.name] = (hints[parameter.name], default)
    try:
        model: type[BaseModel] = create_model(
            f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        )
        model.model_json_schema()
    except (PydanticUserError, TypeError, ValueError) as exc:
        raise InvalidInputError(
            f"{where}: {name}'s annotations cannot be a tool's JSON schema: {clip(str(exc), 300)}"
        ) from None
    return model


class RunTools:
    """A :class:`~fractal_nb.llm.protocol.ToolBox` of the graph's source tools (if any) and the caller's."""

    max_result_chars = MAX_RESULT_CHARS

    def __init__(self, sources: SourceTools | None, caller: Sequence[CallerTool], max_calls: int = MAX_CALLS):
        self.sources = sources
        self.caller = {tool.name: tool for tool in caller}
        self.max_calls = max_calls

    def __repr__(self) -> str:
        return f"RunTools(sources={self.sources!r}, caller={list(self.caller)})"

    def definitions(self) -> list[dict[str, Any]]:
        """The source tools' definitions (with sources), then the caller's."""
        mine = [tool.definition() for tool in self.caller.values()]
        return [*(self.sources.definitions() if self.sources else []), *mine]

    def run(self, name: str, arguments: dict[str, Any]) -> str:
        """Run one tool call; a FractalError the model reads for an unknown tool, bad arguments, a failure."""
        if name in self.caller:
            return self.caller[name].call(arguments)
        if self.sources is not None and name in TOOL_NAMES:
            return self.sources.run(name, arguments)
        offered = [d["function"]["name"] for d in self.definitions()]
        raise InvalidInputError(f"there is no tool {name!r}; the tools: {', '.join(offered)}")


def offered_tools(run: RunState) -> ToolBox | None:
    """What a call offers the model: None for a model that takes no tools, or with nothing to offer.

    The graph's sources (when it has any) and the caller's tools (``RunState.tools``).
    """
    llm = run.call.llm
    if not (isinstance(llm, ToolUsingLLM) and llm.takes_tools) or not (run.has_sources or run.tools):
        return None
    sources = SourceTools(run.store, run.graph_id) if run.has_sources else None
    return RunTools(sources, run.tools) if run.tools else sources
