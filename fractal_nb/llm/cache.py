"""``CachedLLM``: record completions into the store, or replay them without a model.

Node ids in prompts differ from run to run, so the key and the recorded
response use positional stand-ins (``[id1]``, ``[id2]``…) that a replay maps
back to the ids of the prompt at hand. Replay therefore works whenever a run
asks the same questions in the same words, e.g. a step-by-step run, or a demo
recorded once with a real model and replayed on Binder without an API key.

A prompt asked again after a failed or refused call is a retry, which a real
model answers differently (llm/openai_llm.py varies its sampling): the k-th
retry since the prompt's last good answer is kept under its own key, so a
replay follows the recorded run instead of handing back the reply that failed.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Literal

from pydantic import BaseModel

from ..errors import InvalidInputError, LLMError, LLMOutputError
from ..store import Store
from .protocol import LLM, Message, estimate_tokens, messages_tokens, report_usage
from .quality import ReplyContext
from .retries import FailureCount
from .schemas import role_of

CacheMode = Literal["record", "replay", "off"]
_NODE_ID = re.compile(r"n-[0-9a-f]{16}")


class CachedLLM:
    """Wrap a model with a record/replay cache kept in a :class:`~fractal_nb.store.Store`.

    ``record`` calls the model and stores every completion; ``replay`` answers
    only from the store and raises :class:`~fractal_nb.LLMError` on a miss;
    ``off`` passes calls straight through.
    """

    def __init__(self, inner: LLM | None, store: Store, mode: CacheMode = "record") -> None:
        if mode not in ("record", "replay", "off"):
            raise InvalidInputError(f"invalid cache mode {mode!r}; valid values: off, record, replay")
        if inner is None and mode != "replay":
            raise InvalidInputError(
                f"cache mode {mode!r} needs a model to call; only replay runs without one"
            )
        self.inner = inner
        self.store = store
        self.mode = mode
        self.model = inner.model if inner is not None else "replay"
        self._failures = FailureCount()  # a prompt asked again after a failure is a retry

    def __repr__(self) -> str:
        return f"CachedLLM({self.inner!r}, mode={self.mode!r})"

    def complete(self, messages: list[Message], schema: type[BaseModel]) -> dict[str, Any]:
        """Answer from the cache or the model, as the mode says."""
        if self.mode == "off":
            return self._call(messages, schema)
        ids = list(dict.fromkeys(_NODE_ID.findall("".join(m["content"] for m in messages))))
        prompt = self._key(messages, schema, ids)
        retry = self._failures[prompt]
        key = prompt if not retry else self._key(messages, schema, ids, retry=retry)
        try:
            if self.mode == "replay":
                recorded = self.store.cache_get(key)
                if recorded is None:
                    attempt = f" (retry {retry})" if retry else ""
                    raise LLMError(
                        f"no recorded {schema.__name__} completion for this prompt{attempt} (replay mode)"
                    )
                output = json.loads(_restore(json.dumps(recorded), ids))
                report_usage(messages_tokens(messages), estimate_tokens(json.dumps(output)), cached=True)
                try:  # judged as a fresh reply: a recording is no reason to keep junk
                    reply = schema.model_validate(output, context=ReplyContext.of(messages, schema))
                except ValueError as exc:
                    raise LLMOutputError(f"recorded {schema.__name__} reply refused: {exc}") from exc
                result: dict[str, Any] = reply.model_dump(mode="json")
            else:
                result = self._call(messages, schema)
                self.store.cache_put(
                    key,
                    model=self.model,
                    role=role_of(schema),
                    response=json.loads(_standin(json.dumps(result), ids)),
                )
        except LLMError:
            self._failures.failed(prompt)
            raise
        self._failures.succeeded(prompt)
        return result

    def _call(self, messages: list[Message], schema: type[BaseModel]) -> dict[str, Any]:
        if self.inner is None:  # the constructor refuses this; kept for type checkers
            raise LLMError("no model to call in replay-only mode")
        return self.inner.complete(messages, schema)

    def _key(self, messages: list[Message], schema: type[BaseModel], ids: list[str], retry: int = 0) -> str:
        parts: list[Any] = [schema.__name__, [_standin(m["content"], ids) for m in messages]]
        text = json.dumps(parts + [retry] if retry else parts)  # the first answer keeps its old key
        return hashlib.sha256(text.encode()).hexdigest()


def _standin(text: str, ids: list[str]) -> str:
    for k, node_id in enumerate(ids, start=1):
        text = text.replace(node_id, f"[id{k}]")
    return text


def _restore(text: str, ids: list[str]) -> str:
    for k, node_id in reversed(list(enumerate(ids, start=1))):
        text = text.replace(f"[id{k}]", node_id)
    return text
