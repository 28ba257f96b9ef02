"""A graph as one offline HTML file, drawn by pyvis with the live widget's look."""

from __future__ import annotations

import html
import re
from functools import cache
from pathlib import Path

import pyvis
from jinja2 import Environment, FileSystemLoader
from pyvis.network import Network

from ..errors import InvalidInputError
from ..store.records import Changes
from .network_style import EXPORT_PHYSICS_LIMIT, network_options, radial_positions, vis_items

# Tags that pyvis's template loads from CDNs even in ``in_line`` mode (bootstrap).
_REMOTE_TAGS = re.compile(
    r"<link\b[^>]*\bhref=\"https?://[^\"]*\"[^>]*>|<script\b[^>]*\bsrc=\"https?://[^\"]*\"[^>]*>\s*</script>",
    re.IGNORECASE,
)
# A URL-valued attribute; anchored on the literal '="' so a 10 MB page scans in milliseconds.
_URL_VALUE = re.compile(r"=\"(?:https?:)?//", re.IGNORECASE)


@cache
def _pyvis_templates() -> Environment:
    """One jinja environment over pyvis's templates, so the page template compiles once per process."""
    return Environment(loader=FileSystemLoader(Path(pyvis.__file__).parent / "templates"))


def render_html(changes: Changes, *, heading: str) -> str:
    """The page for a full ``get_changes`` result: vis-network inlined, nothing fetched."""
    nodes, edges = vis_items(changes)
    if len(nodes) > EXPORT_PHYSICS_LIMIT:  # physics off: start from a radial tree layout
        positions = radial_positions(changes["nodes"])
        for node in nodes:
            node["x"], node["y"] = positions[node["id"]]
    for node in nodes:
        # pyvis switches every tooltip to innerHTML when a title contains "href"; a
        # zero-width joiner keeps model text on vis-network's innerText path.
        node["title"] = node["title"].replace("href", "hre\u200df")
    net = Network(
        height="820px", width="100%", directed=True, cdn_resources="in_line", heading=html.escape(heading)
    )
    net.nodes, net.edges = nodes, edges  # in bulk: add_node one at a time is quadratic
    net.node_ids = [n["id"] for n in nodes]
    net.node_map = {n["id"]: n for n in nodes}
    net.options = network_options(len(nodes), physics_limit=EXPORT_PHYSICS_LIMIT)
    net.templateEnv = _pyvis_templates()
    page = _REMOTE_TAGS.sub("", net.generate_html(notebook=False))
    for found in _URL_VALUE.finditer(page):
        if page[max(0, found.start() - 4) : found.start()].lower().endswith(("src", "href")):
            # a pyvis release that loads something new: fail loudly, not silently online
            near = page[found.start() - 4 :][:80]
            raise RuntimeError(f"the exported page still loads a remote resource near {near!r}")
    return page


def write_html(changes: Changes, path: str | Path, *, heading: str) -> Path:
    """Write :func:`render_html` to ``path`` (UTF-8); returns the path."""
    target = Path(path)
    if target.suffix.lower() not in (".html", ".htm"):
        raise InvalidInputError(f"the HTML export path must end in .html, not {str(path)!r}")
    if not target.parent.is_dir():
        raise InvalidInputError(
            f"cannot write {target}: folder {target.parent} does not exist (create it first)"
        )
    target.write_text(render_html(changes, heading=heading), encoding="utf-8")
    return target
