"""Checks of the arguments the store and the facade take: ids, free text, flags, counts, seconds.

A refused argument raises :class:`~fractal_nb.errors.InvalidInputError` naming it,
before anything changes (docs/architecture/store.md, "Store rules", rule 7).
"""

from __future__ import annotations

import json
import math
import reprlib
from typing import Any

from .errors import InvalidInputError
from .vocabulary import MAX_METADATA_BYTES, MAX_TEXT_CHARS

MAX_COUNT = 2**63 - 1  # DuckDB's BIGINT: the largest event id or LIMIT a query takes
MAX_IDS = 100_000  # ids in one list argument


def require_id(value: object, what: str) -> str:
    """An id argument must be a non-empty string of at most 300 characters."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{what} must be a non-empty string id, not {value!r}")
    if len(value) > 300:
        raise InvalidInputError(f"{what} is {len(value):,} characters; an id has at most 300")
    return _utf8(value, what)


def require_text(value: object, what: str) -> str:
    """Free text (question, answer, synthesis, seed): a non-blank string within ``MAX_TEXT_CHARS``."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{what} must be a non-empty string, not {value!r}")
    if len(value) > MAX_TEXT_CHARS:
        raise InvalidInputError(
            f"{what} is {len(value):,} characters; the limit is {MAX_TEXT_CHARS:,} (docs/store.md, Limits)"
        )
    return _utf8(value, what)


def _utf8(value: str, what: str) -> str:
    """DuckDB stores UTF-8: refuse NUL characters and strings that cannot be encoded (lone surrogates)."""
    if "\x00" in value:
        raise InvalidInputError(f"{what} contains a NUL character (\\x00); send text without it")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(f"{what} is not valid Unicode text ({exc.reason} at {exc.start})") from None
    return value


def optional_text(value: object, what: str) -> str | None:
    """Optional free text (a reason): None, or a string within ``MAX_TEXT_CHARS`` without NUL."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a string or None, not {shown(value)}")
    if len(value) > MAX_TEXT_CHARS:
        raise InvalidInputError(
            f"{what} is {len(value):,} characters; the limit is {MAX_TEXT_CHARS:,} (docs/store.md, Limits)"
        )
    return _utf8(value, what)


def require_flag(value: object, what: str) -> bool:
    """A flag: True or False, not 1, "yes" or None.

    >>> require_flag(True, "claim_next")
    True
    """
    if not isinstance(value, bool):
        raise InvalidInputError(f"{what} must be True or False, not {shown(value)}")
    return value


def require_count(
    value: object, what: str, *, minimum: int = 0, maximum: int = MAX_COUNT, none: str = ""
) -> int:
    """A limit, offset or event id: an integer (not a bool) from ``minimum`` to ``maximum``.

    ``none``: what None means where the caller takes it, for the message.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        also = f"None ({none}) or " if none else ""
        raise InvalidInputError(
            f"{what} must be {also}an integer from {minimum:,} to {maximum:,}, not {shown(value)}"
        )
    return value


def require_seconds(value: object, what: str, *, none: str = "") -> float:
    """A duration: a finite number of seconds >= 0 (not a bool); ``none`` as for :func:`require_count`."""
    if not isinstance(value, bool) and isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:  # an int beyond any float
            seconds = math.inf
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    also = f"None ({none}) or " if none else ""
    raise InvalidInputError(f"{what} must be {also}a finite number of seconds >= 0, not {shown(value)}")


def merged_metadata(
    current: dict[str, Any], update: dict[str, Any], owner: str
) -> tuple[dict[str, Any], str]:
    """``update`` merged into ``current`` (shallow) and its JSON, refused past ``MAX_METADATA_BYTES``.

    The limit holds for what a node or graph keeps, not only for each update
    (docs/store.md, "Limits"): the update that would pass it is refused whole.
    """
    merged = {**current, **update}
    text = json.dumps(merged)
    if len(text) > MAX_METADATA_BYTES:
        raise InvalidInputError(
            f"the metadata of {owner} would be {len(text):,} characters as JSON after this update "
            f"(it holds {len(json.dumps(current)):,}); the limit is {MAX_METADATA_BYTES:,} in all "
            "(docs/store.md, Limits). Send less, or replace large keys with smaller values"
        )
    return merged, text


def shown(value: object) -> str:
    """A refused value as an error message shows it: its repr, cut short."""
    try:
        return reprlib.repr(value)
    except ValueError:  # an int too long to print
        return f"an integer of {value.bit_length() if isinstance(value, int) else '?'} bits"


def require_ids(value: object, what: str) -> list[str]:
    """A list of ids (None: none): a list or tuple of at most ``MAX_IDS`` ids."""
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise InvalidInputError(f"{what} must be a list of node ids or None, not {shown(value)}")
    if len(value) > MAX_IDS:
        raise InvalidInputError(f"{what} holds {len(value):,} ids; the limit is {MAX_IDS:,}")
    return [require_id(item, f"{what}[{index}]") for index, item in enumerate(value)]


def optional_name(value: object, what: str) -> str | None:
    """An optional actor name (owner, worker) is None or a non-empty string."""
    if value is None:
        return None
    return require_id(value, what)
