"""The control panel's building blocks: its styles, a button sized to its label, a tab page's parts.

The panel (views/control_panel.py) and its parts (views/status_rows.py, views/gates_tab.py,
views/export_tab.py) build from these, so they look and lay out alike: a tab's content
scrolls in a box of its own, its actions pinned below it (docs/architecture/faces.md, "The live
view's protocol"; views/static/panel.css styles the rest).
"""

from __future__ import annotations

import ipywidgets as widgets

ERROR_STYLE = "color:var(--jp-error-color1, #b42323)"
MUTED_STYLE = "color:var(--jp-ui-font-color2, #57606a)"
LINES = "line-height:1.45"  # a status line that wraps reads as a paragraph (ipywidgets sets 28 px lines)
SCROLLED_CSS = "fractal-scrolled"  # the class static/panel.css gives a tab's scrolling box


def button(
    description: str, icon: str, tooltip: str = "", *, style: str = "", disabled: bool = False
) -> widgets.Button:
    """A panel button: sized to its label, with an icon and a tooltip."""
    return widgets.Button(
        description=description,
        icon=icon,
        tooltip=tooltip,
        button_style=style,
        disabled=disabled,
        layout=widgets.Layout(width="auto"),
    )


def show(control: widgets.Button, shown: bool) -> None:
    """Show ``control`` in its row, or take it out of the layout."""
    control.layout.display = None if shown else "none"


def scrolled(content: widgets.Widget) -> widgets.Box:
    """``content`` in a box that takes the page's room left and scrolls (never pushes what is pinned)."""
    box = widgets.Box(
        [content],
        layout=widgets.Layout(flex="1 1 auto", min_height="0", overflow="auto", width="100%"),
    )
    box.add_class(SCROLLED_CSS)  # static/panel.css: its content keeps its height, the box scrolls it
    return box


def pinned(*controls: widgets.Widget) -> widgets.VBox:
    """Controls that keep their height at a page's foot, whatever scrolls above them."""
    return widgets.VBox(list(controls), layout=widgets.Layout(flex="0 0 auto", width="100%"))
