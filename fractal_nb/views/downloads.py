"""``DownloadButtons``: the syntheses, the report and the page, saved by the reader's own browser.

A visitor of the Voila app (on Binder, say) can take nothing from the server's
disk; these buttons hand the file to the browser instead. A click sends a
``download`` request (:class:`DownloadRequest`); Python builds the file's bytes
from the exploration as it stands, with read-only calls only (``syntheses()``,
``report()``, ``render_html()``: no harvest, no model call, nothing written), and
answers with a ``file`` message (:class:`FileMessage`) whose one binary buffer is
the file. The front end (``static/downloads.js``) wraps the buffer in a Blob, makes
an object URL and clicks an ``<a download="...">``: the browser saves it. A file
that cannot be built (nothing synthesized yet, a closed store) is answered with a
``refused`` message (:class:`RefusedMessage`), shown beside the buttons; the
kernel sees no exception.
"""

from __future__ import annotations

import io
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict

import anywidget
import traitlets

from ..errors import FractalError, InvalidInputError, StateError
from .assets import STATIC

if TYPE_CHECKING:
    from ..exploration.exploration import Exploration

Kind = Literal["csv", "parquet", "markdown", "html"]
KINDS: tuple[Kind, ...] = ("csv", "parquet", "markdown", "html")
"""What can be downloaded, in the buttons' order."""
LABELS: dict[str, str] = {
    "csv": "CSV",
    "parquet": "Parquet",
    "markdown": "Markdown report",
    "html": "HTML page",
}
"""Each kind's button."""
NAME_CHARS = 48
"""The most characters of the seed a file name carries."""


class DownloadRequest(TypedDict):
    """The view asks for a file: a button was clicked."""

    type: Literal["download"]
    kind: str  # one of KINDS (checked: the view may send anything)
    request: int  # the view's own count of its requests, echoed in the answer


class FileMessage(TypedDict):
    """The file, its bytes in the message's one buffer."""

    type: Literal["file"]
    request: int
    kind: str
    name: str  # what the browser saves it as: safe characters only
    mime: str
    size: int  # bytes in the buffer


class RefusedMessage(TypedDict):
    """No file: why, for the view to show beside the buttons."""

    type: Literal["refused"]
    request: int
    kind: str
    message: str


@dataclass(frozen=True)
class Download:
    """One built file: its name, its MIME type and its bytes."""

    name: str
    mime: str
    data: bytes


class DownloadButtons(anywidget.AnyWidget):
    """Buttons that download the exploration's syntheses, report and page in the reader's browser.

    CSV and Parquet hold ``Exploration.syntheses()``; the Markdown report is
    ``report()`` (the result as it stands, read-only); the HTML page is
    ``render_html()``, the page ``to_html`` writes. Each click reads the graph as
    it is then, so the widget needs no refresh. Nothing is written on the server.

    Parameters
    ----------
    exploration
        The exploration whose files the buttons download.
    kinds
        The buttons shown, in order: any of ``"csv"``, ``"parquet"``, ``"markdown"``, ``"html"``.

    Examples
    --------
    >>> from fractal_nb import Exploration, SimulatedLLM
    >>> from fractal_nb.views import DownloadButtons
    >>> ex = Exploration.create("Why do tides turn?", intensity="pulse", llm=SimulatedLLM())
    >>> buttons = DownloadButtons(ex)
    >>> buttons.build("markdown").name  # doctest: +ELLIPSIS
    'why-do-tides-turn-g-...-report.md'
    """

    _esm = STATIC / "downloads.js"
    _css = STATIC / "downloads.css"
    kinds = traitlets.List(traitlets.Unicode(), help="The buttons shown, in order (KINDS).").tag(sync=True)
    labels = traitlets.Dict(help="Each kind's button label.").tag(sync=True)

    def __init__(self, exploration: Exploration, *, kinds: Sequence[str] = KINDS) -> None:
        super().__init__(kinds=_checked_kinds(kinds), labels=dict(LABELS))
        self.exploration = exploration
        self.on_msg(self._on_view_message)

    def __repr__(self) -> str:
        return f"<DownloadButtons {self.exploration.graph_id} ({', '.join(self.kinds)})>"

    def build(self, kind: str) -> Download:
        """The file of ``kind`` as the graph stands now (read-only); refused with a ``FractalError``."""
        builder = _BUILDERS.get(kind)
        if builder is None:
            raise InvalidInputError(f"unknown download {kind!r}; should be one of: {', '.join(KINDS)}")
        return builder(self.exploration)

    def _on_view_message(self, _widget: object, content: Any, _buffers: object) -> None:
        if not isinstance(content, Mapping) or content.get("type") != "download":
            return
        kind, request = str(content.get("kind")), content.get("request")
        request = request if isinstance(request, int) and not isinstance(request, bool) else 0
        try:
            built = self.build(kind)
        except Exception as exc:  # a face: every refusal is a message beside the buttons, never the kernel's
            refused: RefusedMessage = {
                "type": "refused",
                "request": request,
                "kind": kind,
                "message": _said(exc),
            }
            self._emit(refused)
            return
        sent: FileMessage = {
            "type": "file",
            "request": request,
            "kind": kind,
            "name": built.name,
            "mime": built.mime,
            "size": len(built.data),
        }
        self._emit(sent, [built.data])

    def _emit(self, message: Mapping[str, Any], buffers: list[bytes] | None = None) -> None:
        self.send(dict(message), buffers)


def file_stem(graph_id: str, seed: str) -> str:
    """A file name's stem from the seed and the graph id: lower-case ASCII letters, digits and hyphens.

    >>> file_stem("g-0a1b", "Why do cities grow? <fast>")
    'why-do-cities-grow-fast-g-0a1b'
    >>> file_stem("g/../x", "城市")
    'g-x'
    """
    words = unicodedata.normalize("NFKD", seed).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", words.lower()).strip("-")
    if len(slug) > NAME_CHARS:  # cut between words when there is one to cut at
        cut = slug[: NAME_CHARS + 1]
        slug = cut.rsplit("-", 1)[0] if "-" in cut else cut[:NAME_CHARS]
    ident = re.sub(r"[^a-z0-9]+", "-", graph_id.lower()).strip("-") or "graph"
    return f"{slug}-{ident}" if slug else ident


def _stem(exploration: Exploration) -> str:
    return file_stem(exploration.graph_id, str(exploration.store.get_graph(exploration.graph_id)["seed"]))


def _syntheses(exploration: Exploration, what: str) -> Any:
    frame = exploration.syntheses()
    if frame.empty:
        raise StateError(
            f"no question is synthesized yet: there is no {what} of syntheses to download; "
            "step or run the exploration first (the report and the page show it as it stands)"
        )
    return frame


def _csv(exploration: Exploration) -> Download:
    data = _syntheses(exploration, "CSV").to_csv(index=False).encode("utf-8")
    return Download(f"{_stem(exploration)}-syntheses.csv", "text/csv;charset=utf-8", data)


def _parquet(exploration: Exploration) -> Download:
    buffer = io.BytesIO()
    _syntheses(exploration, "Parquet file").to_parquet(buffer, index=False)
    return Download(
        f"{_stem(exploration)}-syntheses.parquet", "application/vnd.apache.parquet", buffer.getvalue()
    )


def _markdown(exploration: Exploration) -> Download:
    data = str(exploration.report()).encode("utf-8")  # preview(): read-only, never a harvest
    return Download(f"{_stem(exploration)}-report.md", "text/markdown;charset=utf-8", data)


def _html(exploration: Exploration) -> Download:
    data = exploration.render_html().encode("utf-8")
    return Download(f"{_stem(exploration)}-page.html", "text/html;charset=utf-8", data)


_BUILDERS: dict[str, Callable[[Exploration], Download]] = {
    "csv": _csv,
    "parquet": _parquet,
    "markdown": _markdown,
    "html": _html,
}


def _checked_kinds(kinds: Iterable[str]) -> list[str]:
    """``kinds`` as a list, each one of :data:`KINDS` and none twice."""
    if isinstance(kinds, str):
        raise InvalidInputError(f"kinds must be a list of downloads, not the string {kinds!r}")
    chosen = list(kinds)
    unknown = [k for k in chosen if k not in KINDS]
    if unknown or len(set(chosen)) != len(chosen) or not chosen:
        raise InvalidInputError(
            f"kinds must name each download once, from: {', '.join(KINDS)} (got {chosen!r})"
        )
    return chosen


def _said(exc: Exception) -> str:
    """An error as the line beside the buttons: our own errors say what to do; others name their type."""
    return (
        str(exc)
        if isinstance(exc, FractalError)
        else f"could not build the file: {type(exc).__name__}: {exc}"
    )
