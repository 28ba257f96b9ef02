"""Deepen: a track whose measured complexity passes a threshold splits into sub-tracks.

See docs/architecture/engine.md, "Tracks" (deepen). Seed 003's ``complexity(track) >
threshold → deepen(track)``: a track's complexity is what its skill's searches hit
(distinct files plus distinct definitions, engine/skills.py). Past :data:`DEEPEN_AT`
the track splits by the folders of the files it hit into at most :data:`MAX_SUBTRACKS`
sub-tracks, each a track of the same shape (name, focus, approach, deliverable, skill)
covering its own files; the orthogonality check of the tracks seed keeps each once.
Each sub-track is explored (its skill over its files only, its own findings) and the
sub-tracks' findings are aggregated into the track's.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from itertools import chain, zip_longest
from typing import Any

from ..llm.schemas import MAX_TRACK_FINDINGS, Track, TrackFindings
from .orthogonality import merge_duplicates
from .skills import SkillEvidence

DEEPEN_AT = 40
"""The complexity (files plus definitions a track's skill hit) past which the track splits into sub-tracks."""
MAX_SUBTRACKS = 4
"""The most sub-tracks one track splits into (the smallest folders share the last)."""
MIN_SUBTRACKS = 2


def needs_deepening(found: SkillEvidence, threshold: int | None = None) -> bool:
    """Whether the track's measured complexity passes ``threshold`` (None: :data:`DEEPEN_AT`)."""
    return found.complexity > (DEEPEN_AT if threshold is None else threshold)


def subtracks(track: Mapping[str, Any], files: Sequence[str]) -> list[dict[str, Any]]:
    """The sub-tracks of ``track`` over ``files``: one per folder (the largest first), each its files.

    Each has the track's shape (``name``, ``focus``, ``approach``, ``deliverable``,
    ``skill``) and its ``files``; near-duplicates are merged as the tracks seed merges
    them. Fewer than two distinct groups: none (the track is explored whole).

    >>> track = {"name": "errors", "focus": "f", "approach": "a", "deliverable": "d"}
    >>> subs = subtracks(track, ["pkg/store/claim.py", "pkg/store/answer.py", "pkg/engine/work.py"])
    >>> [(s["name"], len(s["files"])) for s in subs]
    [('errors/pkg/store', 2), ('errors/pkg/engine', 1)]
    """
    groups: dict[str, list[str]] = {}
    for name in dict.fromkeys(files):
        groups.setdefault(posixpath.dirname(name) or ".", []).append(name)
    if len(groups) < MIN_SUBTRACKS:  # one folder: a group per file
        groups = {posixpath.splitext(n)[0]: [n] for n in dict.fromkeys(files)}
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    if len(ordered) > MAX_SUBTRACKS:
        rest = ordered[MAX_SUBTRACKS - 1 :]
        ordered = [*ordered[: MAX_SUBTRACKS - 1], ("others", [n for _, names in rest for n in names])]
    candidates = [_subtrack(track, label, names) for label, names in ordered]
    kept, _ = merge_duplicates([_as_track(c) for c in candidates])
    names = {t.name for t in kept}
    chosen = [c for c in candidates if c["name"] in names]
    return chosen if len(chosen) >= MIN_SUBTRACKS else []


def _subtrack(track: Mapping[str, Any], label: str, names: Sequence[str]) -> dict[str, Any]:
    shown = ", ".join(names[:8]) + (" …" if len(names) > 8 else "")
    return {
        "name": f"{track['name']}/{label}"[:80],
        "focus": f"{label}: {shown}",
        "approach": track.get("approach", ""),
        "deliverable": f"{track.get('deliverable', '')} (within {label})",
        "skill": track.get("skill"),
        "files": list(names),
    }


def _as_track(sub: Mapping[str, Any]) -> Track:
    shape = _shape(sub)
    return Track.model_construct(
        name=shape["name"], focus=shape["focus"], approach=shape["approach"], deliverable=shape["deliverable"]
    )


def _shape(sub: Mapping[str, Any]) -> dict[str, str]:
    return {k: str(sub[k]) for k in ("name", "focus", "approach", "deliverable")}


def aggregate_subtracks(
    track: str, parts: Sequence[tuple[Mapping[str, Any], TrackFindings]]
) -> TrackFindings:
    """The track's findings from its sub-tracks': findings taken in turn, evidence, conclusions, gaps."""
    findings = [f for f in chain(*zip_longest(*(p.findings for _, p in parts))) if f is not None]
    evidence = [e for _, p in parts for e in p.evidence]
    gaps = list(dict.fromkeys(g for _, p in parts for g in p.gaps))
    return TrackFindings.model_construct(
        track=track,
        findings=findings[:MAX_TRACK_FINDINGS],
        evidence=evidence[: 2 * MAX_TRACK_FINDINGS],
        conclusions=" ".join(f"{sub['name']}: {p.conclusions}" for sub, p in parts),
        gaps=gaps,
    )


def subtrack_record(sub: Mapping[str, Any], found: SkillEvidence, findings: TrackFindings) -> dict[str, Any]:
    """What the track's metadata keeps of one sub-track."""
    return {
        **_shape(sub),
        "skill": sub.get("skill"),
        "files": len(sub["files"]),
        "complexity": found.complexity,
        "findings": len(findings.findings),
    }
