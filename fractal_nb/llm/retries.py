"""How many times in a row a prompt failed: what tells a retry from a first ask.

A model asked the same prompt again after a refused or failed reply should not
be asked the same way (llm/openai_llm.py samples it differently), and a cache
should not hand back the reply that failed (llm/cache.py keys the retry apart).
"""

from __future__ import annotations

import threading

REMEMBERED_PROMPTS = 1024  # prompts whose failures are remembered, the oldest forgotten first


class FailureCount:
    """Per prompt key, the calls that failed since its last good answer (thread-safe, bounded).

    >>> count = FailureCount()
    >>> count.failed("p"), count.failed("p"), count["p"]
    (1, 2, 2)
    >>> count.succeeded("p"); count["p"]
    0
    """

    def __init__(self, limit: int = REMEMBERED_PROMPTS) -> None:
        self._counts: dict[str, int] = {}
        self._limit = limit
        self._lock = threading.Lock()

    def __getitem__(self, key: str) -> int:
        with self._lock:
            return self._counts.get(key, 0)

    def failed(self, key: str) -> int:
        """Count one more failure of ``key``; return the count."""
        with self._lock:
            count = self._counts.pop(key, 0) + 1  # popped and put back: the newest last
            self._counts[key] = count
            while len(self._counts) > self._limit:
                del self._counts[next(iter(self._counts))]
            return count

    def succeeded(self, key: str) -> None:
        """Forget ``key``'s failures: its next call is a first ask again."""
        with self._lock:
            self._counts.pop(key, None)
