"""The view's front-end files: our own ``static/`` and the vis-network build pyvis installed.

vis-network is read from the pyvis package at run time, never copied into this
repository, and served to the page by Python (the widget) or inlined (the export).
"""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path

STATIC = Path(__file__).parent / "static"


@cache
def vis_network_source() -> str:
    """The vis-network build installed with pyvis (read once)."""
    spec = importlib.util.find_spec("pyvis")
    if spec is None or spec.origin is None:  # pragma: no cover - pyvis is a dependency
        raise RuntimeError("pyvis is not installed; it provides vis-network (pip install pyvis)")
    builds = sorted((Path(spec.origin).parent / "lib").glob("vis-*/vis-network.min.js"))
    if not builds:  # pragma: no cover - a pyvis release that moved it
        raise RuntimeError(f"no vis-network build under {Path(spec.origin).parent / 'lib'}")
    return builds[-1].read_text(encoding="utf-8")


# The view's script is one ES module made of these files, in this order (network.js, last, exports it).
VIEW_SCRIPT = (
    "question_text.js",
    "tree_layout.js",
    "tree_paint.js",
    "view_parts.js",
    "outline.js",
    "network.js",
)


@cache
def view_script() -> str:
    """The question tree's front end as one module: text, layout, painting, then the view (exports)."""
    return "\n".join(static_text(name) for name in VIEW_SCRIPT)


@cache
def static_text(name: str) -> str:
    """One of our static files (network.js, network.css)."""
    return (STATIC / name).read_text(encoding="utf-8")
