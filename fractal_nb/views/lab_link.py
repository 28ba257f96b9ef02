"""A link that opens a source file in JupyterLab, when the kernel runs under a Jupyter server.

docs/architecture/faces.md, "Evidence in the faces": JupyterLab opens a file from its
``/lab/tree/<path>`` URL, the path relative to the server's root folder (its
documented "File Navigation with /tree" URLs); it has no URL for a line, so the
link opens the file in a new browser tab of JupyterLab and names the lines in its
text and title (Edit → Go to Line… takes the reader there). The link is rooted at
the server's base URL (it works from the page Lab shows it on, behind a proxy too);
the exported page, which may be opened from disk, also carries the server's own
URL and uses it when it is a ``file:`` page. The server is the one
that started this kernel: Jupyter sets ``JPY_PARENT_PID`` in a kernel's environment
and each server writes ``jpserver-<pid>.json`` (its root folder and base URL) in
Jupyter's runtime folder. Outside a Jupyter server (Voila, a script, the CLI), or
for a file outside the server's root or under a hidden folder (which Lab does not
open), there is no link: the path is shown as text.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote


@dataclass(frozen=True)
class LabServer:
    """The Jupyter server a link goes through: its root folder and base URL (``/`` or ``/user/x/``)."""

    root_dir: Path
    base_url: str = "/"
    url: str | None = None  # the server's own URL (its info file's ``url``), for a page opened from disk

    def href(self, location: str | Path) -> str | None:
        """The ``/lab/tree`` URL (rooted at the base URL) that opens ``location``; None outside the root.

        >>> server = LabServer(Path("/home/me"), "/user/me/")
        >>> server.href("/home/me/notes/a b.md"), server.href("/etc/passwd")
        ('/user/me/lab/tree/notes/a%20b.md', None)
        """
        try:
            relative = Path(os.path.abspath(location)).relative_to(os.path.abspath(self.root_dir))
        except ValueError:
            return None
        if not relative.parts or any(part.startswith(".") for part in relative.parts):
            return None  # the root itself, or a hidden path Lab's file browser refuses to open
        base = "/" + self.base_url.strip("/") + "/" if self.base_url.strip("/") else "/"
        return f"{base}lab/tree/{quote(relative.as_posix())}"

    def absolute(self, href: str) -> str | None:
        """``href`` (from :meth:`href`) on the server's own URL, for a page opened from a file; None unknown.

        >>> LabServer(Path("/w"), "/", "http://localhost:8888/").absolute("/lab/tree/a.md")
        'http://localhost:8888/lab/tree/a.md'
        """
        if not self.url or not self.url.startswith(("http://", "https://")):
            return None
        origin = self.url.split("/", 3)[:3]  # scheme, "", host[:port]
        return "/".join(origin) + href


def lab_server() -> LabServer | None:
    """The Jupyter server that started this kernel, from its server info file; None outside one."""
    pid = os.environ.get("JPY_PARENT_PID", "")
    if not pid.isdigit():
        return None
    info = _runtime_dir() / f"jpserver-{pid}.json"
    try:
        fields = json.loads(info.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # no such server (Voila writes none), or a file being written
    root, base, url = fields.get("root_dir"), fields.get("base_url") or "/", fields.get("url")
    if not isinstance(root, str) or not isinstance(base, str):
        return None
    return LabServer(Path(root), base, url if isinstance(url, str) else None)


def _runtime_dir() -> Path:
    """Jupyter's runtime folder (where servers write their info files)."""
    if os.environ.get("JUPYTER_RUNTIME_DIR"):
        return Path(os.environ["JUPYTER_RUNTIME_DIR"])
    try:
        from jupyter_core.paths import jupyter_runtime_dir
    except ImportError:  # pragma: no cover - jupyter_core comes with ipykernel
        return Path.home() / ".local" / "share" / "jupyter" / "runtime"
    return Path(jupyter_runtime_dir())
