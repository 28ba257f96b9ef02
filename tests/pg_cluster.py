"""A throwaway PostgreSQL cluster for the tests: initdb in a temporary folder, a free port on 127.0.0.1.

The tests' ``pg_server`` fixture (tests/conftest.py) uses ``FRACTAL_NB_TEST_PG`` when it
is set, else starts one of these for the session and stops it at the end, with the
binaries in ``FRACTAL_NB_PG_BIN`` if set (Homebrew's, say). By hand::

    eval "$(python -m tests.pg_cluster start)"   # prints FRACTAL_NB_TEST_PG=... and PG_CLUSTER_DIR=...
    python -m tests.pg_cluster stop "$PG_CLUSTER_DIR"

Needs Debian's ``postgresql`` (``initdb`` and ``pg_ctl``); as root, the server runs as the
``postgres`` user (``initdb`` refuses root). fsync is off: the cluster is thrown away.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

INSTALL_HINT = (
    "PostgreSQL cases need a server: apt-get install postgresql (initdb, pg_ctl) and "
    "pip install -e '.[postgres]', or set FRACTAL_NB_TEST_PG=postgresql://...; required under CI"
)


@dataclass(frozen=True)
class Cluster:
    """A running throwaway cluster: its folder and the URL of its ``postgres`` database."""

    folder: Path
    url: str


def binaries() -> Path | None:
    """``FRACTAL_NB_PG_BIN``, else the newest installed PostgreSQL's bin folder (Debian's), or one on PATH."""
    given = os.environ.get("FRACTAL_NB_PG_BIN")
    if given is not None:
        return Path(given) if (Path(given) / "initdb").exists() else None
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _as_server_user(command: list[str]) -> list[str]:
    """``command`` as the user the server runs as: ``postgres`` when we are root (initdb refuses root)."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *command]
    return command


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start() -> Cluster:
    """initdb a new cluster in a temporary folder and start it on a free port of 127.0.0.1."""
    bin_dir = binaries()
    if bin_dir is None:
        raise RuntimeError(INSTALL_HINT)
    folder = Path(tempfile.mkdtemp(prefix="fractal-nb-pg-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    data, port = folder / "data", _free_port()
    subprocess.run(
        _as_server_user(
            [str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8"]
            + ["--no-locale", "--no-sync"]
        ),
        check=True,
        capture_output=True,
    )
    options = (
        f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c fsync=off -c synchronous_commit=off "
        "-c full_page_writes=off -c max_connections=300"
    )
    subprocess.run(
        _as_server_user(
            [
                str(bin_dir / "pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(folder / "server.log"),
                "-w",
                "-o",
                options,
                "start",
            ]
        ),
        check=True,
        capture_output=True,
    )
    return Cluster(folder, f"postgresql://postgres@127.0.0.1:{port}/postgres")


def stop(folder: Path) -> None:
    """Stop the cluster in ``folder`` and delete the folder."""
    bin_dir = binaries()
    if bin_dir is not None and (folder / "data").exists():
        subprocess.run(
            _as_server_user(
                [str(bin_dir / "pg_ctl"), "-D", str(folder / "data"), "-m", "immediate", "-w", "stop"]
            ),
            check=False,
            capture_output=True,
        )
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["start"]:
        cluster = start()
        print(f"export FRACTAL_NB_TEST_PG={cluster.url} PG_CLUSTER_DIR={cluster.folder}")
    elif sys.argv[1:2] == ["stop"] and len(sys.argv) == 3:
        stop(Path(sys.argv[2]))
    else:
        sys.exit("usage: python -m tests.pg_cluster start | stop FOLDER")
