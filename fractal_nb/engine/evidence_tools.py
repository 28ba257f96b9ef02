"""``SourceTools``: the graph's sources as tools a model may call before it answers.

Four tools (docs/architecture/engine.md, "Tool calls"): ``search_sources(query, k)`` (the
store's lexical search over the graph's source chunks), ``read_source(source,
line_start, line_end)`` (a span of one source's lines), ``glob_sources(pattern)`` (the
sources' names matching a glob) and ``grep_sources(pattern, glob)`` (the lines matching a
regular expression, each as ``name:line: text``; "Tracks", skills). Each result is compact text
the model can quote from: a ``[name:L1-L30]`` header, then the lines, each after its
number. A refusal (an unknown source, lines past the end, a bad argument) is a
:class:`~fractal_nb.errors.FractalError` whose message the model reads instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import InvalidInputError
from ..store import WorkerStore
from ..text import one_line
from ..vocabulary import TOOL_NAMES

MAX_K = 8  # chunks one search may return
MAX_LINES = 60  # lines one read may return (a longer span is cut there, and the result says so)
MAX_RESULT_CHARS = 6_000  # what one result may hold; the backend cuts a longer one (llm/openai_llm.py)
MAX_QUERY_CHARS = 500
MAX_GLOB_NAMES = 100  # names one glob returns
MAX_GREP_LINES = 40  # lines one grep returns

_DEFINITIONS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "search_sources",
            "description": (
                "Search the sources of this exploration (files, notes, tables) for the passages "
                "that best match a few keywords; returns each passage as [source:Lstart-Lend] "
                "and its numbered lines."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "A few keywords, e.g. 'claim lease expiry'."},
                    "k": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_K,
                        "description": f"How many passages (1-{MAX_K}, default 5).",
                    },
                },
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_source",
            "description": (
                f"Read lines of one source, by its name as search_sources shows it (at most {MAX_LINES} "
                "lines at once); returns [source:Lstart-Lend] and the numbered lines."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "source": {"type": "string", "description": "The source's name, e.g. 'notes/rivers.md'."},
                    "line_start": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "The first line (from 1).",
                    },
                    "line_end": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "The last line (inclusive).",
                    },
                },
                "required": ["source", "line_start", "line_end"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "glob_sources",
            "description": "List the sources whose names match a glob, e.g. '**/*.py' or '*claim*'.",
            "parameters": {
                "type": "object",
                "properties": {"pattern": {"type": "string", "description": "A glob over source names."}},
                "required": ["pattern"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "grep_sources",
            "description": (
                "Find the lines of the sources matching a regular expression (case-insensitive); returns "
                f"at most {MAX_GREP_LINES} lines as source:line: text."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "A regular expression, e.g. 'def claim'."},
                    "glob": {"type": "string", "description": "Only sources whose names match this glob."},
                },
                "required": ["pattern"],
            },
        },
    },
]


def source_block(source: str, line_start: int, lines: Sequence[str]) -> str:
    """Lines of a source as the model reads them: a ``[name:Lstart-Lend]`` header, then numbered lines.

    >>> print(source_block("notes.md", 7, ["Rivers meander.", "Banks erode."]))
    [notes.md:L7-L8]
    7: Rivers meander.
    8: Banks erode.
    """
    header = f"[{one_line(source)}:L{line_start}-L{line_start + len(lines) - 1}]"
    return "\n".join([header, *(f"{line_start + i}: {one_line(line)}" for i, line in enumerate(lines))])


class SourceTools:
    """The :class:`~fractal_nb.llm.protocol.ToolBox` of a graph's sources, over a worker's store.

    Parameters
    ----------
    store
        The worker's store (local, or a :class:`~fractal_nb.mcp.remote.RemoteStore`):
        its ``search_sources`` and ``read_source``.
    graph_id
        The graph whose sources are searched (retrieval is scoped to them).
    max_calls
        The most tool calls one model call may make (the backend stops there).
    """

    max_result_chars = MAX_RESULT_CHARS

    def __init__(self, store: WorkerStore, graph_id: str, max_calls: int = 4) -> None:
        if isinstance(max_calls, bool) or not isinstance(max_calls, int) or not 1 <= max_calls <= 16:
            raise InvalidInputError(f"max_calls must be an integer from 1 to 16, not {max_calls!r}")
        self.store = store
        self.graph_id = graph_id
        self.max_calls = max_calls

    def __repr__(self) -> str:
        return f"SourceTools({self.graph_id!r}, max_calls={self.max_calls})"

    def definitions(self) -> list[dict[str, Any]]:
        """``search_sources``, ``read_source``, ``glob_sources`` and ``grep_sources``, as OpenAI tools."""
        return _DEFINITIONS

    def run(self, name: str, arguments: dict[str, Any]) -> str:
        """Run one tool call; InvalidInputError (or the store's refusal) says what is wrong."""
        if name == "search_sources":
            return self.search(_text(arguments, "query"), _whole(arguments, "k", default=5))
        if name == "read_source":
            return self.read(
                _text(arguments, "source"), _whole(arguments, "line_start"), _whole(arguments, "line_end")
            )
        if name == "glob_sources":
            return self.glob(_text(arguments, "pattern"))
        if name == "grep_sources":
            where = arguments.get("glob")
            return self.grep(_text(arguments, "pattern"), None if where is None else _text(arguments, "glob"))
        raise InvalidInputError(f"there is no tool {name!r}; the tools: {', '.join(TOOL_NAMES)}")

    def glob(self, pattern: str) -> str:
        """The names of the sources matching ``pattern``, one a line (at most :data:`MAX_GLOB_NAMES`)."""
        names = self.store.glob_sources(self.graph_id, pattern)
        if not names:
            return f"no source name matches {pattern[:80]!r}"
        more = f"\n(and {len(names) - MAX_GLOB_NAMES} more)" if len(names) > MAX_GLOB_NAMES else ""
        return "\n".join(one_line(n) for n in names[:MAX_GLOB_NAMES]) + more

    def grep(self, pattern: str, glob: str | None = None) -> str:
        """The lines matching ``pattern`` as ``name:line: text`` (at most :data:`MAX_GREP_LINES`)."""
        hits = self.store.grep_sources(self.graph_id, pattern, glob=glob, k=MAX_GREP_LINES)
        if not hits:
            return f"no line of the sources matches {pattern[:80]!r}"
        return "\n".join(f"{one_line(h['source'])}:{h['line']}: {one_line(h['text'])}" for h in hits)

    def search(self, query: str, k: int = 5) -> str:
        """The ``k`` passages that best match ``query``, each as a :func:`source_block`."""
        if not 1 <= k <= MAX_K:
            raise InvalidInputError(f"k must be from 1 to {MAX_K}, not {k}")
        hits = self.store.search_sources(self.graph_id, query[:MAX_QUERY_CHARS], k=k)
        if not hits:
            return f"no passage of the sources matches {query[:80]!r}; try other words"
        return "\n\n".join(source_block(h["source"], h["line_start"], h["text"].split("\n")) for h in hits)

    def read(self, source: str, line_start: int, line_end: int) -> str:
        """Lines ``line_start``-``line_end`` of ``source`` (at most :data:`MAX_LINES`) as a source block."""
        if line_end < line_start:
            raise InvalidInputError(f"line_end ({line_end}) must not be before line_start ({line_start})")
        last = min(line_end, line_start + MAX_LINES - 1)
        read = self.store.read_source(self.graph_id, source, line_start, last)
        block = source_block(read["source"], read["line_start"], read["lines"])
        if last < line_end:
            block += f"\n(cut at {MAX_LINES} lines: read from line {last + 1} for more)"
        return block


def _text(arguments: dict[str, Any], name: str) -> str:
    value = arguments.get(name)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{name} must be non-empty text, not {value!r:.60}")
    return value


def _whole(arguments: dict[str, Any], name: str, default: int | None = None) -> int:
    value = arguments.get(name, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # some models send 3.0
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"{name} must be a whole number, not {value!r:.60}")
    return value
