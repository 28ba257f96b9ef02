"""Pydantic models of every structured output the engine asks a model for, one per role.

Their text fields refuse junk (:mod:`.quality`): a reply that holds no words or
is a link, JSON fragments, a copy (or a near copy) of the prompt, of the schema's
wording or of a correction, or a "question" that asks nothing fails validation
like a missing field would.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationInfo,
    create_model,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from ..text import normalize
from ..vocabulary import MAX_SUB_QUESTIONS, ClaimKind, HaltKind
from . import quality


def shape(least: int, most: int, *, asks: bool = False) -> Any:
    """What a grammar-enforcing server may generate for a text: a JSON schema ``pattern``, not a check.

    One line without quotes or backslashes that does not open on JSON's punctuation,
    ``least`` to ``most`` characters long (a question ends with ``?``). llama.cpp, vLLM
    and Ollama turn it into grammar, so a small model cannot write ``}, {`` or ``"I", "I", …``
    into a field; other servers ignore it. Pydantic does not check it: the gates
    (:mod:`.quality`) judge what comes back (docs/architecture/models.md, "Small models").

    >>> import re
    >>> pattern = shape(8, 400, asks=True).json_schema_extra["pattern"]
    >>> [bool(re.match(pattern, text)) for text in ("How do jobs pull people in?", '}, {"I', "Jobs.")]
    [True, False, False]
    """
    return Field(
        json_schema_extra={"pattern": rf'^{_OPENS}[^"\\\n\r\t]{{{least},{most}}}{"[?]" if asks else ""}$'}
    )


_OPENS = r'[^\s"\\{}\[\]:,]'  # a text's first character: not a space, a quote or JSON punctuation


def _prose(min_words: int, *, echo: bool = True) -> AfterValidator:
    def check(text: str, info: ValidationInfo) -> str:
        return quality.prose(text, info, min_words=min_words, echo=echo)

    return AfterValidator(check)


# A short fact ("Paris") is an answer; a bare "Yes", "I don't know" or a question back is not.
AnswerText = Annotated[str, Field(min_length=1), shape(2, 4000), AfterValidator(quality.answer)]
Prose = Annotated[str, Field(min_length=1), shape(10, 4000), _prose(3)]
# A link's note, a tension, a gap: about material the prompt shows, which it may quote.
Remark = Annotated[str, Field(min_length=1), shape(6, 1000), _prose(2, echo=False)]
# Drawn from the chain shown.
Harvested = Annotated[str, Field(min_length=1), shape(10, 4000), _prose(3, echo=False)]
QuestionText = Annotated[str, Field(min_length=1), shape(8, 250, asks=True), AfterValidator(quality.question)]
# A claim of an answer is the model's own: a copy of the prompt is no claim. A synthesis carries its
# children's claims up, so its claims may quote them (the grounding in engine/grounding.py checks them).
ClaimText = Annotated[str, Field(min_length=1), shape(6, 400), _prose(2)]
CarriedText = Annotated[str, Field(min_length=1), shape(6, 400), _prose(2, echo=False)]
MAX_CLAIMS = 8
"""Claims kept per answer or synthesis: a bounded list (a longer one is refused like junk)."""


@dataclass(frozen=True)
class Usable:
    """A list of a reply whose items are judged one by one (:meth:`_Output._keep_usable`).

    ``related_to`` names the field a question may share words with besides the
    seed and question asked (:func:`.quality.related`); fewer than ``least``
    usable items refuse the reply.
    """

    key: str
    item: Any  # the items' type
    least: int = 0
    related_to: str | None = None


def _none(items: list[str]) -> bool:
    """Whether a ``refused`` list is empty: a reply with nothing refused dumps as it always did."""
    return not items


@lru_cache(maxsize=64)
def _adapter(item: Any) -> TypeAdapter[Any]:
    return TypeAdapter(item)


class _Output(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)
    role: ClassVar[str]  # the engine's name for the call (the ledger's ``role``, max_tokens' keys)
    usable: ClassVar[tuple[Usable, ...]] = ()
    # Items of its ``usable`` lists a gate refused, each as "field: 'text': why": dropped, the reply kept.
    refused: SkipJsonSchema[list[str]] = Field(default_factory=list, exclude_if=_none)

    @model_validator(mode="before")
    @classmethod
    def _keep_usable(cls, data: Any, info: ValidationInfo) -> Any:
        """``data`` with the items of its ``usable`` lists that fail a gate moved to ``refused``, with why.

        One bad question or claim of four need not cost the other three a correction
        round trip (a small model's lists mix good items and junk): the usable ones
        are kept and the refused recorded (the engine keeps them in the node's
        metadata). Junk is never kept either way (docs/architecture/models.md, "Small models").
        """
        if not isinstance(data, dict) or not cls.usable:
            return data
        refused = list(data.get("refused") or [])
        data = dict(data)
        for usable in cls.usable:
            items = data.get(usable.key)
            if not isinstance(items, list):
                continue
            material = data.get(usable.related_to) if usable.related_to else None
            kept = []
            for item in items:
                try:
                    _adapter(usable.item).validate_python(item, context=info.context)
                    if usable.related_to is not None:
                        text = item.get("text") if isinstance(item, dict) else item
                        quality.related(str(text), info, material if isinstance(material, str) else "")
                except ValueError as exc:  # a ValidationError is one
                    why = quality.describe(exc).removeprefix("(root): ").removeprefix("Value error, ")
                    refused.append(f"{usable.key}: {why}")
                    continue
                kept.append(item)
            if items and len(kept) < usable.least:  # an empty list is the engine's to weigh, as it always was
                raise ValueError(f"{usable.key}: nothing usable ({'; '.join(refused[-3:])})")
            data[usable.key] = kept
        data["refused"] = refused
        return data


class SeedKind(StrEnum):
    """What the seed is: each kind calls for different first questions."""

    QUESTION = "question"
    CLAIM = "claim"
    GOAL = "goal"
    FACT = "fact"


MAX_SEED_QUESTIONS = 12
"""The longest list of seed questions a grammar lets a model write (the deepest intensity's most)."""


class SeedPlan(_Output):
    """Seed phase: classify the seed, decompose it, and pose the first questions.

    Questions a gate refuses are dropped and listed in ``refused`` (``_Output._keep_usable``).
    """

    role: ClassVar[str] = "seed"
    usable: ClassVar[tuple[Usable, ...]] = (
        Usable("questions", QuestionText, least=1, related_to="decomposition"),
    )
    seed_kind: SeedKind
    decomposition: Annotated[
        str, Field(min_length=1), shape(10, 500), _prose(3), AfterValidator(quality.related)
    ] = Field(description="How the seed breaks apart, in prose.")
    questions: list[QuestionText] = Field(
        description="Independent, specific seed questions.",
        json_schema_extra={"maxItems": MAX_SEED_QUESTIONS},
    )


class ProxySignal(StrEnum):
    """Structural signals that justify a sub-question.

    See docs/architecture/engine.md, "The worker protocol we follow".
    """

    QUALIFIERS = "qualifiers"
    ALTERNATIVES = "alternatives"
    ASSUMPTIONS = "assumptions"
    NEW_DOMAIN = "new_domain"
    HIGH_BLAST_RADIUS = "high_blast_radius"


class SubQuestion(_Output):
    """A sub-question worth its own node, with the signal that made it branch."""

    text: QuestionText
    proxy_signal: ProxySignal


MAX_CITATIONS = 8
"""Citations kept per answer, finding or track finding (a longer list is refused)."""
MAX_SOURCE_CHARS = 1000
"""The longest source name a citation may give."""
MAX_QUOTE_CHARS = 2000
"""The longest quote a citation may give."""


def _at_most(most: int) -> AfterValidator:
    """A length bound checked in Python, never a JSON schema ``maxLength`` (see ``Citation``)."""

    def check(text: str) -> str:
        if len(text) > most:
            raise ValueError(f"longer than {most} characters")
        return text

    return AfterValidator(check)


class Citation(_Output):
    """Where a statement's evidence is: a source of the graph, a span of its lines, and the quoted text.

    ``source`` is the source's name as the evidence shown names it (a file's path
    relative to where it was added, or a snippet's or table's label). The store
    checks every citation when it is written (docs/architecture/store.md, "Sources and citations").
    """

    # Lengths are checked by validators, not in the JSON schema: llama.cpp turns a maxLength into one grammar
    # rule per character, and a bound of 1000 fails its grammar parser (and takes the server down).
    source: Annotated[str, Field(min_length=1), _at_most(MAX_SOURCE_CHARS)]
    line_start: int = Field(ge=1)
    line_end: int = Field(ge=1)
    quote: Annotated[
        str, Field(min_length=1, description="The cited lines' text, quoted."), _at_most(MAX_QUOTE_CHARS)
    ]

    @model_validator(mode="after")
    def _ordered(self) -> Citation:
        if self.line_end < self.line_start:
            raise ValueError(f"line_end {self.line_end} is before line_start {self.line_start}")
        return self


def _citations() -> Any:
    return Field(
        default_factory=list,
        max_length=MAX_CITATIONS,
        description="The evidence shown that this rests on: source, line span and the quoted text.",
    )


class StatedClaim(_Output):
    """One claim of an answer: a fact with its support, an assumption, or an unknown.

    ``support`` is what a fact rests on (for now the model's stated basis; the
    shape stays a string, open to checked citations). A fact that states no
    support is taken as an assumption: code, not the model, decides that.
    """

    kind: ClaimKind
    text: ClaimText
    support: str = Field(default="", description="For a fact: what it rests on.")

    @model_validator(mode="after")
    def _unsupported_fact(self, info: ValidationInfo) -> StatedClaim:
        if self.support:
            self.support = quality.prose(self.support, info, min_words=2, echo=False)
        if self.kind == ClaimKind.FACT and not self.support:
            self.kind = ClaimKind.ASSUMPTION
        return self


class CarriedClaim(StatedClaim):
    """A claim a synthesis carries up from its sub-questions (it may quote them)."""

    text: CarriedText


def _claims() -> Any:
    return Field(
        default_factory=list,
        max_length=MAX_CLAIMS,
        description="Facts (each with its support), assumptions and unknowns, kept apart.",
    )


Saturation = Literal["semantic_overlap", "derivable", "actionable", "hollow_questions"]


class LeafAnswer(_Output):
    """Work phase at the last level: answer the claimed question (no sub-questions can follow)."""

    role: ClassVar[str] = "answer"
    usable: ClassVar[tuple[Usable, ...]] = (Usable("claims", StatedClaim),)
    answer: AnswerText
    confidence: float = Field(ge=0.0, le=1.0)
    saturation: Saturation | None = Field(
        default=None, description="Why this branch needs no further questions, if so."
    )
    claims: list[StatedClaim] = _claims()
    # With sources, the evidence shown that the answer rests on (the store checks each: engine/evidence.py).
    citations: list[Citation] = _citations()
    halt: Halt | None = Field(default=None, description="Only when you must stop: see the task (rarely).")


class Answer(LeafAnswer):
    """Work phase: answer the claimed question and decide its sub-questions."""

    usable: ClassVar[tuple[Usable, ...]] = (
        Usable("claims", StatedClaim),
        Usable("sub_questions", SubQuestion, related_to="answer"),
    )

    # The JSON schema says maxItems; validation keeps a longer list, which the engine cuts to the bound
    # and records (engine/primitive.py): the answer is good, and a refusal would pay for a correction
    # round trip (issue 37: a model proposed 10,000 sub-questions).
    sub_questions: list[SubQuestion] = Field(
        default_factory=list, json_schema_extra={"maxItems": MAX_SUB_QUESTIONS}
    )


class Synthesis(_Output):
    """Bottom-up synthesis of a question from its children's syntheses only."""

    role: ClassVar[str] = "synthesize"
    usable: ClassVar[tuple[Usable, ...]] = (Usable("tensions", Remark), Usable("claims", CarriedClaim))
    synthesis: Annotated[Prose, AfterValidator(quality.on_topic)]
    tensions: list[Remark] = Field(default_factory=list, description="Contradictions kept visible.")
    claims: list[CarriedClaim] = _claims()


class Link(_Output):
    """A link from the new answer to one of the candidate answers shown."""

    node_id: str
    note: Remark = Field(description="The shared conclusion, or the tension.")


class Connections(_Output):
    """Connect phase: convergences and contradictions with nearby answers."""

    role: ClassVar[str] = "connect"
    usable: ClassVar[tuple[Usable, ...]] = (Usable("convergences", Link), Usable("contradictions", Link))
    convergences: list[Link] = Field(default_factory=list)
    contradictions: list[Link] = Field(default_factory=list)


@lru_cache(maxsize=256)
def connections_among(node_ids: tuple[str, ...]) -> type[Connections]:
    """``Connections`` whose links may name only ``node_ids`` (an enum in the JSON schema).

    A server that enforces the schema (json_schema or json_object mode) cannot
    return an id that was not shown; any other model gets its reply refused.
    """
    if not node_ids:
        raise ValueError("connections_among needs at least one candidate id")
    candidate: Any = Literal.__getitem__(node_ids)
    link = create_model(
        "CandidateLink",
        __base__=Link,
        __doc__=Link.__doc__,
        node_id=(candidate, Field(description="One of the ids shown.")),
    )
    links: Any = list.__class_getitem__(link)
    return create_model(
        "Connections",
        __base__=Connections,
        __doc__=Connections.__doc__,
        convergences=(links, Field(default_factory=list)),
        contradictions=(links, Field(default_factory=list)),
    )


class Finding(_Output):
    """One finding of the harvest, with how sure the graph is of it."""

    finding: Harvested
    confidence: Literal["high", "medium", "low"]
    # With sources, the verified citations of the chain's answers it rests on; none: unsupported.
    citations: list[Citation] = _citations()


class HarvestFinding(Finding):
    """A finding the harvest's call names: on the seed's topic, never the worked example's."""

    finding: Annotated[Harvested, AfterValidator(quality.on_topic)]


class HarvestFindings(_Output):
    """Harvest phase: the findings and the gaps, drawn from the root's synthesis chain.

    No summary: the root's synthesis is the result's summary (seed 001), built bottom-up;
    the harvest adds the findings it rests on, each with the node it comes from.
    """

    role: ClassVar[str] = "harvest"
    usable: ClassVar[tuple[Usable, ...]] = (
        Usable("findings", HarvestFinding, least=1),
        Usable("gaps", Remark),
    )
    findings: list[HarvestFinding] = Field(json_schema_extra={"minItems": 1})
    gaps: list[Remark] = Field(default_factory=list)

    @model_validator(mode="after")
    def _found(self, info: ValidationInfo) -> HarvestFindings:
        """A reply names at least one finding; a harvest read back may hold none (its call failed)."""
        stored = isinstance(info.context, quality.ReplyContext) and info.context.trusted
        if not self.findings and not stored:
            raise ValueError("findings: none: name what the synthesis chain found, each with a confidence")
        return self


class WidenPlan(_Output):
    """A later turn's widening: seed questions the graph lacks.

    See docs/architecture/store.md, "Turns and heads".
    """

    role: ClassVar[str] = "widen"
    usable: ClassVar[tuple[Usable, ...]] = (
        Usable("questions", QuestionText, least=1, related_to="rationale"),
    )
    rationale: Prose = Field(description="What the new questions cover that the existing ones do not.")
    questions: list[QuestionText] = Field(
        description="New seed questions the existing ones do not cover.",
        json_schema_extra={"maxItems": MAX_SEED_QUESTIONS},
    )


SCHEMAS: tuple[type[_Output], ...] = (
    SeedPlan,
    Answer,
    LeafAnswer,
    Synthesis,
    Connections,
    HarvestFindings,
    WidenPlan,
)
"""Every schema the engine asks for (``connections_among`` builds narrowed ``Connections``)."""


def role_of(schema: type[BaseModel]) -> str:
    """The role a schema is asked for in (``"answer"``, ``"connect"``, …); its name for others."""
    return getattr(schema, "role", None) or schema.__name__


# -- halts: the seed's laws for a question a worker must not answer alone --------------------------------
# docs/architecture/engine.md, "Halts".

MAX_HALT_OPTIONS = 6
"""Options an ambiguity halt offers, and alternatives a blocked one suggests (a longer list is refused)."""


OptionText = Annotated[str, Field(min_length=1), _prose(1, echo=False)]  # "Paris" is an option


class HaltOption(_Output):
    """One way to read an ambiguous question, with what choosing it costs and gains."""

    option: OptionText = Field(description="One reading or choice, in a few words.")
    tradeoffs: Remark = Field(description="What choosing it gains and loses.")


class Halt(_Output):
    """A worker's stop instead of an answer: a choice or a clarification for the person, or a blocker.

    ``ambiguity`` needs at least two distinct options, ``blocked`` at least one
    alternative; what a kind does not use is dropped (a confusion's options, an
    ambiguity's alternatives).
    """

    kind: HaltKind
    question: Prose = Field(
        description="ambiguity: what is ambiguous; confusion: the clarifying question; blocked: the blocker."
    )
    options: list[HaltOption] = Field(default_factory=list, max_length=MAX_HALT_OPTIONS)
    alternatives: list[Remark] = Field(
        default_factory=list, max_length=MAX_HALT_OPTIONS, description="blocked: what could be done instead."
    )

    @model_validator(mode="after")
    def _fits_kind(self) -> Halt:
        if self.kind == HaltKind.AMBIGUITY:
            distinct = {normalize(o.option) for o in self.options}
            if len(distinct) < 2:
                raise ValueError("an ambiguity halt needs at least two distinct options, each with tradeoffs")
            self.alternatives = []
        elif self.kind == HaltKind.BLOCKED:
            if not self.alternatives:
                raise ValueError("a blocked halt needs at least one suggested alternative")
            self.options = []
        else:
            self.options, self.alternatives = [], []
        return self


LeafAnswer.model_rebuild()  # its ``halt`` field names Halt, defined here at the end
Answer.model_rebuild()


# -- the tracks strategy (docs/architecture/engine.md, "Tracks") -------------------------------------------

MIN_TRACKS = 3
"""A tracks seed poses at least this many orthogonal tracks (the seed's ``minimum-tracks`` law)."""
MAX_TRACKS = 8
MAX_TRACK_FINDINGS = 8


class Track(_Output):
    """One line of inquiry of a tracks graph: what it covers, how, and what it hands back."""

    name: Annotated[str, Field(min_length=1), _at_most(80), _prose(1, echo=False)]
    focus: Remark = Field(description="The part of the question this track alone covers.")
    approach: Remark = Field(description="How the track gathers its evidence.")
    deliverable: Remark = Field(description="What the track hands back.")


class TrackPlan(_Output):
    """Tracks seed: the question decomposed into orthogonal tracks (no two alike)."""

    role: ClassVar[str] = "tracks_seed"
    decomposition: Prose = Field(description="The independent dimensions of the question, in prose.")
    tracks: list[Track] = Field(max_length=MAX_TRACKS, description="Orthogonal tracks, at least three.")


class TrackFinding(_Output):
    """One finding of a track and the evidence shown that it rests on."""

    finding: Harvested
    confidence: Literal["high", "medium", "low"] = "medium"
    citations: list[Citation] = _citations()


class TrackEvidence(_Output):
    """A piece of evidence the track used: a source, a line of it, what it shows."""

    source: Annotated[str, Field(min_length=1), _at_most(MAX_SOURCE_CHARS)]
    line: int = Field(ge=1)
    description: Remark


class TrackFindings(_Output):
    """A track's synthesis: its findings with citations, the evidence, conclusions and gaps."""

    role: ClassVar[str] = "track_synthesis"
    track: Annotated[str, Field(min_length=1), _at_most(200)]
    findings: list[TrackFinding] = Field(default_factory=list, max_length=MAX_TRACK_FINDINGS)
    evidence: list[TrackEvidence] = Field(default_factory=list, max_length=2 * MAX_TRACK_FINDINGS)
    conclusions: Harvested = Field(description="What the track concludes about its question.")
    gaps: list[Remark] = Field(default_factory=list, description="What the track could not settle.")


class Nuance(_Output):
    """Where the tracks differ, with the tracks named."""

    text: Remark
    tracks: list[str] = Field(default_factory=list)


class SynthesisObject(_Output):
    """The aggregate of tracks (or of a fractal graph's seed questions): agreement, divergence, confidence."""

    role: ClassVar[str] = "aggregate"
    unified: Harvested = Field(description="What the tracks agree on.")
    nuances: list[Nuance] = Field(default_factory=list)
    open_questions: list[Remark] = Field(default_factory=list)
    confidence: Literal["high", "medium", "low"]
    justification: Harvested = Field(description="Why this confidence, from the divergences.")


SCHEMAS += (TrackPlan, TrackFindings, SynthesisObject)


# -- the thinkon strategy: Think and Eval, two choices each ----------------------------------------------
# docs/architecture/engine.md, "Thinkon".


class ThinkChoice(StrEnum):
    """What Think returns: the level's result, or its plan."""

    RETURN = "RETURN"  # the level's result, at once
    TODO = "TODO"  # a plan, in plain language: written to the level's todo


class Think(_Output):
    """A new level's first step: return its result, or write the plan its Eval works through."""

    role: ClassVar[str] = "think"
    type: ThinkChoice
    description: Prose


class EvalChoice(StrEnum):
    """What Eval returns: a sub-goal to call, or the level's result."""

    CALL = "CALL"  # a sub-goal: a child level, solved before this level's next Eval
    RETURN = "RETURN"  # this level's result


# A sub-goal quotes its plan, and a level's result what its sub-goals returned: both shown in the prompt.
ChainText = Annotated[str, Field(min_length=1), _prose(2, echo=False)]  # "Book trains." is a sub-goal


class Eval(_Output):
    """A level's judgement of its plan and of what its sub-goals returned: call the next one, or return."""

    role: ClassVar[str] = "eval"
    type: EvalChoice
    description: ChainText


SCHEMAS += (Think, Eval)


# -- the single strategy and the judge of compare() -------------------------------------------------------
# docs/architecture/facade.md, "Comparing strategies".


class SingleAnswer(_Output):
    """The baseline: the whole question answered in one reply, with its findings and what it leaves open."""

    role: ClassVar[str] = "single"
    answer: Prose
    findings: list[Finding] = Field(default_factory=list)
    gaps: list[Remark] = Field(default_factory=list)


class Judgement(_Output):
    """A judge's scores of one strategy's result: how much of the question it covers, how well supported."""

    role: ClassVar[str] = "judge"
    coverage: int = Field(ge=1, le=5, description="1: answers little of the question; 5: all of it.")
    support: int = Field(ge=1, le=5, description="1: findings rest on nothing shown; 5: each on evidence.")
    rationale: Remark


SCHEMAS += (SingleAnswer, Judgement)
