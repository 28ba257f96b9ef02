"""Beyond loopback the HTTP server needs its bearer token and keeps its Host check (clients on 127.0.0.1).

Covers: loopback.py.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request

from fractal_nb import Exploration, GraphStore, InvalidInputError, SimulatedLLM, StateError
from fractal_nb.loopback import is_loopback
from fractal_nb.mcp.auth import (
    TOKEN_ENV,
    StaticTokenVerifier,
    allowed_hosts,
    client_token,
    client_url,
    http_app,
    resolve_token,
    transport_security,
)
from fractal_nb.mcp.remote import RemoteStore
from fractal_nb.mcp.server import BackgroundServer, build_server
from tests.local_port import free_port, listening
from tests.mcp.conftest import serve_mcp_command, wait_until, worker_command

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test_auth", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
REFUSED_401 = (
    r"refused the request: 401 Unauthorized "
    r"\(pass the server's token: --token or FRACTAL_NB_TOKEN\)"
)


def post_initialize(url: str, *, token: str | None = None, host: str | None = None) -> httpx.Response:
    """A raw MCP initialize POST, with the bearer token and Host header given."""
    headers = dict(MCP_HEADERS)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if host is not None:
        headers["Host"] = host
    return httpx.post(url, json=INITIALIZE, headers=headers, timeout=30)


def env_without_token(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    env.update(extra)
    return env


@dataclass
class CliServer:
    process: subprocess.Popen[str]
    port: int
    stderr_lines: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def stderr(self) -> str:
        return "".join(self.stderr_lines)


@contextmanager
def cli_server(tmp_path: Path, *options: str, env: dict[str, str]) -> Iterator[CliServer]:
    """``fractal-nb serve-mcp --http`` in a subprocess, its stderr collected line by line as it comes."""
    port = free_port()
    process = subprocess.Popen(
        serve_mcp_command(tmp_path / "auth.duckdb", port, *options),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    served = CliServer(process, port)

    def collect() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            served.stderr_lines.append(line)

    reader = threading.Thread(target=collect, daemon=True)
    reader.start()
    try:
        wait_until(lambda: listening(port), "the server to listen", alive=lambda: process.poll() is None)
        yield served
    finally:
        process.terminate()
        process.wait(timeout=20)
        reader.join(timeout=20)
        if process.stderr:
            process.stderr.close()


# -- the CLI server beyond loopback ------------------------------------------------------------


def test_cli_beyond_loopback_requires_the_token_and_checks_the_host(tmp_path: Path) -> None:
    with cli_server(
        tmp_path,
        "--host",
        "0.0.0.0",
        "--token",
        "T0ken-given",
        "--allow-host",
        "notebook.example.org",
        env=env_without_token(),
    ) as server:
        bound = {
            c.laddr.ip
            for c in psutil.Process(server.process.pid).net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN and c.laddr.port == server.port
        }
        assert bound == {"0.0.0.0"}
        without = post_initialize(server.url)
        assert without.status_code == 401, without.text
        assert post_initialize(server.url, token="wrong").status_code == 401
        assert post_initialize(server.url, token="T0ken-given").status_code == 200
        evil = post_initialize(server.url, token="T0ken-given", host=f"evil.example.com:{server.port}")
        assert 400 <= evil.status_code < 500, "the Host check stays on beyond loopback"
        assert post_initialize(server.url, token="T0ken-given", host="evil.example.com").status_code != 200
        machine = post_initialize(
            server.url, token="T0ken-given", host=f"{socket.gethostname()}:{server.port}"
        )
        assert machine.status_code == 200, "the machine's own name is admitted"
        allowed = post_initialize(server.url, token="T0ken-given", host=f"notebook.example.org:{server.port}")
        assert allowed.status_code == 200, "--allow-host admits a name on any port"

        with RemoteStore(server.url, token="T0ken-given") as remote:
            assert remote.list_graphs()["count"] == 0
        with pytest.raises(StateError, match=REFUSED_401):
            RemoteStore(server.url)
        with pytest.raises(StateError, match=REFUSED_401):
            RemoteStore(server.url, token="wrong")
    warning = (
        f"fractal-nb: warning: serving beyond loopback on 0.0.0.0:{server.port}: every request needs "
        "the bearer token"
    )
    assert warning in server.stderr
    assert "notebook.example.org" in server.stderr and "T0ken-given" not in server.stderr, server.stderr


def test_cli_generates_and_prints_a_token_when_none_is_given(tmp_path: Path) -> None:
    with cli_server(tmp_path, "--host", "0.0.0.0", env=env_without_token()) as server:
        wait_until(
            lambda: "token (pass it to workers" in server.stderr,
            "the token line",
            alive=lambda: server.process.poll() is None,
        )
        found = re.search(
            r"token \(pass it to workers with --token or FRACTAL_NB_TOKEN\): (\S+)", server.stderr
        )
        assert found, server.stderr
        token = found.group(1)
        assert len(token) >= 40, "secrets.token_urlsafe(32)"
        assert post_initialize(server.url).status_code == 401
        assert post_initialize(server.url, token=token).status_code == 200
        assert "serving beyond loopback on 0.0.0.0" in server.stderr


def test_cli_takes_the_token_from_the_environment(tmp_path: Path) -> None:
    env = env_without_token(**{TOKEN_ENV: "from-env"})
    with cli_server(tmp_path, "--host", "0.0.0.0", env=env) as server:
        assert post_initialize(server.url).status_code == 401
        assert post_initialize(server.url, token="from-env").status_code == 200
    assert "token (pass it" not in server.stderr, "nothing generated when the environment has one"


def test_cli_loopback_with_a_token_requires_it_and_prints_no_warning(tmp_path: Path) -> None:
    with cli_server(tmp_path, "--token", "T", env=env_without_token()) as server:
        assert post_initialize(server.url).status_code == 401
        assert post_initialize(server.url, token="T").status_code == 200
        evil = post_initialize(server.url, token="T", host=f"evil.example.com:{server.port}")
        assert evil.status_code == 421
    assert "beyond loopback" not in server.stderr


# -- in-process: Exploration.serve_mcp and fractal-nb worker ------------------------------------


def test_serve_mcp_beyond_loopback_needs_the_token_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with Exploration.create(
        "Why do rivers meander?", intensity="pulse", llm=SimulatedLLM(seed=3), path=tmp_path / "owned.duckdb"
    ) as ex:
        assert ex.mcp_token is None, "no server, no token"
        ex.step(1)
        url = ex.serve_mcp(host="0.0.0.0")
        port = int(url.split(":")[2].split("/")[0])
        assert url == f"http://127.0.0.1:{port}/mcp", "reached through loopback on this machine"
        token = ex.mcp_token
        assert token and len(token) >= 40, "generated"
        assert f"serving beyond loopback on 0.0.0.0:{port}" in capsys.readouterr().err
        assert post_initialize(url).status_code == 401
        assert post_initialize(url, token=token).status_code == 200

        worker = worker_command(url, "far", 2, "--llm", "simulated", "--seed-value", "3")
        refused = subprocess.run(worker, capture_output=True, text=True, timeout=120, env=env_without_token())
        assert refused.returncode != 0
        assert re.search(REFUSED_401, refused.stderr), refused.stderr
        assert "ExceptionGroup" not in refused.stderr and "Traceback" not in refused.stderr, refused.stderr

        done = subprocess.run(
            [*worker, "--token", token], capture_output=True, text=True, timeout=300, env=env_without_token()
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert re.findall(r"exit: (\w+)", done.stdout), done.stdout
        nodes = ex.nodes()
        assert set(nodes[nodes.node_type == "question"].status) <= {"synthesized", "saturated"}
        assert nodes.query("depth == 0").iloc[0]["status"] == "synthesized"
        assert ex.harvest().status == "completed"
        assert set(ex.events().query("kind == 'claimed'").actor.str.split("-").str[0]) == {"far"}
        ex.stop_mcp()
        assert ex.mcp_token is None


def test_background_server_on_loopback_with_a_token_requires_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with GraphStore(tmp_path / "l.duckdb") as store:
        open_server = BackgroundServer(store)
        assert open_server.token is None and not open_server.token_generated
        guarded = BackgroundServer(store, token="loop-T")
        urls = [open_server.start(), guarded.start()]
        try:
            assert post_initialize(urls[0]).status_code == 200, "loopback without a token: as before"
            assert post_initialize(urls[0], host="evil.example.com:80").status_code == 421
            assert post_initialize(urls[1]).status_code == 401
            assert post_initialize(urls[1], token="loop-T").status_code == 200
            with RemoteStore(urls[1], token="loop-T") as remote:
                assert remote.list_graphs()["count"] == 0
        finally:
            open_server.stop()
            guarded.stop()


def test_remote_store_names_the_root_cause_when_nothing_listens() -> None:
    with pytest.raises(StateError) as refused:
        RemoteStore(f"http://127.0.0.1:{free_port()}/mcp", token="T")
    message = str(refused.value)
    assert message.startswith("cannot reach the MCP server at http://127.0.0.1:")
    assert "TaskGroup" not in message and "sub-exception" not in message, message


# -- issue 37: an empty token is refused, never taken for none ---------------------------------


@pytest.mark.parametrize("token", ["", "   "], ids=["empty", "blank"])
def test_serve_mcp_refuses_an_empty_token_as_typed_before_it_serves(tmp_path: Path, token: str) -> None:
    """`fractal-nb serve-mcp --http --token ''` used to serve on loopback with no token at all."""
    port = free_port()
    done = subprocess.run(
        serve_mcp_command(tmp_path / "t.duckdb", port, "--token", token),
        capture_output=True,
        text=True,
        timeout=120,
        env=env_without_token(),
    )
    assert done.returncode == 2, done.stderr
    kind = "empty" if not token else "blank"
    assert f"serve-mcp: --token is {kind}; give the bearer token every request must carry" in done.stderr
    assert "usage: fractal-nb" in done.stderr and "Traceback" not in done.stderr
    assert not listening(port) and list(tmp_path.iterdir()) == [], "nothing served, no file"


def test_a_worker_refuses_an_empty_token_as_typed() -> None:
    done = subprocess.run(
        [*worker_command(f"http://127.0.0.1:{free_port()}/mcp", "w", 1), "--token", ""],
        capture_output=True,
        text=True,
        timeout=120,
        env=env_without_token(),
    )
    assert done.returncode == 2 and "worker: --token is empty" in done.stderr, done.stderr


def test_the_python_api_refuses_an_empty_token_before_it_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with Exploration.create(
        "Why?", intensity="pulse", llm=SimulatedLLM(seed=1), path=tmp_path / "e.duckdb"
    ) as ex:
        for token in ("", " \t"):
            with pytest.raises(InvalidInputError, match="token is (empty|blank); give the bearer token"):
                ex.serve_mcp(token=token)
            assert ex.mcp_token is None, "no server"
            with pytest.raises(InvalidInputError, match="token is"):
                BackgroundServer(ex.store, token=token)
            with pytest.raises(InvalidInputError, match="token is"):
                build_server(ex.store, token=token)
        monkeypatch.setenv(TOKEN_ENV, "  ")
        with pytest.raises(InvalidInputError, match=r"\$FRACTAL_NB_TOKEN is blank"):
            ex.serve_mcp()
        assert ex.mcp_token is None


def test_tokens_empty_or_blank_are_refused_and_an_empty_variable_is_unset() -> None:
    for token in ("", "  "):
        with pytest.raises(InvalidInputError, match="token is"):
            resolve_token(token, host="127.0.0.1", environ={TOKEN_ENV: "from-env"})
        with pytest.raises(InvalidInputError, match="token is"):
            client_token(token, environ={TOKEN_ENV: "from-env"})
    with pytest.raises(InvalidInputError, match=r"\$FRACTAL_NB_TOKEN is blank"):
        resolve_token(None, host="127.0.0.1", environ={TOKEN_ENV: " "})
    with pytest.raises(InvalidInputError, match=r"\$FRACTAL_NB_TOKEN is blank"):
        client_token(None, environ={TOKEN_ENV: "\n"})
    assert resolve_token(None, host="127.0.0.1", environ={TOKEN_ENV: ""}) == (None, False)
    with pytest.raises(InvalidInputError, match=r"token must be a bearer token \(str\), not int"):
        resolve_token(5, host="127.0.0.1")  # type: ignore[arg-type]


# -- units: loopback, tokens, the Host allow-list ----------------------------------------------


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("example.org", False),
        ("", False),
    ],
)
def test_is_loopback(host: str, expected: bool) -> None:
    assert is_loopback(host) is expected


def test_resolve_token_order() -> None:
    env = {TOKEN_ENV: "from-env"}
    assert resolve_token("given", host="0.0.0.0", environ=env) == ("given", False)
    assert resolve_token(None, host="0.0.0.0", environ=env) == ("from-env", False)
    assert resolve_token(None, host="127.0.0.1", environ={}) == (None, False), "loopback: none needed"
    assert resolve_token(None, host="localhost", environ={TOKEN_ENV: ""}) == (None, False)
    first, generated = resolve_token(None, host="0.0.0.0", environ={})
    second, _ = resolve_token(None, host="192.168.1.5", environ={})
    assert generated and first and second and first != second
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", first), "secrets.token_urlsafe(32)"


def test_client_token() -> None:
    assert client_token("given", environ={TOKEN_ENV: "env"}) == "given"
    assert client_token(None, environ={TOKEN_ENV: "env"}) == "env"
    assert client_token(None, environ={}) is None
    assert client_token(None, environ={TOKEN_ENV: ""}) is None, "an empty variable is an unset one"


def test_static_token_verifier() -> None:
    verifier = StaticTokenVerifier("s3cret")
    accepted = asyncio.run(verifier.verify_token("s3cret"))
    assert accepted is not None and accepted.token == "s3cret" and accepted.scopes == []
    for wrong in ("s3creT", "s3cret ", "", "sécret"):
        assert asyncio.run(verifier.verify_token(wrong)) is None
    assert "s3cret" not in repr(verifier)
    with pytest.raises(InvalidInputError, match="token is empty"):
        StaticTokenVerifier("")


def test_loopback_keeps_the_sdks_defaults() -> None:
    settings = transport_security("127.0.0.1")
    assert settings == TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )
    assert transport_security("::1") == settings == transport_security("localhost")


def test_allowed_hosts_beyond_loopback() -> None:
    extras = ["notebook.example.org", "proxy.example.org:8443", "fe80::1"]
    hosts = allowed_hosts("0.0.0.0", allow_hosts=extras)
    assert hosts[:3] == ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    assert f"{socket.gethostname()}:*" in hosts and f"{socket.getfqdn()}:*" in hosts
    assert "notebook.example.org:*" in hosts and "notebook.example.org" in hosts
    assert "proxy.example.org:8443" in hosts and "proxy.example.org:8443:*" not in hosts
    assert "[fe80::1]:*" in hosts
    assert not any(h.startswith("0.0.0.0") for h in hosts), "a wildcard bind is no Host name"
    assert len(hosts) == len(set(hosts))
    assert "192.0.2.7:*" in allowed_hosts("192.0.2.7")
    assert "[2001:db8::7]:*" in allowed_hosts("2001:db8::7")


@pytest.mark.parametrize(
    ("host_header", "origin", "admitted"),
    [
        ("127.0.0.1:8765", None, True),
        ("localhost:8765", "http://localhost:8765", True),
        (f"{socket.gethostname()}:8765", None, True),
        ("notebook.example.org:8765", "https://notebook.example.org:8765", True),
        ("notebook.example.org", None, True),
        ("proxy.example.org:8443", None, True),
        ("proxy.example.org:9999", None, False),
        ("evil.example.com:8765", None, False),
        ("evil.example.com", None, False),
        ("127.0.0.1:8765", "http://evil.example.com", False),
        (None, None, False),
    ],
)
def test_the_sdks_host_check_with_our_allow_list(
    host_header: str | None, origin: str | None, admitted: bool
) -> None:
    settings = transport_security("0.0.0.0", allow_hosts=["notebook.example.org", "proxy.example.org:8443"])
    headers = [(b"content-type", b"application/json")]
    if host_header is not None:
        headers.append((b"host", host_header.encode()))
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    request = Request({"type": "http", "method": "POST", "path": "/mcp", "headers": headers})
    refusal = asyncio.run(TransportSecurityMiddleware(settings).validate_request(request, is_post=True))
    assert (refusal is None) is admitted, refusal and refusal.body


def test_allow_host_star_turns_the_check_off_only_when_asked() -> None:
    assert transport_security("0.0.0.0").enable_dns_rebinding_protection
    assert transport_security("0.0.0.0", allow_hosts=["a.example.org"]).enable_dns_rebinding_protection
    assert not transport_security("0.0.0.0", allow_hosts=["*"]).enable_dns_rebinding_protection


def test_no_app_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    with GraphStore(tmp_path / "n.duckdb") as store:
        with pytest.raises(ValueError, match="needs a bearer token"):
            http_app(build_server(store), host="0.0.0.0", security=transport_security("0.0.0.0"))
        http_app(build_server(store, token="T"), host="0.0.0.0", security=transport_security("0.0.0.0"))
        http_app(build_server(store), host="127.0.0.1", security=transport_security("127.0.0.1"))


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8765/mcp"),
        ("0.0.0.0", "http://127.0.0.1:8765/mcp"),
        ("::", "http://[::1]:8765/mcp"),
        ("::1", "http://[::1]:8765/mcp"),
        ("192.0.2.7", "http://192.0.2.7:8765/mcp"),
    ],
)
def test_client_url(host: str, url: str) -> None:
    assert client_url(host, 8765) == url
