"""A citation's link opens its file in a real JupyterLab: the href built from the server's own info file.

JupyterLab serves on 127.0.0.1 (no token, a temporary root and runtime folder);
this test process stands as its kernel (``JPY_PARENT_PID`` is the server's pid),
so :func:`lab_server` reads the info file that server wrote. The exported page,
opened from disk, holds the link; a click opens JupyterLab in a new tab with the
cited file in its editor (docs/architecture/faces.md, "Evidence in the faces").

Covers: views/lab_link.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from fractal_nb import Exploration, GraphStore, SimulatedLLM
from fractal_nb.views.lab_link import LabServer, lab_server
from tests.browser.tree_checks import screenshot
from tests.engine.test_runs import FAST
from tests.local_port import free_port
from tests.views.cited_graph import cited_graph

pytestmark = pytest.mark.browser


@contextmanager
def jupyter_lab(root: Path, runtime: Path, settings: Path | None = None) -> Iterator[tuple[str, int]]:
    """JupyterLab serving ``root`` on 127.0.0.1, its info file in ``runtime``; yields (URL, server pid)."""
    port = free_port()
    log = (runtime.parent / "lab.log").open("w")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            f"--port={port}",
            "--ServerApp.ip=127.0.0.1",
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            f"--ServerApp.root_dir={root}",
            "--ServerApp.port_retries=0",
            "--ServerApp.allow_root=True",  # CI runs as root
            "--LabApp.extension_manager=readonly",  # nothing asked of PyPI
            # A layout of its own: ~/.jupyter's saved workspace (tabs some other run left open) stays out.
            f"--LabApp.workspaces_dir={runtime.parent / 'workspaces'}",
        ],
        cwd=root,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={
            **os.environ,
            "JUPYTER_RUNTIME_DIR": str(runtime),
            "PYTHONUNBUFFERED": "1",
            **({"JUPYTERLAB_SETTINGS_DIR": str(settings)} if settings else {}),  # a theme, say
        },
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{url}api", timeout=2).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("jupyter lab did not start:\n" + Path(log.name).read_text()) from None
                time.sleep(0.3)
        yield url, server.pid
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def test_a_citation_link_on_the_page_opens_the_file_in_jupyterlab(
    browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.browser.conftest import guarded_page

    root, runtime = tmp_path / "work", tmp_path / "runtime"
    root.mkdir()
    runtime.mkdir()
    with jupyter_lab(root, runtime) as (url, pid):
        monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
        monkeypatch.setenv("JPY_PARENT_PID", str(pid))  # as in a kernel that server started
        assert lab_server() == LabServer(root, "/", url)
        store = GraphStore()
        built = cited_graph(store, root)
        Exploration(store, built["graph_id"], SimulatedLLM(), clock=FAST).to_html(root / "cited.html")
        store.close()
        with guarded_page(browser) as (tab, traffic):
            tab.goto((root / "cited.html").as_uri())  # the page opened from disk
            link = tab.locator("ul.fractal-findings a.fractal-cite-link").first
            assert link.get_attribute("href") == f"{url}lab/tree/notes/bridges.md", "the server's own URL"
            with tab.context.expect_page(timeout=60_000) as opened:
                link.click()
            lab = opened.value
            editor = lab.locator(".jp-FileEditor .cm-content")
            editor.wait_for(timeout=120_000)
            lab.wait_for_function(
                "() => document.querySelector('.jp-FileEditor .cm-content')?.innerText"
                ".includes('Most failures start at the bearings,')",
                timeout=60_000,
            )
            assert (
                "bridges.md" in lab.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current").inner_text()
            )
            screenshot(lab, "lab-opened-citation")
            assert traffic.errors == []
