"""The options of :class:`~fractal_nb.llm.openai_llm.OpenAILLM` checked, before any client is built.

docs/architecture.md "Layers" (the model layer): each option it cannot work with
is refused by name (:class:`~fractal_nb.errors.InvalidInputError`); ``max_tokens``
becomes every role's reply bound, ``max_concurrency`` the requests in flight at
once, ``sampling`` the extra settings sent with every request.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ..errors import InvalidInputError
from .protocol import REPLY_BOUNDS

MAX_TOKENS = REPLY_BOUNDS  # the default reply length bounds per role (tokens)
_OWN_FIELDS = frozenset(
    "model messages max_tokens max_completion_tokens temperature seed response_format tools tool_choice "
    "stream n".split()
)


def check_options(
    output_retries: int, timeout: float, seed: int | None, tool_calls: object, max_reply_bytes: int
) -> None:
    """Refuse an option :class:`OpenAILLM` cannot work with, naming it, before a client is built."""
    if output_retries < 0:
        raise InvalidInputError(f"output_retries must be 0 or more, not {output_retries}")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise InvalidInputError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise InvalidInputError(f"seed must be an integer or None, not {seed!r}")
    if tool_calls not in (True, False, "auto") or (tool_calls != "auto" and not isinstance(tool_calls, bool)):
        raise InvalidInputError(f"tool_calls must be True, False or 'auto', not {tool_calls!r}")
    if isinstance(max_reply_bytes, bool) or not isinstance(max_reply_bytes, int) or max_reply_bytes < 1024:
        raise InvalidInputError(
            f"max_reply_bytes must be an integer >= 1024 (bytes), not {max_reply_bytes!r}"
        )


def concurrency_bound(value: object, *, ask_slots: bool) -> int | None:
    """Requests in flight at once (None: no bound); ``"auto"``: 1 until the server is asked, else none."""
    if value == "auto":
        return 1 if ask_slots else None
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InvalidInputError(f"max_concurrency must be an integer >= 1 or None, not {value!r}")
    return value


def max_tokens_per_role(value: int | Mapping[str, int] | None) -> dict[str, int]:
    """Every role's reply bound: the defaults, overridden by one number or per role."""
    bounds = dict(MAX_TOKENS)
    if isinstance(value, int) and not isinstance(value, bool):
        bounds = dict.fromkeys(bounds, value)
    elif isinstance(value, Mapping):
        unknown = set(value) - set(bounds)
        if unknown:
            raise InvalidInputError(
                f"max_tokens names unknown roles {sorted(unknown)}; roles: {', '.join(sorted(bounds))}"
            )
        bounds.update(value)
    elif value is not None:
        raise InvalidInputError(
            f"max_tokens must be an integer, a dict of role -> integer, or None, not {value!r}"
        )
    for role, bound in bounds.items():
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 16:
            raise InvalidInputError(f"max_tokens for {role} must be an integer >= 16, not {bound!r}")
    return bounds


def checked_sampling(sampling: Mapping[str, object] | None) -> dict[str, object]:
    """``sampling`` checked: setting names mapped to JSON values, none a field OpenAILLM sets itself."""
    if sampling is None:
        return {}
    if not isinstance(sampling, Mapping) or not all(isinstance(k, str) and k for k in sampling):
        raise InvalidInputError(f"sampling must map setting names to values, not {sampling!r}")
    if own := sorted(_OWN_FIELDS & set(sampling)):
        raise InvalidInputError(f"sampling cannot set {', '.join(own)}: OpenAILLM sets them itself")
    try:
        json.dumps(dict(sampling), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"sampling must hold JSON values: {exc}") from exc
    return dict(sampling)
