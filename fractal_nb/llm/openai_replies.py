"""What an OpenAI-compatible server sends back, read as data, never trusted (issue 37).

docs/architecture/models.md, "A server's reply is data": one chat completion sent and
its body checked (:class:`BadBody` when it is not UTF-8, not JSON, not a chat
completion, over ``max_reply_bytes``, or holds a lone surrogate); its text and
tool calls taken out; its usage reported, a figure no completion can have
estimated instead; its JSON repaired and validated against the schema; and
``openai``'s errors said in plain words as :class:`~fractal_nb.errors.LLMError`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, cast

import json_repair
import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
from pydantic import BaseModel

from ..errors import LLMError, LLMTimeoutError, LLMUnavailableError
from ..wire import connection_problem
from .openai_transport import ReplyTooLarge
from .protocol import Message, report_usage, reported_tokens
from .quality import ReplyContext

_SNIPPET = 300
REJECTS_OPTION = frozenset({400, 422, 500})
"""What servers answer to a request option they lack (``response_format``, ``tools``)."""


class BadBody(Exception):
    """The server answered 200 with something that is not a chat completion."""


def chat_completion(
    client: openai.OpenAI, model: str, convo: list[Message], options: Mapping[str, Any]
) -> ChatCompletion:
    """Send one request; the reply, or :class:`BadBody` when the body is no chat completion we can read.

    The openai client parses a 200 body without wrapping its errors: bytes that are not
    UTF-8 raise UnicodeDecodeError, text that is not JSON JSONDecodeError, and a body
    with another content type comes back as a str. Its own errors propagate.
    """
    try:
        response = client.chat.completions.create(
            model=model, messages=cast("list[ChatCompletionMessageParam]", convo), **options
        )
    except UnicodeDecodeError as exc:
        raise BadBody(f"the server's body was not UTF-8 ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise BadBody(f"the server's body was not JSON ({exc})") from exc
    except ReplyTooLarge as exc:
        raise BadBody(str(exc)) from exc
    if not isinstance(response, ChatCompletion):
        raise BadBody(f"the server's body was not a chat completion: {_short(response)}")
    return response


def first_message(response: ChatCompletion) -> object:
    """The first choice's message (None when the reply has no choice)."""
    choices = getattr(response, "choices", None)
    first = choices[0] if isinstance(choices, list) and choices else None
    return getattr(first, "message", None)


def reply_text(message: object) -> str:
    """The message's text ("" for none); :class:`BadBody` when it is not text a store can keep."""
    content = getattr(message, "content", None)
    if content is None:
        return ""
    if not isinstance(content, str):
        raise BadBody(f"the reply's content was not text but {type(content).__name__}: {_short(content)}")
    return _storable(content, "the reply's content")


def _storable(text: str, what: str) -> str:
    """``text`` when it encodes as UTF-8; a lone surrogate (a JSON escape of half a pair) is a bad body."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadBody(f"{what} held a character that is not Unicode text ({exc.reason})") from None
    return text


def reply_tool_calls(message: object) -> list[dict[str, Any]]:
    """The message's tool calls as {id, name, arguments}, each text (arguments as the server sent them)."""
    calls = getattr(message, "tool_calls", None)
    if not isinstance(calls, list):
        return []
    found = []
    for index, call in enumerate(calls):
        function = getattr(call, "function", None)
        if function is None:
            continue
        name, arguments = getattr(function, "name", None), getattr(function, "arguments", None)
        found.append(
            {
                "id": _storable(str(getattr(call, "id", None) or f"call-{index}"), "a tool call's id"),
                "name": _storable(str(name or ""), "a tool call's name"),
                "arguments": _storable(
                    arguments if isinstance(arguments, str) else json.dumps(arguments or {}),
                    "a tool call's arguments",
                ),
            }
        )
    return found


def report_reply_usage(
    response: ChatCompletion, prompt_estimate: int, completion_estimate: int, *, tool_round: bool = False
) -> None:
    """Report one completion's tokens: the server's figures where it sent ones a completion can have.

    A figure it did not send is estimated; one it sent that no completion can have
    (:func:`~fractal_nb.llm.protocol.reported_tokens`: 10^12, -10^6, text) is estimated
    too, and what it sent is kept for the ledger's ``refused_usage``.
    """
    usage = getattr(response, "usage", None)
    sent = {name: getattr(usage, name, None) for name in ("prompt_tokens", "completion_tokens")}
    taken = {name: reported_tokens(value) for name, value in sent.items()}
    prompt, completion = taken["prompt_tokens"], taken["completion_tokens"]
    refused = {name: _as_sent(sent[name]) for name in sent if sent[name] is not None and taken[name] is None}
    report_usage(
        prompt_estimate if prompt is None else prompt,
        completion_estimate if completion is None else completion,
        estimated=prompt is None or completion is None,
        tool_round=tool_round,
        refused=refused,
    )


def _as_sent(value: object) -> object:
    """A usage figure as the server sent it, for the ledger: a number as it is, anything else as short text.

    >>> _as_sent(10**12), _as_sent(-3), _as_sent({"a": 1}), _as_sent(float("nan"))
    (1000000000000, -3, "{'a': 1}", 'nan')
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return _short(value)[:40]
    return value


def parse_reply(text: str, schema: type[BaseModel], context: ReplyContext) -> dict[str, Any]:
    """Repair the reply's JSON (prose, fences, trailing commas, raw newlines), validate and judge it."""
    if not text.strip():
        raise ValueError("the reply was empty")
    data = json_repair.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"the reply held no JSON object: {_short(text)}")
    return schema.model_validate(data, context=context).model_dump(mode="json")


def rejects_format(exc: openai.OpenAIError) -> bool:
    """Whether the server refused the request for its response_format (so fall back)."""
    if not isinstance(exc, openai.APIStatusError):
        return False
    return exc.status_code in REJECTS_OPTION or "response_format" in f"{exc.message} {exc.body}"


def translate_error(exc: openai.OpenAIError, model: str, base_url: str) -> LLMError:
    """Our error for an openai one, in plain words: timeout, unreachable or refusing server, HTTP error."""
    if isinstance(exc, openai.APITimeoutError):
        return LLMTimeoutError(f"{model}: the request to {base_url} timed out, after the client's retries")
    if isinstance(exc, openai.APIConnectionError):
        return LLMUnavailableError(f"cannot reach the model server at {base_url}: {connection_problem(exc)}")
    if isinstance(exc, openai.APIStatusError):
        body = _short(exc.body if exc.body is not None else exc.message)
        status = exc.status_code
        if status in (401, 403):
            return LLMUnavailableError(
                f"the model server at {base_url} refused the API key (HTTP {status}): {body}"
            )
        if status == 404:
            return LLMUnavailableError(
                f"the model server at {base_url} has no model {model!r} (HTTP 404): {body}"
            )
        if status >= 500:
            return LLMUnavailableError(
                f"the model server at {base_url} failed (HTTP {status}, after the client's retries): {body}"
            )
        return LLMError(f"{model}: HTTP {status}: {body}")
    return LLMError(f"{model}: {type(exc).__name__}: {_short(exc)}")


def _short(value: object) -> str:
    """``value`` as one line of at most a few hundred characters."""
    text = " ".join(str(value).split())
    return text if len(text) <= _SNIPPET else text[: _SNIPPET - 1] + "…"
