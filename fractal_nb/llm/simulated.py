"""``SimulatedLLM``: a deterministic stand-in model for demos, tests and benchmarks.

It reads the same prompts a real model gets and answers every role with
schema-valid JSON. Its questions read like a run's, in words of the question
they split (``simulated_frames``, ``simulated_questions``: never the seed
pasted again); its answers, syntheses and summaries name their question's
subject and say plainly that they are simulated (``simulated_prose``). Outputs depend
only on the seed and the id-free text of the prompt (for answers: the question
alone). So a run with one worker (``run(1)``, ``step()``) repeats exactly: the
same graph, text and token counts. With several workers every question gets the
same answer, but what the connect step is shown, the links and boundary
questions that follow, and the prompts' context (so their token counts) depend
on which nodes finished first; without links (``link_rate=0``) the graph has
the same shape and text whatever the number of workers.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from collections import Counter
from typing import Any

from pydantic import BaseModel

from ..errors import InvalidInputError, LLMError
from ..text import clip
from ..vocabulary import HaltKind, parse_choice
from .protocol import Message, estimate_tokens, messages_tokens, report_usage, report_wait
from .schemas import MAX_CLAIMS, SCHEMAS, ProxySignal
from .simulated_chain import eval_reply, think_reply
from .simulated_frames import GENERIC, read_frame
from .simulated_prose import FACTORS, answer_level, answer_text, factors, synthesis_text
from .simulated_questions import ANGLES, angle_labels, angle_questions, extra_question, follow_up, read

_HEDGES = ["probably", "it depends on the setting, but", "in most cases", "assuming the data hold,"]
# …and each question adds a remark of its own (by a digest of its text), so two questions that open
# alike at one depth (boundary questions under boundary questions) get answers that differ.
_REMARKS = [
    "Costs and benefits fall unevenly across groups.",
    "Institutions shape most of the outcome.",
    "Timing decides more than size does.",
    "Early advantages compound over the years.",
    "Supply limits cap what is possible.",
    "Incentives explain most of the spread.",
    "Measurement errors blur the picture.",
    "Outside shocks can tip the balance.",
]
# Each answer states one fact (with its support), one assumption and one unknown, told apart from
# every other question's by a digest of its own (id-free) text: no claim repeats a question.
_FACTS = [
    "records show the trend held for a decade",
    "the main cost falls on households",
    "two of three surveyed regions moved the same way",
    "the effect is larger in cities than elsewhere",
    "prices rose faster than wages in the period",
    "the rule was changed twice since it began",
]
_ASSUMPTIONS = [
    "the available data are complete enough",
    "past patterns will continue",
    "the regions compared are alike in other respects",
    "the measures used mean the same everywhere",
]
_UNKNOWNS = [
    "how large the effect is at its peak",
    "whether the cause runs the other way",
    "what a longer period would show",
    "which group bears most of the cost",
]
_CARRIED = re.compile(r"^\s+\[(fact|assumption|unknown)\] (.+?)(?: \(support: (.+)\))?$", re.MULTILINE)
_NODE_ID = re.compile(r"^- \[(n-[0-9a-f]+)\]", re.MULTILINE)  # a candidate's line (its text may cite ids)
_ANY_ID = re.compile(r"\bn-[0-9a-f]{1,16}")  # a node id, whole or cut short by a clipped text
# The evidence section of an answer prompt (prompts/evidence.txt): a passage's head, then its numbered lines.
_EVIDENCE = "\nEvidence: the passages of the exploration's sources"
_PASSAGE = re.compile(r"^\[(.+):L(\d+)-L(\d+)\]$((?:\n\d+: .*)*)", re.MULTILINE)
_CHAIN_CITE = re.compile(r'^\s+cites \[(.+?):L(\d+)-L(\d+)\]: "(.*)"$', re.MULTILINE)


class SimulatedLLM:
    r"""A schema-valid model, deterministic per prompt; its answers and syntheses start with "[simulated]".

    One worker repeats a run exactly; several workers give the same answers but
    timing-dependent links and prompt sizes (see the module docstring).

    Parameters
    ----------
    seed:
        Changes every choice it makes; the same seed and prompt give the same output.
    branching:
        Mean number of sub-questions proposed for a depth-1 question; it shrinks
        by ``decay`` per level below.
    latency_s:
        Seconds each call sleeps, to stand in for a real model's latency.
    failure_rate:
        Share of calls that raise :class:`~fractal_nb.LLMError` (a retried call
        may succeed: the draw includes how often the prompt was seen).
    link_rate:
        Chance that a new answer converges with a candidate answer shown to it.
    halt_on:
        ``{keyword: kind}``: a question whose text holds ``keyword`` (case-blind)
        is answered with a halt of that kind (``ambiguity``, ``confusion`` or
        ``blocked``; docs/architecture.md, "Halts") until the person's choice or
        clarification is shown with it; then its answer follows that choice.

    Examples
    --------
    >>> from fractal_nb.llm.schemas import SeedPlan
    >>> llm = SimulatedLLM(seed=1)
    >>> messages = [{"role": "user", "content": "Seed: Why?\nPose between 3 and 4 seed questions."}]
    >>> 3 <= len(llm.complete(messages, SeedPlan)["questions"]) <= 4
    True
    """

    def __init__(
        self,
        seed: int = 0,
        *,
        branching: float = 1.5,
        decay: float = 0.6,
        latency_s: float = 0.0,
        failure_rate: float = 0.0,
        link_rate: float = 0.1,
        halt_on: dict[str, str] | None = None,
    ) -> None:
        for name, value in (("branching", branching), ("latency_s", latency_s)):
            if value < 0:
                raise InvalidInputError(f"{name} must be >= 0, not {value!r}")
        for name, value in (("decay", decay), ("failure_rate", failure_rate), ("link_rate", link_rate)):
            if not 0 <= value <= 1:
                raise InvalidInputError(f"{name} must be between 0 and 1, not {value!r}")
        self.seed = seed
        self.branching = branching
        self.decay = decay
        self.latency_s = latency_s
        self.failure_rate = failure_rate
        self.link_rate = link_rate
        self.halt_on = {
            k.lower(): parse_choice(HaltKind, v, "halt_on kind")
            for k, v in (halt_on or {}).items()
            if k.strip()
        }
        self.model = f"simulated-{seed}"
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SimulatedLLM(seed={self.seed}, branching={self.branching}, latency_s={self.latency_s})"

    def complete(self, messages: list[Message], schema: type[BaseModel]) -> dict[str, Any]:
        """Answer ``messages`` with a dict valid against ``schema``."""
        role = getattr(schema, "role", None)
        if role is None:
            known = sorted(m.__name__ for m in SCHEMAS)
            raise InvalidInputError(f"SimulatedLLM knows the schemas {known}, not {schema.__name__}")
        prompt = messages[-1]["content"]
        key = f"{self.seed}:{role}:{_decisive(role, prompt)}"
        with self._lock:
            self._seen[key] += 1
            attempt = self._seen[key]
        rng = random.Random(hashlib.sha256(f"{key}:{attempt}".encode()).hexdigest())
        report_wait(0.0, "simulated")
        if self.latency_s:
            time.sleep(self.latency_s)
        if rng.random() < self.failure_rate:
            report_usage(messages_tokens(messages), 0, estimated=True)  # no server: estimates
            raise LLMError(f"simulated failure of a {role} call (failure_rate={self.failure_rate})")
        build = {
            "seed": self._seed,
            "answer": self._answer,
            "synthesize": self._synthesize,
            "connect": self._connect,
            "harvest": self._harvest,
            "widen": self._widen,
            "tracks_seed": self._tracks_seed,
            "track_synthesis": self._track_synthesis,
            "aggregate": self._aggregate,
            "think": think_reply,  # the thinkon strategy (llm/simulated_chain.py)
            "eval": eval_reply,
            "single": self._single,  # compare()'s baseline and judge (fractal_nb/exploration/comparison.py)
            "judge": self._judge,
        }[role]
        output = schema.model_validate(build(prompt, rng)).model_dump(mode="json")
        report_usage(messages_tokens(messages), estimate_tokens(json.dumps(output)), estimated=True)
        return output

    # -- one builder per role ---------------------------------------------------------

    def _seed(self, prompt: str, rng: random.Random) -> dict[str, Any]:
        seed = _field(prompt, r"Seed: (.+)") or "the seed"
        bounds = re.search(r"between (\d+) and (\d+)", prompt)
        lo, hi = (int(bounds.group(1)), int(bounds.group(2))) if bounds else (3, 4)
        frame = read_frame(seed)
        angles = rng.sample(range(len(ANGLES[GENERIC])), k=min(len(ANGLES[GENERIC]), rng.randint(lo, hi)))
        kind = "question" if seed.rstrip().endswith("?") else rng.choice(["claim", "goal", "fact"])
        labels = angle_labels(frame, angles)
        listed = ", ".join(labels[:-1]) + (" and " if len(labels) > 1 else "") + labels[-1]
        return {
            "seed_kind": kind,
            "decomposition": f"[simulated] {len(angles)} dimensions of {frame.subject}: {listed}.",
            "questions": angle_questions(frame, angles),
        }

    def _widen(self, prompt: str, rng: random.Random) -> dict[str, Any]:
        """New seed questions (engine/steering.py): angles the listed ones do not take, then numbered ones."""
        seed = _field(prompt, r"Seed: (.+)") or "the seed"
        wanted = int(_field(prompt, r"[Pp]ose exactly (\d+)") or 1)
        existing = prompt.split("Existing seed questions:", 1)[-1]
        frame = read_frame(seed)
        angles = angle_questions(frame, range(len(ANGLES[GENERIC])))
        fresh = [a for a in rng.sample(angles, k=len(angles)) if a not in existing]
        extra = (extra_question(frame, i) for i in range(1, 1000))
        fresh += [q for q in extra if q not in existing][: max(0, wanted - len(fresh))]
        posed = fresh[:wanted]
        return {
            "rationale": f"[simulated] {len(posed)} dimensions of {frame.subject} the listed questions "
            "leave out.",
            "questions": posed,
        }

    def _answer(self, prompt: str, rng: random.Random) -> dict[str, Any]:
        question = _field(prompt, r"Question to answer now[^\n]*:\n(.+)") or "the question"
        depth = int(_field(prompt, r"Question to answer now \(depth (\d+)") or 1)
        mean = self.branching * self.decay ** max(0, depth - 1)
        count = int(mean) + (1 if rng.random() < mean - int(mean) else 0)
        reading = read(question)
        avoid = _field(prompt, r"Do not ask these sub-questions again: (.+)")
        signals = list(ProxySignal)
        # A redecomposition (store/turn_requests.py) draws at least one, and words each apart from ``avoid``.
        drawn = rng.sample(signals, k=min(max(count, 1) if avoid is not None else count, len(signals)))
        hedge = rng.choice(_HEDGES) if drawn else "clearly"
        # A follow-up along the signal that led to its question (or to its parent) would go over the same
        # ground: dropped (a redecomposition keeps one).
        follow_ups = [s for s in drawn if s not in reading.signals] or (
            drawn[:1] if avoid is not None else []
        )
        chosen = _field(prompt, r"The person (?:chose|clarified): (.+)")
        halt = self._halt(question, answered=chosen is not None)
        if halt is not None:
            return {
                "answer": f"[simulated] {_topic(question)} needs the person first.",
                "confidence": 0.3,
                "halt": halt,
            }
        if chosen is not None:  # the branch goes on with the person's choice
            follow_ups, hedge = follow_ups[:1], f"following the person's word ({clip(chosen, 80)}),"
        citations = _cite(prompt, question)  # with an evidence section: real lines of its first passage
        where = "".join(
            f" It rests on {c['source']}, "
            + (
                f"line {c['line_start']}."
                if c["line_start"] == c["line_end"]
                else f"lines {c['line_start']}-{c['line_end']}."
            )
            for c in citations
        )
        confidence = round(rng.uniform(0.45, 0.95), 2)
        saturation = None if follow_ups else rng.choice(["actionable", "derivable"])
        return {
            # Each depth words its answer its own way (answers that read alike along one path would be
            # near copies of an ancestor's, which the gates refuse).
            "answer": answer_text(reading, depth, hedge, factors(reading.kind, rng))
            + " "
            + _remark(question, prompt)
            + where,
            "confidence": confidence,
            "sub_questions": [
                {"text": follow_up(reading, s, rng, avoid or ""), "proxy_signal": s} for s in follow_ups
            ],
            "saturation": saturation,
            "claims": _claims(question, depth),
            "citations": citations,
        }

    def _halt(self, question: str, *, answered: bool) -> dict[str, Any] | None:
        """The halt ``halt_on`` asks for on this question, until the person has ``answered`` (then None)."""
        kind = next((k for word, k in self.halt_on.items() if word in question.lower()), None)
        if kind is None or (kind != HaltKind.BLOCKED and answered):
            return None
        about = _topic(question)
        if kind == HaltKind.AMBIGUITY:
            return {
                "kind": kind.value,
                "question": f"[simulated] {about} can be read in two ways that lead apart.",
                "options": [
                    {
                        "option": "[simulated] the narrow reading",
                        "tradeoffs": "[simulated] faster, less general",
                    },
                    {
                        "option": "[simulated] the broad reading",
                        "tradeoffs": "[simulated] slower, more general",
                    },
                ],
            }
        if kind == HaltKind.CONFUSION:
            return {"kind": kind.value, "question": f"[simulated] Which sense of {about} do you mean?"}
        return {
            "kind": kind.value,
            "question": f"[simulated] Nothing available can settle {about}.",
            "alternatives": [
                f"[simulated] ask a narrower question about {about}",
                "[simulated] add a source",
            ],
        }

    def _synthesize(self, prompt: str, rng: random.Random) -> dict[str, Any]:
        reading = read(_field(prompt, r"Question: (.+)") or "the question")
        children = prompt.count("\n- ")
        tensions = (
            ["[simulated] two sub-findings pull in different directions"]
            if "contradict" in prompt.lower()
            else []
        )
        # The level of its own answer's wording (the root's is the plan: 0), so a synthesis never reads
        # like its children's.
        level = answer_level(_field(prompt, r"Its own answer:\n([^\n]*)") or "")
        carried: dict[str, dict[str, str]] = {}  # carried up as stated: one per text
        for kind, text, support in _CARRIED.findall(prompt):
            carried.setdefault(text, {"kind": kind, "text": text, "support": support})
        return {
            "synthesis": synthesis_text(reading, level, children, _leading(prompt, reading.kind, rng)),
            "tensions": tensions,
            "claims": list(carried.values())[:MAX_CLAIMS],
        }

    def _connect(self, prompt: str, rng: random.Random) -> dict[str, Any]:
        links: dict[str, list[dict[str, str]]] = {"convergences": [], "contradictions": []}
        question = _field(prompt, r"Question: (.+)") or "the question"
        reading = read(question)
        factor = FACTORS[reading.kind][_digest(question)[0] % len(FACTORS[reading.kind])]
        for node_id in _NODE_ID.findall(prompt.split("Answers to compare with", 1)[-1]):
            draw = rng.random()
            if draw < self.link_rate and not links["convergences"]:
                links["convergences"].append(
                    {
                        "node_id": node_id,
                        "note": f"[simulated] both point to {factor} as what drives {reading.subject}",
                    }
                )
            elif draw > 1 - self.link_rate / 3 and not links["contradictions"]:
                links["contradictions"].append(
                    {"node_id": node_id, "note": "[simulated] they disagree on the direction"}
                )
        return links

    def _harvest(self, prompt: str, rng: random.Random) -> dict[str, Any]:
        seed = _field(prompt, r"Seed: (.+)") or "the seed"
        chain = prompt.split("synthesis chain", 1)[-1].split("Open gaps", 1)[0]
        steps = max(1, len(re.findall(r"^\s*- ", chain, flags=re.MULTILINE)))
        gaps = [line[2:] for line in prompt.split("Open gaps", 1)[-1].splitlines() if line.startswith("- ")][
            :5
        ]
        # The chain's verified citations (engine/evidence.py), carried to the findings in turn.
        cited = [
            {"source": src, "line_start": int(a), "line_end": int(b), "quote": quote}
            for src, a, b, quote in dict.fromkeys(_CHAIN_CITE.findall(chain))  # each once
        ]
        frame = read_frame(seed)
        x, y = _leading(chain, frame.kind, rng)
        # Each finding is about a question of the chain (root first), in the words it was asked in.
        asked = re.findall(r"^\s*- (.+?\?): ", chain, flags=re.MULTILINE) or [seed]
        findings = []
        for i in range(min(3, steps)):
            question = asked[i % len(asked)]
            reading = read(question)
            factor = FACTORS[reading.kind][(_digest(question)[1] + i) % len(FACTORS[reading.kind])]
            findings.append(
                {
                    "finding": f"[simulated] finding {i + 1}: what decides {reading.subject} is mainly "
                    f"{factor}",
                    "confidence": rng.choice(["high", "medium", "low"]),
                    "citations": [cited[i % len(cited)]] if cited else [],
                }
            )
        return {
            "summary": f"[simulated] Across {steps} syntheses, what decides {frame.subject} is {x} first and "
            f"{y} second. Connect a real model (OpenAILLM) for real answers.",
            "findings": findings,
            "gaps": gaps,
        }

    # -- compare()'s baseline and judge (fractal_nb/exploration/comparison.py) ------------------------

    def _single(self, prompt: str, rng: random.Random) -> dict[str, Any]:
        """The whole question in one reply: an answer naming three factors, two findings, one gap."""
        question = _field(prompt, r"Question: (.+)") or "the question"
        reading = read(question)
        named = factors(reading.kind, rng)
        citations = _cite(prompt, question)  # with sources: the single_citing section's first passage
        return {
            "answer": answer_text(reading, 1, rng.choice(_HEDGES), named) + " " + _remark(question, prompt),
            "findings": [
                {
                    "finding": f"[simulated] what decides {reading.subject} is mainly {factor}",
                    "confidence": rng.choice(["medium", "low"]),
                    "citations": citations,
                }
                for factor in named[:2]
            ],
            "gaps": [f"[simulated] how much {named[2]} weighs was not explored"],
        }

    def _judge(self, prompt: str, rng: random.Random) -> dict[str, Any]:
        """Scores from what the result shows: more findings cover more, cited ones are better supported."""
        findings = prompt.split("Findings:", 1)[-1].split("Gaps it names:", 1)[0]
        listed = len(re.findall(r"^- ", findings, flags=re.MULTILINE))
        cited = len(re.findall(r"\[cites ", findings))
        coverage = min(5, 1 + listed)
        support = min(5, 1 + 2 * cited) if listed else 1
        return {
            "coverage": coverage,
            "support": support,
            "rationale": f"[simulated] {listed} findings shown, {cited} of them with citations.",
        }

    # -- the tracks strategy (engine/strategies/tracks.py) ------------------------------------------

    def _tracks_seed(self, prompt: str, rng: random.Random) -> dict[str, Any]:
        """Orthogonal tracks: one dimension each, each about another of the seed's own words."""
        seed = _field(prompt, r"Seed: (.+)") or "the seed"
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
            "decomposition": f"[simulated] {_topic(seed)} splits into {count} orthogonal tracks: "
            + ", ".join(t["name"] for t in tracks)
            + ".",
            "tracks": tracks,
        }

    def _track_synthesis(self, prompt: str, rng: random.Random) -> dict[str, Any]:
        """A track's findings: each cites a real line of the evidence shown (none without evidence)."""
        name = _field(prompt, r"Track: (.+)") or "the track"
        focus = _field(prompt, r"Its focus: (.+)") or name
        findings, evidence = [], []
        for source, line, text in _evidence_lines(prompt, f"{name} {focus}")[:3]:
            quote = text.strip()
            findings.append(
                {
                    "finding": f"[simulated] {source} line {line} bears on {_clip_words(focus, 12)}: "
                    f"{_clip_words(quote, 16)}",
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

    def _aggregate(self, prompt: str, rng: random.Random) -> dict[str, Any]:
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
_TRACK_STOP = frozenset({"what", "which", "when", "where", "does", "that", "this", "with", "from", "have"})
_EVIDENCE_HEAD = re.compile(r"^\[(.+):L(\d+)-L(\d+)\]$")
_NUMBERED = re.compile(r"^\s*(\d+)\s*[:|]\s?(.*)$")


def _evidence_lines(prompt: str, about: str) -> list[tuple[str, int, str]]:
    """One line per evidence block shown: source, line number, text of its line nearest ``about``.

    Nearest: the most words of four letters or more shared with ``about``; the first at a tie.
    """
    wanted = {w.lower() for w in re.findall(r"[^\W\d_]{4,}", about)}
    blocks: list[tuple[str, list[tuple[int, str]]]] = []
    for row in prompt.splitlines():
        head = _EVIDENCE_HEAD.match(row.strip())
        numbered = _NUMBERED.match(row)
        if head:
            blocks.append((head.group(1), []))
        elif blocks and numbered and re.search(r"[^\W\d_]{3,}", numbered.group(2)):
            blocks[-1][1].append((int(numbered.group(1)), numbered.group(2)))
    found = []
    for source, lines in blocks:
        if lines:
            line, text = max(
                lines,
                key=lambda lt: (
                    len(wanted & {w.lower() for w in re.findall(r"[^\W\d_]{4,}", lt[1])}),
                    -lt[0],
                ),
            )
            found.append((source, line, text))
    return found


def _clip_words(text: str, n: int) -> str:
    """The first ``n`` words of ``text``."""
    words = text.split()
    return " ".join(words[:n]) + (" …" if len(words) > n else "")


def _claims(question: str, depth: int) -> list[dict[str, str]]:
    """A question's fact, assumption and unknown: the same for the same question, distinct for others."""
    digest = _digest(question).hex()
    case, pick = digest[:6], int(digest[6:10], 16)
    return [
        {
            "kind": "fact",
            "text": f"[simulated] In case {case}, {_FACTS[pick % len(_FACTS)]}.",
            "support": f"[simulated] the stand-in model's own reading at depth {depth}",
        },
        {"kind": "assumption", "text": f"[simulated] Case {case} takes it that {_ASSUMPTIONS[pick % 4]}."},
        {"kind": "unknown", "text": f"[simulated] Open in case {case}: {_UNKNOWNS[pick // 4 % 4]}."},
    ]


def _digest(text: str) -> bytes:
    """A digest of ``text`` without its node ids (they differ between runs; the choices must not)."""
    return hashlib.sha256(_ANY_ID.sub("n-id", text).encode()).digest()


def _leading(text: str, kind: str, rng: random.Random) -> list[str]:
    """The two factors ``text`` (the findings below a synthesis) names most, then drawn ones."""
    named = {f: text.count(f) for f in FACTORS[kind] if f in text}
    leading = sorted(named, key=lambda f: -named[f])  # stable: at a tie, in the order of FACTORS
    return (leading + [f for f in factors(kind, rng, 4) if f not in leading])[:2]


def _decisive(role: str, prompt: str) -> str:
    """The part of a prompt the simulated choices depend on.

    An answer depends on its question alone, not on what other workers happen
    to have written by then, so a simulated tree has the same shape with one
    worker or eight. Node ids (new every run) never count.
    """
    if role == "answer":
        prompt = _field(prompt, r"(Question to answer now[^\n]*\n[^\n]*)") or prompt
    return _ANY_ID.sub("n-id", prompt)


def _field(prompt: str, pattern: str) -> str | None:
    match = re.search(pattern, prompt)
    return match.group(1).strip() if match else None


def _remark(question: str, prompt: str) -> str:
    """The remark a question's answer adds, by a digest of its id-free text (no draw of the run).

    The first from there that the prompt does not hold already: an answer whose
    question quotes another answer (a boundary question) would otherwise be a near
    copy of a line of its prompt, which the gates refuse (llm/quality.py).
    """
    start = _digest(question)[0]
    turns = [_REMARKS[(start + i) % len(_REMARKS)] for i in range(len(_REMARKS))]
    return next((r for r in turns if r not in prompt), turns[0])


def _topic(text: str) -> str:
    """A question as quoted in a halt; a long one cut, with a digest of the whole.

    Questions may open alike; the digest keeps their halts apart.
    """
    text = _ANY_ID.sub("n-id", text).strip().rstrip("?.!")  # ids differ between runs; topics must not
    if len(text) <= 80:
        return f"'{text}'"
    return f"'{text[:70]}… #{hashlib.sha256(text.encode()).hexdigest()[:6]}'"


def _cite(prompt: str, question: str) -> list[dict[str, Any]]:
    """With an evidence section, a citation of its first passage: 1 to 3 of its lines, quoted verbatim.

    Which lines and how many follow a digest of the question, so a run repeats;
    blank lines and lines the prompt shows cut are never quoted.
    """
    if _EVIDENCE not in prompt:
        return []
    passage = _PASSAGE.search(prompt.split(_EVIDENCE, 1)[1])
    if passage is None:  # no passage matched the question: nothing to cite
        return []
    numbered = [line.split(": ", 1) for line in passage.group(4).split("\n")[1:]]
    lines = [(int(n), text) for n, text in numbered if text.strip() and not text.endswith("…")]
    if not lines:
        return []
    pick = _digest(question)
    first = pick[0] % len(lines)
    run = [lines[first]]
    for number, text in lines[first + 1 : first + 1 + pick[1] % 3]:  # the next lines, while consecutive
        if number != run[-1][0] + 1:
            break
        run.append((number, text))
    return [
        {
            "source": passage.group(1),
            "line_start": run[0][0],
            "line_end": run[-1][0],
            "quote": "\n".join(text for _, text in run),
        }
    ]
