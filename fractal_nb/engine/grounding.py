"""Facts stay facts only where the graph states them: the grounding of a synthesis's claims.

A synthesis carries up the claims of its question's own answer and of its
sub-questions (docs/architecture/engine.md, "Facts, assumptions, unknowns"). The model
says which kind each is; code decides whether a fact may stay one: a fact of a
synthesis must be a fact of one of those sources (the same text, or a
restatement of it), else it is demoted to an assumption. So an assumption of a
child never becomes a fact above it, whatever the model writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..llm.copies import copied_share
from ..llm.quality import stems
from ..llm.schemas import MAX_CLAIMS, StatedClaim
from ..store.records import ClaimRecord, NodeRecord, SynthesisInputs
from ..text import clip, normalize
from ..vocabulary import CitationStatus, ClaimKind, NodeType

SAME_FACT_SHARE = 0.8
"""Two texts state the same fact when four words in five of each sit in runs of three words of the
other (:func:`~fractal_nb.llm.copies.copied_share`): a word changed or dropped keeps the fact, a
clause added ("…, and so prices will fall") is a new statement that no source states."""

QUOTED_SHARE = 0.5
"""A verified citation supports a fact when its quote holds at least half of the fact's content words
(:func:`~fractal_nb.llm.quality.stems`): the fact says what the cited lines say, not merely that the
answer it comes from cited something."""


def sources(inputs: SynthesisInputs) -> list[ClaimRecord]:
    """The claims a synthesis of ``inputs`` may carry up (its answers' and sub-questions'), with sources."""
    found: list[ClaimRecord] = []
    for brief in [*inputs["answers"], *inputs["sub_questions"]]:
        for claim in brief["claims"]:
            found.append(
                {
                    "kind": claim["kind"],
                    "text": claim["text"],
                    "support": claim.get("support") or "",
                    "source": brief["node_id"],
                }
            )
    return found


def same_fact(text: str, other: str) -> bool:
    """Whether two claim texts state the same fact (:data:`SAME_FACT_SHARE`).

    >>> same_fact("Rents rose 5% in 2023.", "rents rose 5% in 2023")
    True
    >>> same_fact("Rents rose 5% in the region", "Rents rose 5% in the region, so prices fall")
    False
    """
    if normalize(text) == normalize(other):
        return True
    return min(copied_share(text, other), copied_share(other, text)) >= SAME_FACT_SHARE


def ground(carried: Iterable[StatedClaim], stated: list[ClaimRecord]) -> list[ClaimRecord]:
    """The claims of a synthesis as stored: a fact kept only where a source states it as a fact.

    A kept fact takes the support and source of the fact it restates; any other
    "fact" becomes an assumption without support. Repeats (by normalized text) are
    dropped; at most :data:`~fractal_nb.llm.schemas.MAX_CLAIMS` are kept.

    >>> from fractal_nb.llm.schemas import StatedClaim
    >>> child = [{"kind": "assumption", "text": "Demand stays flat", "support": "", "source": "n-1"}]
    >>> claim = StatedClaim.model_construct(kind=ClaimKind.FACT, text="Demand stays flat", support="it")
    >>> ground([claim], child)[0]["kind"]
    'assumption'
    """
    facts = [c for c in stated if c["kind"] == ClaimKind.FACT]
    grounded: list[ClaimRecord] = []
    seen: set[str] = set()
    for claim in carried:
        key = normalize(claim.text)
        if key in seen or len(grounded) >= MAX_CLAIMS:
            continue
        seen.add(key)
        text = clip(claim.text, 500)
        if claim.kind == ClaimKind.FACT:
            match = next((f for f in facts if same_fact(claim.text, f["text"])), None)
            if match is not None:
                grounded.append(
                    {
                        "kind": ClaimKind.FACT.value,
                        "text": text,
                        "support": match["support"],
                        "source": match.get("source"),
                    }
                )
            else:  # no source states it as a fact: never promoted
                grounded.append(
                    {"kind": ClaimKind.ASSUMPTION.value, "text": text, "support": "", "source": None}
                )
            continue
        source = next((c.get("source") for c in stated if normalize(c["text"]) == key), None)
        grounded.append({"kind": claim.kind.value, "text": text, "support": "", "source": source})
    return grounded


def joined(stated: list[ClaimRecord]) -> list[ClaimRecord]:
    """The claims of a synthesis joined without the model: its sources' claims as they were stated."""
    claims = [
        StatedClaim.model_construct(kind=ClaimKind(c["kind"]), text=c["text"], support=c["support"])
        for c in stated
    ]
    return ground(claims, stated)


def listed(claims: list[ClaimRecord], indent: str) -> str:
    """Claims as prompt lines: ``[kind] text (support: …)``, one a line."""
    return "".join(
        f"\n{indent}[{c['kind']}] {clip(c['text'], 300)}"
        + (f" (support: {clip(c['support'], 200)})" if c["kind"] == ClaimKind.FACT and c["support"] else "")
        for c in claims
    )


def checked_by(claim: Mapping[str, Any], by_id: Mapping[str, NodeRecord]) -> Mapping[str, Any] | None:
    """The citation the store verified that supports a fact (None: the fact is only stated).

    A fact carried up a synthesis names its ``source``; followed down to the answers
    that state it, it is checked when one of them carries a citation whose status
    is ``verified`` (the store found the quote in the source's lines) and whose
    quote supports it (:data:`QUOTED_SHARE`). A model's own support string
    (``support``) checks nothing: docs/architecture/engine.md, "Facts, assumptions, unknowns".

    >>> answer = {"node_id": "n-a", "node_type": "answer", "metadata": {"citations": [
    ...     {"status": "verified", "quote": "Rents rose 5% in 2023 across the city.", "source": "a.md"}]}}
    >>> checked_by({"text": "Rents rose in 2023", "source": "n-a"}, {"n-a": answer})["source"]
    'a.md'
    >>> checked_by({"text": "Wages fell in 2023", "source": "n-a"}, {"n-a": answer}) is None
    True
    """
    wanted = stems(claim["text"])
    for answer in _answers_stating(claim, by_id, set()):
        cited: list[Mapping[str, Any]] = answer["metadata"].get("citations") or []
        for citation in cited:
            quoted = stems(str(citation.get("quote") or ""))
            if (
                citation.get("status") == CitationStatus.VERIFIED
                and wanted
                and len(wanted & quoted) >= QUOTED_SHARE * len(wanted)
            ):
                return citation
    return None


def _answers_stating(
    claim: Mapping[str, Any], by_id: Mapping[str, NodeRecord], seen: set[str]
) -> Iterable[NodeRecord]:
    """The answers a fact comes from: its source, followed down while the source is a question."""
    source = by_id.get(str(claim.get("source")))
    if source is None or source["node_id"] in seen:
        return
    seen.add(source["node_id"])
    if source["node_type"] == NodeType.ANSWER:
        yield source
        return
    for carried in source["metadata"].get("claims") or []:
        if carried["kind"] == ClaimKind.FACT and same_fact(claim["text"], carried["text"]):
            yield from _answers_stating(carried, by_id, seen)
