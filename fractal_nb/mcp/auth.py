"""Who may call the MCP server over HTTP: a bearer token, and the Host names it answers to.

On loopback (127.0.0.0/8, ``::1``, ``localhost``) nothing changes unless a token
is given: the SDK's own Host/Origin check admits only loopback names. Bound
beyond loopback, every request needs ``Authorization: Bearer <token>`` (the
token given, else ``$FRACTAL_NB_TOKEN``, else one generated here for the caller
to print), and the Host/Origin check stays on, admitting the loopback names, this
machine's host name and FQDN, the bind address and the names the user allows.
"""

from __future__ import annotations

import functools
import hmac
import os
import secrets
import socket
from collections.abc import Iterable, Mapping

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl
from starlette.applications import Starlette

from ..arguments import check_token
from ..loopback import is_loopback

TOKEN_ENV = "FRACTAL_NB_TOKEN"
"""The environment variable read when no token is passed (server and worker alike)."""

ANY_HOST = "*"
"""The ``--allow-host`` value that turns the Host/Origin check off (the token still applies)."""

# The SDK's defaults for a loopback bind (MCPServer.streamable_http_app with host 127.0.0.1).
LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")
LOOPBACK_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")

# AuthSettings requires an issuer, which only OAuth routes read: a shared static token has none.
_ISSUER = "http://localhost"
_WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::", "[::]"})


class StaticTokenVerifier:
    """The SDK's ``TokenVerifier`` for one shared bearer token, compared in constant time.

    Parameters
    ----------
    token : str
        The token every request must carry (non-empty).
    client_id : str
        The identity an accepted request is attributed to.
    """

    def __init__(self, token: str, *, client_id: str = "fractal-nb") -> None:
        self._expected = check_token(token).encode()
        self._client_id = client_id

    def __repr__(self) -> str:
        return f"<StaticTokenVerifier client_id={self._client_id!r}>"  # never the token

    async def verify_token(self, token: str) -> AccessToken | None:
        """The access granted to ``token``, or None when it is not the shared token.

        Parameters
        ----------
        token : str
            The value after ``Bearer`` in the request's Authorization header.

        Returns
        -------
        AccessToken or None
            An access token without scopes or expiry for the right token, else None.
        """
        if not hmac.compare_digest(token.encode(), self._expected):
            return None
        return AccessToken(token=token, client_id=self._client_id, scopes=[])


def resolve_token(
    token: str | None, *, host: str, environ: Mapping[str, str] | None = None
) -> tuple[str | None, bool]:
    """The token the server will require, and whether it was generated here.

    Parameters
    ----------
    token : str or None
        The token asked for explicitly (``--token``, ``token=``); empty or blank is refused.
    host : str
        The bind address: beyond loopback a token is always required.
    environ : Mapping[str, str], optional
        Where to read ``FRACTAL_NB_TOKEN`` (default ``os.environ``).

    Returns
    -------
    tuple of (str or None, bool)
        The explicit token, else the environment's, else (beyond loopback only) a
        new ``secrets.token_urlsafe(32)`` with ``True``, for the caller to print;
        ``(None, False)`` on loopback with no token anywhere.
    """
    if token is not None:
        return check_token(token), False
    from_env = _from_environment(environ)
    if from_env is not None:
        return from_env, False
    if is_loopback(host):
        return None, False
    return secrets.token_urlsafe(32), True


def client_token(token: str | None, *, environ: Mapping[str, str] | None = None) -> str | None:
    """The token a client sends: the one given, else ``FRACTAL_NB_TOKEN``, else None.

    Parameters
    ----------
    token : str or None
        The token asked for explicitly; empty or blank is refused.
    environ : Mapping[str, str], optional
        Where to read ``FRACTAL_NB_TOKEN`` (default ``os.environ``).

    Returns
    -------
    str or None
        The token to send as ``Authorization: Bearer``, if any.
    """
    return check_token(token) if token is not None else _from_environment(environ)


def _from_environment(environ: Mapping[str, str] | None) -> str | None:
    """``$FRACTAL_NB_TOKEN``: None when unset or empty (as a shell's ``VAR=`` unsets), refused when blank."""
    value = (os.environ if environ is None else environ).get(TOKEN_ENV, "")
    return check_token(value, f"${TOKEN_ENV}") if value else None


def token_verifier(token: str | None) -> StaticTokenVerifier | None:
    """The verifier for ``MCPServer(token_verifier=...)``: None (no auth) when there is no token."""
    return None if token is None else StaticTokenVerifier(token)


def auth_settings(token: str | None) -> AuthSettings | None:
    """The settings for ``MCPServer(auth=...)`` that go with :func:`token_verifier`.

    A resource server without OAuth routes or scopes: the token verifier alone
    decides, and the SDK answers a request without a valid token with 401.
    """
    if token is None:
        return None
    return AuthSettings(issuer_url=AnyHttpUrl(_ISSUER), resource_server_url=None, required_scopes=[])


@functools.cache
def _machine_names() -> tuple[str, str]:
    """The host name and FQDN of this machine (looked up once: the FQDN may take a DNS query)."""
    return socket.gethostname(), socket.getfqdn()


def _host_patterns(name: str) -> list[str]:
    """Host header values admitted for ``name``: with any port (``NAME:*``) and bare, or as given."""
    name = name.strip()
    if not name:
        return []
    if name.startswith("["):  # [v6] or [v6]:port
        return [name] if "]:" in name else [name, f"{name}:*"]
    if name.count(":") == 1:  # name:port or name:*
        return [name]
    if ":" in name:  # a bare IPv6 address
        name = f"[{name}]"
    return [name, f"{name}:*"]


def allowed_hosts(host: str, *, allow_hosts: Iterable[str] = ()) -> list[str]:
    """The Host header values the server answers to when bound to ``host``.

    Parameters
    ----------
    host : str
        The bind address.
    allow_hosts : Iterable[str]
        Extra names (``--allow-host``): ``NAME`` admits ``NAME`` on any port,
        ``NAME:PORT`` that port only.

    Returns
    -------
    list of str
        Loopback: the SDK's loopback patterns. Beyond loopback, also this machine's
        host name and FQDN and the bind address (unless it is a wildcard such as
        0.0.0.0). The extra names in both cases; no duplicates.
    """
    names: list[str] = list(LOOPBACK_HOSTS)
    if not is_loopback(host):
        for machine in _machine_names():
            names += _host_patterns(machine) + _host_patterns(machine.lower())
        if host.strip() not in _WILDCARD_BINDS:
            names += _host_patterns(host)
    for extra in allow_hosts:  # clients send host names lower-cased, mostly
        names += _host_patterns(extra) + _host_patterns(extra.lower())
    return list(dict.fromkeys(names))


def transport_security(host: str, *, allow_hosts: Iterable[str] = ()) -> TransportSecuritySettings:
    """The SDK's Host/Origin check for a server bound to ``host``: on, unless ``*`` is allowed.

    Parameters
    ----------
    host : str
        The bind address.
    allow_hosts : Iterable[str]
        Extra Host names (see :func:`allowed_hosts`); ``"*"`` among them turns
        the check off, which leaves the bearer token as the only guard.

    Returns
    -------
    TransportSecuritySettings
        For a loopback bind without extras, exactly the SDK's loopback defaults.
        Otherwise the hosts of :func:`allowed_hosts`, and as origins the SDK's
        loopback origins plus ``http://`` and ``https://`` for every other host.
    """
    extras = list(allow_hosts)
    if ANY_HOST in (extra.strip() for extra in extras):
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts = allowed_hosts(host, allow_hosts=extras)
    origins = list(LOOPBACK_ORIGINS) + [
        f"{scheme}://{pattern}"
        for pattern in hosts
        if pattern not in LOOPBACK_HOSTS
        for scheme in ("http", "https")
    ]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def client_url(host: str, port: int, *, path: str = "/mcp") -> str:
    """The URL a client on this machine uses for a server bound to ``host``:``port``.

    A wildcard bind (``0.0.0.0``, ``::``) is reached through loopback, whose names
    the Host check always admits; an IPv6 address is bracketed.

    Parameters
    ----------
    host, port : str, int
        The bind address and port.
    path : str
        The endpoint's path.

    Returns
    -------
    str
        E.g. ``http://127.0.0.1:8765/mcp``.
    """
    name = host.strip()
    if name in _WILDCARD_BINDS:
        name = "::1" if ":" in name else "127.0.0.1"
    if ":" in name and not name.startswith("["):
        name = f"[{name}]"
    return f"http://{name}:{port}{path}"


def http_app(server: MCPServer, *, host: str, security: TransportSecuritySettings) -> Starlette:
    """The streamable-HTTP Starlette app of ``server`` with its bearer-token and Host checks.

    Parameters
    ----------
    server : MCPServer
        The server. Built with a token (``build_server(store, token=...)``), its
        ``/mcp`` route answers 401 to any request without that bearer token.
    host : str
        The address the app will be bound to.
    security : TransportSecuritySettings
        The Host/Origin check (see :func:`transport_security`).

    Returns
    -------
    Starlette
        The ASGI app, for uvicorn.

    Raises
    ------
    ValueError
        When ``host`` is beyond loopback and the server has no token.
    """
    if server.settings.auth is None and not is_loopback(host):
        raise ValueError(
            f"serving beyond loopback ({host}) needs a bearer token: "
            "build the server with build_server(store, token=...)"
        )
    return server.streamable_http_app(host=host, transport_security=security)


def beyond_loopback_warning(
    host: str, port: int, *, security: TransportSecuritySettings, token_hint: str
) -> str:
    """The line printed to stderr when a server binds beyond loopback.

    Parameters
    ----------
    host, port : str, int
        Where the server listens.
    security : TransportSecuritySettings
        Its Host check (see :func:`transport_security`).
    token_hint : str
        Where the token is to be found, e.g. ``"printed below"`` or ``"in ex.mcp_token"``.

    Returns
    -------
    str
        One line naming the address, the token requirement and the admitted Host names.
    """
    if security.enable_dns_rebinding_protection:
        hosts = ", ".join(h for h in security.allowed_hosts if not h.endswith(":*") and not is_loopback(h))
        check = f"Host must be loopback or one of: {hosts or '(none)'} (add names with --allow-host NAME)"
    else:
        check = "the Host check is OFF (--allow-host '*')"
    return (
        f"fractal-nb: warning: serving beyond loopback on {host}:{port}: every request needs the "
        f"bearer token (Authorization: Bearer <token>; {token_hint}); {check}"
    )
