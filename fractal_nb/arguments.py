"""Checks of where a person points the facade and the shell: store paths, bind addresses, tokens.

They run before anything is opened, created or bound, so a refused argument
leaves no file behind (docs/architecture.md, "Layers": Arguments). Each check names the
argument as the caller spells it (``path`` in Python, ``--db`` in the shell).
Light to import: the shell's usage errors load nothing else.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .errors import InvalidInputError

__all__ = [
    "check_bind_host",
    "check_file_path",
    "check_store_path",
    "check_store_target",
    "check_token",
    "is_database_url",
    "shown_target",
]

STORE_LOG = ".wal"  # DuckDB's write-ahead log, made beside a store's file
_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


def check_file_path(
    path: object, what: str = "path", *, example: str = "exploration.duckdb", beside: str = ""
) -> Path:
    """``path`` as a :class:`~pathlib.Path` if a file can be there; InvalidInputError saying what it is.

    One check for every file a person names (a store, an exported page): text or a
    path object without NUL, not a folder nor a device, in a folder that exists.
    ``example`` is the file name suggested inside a folder given by mistake;
    ``beside`` the longest suffix of a file made beside it (its name leaves room).

    >>> check_file_path("notes.duckdb")
    PosixPath('notes.duckdb')
    >>> try:
    ...     check_file_path(".", "--db")
    ... except InvalidInputError as exc:
    ...     print(exc)
    --db .: is a directory; give a file inside it, e.g. exploration.duckdb
    """
    if isinstance(path, bytes) or not isinstance(path, str | os.PathLike):
        raise InvalidInputError(
            f"{what} must be a file path (str or Path), not {type(path).__name__}: {path!r:.80}"
        )
    text = os.fspath(path)
    if not isinstance(text, str) or not text.strip():
        raise InvalidInputError(f"{what} must be a file path, not {text!r:.80}")
    if "\x00" in text:
        raise InvalidInputError(f"{what} contains a NUL character (\\x00): {text!r:.80}")
    where = Path(text)
    _check_lengths(where, what, beside)
    if where.is_dir():
        raise InvalidInputError(
            f"{what} {text}: is a directory; give a file inside it, e.g. {where / example}"
        )
    if where.exists() and not where.is_file():
        raise InvalidInputError(f"{what} {text}: is not a regular file (a device, socket or pipe)")
    folder = where.parent
    if not folder.exists():
        raise InvalidInputError(f"{what} {text}: folder {folder} does not exist (create it first)")
    if not folder.is_dir():
        raise InvalidInputError(f"{what} {text}: {folder} is a file, not a folder")
    return where


def _check_lengths(where: Path, what: str, beside: str) -> None:
    """Refuse a path the file system cannot hold: not encodable, a name or the whole too long.

    Checked before anything looks at the path, which would raise the OS's own
    error (issue 37). ``beside`` is the longest suffix a file is given beside
    this one (a store's ``.wal``): its name must leave room for it.
    """
    try:
        whole = len(os.fsencode(os.path.abspath(where))) + len(beside)
    except UnicodeEncodeError:
        raise InvalidInputError(
            f"{what} {str(where)!r:.80}: has characters no file name can hold (lone surrogates)"
        ) from None
    name_max, path_max = _limit(where, "PC_NAME_MAX", 255), _limit(where, "PC_PATH_MAX", 4096)
    for folder in where.parts[:-1]:
        if len(os.fsencode(folder)) > name_max:
            raise InvalidInputError(
                f"{what}: the folder name {_shown(folder)} is {len(os.fsencode(folder))} bytes; this "
                f"file system allows at most {name_max} per name"
            )
    size = len(os.fsencode(where.name))
    if size + len(beside) > name_max:
        raise InvalidInputError(
            f"{what}: the file name {_shown(where.name)} is {size} bytes; at most {name_max - len(beside)} "
            f"fit here (this file system allows {name_max} per name"
            + (f", and {beside!r} is added beside it)" if beside else ")")
        )
    if whole >= path_max:
        raise InvalidInputError(
            f"{what} {str(where)!r:.80}: is {whole} bytes long as a full path; this file system "
            f"allows paths under {path_max} bytes"
        )


def _shown(name: str) -> str:
    """``name`` quoted, its start only when it is long."""
    return repr(name) if len(name) <= 40 else f"{name[:30]!r}…"


def _limit(where: Path, name: str, default: int) -> int:
    """The file system's ``name`` limit in the folder ``where`` would be in (``default`` if unknown)."""
    try:
        return os.pathconf(where.parent, name)
    except (OSError, ValueError):  # a folder that is not there (checked next) or has no such limit
        return default


def check_store_path(path: object, what: str = "path", *, must_exist: bool = False) -> Path:
    """:func:`check_file_path` for a store; with ``must_exist`` the file must be there.

    A store's name leaves room for the log DuckDB writes beside it (``<name>.wal``).

    >>> try:
    ...     check_store_path("x" * 253, "--db")
    ... except InvalidInputError as exc:
    ...     print(str(exc).split("; ")[1])
    at most 251 fit here (this file system allows 255 per name, and '.wal' is added beside it)
    """
    where = check_file_path(path, what, beside=STORE_LOG)
    if must_exist and not where.exists():
        raise InvalidInputError(f"{what} {where}: no such file")
    return where


def is_database_url(target: object) -> bool:
    """Whether ``target`` names a PostgreSQL database (``postgresql://`` or ``postgres://``), not a file.

    >>> is_database_url("postgresql://alice@db.example/research"), is_database_url("tram.duckdb")
    (True, False)
    """
    return (
        isinstance(target, str)
        and target.partition("://")[0].lower() in ("postgresql", "postgres")
        and ("://" in target)
    )


def shown_target(target: object) -> str:
    """How messages name a store: a URL without its password (user part or parameter), a path as it is.

    >>> shown_target("postgresql://alice:s3cret@db.example:5433/research?password=x&sslmode=require")
    'postgresql://alice@db.example:5433/research?sslmode=require'
    """
    if not is_database_url(target):
        return str(target)
    parts = urlsplit(str(target))
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    netloc = (
        (f"{parts.username}@" if parts.username else "") + host + (f":{parts.port}" if parts.port else "")
    )
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k.lower() != "password"])
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def check_store_target(target: object, what: str = "path", *, must_exist: bool = False) -> Path | str:
    """Where a store is: a ``postgresql://`` URL as it is, else a file :func:`check_store_path` checks.

    ``must_exist`` holds for a file only: whether a database holds a store is known once
    it is opened.

    >>> check_store_target("postgresql://localhost/research")
    'postgresql://localhost/research'
    """
    if is_database_url(target):
        return str(target)
    return check_store_path(target, what, must_exist=must_exist)


def check_bind_host(host: object, what: str = "host") -> str:
    """``host`` if it can be an address to bind: an IPv4 or IPv6 address, or a host name.

    Checked by its form alone (no name is looked up): ``999.1.1.1`` is no IPv4
    address, ``my host`` no name.

    >>> check_bind_host("0.0.0.0")
    '0.0.0.0'
    >>> try:
    ...     check_bind_host("999.1.1.1", "--host")
    ... except InvalidInputError as exc:
    ...     print(exc)
    --host '999.1.1.1' is not an IPv4 address (each of its four numbers is 0-255)
    """
    if not isinstance(host, str) or not host.strip():
        raise InvalidInputError(f"{what} must be an IP address or a host name, not {host!r}")
    name = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if ":" in name:
        try:
            ipaddress.IPv6Address(name)
        except ValueError:
            raise InvalidInputError(f"{what} {host!r} is not an IPv6 address") from None
        return host
    if re.fullmatch(r"[0-9.]+", name):
        try:
            ipaddress.IPv4Address(name)
        except ValueError:
            raise InvalidInputError(
                f"{what} {host!r} is not an IPv4 address (each of its four numbers is 0-255)"
            ) from None
        return host
    labels = name.removesuffix(".").split(".")
    if len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise InvalidInputError(
            f"{what} {host!r} is neither an IP address nor a host name (letters, digits and "
            "hyphens, in dot-separated labels of at most 63 characters)"
        )
    return host


def check_token(token: object, what: str = "token") -> str:
    """``token`` if it can be a bearer token: text with more than blanks in it.

    An empty token would serve with none at all (issue 37), and a blank one can
    never be sent back in a header: both are refused, naming ``what``.

    >>> try:
    ...     check_token("", "--token")
    ... except InvalidInputError as exc:
    ...     print(exc)
    --token is empty; give the bearer token every request must carry, or leave --token out
    """
    if not isinstance(token, str):
        raise InvalidInputError(f"{what} must be a bearer token (str), not {type(token).__name__}")
    if not token.strip():
        raise InvalidInputError(
            f"{what} is {'empty' if not token else 'blank'}; give the bearer token every request "
            f"must carry, or leave {what} out"
        )
    return token


def check_llm(llm: object, what: str = "llm") -> None:
    """Refuse anything that is not a model: it must have ``complete(messages, schema)``."""
    if not callable(getattr(llm, "complete", None)):
        raise InvalidInputError(
            f"{what} must be a model with complete(messages, schema), such as SimulatedLLM() or "
            f"OpenAILLM(...), not {llm!r}"
        )
