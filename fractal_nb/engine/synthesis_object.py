"""The synthesis object: tracks' findings, conclusions and gaps, aggregated.

See docs/architecture/engine.md, "Tracks".

A tracks graph's root synthesis, and a fractal graph's when its harvest is asked
to aggregate (each seed question standing for a track). The model writes it;
the code's own checks keep it honest (:func:`checked_object`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..llm.schemas import SynthesisObject
from ..prompts import chat
from ..text import clip, normalize
from ..vocabulary import Support

if TYPE_CHECKING:
    from .calls import PendingCalls
    from .run_state import RunState


def kept_findings(meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A track's findings that may reach a unified answer: supported ones, or all when it has no sources."""
    return [
        f
        for f in meta.get("findings") or []
        if f.get("support") in (Support.SUPPORTED.value, Support.NO_SOURCES.value)
    ]


def track_brief(name: str, meta: Mapping[str, Any], synthesis: str | None) -> dict[str, Any]:
    """What the aggregate reads of one track: name, kept findings, conclusions and gaps."""
    return {
        "name": name,
        "findings": kept_findings(meta),
        "conclusions": str(meta.get("conclusions") or synthesis or "(no conclusions)"),
        "gaps": [str(g) for g in meta.get("gaps") or []],
    }


def aggregate(
    run: RunState,
    briefs: Sequence[Mapping[str, Any]],
    *,
    node_id: str,
    worker: str | None,
    calls: PendingCalls | None,
) -> dict[str, Any]:
    """The synthesis object of ``briefs`` (:func:`track_brief`), with the code's own checks applied.

    Every gap a track named is among ``open_questions`` (added where the model
    dropped it); nuances name only tracks that exist; a ``high`` confidence with
    divergences (nuances) is lowered to ``medium``, and the justification says so.
    """
    listing = "\n".join(
        f"Track {b['name']}:\n"
        + "".join(f"  - finding: {clip(str(f['finding']), 400)}\n" for f in b["findings"])
        + f"  conclusions: {clip(str(b['conclusions']), 800)}\n"
        + "".join(f"  - gap: {clip(g, 300)}\n" for g in b["gaps"])
        for b in briefs
    )
    found = run.call(
        SynthesisObject,
        chat("aggregate", seed=clip(run.seed, 500), tracks=listing or "(no tracks)"),
        node_id=node_id,
        worker=worker,
        pending=calls,
    )
    return checked_object(found, briefs)


def checked_object(found: SynthesisObject, briefs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The model's synthesis object made honest: gaps kept, nuances' tracks real, confidence justified."""
    names = {normalize(str(b["name"])): str(b["name"]) for b in briefs}
    nuances = [
        {"text": n.text, "tracks": [names[normalize(t)] for t in n.tracks if normalize(t) in names]}
        for n in found.nuances
    ]
    open_questions = list(found.open_questions)
    seen = {normalize(q) for q in open_questions}
    for gap in _union(b["gaps"] for b in briefs):
        if normalize(gap) not in seen:
            seen.add(normalize(gap))
            open_questions.append(gap)
    confidence, justification = found.confidence, found.justification
    if nuances and confidence == "high":
        confidence = "medium"
        justification += f" (Lowered from high: the tracks diverge on {len(nuances)} point(s).)"
    return {
        "unified": found.unified,
        "nuances": nuances,
        "open_questions": open_questions,
        "confidence": confidence,
        "justification": justification,
        "tracks": [str(b["name"]) for b in briefs],
    }


def _union(lists: Iterable[Sequence[str]]) -> list[str]:
    return [item for items in lists for item in items]
