"""Config profiles: the model, endpoint, budgets and defaults a person would retype per command.

docs/shell.md, "Profiles": a TOML file (``$FRACTAL_NB_CONFIG``, else
``$XDG_CONFIG_HOME/fractal-nb/config.toml``, else ``~/.config/fractal-nb/config.toml``)
holds ``[profiles.NAME]`` tables; ``--profile NAME`` (or ``$FRACTAL_NB_PROFILE``)
puts a profile's options on the command line, before the ones typed, so what is
typed wins and every value is checked as the typed flag is (argparse and
:mod:`.option_checks`). A key only some commands take applies to those; ``demo``
takes none (it is the same sample everywhere).

>>> table = {"profiles": {"lab": {"llm": "openai", "max_tokens": 20000}}}
>>> profile_argv(["run", "Why?"], "lab", table)
['run', '--llm', 'openai', '--max-tokens', '20000', 'Why?']
>>> profile_argv(["report", "x.duckdb"], "lab", table)
['report', 'x.duckdb']
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError

CONFIG_ENV = "FRACTAL_NB_CONFIG"
PROFILE_ENV = "FRACTAL_NB_PROFILE"

_MODEL = frozenset({"run", "resume", "harvest", "ask", "worker", "seed"})
_RUNNING = frozenset({"run", "resume", "ask"})
_FILES = frozenset({"run", "resume", "harvest", "ask", "fork", "seed"})
# A profile's key: the flag it stands for and the commands that take it (cli/parser.py).
OPTIONS: Mapping[str, tuple[str, frozenset[str]]] = {
    "llm": ("--llm", _MODEL),
    "model": ("--model", _MODEL),
    "base_url": ("--base-url", _MODEL),
    "seed_value": ("--seed-value", _MODEL),
    "max_concurrency": ("--max-concurrency", _MODEL),
    "timeout": ("--timeout", _MODEL),
    "intensity": ("--intensity", frozenset({"run", "seed"})),
    "checkpoint": ("--checkpoint", frozenset({"run", "seed"})),
    "strategy": ("--strategy", frozenset({"run", "seed"})),
    "workers": ("--workers", _RUNNING),
    "max_tokens": ("--max-tokens", _RUNNING),
    "max_wall_s": ("--max-wall-s", _RUNNING),
    "db": ("--db", _FILES),
}


def config_path() -> Path:
    """Where the profiles are read from (the module's docstring says the order)."""
    if named := os.environ.get(CONFIG_ENV):
        return Path(named).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "fractal-nb" / "config.toml"


def with_profile(argv: list[str]) -> list[str]:
    """``argv`` with ``--profile NAME`` taken out and the profile's options put after the command.

    Without ``--profile``, ``$FRACTAL_NB_PROFILE`` names the profile; with neither, ``argv``
    as it is. InvalidInputError (the shell's usage error) for a profile or file that is not there,
    a key no command takes, or a value that is not a string, a number or a boolean.
    """
    rest, name = _taken_out(argv)
    name = name if name is not None else os.environ.get(PROFILE_ENV) or None
    if name is None:
        return rest
    path = config_path()
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInputError(f"--profile {name}: no profiles file at {path} (or ${CONFIG_ENV})") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InvalidInputError(f"--profile {name}: {path} is not a TOML file: {exc}") from None
    return profile_argv(rest, name, table, where=str(path))


def profile_argv(
    argv: list[str], name: str, table: Mapping[str, Any], *, where: str = "the profiles"
) -> list[str]:
    """``argv`` with profile ``name`` of ``table`` (a parsed TOML file) after the command."""
    profiles = table.get("profiles")
    if not isinstance(profiles, Mapping) or not isinstance(profiles.get(name), Mapping):
        known = ", ".join(sorted(profiles)) if isinstance(profiles, Mapping) else ""
        raise InvalidInputError(
            f"--profile {name}: {where} holds no [profiles.{name}] table"
            + (f"; its profiles: {known}" if known else "")
        )
    options: list[str] = []
    for key, value in profiles[name].items():
        if key not in OPTIONS:
            raise InvalidInputError(
                f"--profile {name}: {key!r} in {where} is no option a profile sets; "
                f"the keys: {', '.join(OPTIONS)}"
            )
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise InvalidInputError(
                f"--profile {name}: {key} in {where} must be a string or a number, not {value!r}"
            )
        flag, commands = OPTIONS[key]
        if argv and argv[0] in commands:
            options += [flag, str(value)]
    return argv[:1] + options + argv[1:] if options else argv


def _taken_out(argv: list[str]) -> tuple[list[str], str | None]:
    """``argv`` without its ``--profile NAME`` (or ``--profile=NAME``), and that name (None: none)."""
    rest: list[str] = []
    name: str | None = None
    tokens = iter(argv)
    for token in tokens:
        if token == "--":
            rest += [token, *tokens]
            break
        if token == "--profile":
            name = next(tokens, None)
            if not name:
                raise InvalidInputError("--profile needs a profile's name")
        elif token.startswith("--profile="):
            name = token.partition("=")[2]
            if not name:
                raise InvalidInputError("--profile needs a profile's name")
        else:
            rest.append(token)
    return rest, name
