"""Pydantic models of every structured output the engine asks a model for, one per role."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Output(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


class SeedKind(StrEnum):
    """What the seed is: each kind calls for different first questions."""

    QUESTION = "question"
    CLAIM = "claim"
    GOAL = "goal"
    FACT = "fact"


class SeedPlan(_Output):
    """Seed phase: classify the seed, decompose it, and pose the first questions."""

    seed_kind: SeedKind
    decomposition: str = Field(min_length=1, description="How the seed breaks apart, in prose.")
    questions: list[str] = Field(description="Independent, specific seed questions.")


class ProxySignal(StrEnum):
    """Structural signals (seed 000) that justify a BRANCH verdict for a sub-question."""

    QUALIFIERS = "qualifiers"
    ALTERNATIVES = "alternatives"
    ASSUMPTIONS = "assumptions"
    NEW_DOMAIN = "new_domain"
    HIGH_BLAST_RADIUS = "high_blast_radius"


class SubQuestion(_Output):
    """A sub-question worth its own node, with the signal that made it branch."""

    text: str = Field(min_length=1)
    proxy_signal: ProxySignal


class Answer(_Output):
    """Work phase: answer the claimed question and decide its sub-questions."""

    answer: str = Field(min_length=1)
    confidence: float = Field(ge=0.0, le=1.0)
    sub_questions: list[SubQuestion] = Field(default_factory=list)
    saturation: (
        Literal["semantic_overlap", "derivable", "actionable", "hollow_questions"] | None
    ) = Field(default=None, description="Why this branch needs no further questions, if so.")


class Synthesis(_Output):
    """Bottom-up synthesis of a question from its children's syntheses only."""

    synthesis: str = Field(min_length=1)
    tensions: list[str] = Field(default_factory=list, description="Contradictions kept visible.")


class Link(_Output):
    """A link from the new answer to one of the candidate answers shown."""

    node_id: str
    note: str = Field(min_length=1, description="The shared conclusion, or the tension.")


class Connections(_Output):
    """Connect phase: convergences and contradictions with nearby answers."""

    convergences: list[Link] = Field(default_factory=list)
    contradictions: list[Link] = Field(default_factory=list)


class Finding(_Output):
    """One finding of the harvest, with how sure the graph is of it."""

    finding: str = Field(min_length=1)
    confidence: Literal["high", "medium", "low"]


class HarvestSummary(_Output):
    """Harvest phase: the summary, findings and gaps, drawn from the root's synthesis chain."""

    summary: str = Field(min_length=1)
    findings: list[Finding] = Field(default_factory=list)
    gaps: list[str] = Field(default_factory=list)


ROLES: dict[type[BaseModel], str] = {
    SeedPlan: "seed",
    Answer: "answer",
    Synthesis: "synthesize",
    Connections: "connect",
    HarvestSummary: "harvest",
}
