"""The Export tab: the syntheses as browser downloads, and into the kernel as a variable or a file.

A published page (a Voila app, whose readers do not own its kernel) offers the
downloads only: no file is written on the server's disk and no variable is set in
its kernel. Elsewhere the syntheses also go to a variable of the notebook or a
.csv / .parquet file on the kernel's disk (docs/architecture/faces.md, "The live view's
protocol").
"""

from __future__ import annotations

import keyword
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from .downloads import DownloadButtons
from .panel_layout import button

if TYPE_CHECKING:
    import pandas as pd

    from ..exploration.exploration import Exploration
    from .held_questions import Act

PUBLISHED_EXPORT = (
    "<span style='color:var(--jp-ui-font-color2, #57606a)'>This page is published: the downloads above "
    "save the syntheses and the graph in your browser; nothing is written on the server.</span>"
)


class ExportTab:
    """The Export tab of one panel: its page, and the export into the kernel (``exported``: the last)."""

    def __init__(
        self, exploration: Exploration, *, published: bool, handler: Act, post: Callable[[str, Any], None]
    ) -> None:
        self.exploration = exploration
        self.published = published
        self._post = post  # news for the kernel task: what the export did
        self.export_name = widgets.Text(value="syntheses", description="variable")
        self.export_path = widgets.Text(value="", description="file", placeholder="syntheses.csv or .parquet")
        self.export_button = button("Export syntheses", "download")
        # A browser download (Voila, Binder: nothing written on the server), then the kernel's own ways.
        self.downloads = DownloadButtons(exploration)
        self.exported: pd.DataFrame | None = None  # the last exported syntheses
        self.page: list[widgets.Widget] = (
            [self.downloads, widgets.HTML(PUBLISHED_EXPORT)]
            if published
            else [
                self.downloads,
                widgets.HTML(
                    "<b>Export</b> the syntheses into this kernel (a variable) or a file on its disk:"
                ),
                self.export_name,
                self.export_path,
                self.export_button,
            ]
        )
        self.export_button.on_click(handler(self.export))

    def export(self) -> None:
        """The syntheses into the variable and the file named (both, either, or ``exported`` only)."""
        if self.published:  # the page's reader is not the kernel's owner: downloads only
            raise ValueError("this page is published: download the syntheses above (nothing is saved here)")
        name, path = self.export_name.value.strip(), self.export_path.value.strip()
        if name and (not name.isidentifier() or keyword.iskeyword(name)):
            raise ValueError(f"{name!r} is not a Python variable name")
        suffix = Path(path).suffix.lower()
        if path and suffix not in (".csv", ".parquet"):
            raise ValueError(f"the export file must end in .csv or .parquet, not {path!r}")
        frame = self.exploration.syntheses()
        if path:
            frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path, index=False)
        self.exported = frame
        where = []
        if name:
            _user_namespace()[name] = frame
            where.append(f"variable {name}")
        if path:
            where.append(path)
        self._post("note", f"exported {len(frame)} syntheses to {' and '.join(where) or 'view.exported'}")


def published_kernel() -> bool:
    """Whether this kernel serves a published page (Voila sets ``VOILA_KERNEL_ID`` in its kernels)."""
    return bool(os.environ.get("VOILA_KERNEL_ID"))


def _user_namespace() -> dict[str, Any]:
    """The notebook's global namespace (the ``__main__`` module's outside IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with ipywidgets
        shell = None
    else:
        shell = get_ipython()
    if shell is not None:
        namespace: dict[str, Any] = shell.user_ns
        return namespace
    import __main__

    main: dict[str, Any] = __main__.__dict__
    return main
