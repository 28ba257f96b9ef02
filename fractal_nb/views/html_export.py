"""A graph as one offline HTML page: the live view's question tree, legend, search, details, downloads.

The page inlines vis-network (the build the pyvis package installed), our own
``static/network.js`` and ``network.css``, and the graph as JSON, so it opens
from a file with nothing fetched. The graph's JSON is the store's
(``GraphStore.get_question_items``, written by DuckDB) placed into the page as it
comes: a page of 100,000 nodes costs no Python per row. Model text travels only inside the JSON blocks
(``</`` escaped; the downloads' block holds no ``<`` at all) and reaches the page through textContent
or vis-network's text tooltips (docs/architecture/faces.md, "The live view's protocol").

The page offers its own downloads (``static/downloads.js``), built in the reader's
browser from what the page carries, with no server: the questions (from the
graph's JSON), and, with a result, the synthesis chain, the gaps (the rows of
``Exploration.gaps()``) and the report (``report()``'s Markdown), each table as
CSV or JSON. Those tables travel in a second JSON block (:func:`downloads_spec`).
"""

from __future__ import annotations

import html
import json
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from ..arguments import check_file_path
from ..errors import InvalidInputError
from ..exploration.graph_sql import GAP_COLUMNS
from ..results.evidence import Evidence
from ..store.records import QuestionItems
from .assets import static_text, view_script, vis_network_source
from .citations_html import evidence_html
from .downloads import file_stem
from .lab_link import lab_server

if TYPE_CHECKING:
    from ..results.result import FractalResult

_PAGE_CSS = """
body { margin: 0; background: var(--page-bg); color: var(--page-text);
       font-family: system-ui, -apple-system, "Segoe UI", sans-serif; }
body { --page-bg: #ffffff; --page-text: #1b1f24; --page-muted: #57606a; }
body[data-jp-theme-light="false"] { --page-bg: #0d1117; --page-text: #e6edf3; --page-muted: #9da7b3;
  --jp-layout-color0: #0d1117; --jp-layout-color1: #161b22; --jp-ui-font-color0: #e6edf3;
  --jp-ui-font-color2: #9da7b3; --jp-border-color1: #30363d; }
.fractal-page { max-width: 1400px; margin: 0 auto; padding: 16px 20px; }
.fractal-page header h1 { font-size: 20px; font-weight: 600; margin: 0 0 4px 0; }
.fractal-page header p { margin: 0 0 10px 0; color: var(--page-muted); }
.fractal-page header .fractal-warning { margin: 0 0 10px 0; padding: 6px 10px; color: var(--page-text);
  border-left: 4px solid var(--page-warn); background: var(--page-warn-bg); }
body { --page-warn: #9a3412; --page-warn-bg: #fff4e5; }
body[data-jp-theme-light="false"] { --page-warn: #fb923c; --page-warn-bg: #2b1a0c; }
.fractal-page section.fractal-report { margin-top: 14px; line-height: 1.45; }
.fractal-page section.fractal-report h2 { font-size: 17px; margin: 0 0 6px 0; }
.fractal-page section.fractal-report .fractal-result h3 { display: none; }
body { --jp-success-color1: #1a7f37; --jp-error-color1: #b42323; --jp-content-link-color: #0969da;
  --jp-layout-color2: #eef1f4; }
body[data-jp-theme-light="false"] { --jp-success-color1: #3fb950; --jp-error-color1: #ff7b72;
  --jp-content-link-color: #58a6ff; --jp-layout-color2: #1c2128; }
.fractal-page section.fractal-evidence { margin-top: 14px; line-height: 1.45; }
.fractal-page section.fractal-evidence h2 { font-size: 17px; margin: 0 0 6px 0; }
.fractal-page section.fractal-evidence h3 { font-size: 15px; margin: 12px 0 4px 0; }
.fractal-page section.fractal-evidence code { font-size: 12px; }
"""
_THEME = """
const dark = window.matchMedia("(prefers-color-scheme: dark)");
const setTheme = () => { document.body.dataset.jpThemeLight = dark.matches ? "false" : "true"; };
setTheme();
dark.addEventListener("change", setTheme);
// A citation's JupyterLab link is rooted at the server's base URL; a page opened from disk uses the
// server's own URL instead (views/lab_link.py).
if (location.protocol === "file:") {
  addEventListener("DOMContentLoaded", () => {
    for (const a of document.querySelectorAll("a[data-lab-href]")) a.href = a.dataset.labHref;
  });
}
"""


SYNTHESIS_COLUMNS = ["node_id", "depth", "question", "synthesis", "degraded", "weak"]
"""The page's syntheses table: the synthesis chain as its Result shows it (root first, depth-first)."""


class Table(TypedDict):
    """One downloadable table: its columns, in order, and its rows (one object per row)."""

    columns: list[str]
    rows: list[dict[str, Any]]


class DownloadsSpec(TypedDict):
    """What the page's downloads hold beside the graph's JSON (``static/downloads.js`` builds the files)."""

    stem: str  # every file's name starts with it (``downloads.file_stem``, as the notebook's)
    questions: int  # how many questions the graph's JSON holds (their table is built from it)
    tables: dict[str, Table]  # "syntheses" and "gaps" with a result; the questions come from the graph
    report: str | None  # ``report()``'s Markdown, with a result


def downloads_spec(items: QuestionItems, *, heading: str, result: FractalResult | None) -> DownloadsSpec:
    """The page's downloadable tables beside the graph's JSON: the synthesis chain, the gaps, the report.

    >>> from fractal_nb import Exploration, SimulatedLLM
    >>> ex = Exploration.create("Why do tides turn?", intensity="pulse", llm=SimulatedLLM())
    >>> items = ex.store.get_question_items(ex.graph_id)
    >>> spec = downloads_spec(items, heading="Why do tides turn?", result=ex.preview())
    >>> spec["stem"].startswith("why-do-tides-turn-g-"), spec["tables"]["syntheses"]["rows"]
    (True, [])
    >>> downloads_spec(items, heading="Why?", result=None)["tables"]
    {}
    """
    stem, questions = file_stem(items["graph_id"], heading), items["question_count"]
    if result is None:
        return {"stem": stem, "questions": questions, "tables": {}, "report": None}
    chain = [
        {
            "node_id": link.node_id,
            "depth": link.depth,
            "question": link.question,
            "synthesis": link.synthesis,
            "degraded": link.degraded,
            "weak": "; ".join(link.weak),
        }
        for link in result.synthesis_chain
    ]
    gaps = [{column: row[column] for column in GAP_COLUMNS} for row in result.gap_rows]
    return {
        "stem": stem,
        "questions": questions,
        "tables": {
            "syntheses": {"columns": list(SYNTHESIS_COLUMNS), "rows": chain},
            "gaps": {"columns": list(GAP_COLUMNS), "rows": gaps},
        },
        "report": result.to_markdown(),
    }


def _inert_json(value: object) -> str:
    """JSON for a <script> block with no ``<``, ``>`` or ``&`` in it: nothing in it reads as markup."""
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _script_json(text: str) -> str:
    """JSON text that cannot end the <script> element holding it."""
    return text.replace("</", "<\\/").replace("<!--", "<\\u0021--")


def _snapshot_json(items: QuestionItems) -> str:
    """The ``snapshot`` message the view applies (graph_feed.SnapshotMessage), the items' JSON as it is."""
    head = {"type": "snapshot", "past": None, "seq": items["last_event_id"], "status": items["status"]}
    return (
        json.dumps(head)[:-1]
        + f', "questions": {items["questions"]}, "links": {items["links"]}, '
        + f'"counts": {json.dumps(items["counts"])}}}'
    )


def _report(result: FractalResult | None) -> tuple[str, str]:
    """The degraded warning (above the view) and the result section (below it), model text escaped."""
    if result is None:
        return "", ""
    warning = (
        '<p class="fractal-warning" role="alert"><b>Degraded result:</b> '
        + html.escape("; ".join(result.degraded_reasons))
        + " (the result below says more)</p>\n"
        if result.degraded
        else ""
    )
    section = f'<section class="fractal-report">\n<h2>Result</h2>\n{result._repr_html_()}\n</section>\n'
    return warning, section


def _evidence_section(evidence: Evidence | None) -> str:
    """The page's Evidence section (docs/architecture/faces.md, "Evidence in the faces"); '' without any."""
    shown = evidence_html(evidence, lab_server()) if evidence is not None else ""
    return f'<section class="fractal-evidence">\n<h2>Evidence</h2>\n{shown}\n</section>\n' if shown else ""


# The page's view, drawn from the graph's JSON inlined in it.
_STARTER = (
    "const data = JSON.parse(document.getElementById('fractal-data').textContent);\n"
    "const view = createView(document.getElementById('fractal-view'),\n"
    "  {vis: globalThis.vis, height: '72vh', details: true});\n"
    "view.apply(data);\n"
    "window.fractalView = view;\n"
)
# The downloads read the graph's JSON again on a click (a page of 100,000 questions keeps no
# second copy in memory) and their own tables once.
_OFFER = (
    "offerDownloads(document.getElementById('fractal-downloads'),\n"
    "  JSON.parse(document.getElementById('fractal-downloads-data').textContent),\n"
    "  () => JSON.parse(document.getElementById('fractal-data').textContent).questions);\n"
)


def render_html(
    items: QuestionItems,
    *,
    heading: str,
    result: FractalResult | None = None,
    evidence: Evidence | None = None,
) -> str:
    """The page for a whole graph (``GraphStore.get_question_items``): everything inlined, nothing fetched.

    With ``result`` (``Exploration.preview()``), the page shows what ``report()``
    shows: the degraded warning above the tree, the conclusion (the root's synthesis) and findings
    below it, then the synthesis chain, then the gaps under their count (``FractalResult._repr_html_``).
    With ``evidence`` (``Exploration.evidence()``), an
    Evidence section follows: the synthesis object, the tracks, the findings with
    their citations (the unsupported under their own heading), and each cited answer
    with its support and citations, every quote and stored line escaped. Below the title, the page's
    own downloads (:func:`downloads_spec`): the questions, and with ``result`` the synthesis chain, the
    gaps and the report, built as files in the reader's browser.
    """
    counts = items["counts"]
    summary = (
        f"{items['question_count']:,} questions · {counts['answers']:,} answers · "
        f"{counts['synthesized']:,} synthesized · {items['link_count']:,} cross-branch links · "
        f"graph {items['status']}"
    )
    warning, report = _report(result)
    spec = downloads_spec(items, heading=heading, result=result)
    return "".join(
        [
            '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
            f"<title>{html.escape(heading)}</title>\n",
            f"<style>{_PAGE_CSS}\n{static_text('network.css')}\n{static_text('downloads.css')}</style>\n",
            "</head>\n<body>\n",
            f"<script>{_THEME}</script>\n",
            '<main class="fractal-page">\n<header>\n',
            f"<h1>{html.escape(heading)}</h1>\n<p>{html.escape(summary)}</p>\n",
            '<nav id="fractal-downloads" aria-label="Download the graph"></nav>\n',
            f"{warning}</header>\n",
            '<div id="fractal-view"></div>\n',
            report,
            _evidence_section(evidence),
            "</main>\n",
            f"<script>{vis_network_source()}</script>\n",
            '<script type="application/json" id="fractal-data">',
            _script_json(_snapshot_json(items)),
            "</script>\n",
            f'<script type="module">\n{view_script()}\n{_STARTER}</script>\n',
            '<script type="application/json" id="fractal-downloads-data">',
            _inert_json(spec),
            "</script>\n",
            f'<script type="module">\n{static_text("downloads.js")}\n{_OFFER}</script>\n',
            "</body>\n</html>\n",
        ]
    )


def write_html(
    items: QuestionItems,
    path: str | Path,
    *,
    heading: str,
    result: FractalResult | None = None,
    evidence: Evidence | None = None,
) -> Path:
    """Write :func:`render_html` to ``path`` (UTF-8) whole or not at all; returns the path.

    The path is checked before anything is rendered; the page goes to a file
    beside it first and takes its name at the end, so a failed write leaves no
    partial page and an existing page as it was.
    """
    target = _export_path(path)
    page = render_html(items, heading=heading, result=result, evidence=evidence).encode("utf-8")
    part = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.part")
    try:
        descriptor = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as exc:
        raise InvalidInputError(
            f"cannot write {target}: folder {target.parent} does not take new files "
            f"({exc.strerror or exc}); pass a path in a folder you can write"
        ) from None
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(page)
        os.replace(part, target)
    except OSError as exc:
        part.unlink(missing_ok=True)
        raise InvalidInputError(
            f"cannot write {target}: {exc.strerror or exc}; nothing was written there"
        ) from None
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return target


def _export_path(path: object) -> Path:
    """The page's path: a file path (``arguments.check_file_path``) ending in .html."""
    target = check_file_path(path, "the HTML export path", example="graph.html")
    if target.suffix.lower() not in (".html", ".htm"):
        raise InvalidInputError(f"the HTML export path must end in .html, not {str(target)!r}")
    return target
