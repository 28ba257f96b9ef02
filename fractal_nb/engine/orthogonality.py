"""Orthogonal tracks: when two tracks are near-duplicates, and keeping each once.

See docs/architecture/engine.md, "Tracks" (orthogonality is code's): the tracks seed
(engine/strategies/tracks.py) and a deepened track's sub-tracks (engine/deepen.py)
pass through the same check.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..llm.schemas import Track
from ..text import content_words, normalize

SIMILAR = 0.6
"""Two tracks are near-duplicates when the Jaccard similarity of their name+focus content words is at least
this, or when one's words (two or more) are all among the other's."""


def _track_words(track: Track) -> frozenset[str]:
    return content_words(f"{track.name} {track.focus}")


def similar(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two word sets are near-duplicates (:data:`SIMILAR`, or one held in the other).

    >>> similar(frozenset({"error", "handling"}), frozenset({"error", "handling", "path"}))
    True
    >>> similar(frozenset({"service"}), frozenset({"layer", "composition"}))
    False
    """
    if not a or not b:
        return a == b
    small, large = sorted((a, b), key=len)
    if len(small) >= 2 and small <= large:
        return True
    return len(a & b) / len(a | b) >= SIMILAR


def near_duplicates(tracks: Sequence[Track]) -> list[tuple[int, int]]:
    """Pairs ``(i, j)``, ``i < j``, of tracks that are near-duplicates (same name, or :func:`similar`)."""
    words = [_track_words(t) for t in tracks]
    return [
        (i, j)
        for i in range(len(tracks))
        for j in range(i + 1, len(tracks))
        if normalize(tracks[i].name) == normalize(tracks[j].name) or similar(words[i], words[j])
    ]


def merge_duplicates(tracks: Sequence[Track]) -> tuple[list[Track], list[dict[str, str]]]:
    """The tracks, each near-duplicate kept once (the first), and the merges made (``kept``, ``merged``)."""
    kept: list[Track] = []
    merges: list[dict[str, str]] = []
    for track in tracks:
        twin = next((k for k in kept if near_duplicates([k, track])), None)
        if twin is None:
            kept.append(track)
        else:
            merges.append({"kept": twin.name, "merged": track.name, "focus": track.focus})
    return kept, merges
