"""The simulator's tracks strategy (engine/strategies/tracks.py): tracks, their findings, the aggregate.

docs/architecture.md "Layers" (the model layer): orthogonal tracks, one dimension
each about another of the seed's own words; a track's findings, each citing a real
line of the evidence shown; their aggregate across the tracks listed. Like
``simulated_chain``, each reply is drawn from the prompt and the call's own random
draw, so it is the same on every run.
"""

from __future__ import annotations

import random
import re
from typing import Any

from .simulated_prompts import evidence_lines, prompt_field, quoted_question

_TRACK_DIMENSIONS = [
    (
        "mechanisms",
        "how {w} works: its parts and their interplay",
        "[simulated] trace each part",
        "a map of {w}",
    ),
    ("evidence", "what records and data say about {w}", "[simulated] read the records", "cited data on {w}"),
    (
        "failure modes",
        "where {w} breaks down and why",
        "[simulated] scan the error paths",
        "the failures of {w}",
    ),
    (
        "configuration",
        "which settings and limits shape {w}",
        "[simulated] find the settings",
        "the knobs of {w}",
    ),
    ("history", "how {w} changed over time", "[simulated] compare versions", "a timeline of {w}"),
]
_WORDS = re.compile(r"[^\W\d_]{3,}")  # a quote's words: a finding never echoes code or JSON
_TRACK_STOP = frozenset({"what", "which", "when", "where", "does", "that", "this", "with", "from", "have"})


def tracks_seed_reply(prompt: str, rng: random.Random) -> dict[str, Any]:
    """Orthogonal tracks: one dimension each, each about another of the seed's own words."""
    seed = prompt_field(prompt, r"Seed: (.+)") or "the seed"
    bounds = re.search(r"between (\d+) and (\d+)", prompt)
    lo, hi = (int(bounds.group(1)), int(bounds.group(2))) if bounds else (3, 4)
    words = list(dict.fromkeys(w.lower() for w in re.findall(r"[^\W\d_]{4,}", seed)))
    words = [w for w in words if w not in _TRACK_STOP] or ["seed"]
    count = min(len(_TRACK_DIMENSIONS), max(lo, min(hi, 4)))
    dimensions = rng.sample(_TRACK_DIMENSIONS, k=count)
    tracks = []
    for i, (name, focus, approach, deliverable) in enumerate(dimensions):
        word = words[i % len(words)]
        tracks.append(
            {
                "name": f"{name} of {word}",
                "focus": focus.format(w=word),
                "approach": approach,
                "deliverable": deliverable.format(w=word),
            }
        )
    return {
        "decomposition": f"[simulated] {quoted_question(seed)} splits into {count} orthogonal tracks: "
        + ", ".join(t["name"] for t in tracks)
        + ".",
        "tracks": tracks,
    }


def track_synthesis_reply(prompt: str, rng: random.Random) -> dict[str, Any]:
    """A track's findings: each cites a real line of the evidence shown (none without evidence)."""
    name = prompt_field(prompt, r"Track: (.+)") or "the track"
    focus = prompt_field(prompt, r"Its focus: (.+)") or name
    findings, evidence = [], []
    for source, line, text in evidence_lines(prompt, f"{name} {focus}")[:3]:
        quote = text.strip()
        findings.append(
            {
                "finding": f"[simulated] {source} line {line} bears on {_clip_words(focus, 12)}: "
                f"it names {_clip_words(' '.join(_WORDS.findall(quote)), 12)}",
                "confidence": rng.choice(["high", "medium"]),
                "citations": [{"source": source, "line_start": line, "line_end": line, "quote": quote}],
            }
        )
        evidence.append(
            {"source": source, "line": line, "description": f"[simulated] the line {source} states"}
        )
    return {
        "track": name,
        "findings": findings,
        "evidence": evidence,
        "conclusions": f"[simulated] On {focus}: the track {name!r} finds "
        + (f"{len(findings)} cited point(s) in the sources." if findings else "no evidence to cite."),
        "gaps": [f"[simulated] what the sources leave open about {focus}"],
    }


def aggregate_reply(prompt: str, rng: random.Random) -> dict[str, Any]:
    """Agreement across the tracks listed, one divergence between the first two, their gaps."""
    names = re.findall(r"^Track (.+):$", prompt, flags=re.MULTILINE)
    gaps = re.findall(r"^\s+- gap: (.+)$", prompt, flags=re.MULTILINE)
    nuances = (
        [
            {
                "text": f"[simulated] {names[0]} and {names[1]} weigh the evidence differently",
                "tracks": names[:2],
            }
        ]
        if len(names) >= 2
        else []
    )
    return {
        "unified": f"[simulated] Across {len(names)} tracks the findings agree on the main account; "
        "a real model would state it.",
        "nuances": nuances,
        "open_questions": gaps,
        "confidence": "medium" if nuances else "high",
        "justification": f"[simulated] {len(nuances)} divergence(s) among {len(names)} tracks.",
    }


def _clip_words(text: str, n: int) -> str:
    """The first ``n`` words of ``text``."""
    words = text.split()
    return " ".join(words[:n]) + (" …" if len(words) > n else "")
