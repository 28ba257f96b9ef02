"""``SimulatedLLM``: a deterministic stand-in model for demos, tests and benchmarks.

It reads the same prompts a real model gets and answers every role with
schema-valid JSON. Its questions read like a run's, in words of the question
they split (``simulated_frames``, ``simulated_questions``: never the seed
pasted again); its answers, syntheses and summaries name their question's
subject and say plainly that they are simulated (``simulated_prose``). The
thinkon and tracks strategies' roles are ``simulated_chain``'s and
``simulated_tracks``'s; what is read in a prompt, ``simulated_prompts``'s. Outputs
depend only on the seed and the id-free text of the prompt (for answers: the question
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
from .simulated_prompts import (
    cite_evidence,
    decisive_part,
    id_free_digest,
    prompt_field,
    quoted_question,
    without_elsewhere,
)
from .simulated_prose import FACTORS, answer_level, answer_text, factors, synthesis_text
from .simulated_questions import ANGLES, angle_labels, angle_questions, extra_question, follow_up, read
from .simulated_tracks import aggregate_reply, track_synthesis_reply, tracks_seed_reply

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
_QUOTED_FACT_WORDS = 4  # a cited line this long is stated as the answer's fact (a heading is not)
_CARRIED = re.compile(r"^\s+\[(fact|assumption|unknown)\] (.+?)(?: \(support: (.+)\))?$", re.MULTILINE)
_NODE_ID = re.compile(r"^- \[(n-[0-9a-f]+)\]", re.MULTILINE)  # a candidate's line (its text may cite ids)
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
        ``blocked``; docs/architecture/engine.md, "Halts") until the person's choice or
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
        key = f"{self.seed}:{role}:{decisive_part(role, prompt)}"
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
            "tracks_seed": tracks_seed_reply,
            "track_synthesis": track_synthesis_reply,
            "aggregate": aggregate_reply,
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
        seed = prompt_field(prompt, r"Seed: (.+)") or "the seed"
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
        seed = prompt_field(prompt, r"Seed: (.+)") or "the seed"
        wanted = int(prompt_field(prompt, r"[Pp]ose exactly (\d+)") or 1)
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
        question = prompt_field(prompt, r"Question to answer now[^\n]*:\n(.+)") or "the question"
        depth = int(prompt_field(prompt, r"Question to answer now \(depth (\d+)") or 1)
        mean = self.branching * self.decay ** max(0, depth - 1)
        count = int(mean) + (1 if rng.random() < mean - int(mean) else 0)
        reading = read(question)
        avoid = prompt_field(prompt, r"Do not ask these sub-questions again: (.+)")
        signals = list(ProxySignal)
        # A redecomposition (store/turn_requests.py) draws at least one, and words each apart from ``avoid``.
        drawn = rng.sample(signals, k=min(max(count, 1) if avoid is not None else count, len(signals)))
        hedge = rng.choice(_HEDGES) if drawn else "clearly"
        # A follow-up along the signal that led to its question (or to its parent) would go over the same
        # ground: dropped (a redecomposition keeps one).
        follow_ups = [s for s in drawn if s not in reading.signals] or (
            drawn[:1] if avoid is not None else []
        )
        chosen = prompt_field(prompt, r"The person (?:chose|clarified): (.+)")
        halt = self._halt(question, answered=chosen is not None)
        if halt is not None:
            return {
                "answer": f"[simulated] {quoted_question(question)} needs the person first.",
                "confidence": 0.3,
                "halt": halt,
            }
        if chosen is not None:  # the branch goes on with the person's choice
            follow_ups, hedge = follow_ups[:1], f"following the person's word ({clip(chosen, 80)}),"
        # With an evidence section: real lines of its first passage.
        citations = cite_evidence(prompt, question)
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
            "claims": _claims(question, depth, citations),
            "citations": citations,
        }

    def _halt(self, question: str, *, answered: bool) -> dict[str, Any] | None:
        """The halt ``halt_on`` asks for on this question, until the person has ``answered`` (then None)."""
        kind = next((k for word, k in self.halt_on.items() if word in question.lower()), None)
        if kind is None or (kind != HaltKind.BLOCKED and answered):
            return None
        about = quoted_question(question)
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
        reading = read(prompt_field(prompt, r"Question: (.+)") or "the question")
        children = prompt.count("\n- ")
        tensions = (
            ["[simulated] two sub-findings pull in different directions"]
            if "contradict" in prompt.lower()
            else []
        )
        # The level of its own answer's wording (the root's is the plan: 0), so a synthesis never reads
        # like its children's.
        level = answer_level(prompt_field(prompt, r"Its own answer:\n([^\n]*)") or "")
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
        question = prompt_field(prompt, r"Question: (.+)") or "the question"
        reading = read(question)
        factor = FACTORS[reading.kind][id_free_digest(question)[0] % len(FACTORS[reading.kind])]
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
        seed = prompt_field(prompt, r"Seed: (.+)") or "the seed"
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
        # Each finding is about a question of the chain (root first), in the words it was asked in.
        asked = re.findall(r"^\s*- (.+?\?): ", chain, flags=re.MULTILINE) or [seed]
        findings = []
        for i in range(min(3, steps)):
            question = asked[i % len(asked)]
            reading = read(question)
            factor = FACTORS[reading.kind][(id_free_digest(question)[1] + i) % len(FACTORS[reading.kind])]
            findings.append(
                {
                    "finding": f"[simulated] finding {i + 1}: what decides {reading.subject} is mainly "
                    f"{factor}",
                    "confidence": rng.choice(["high", "medium", "low"]),
                    "citations": [cited[i % len(cited)]] if cited else [],
                }
            )
        return {
            "findings": findings,
            "gaps": gaps,
        }

    # -- compare()'s baseline and judge (fractal_nb/exploration/comparison.py) ------------------------

    def _single(self, prompt: str, rng: random.Random) -> dict[str, Any]:
        """The whole question in one reply: an answer naming three factors, two findings, one gap."""
        question = prompt_field(prompt, r"Question: (.+)") or "the question"
        reading = read(question)
        named = factors(reading.kind, rng)
        citations = cite_evidence(prompt, question)  # with sources: the single_citing section's first passage
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


def _claims(question: str, depth: int, citations: list[dict[str, Any]]) -> list[dict[str, str]]:
    """A question's fact, assumption and unknown: the same for the same question, distinct for others.

    With a citation, the fact is what the cited lines say (a fact the store can check, issue 42).
    """
    digest = id_free_digest(question).hex()
    case, pick = digest[:6], int(digest[6:10], 16)
    fact = {
        "kind": "fact",
        "text": f"[simulated] In case {case}, {_FACTS[pick % len(_FACTS)]}.",
        "support": f"[simulated] the stand-in model's own reading at depth {depth}",
    }
    quoted = " ".join(citations[0]["quote"].split()) if citations else ""
    if len(quoted.split()) >= _QUOTED_FACT_WORDS:
        cited = citations[0]
        fact = {
            "kind": "fact",
            "text": f"[simulated] The source says: {clip(quoted, 300)}",
            "support": f"{cited['source']}, lines {cited['line_start']}-{cited['line_end']}",
        }
    return [
        fact,
        {"kind": "assumption", "text": f"[simulated] Case {case} takes it that {_ASSUMPTIONS[pick % 4]}."},
        {"kind": "unknown", "text": f"[simulated] Open in case {case}: {_UNKNOWNS[pick // 4 % 4]}."},
    ]


def _leading(text: str, kind: str, rng: random.Random) -> list[str]:
    """The two factors ``text`` (the findings below a synthesis) names most, then drawn ones."""
    named = {f: text.count(f) for f in FACTORS[kind] if f in text}
    leading = sorted(named, key=lambda f: -named[f])  # stable: at a tie, in the order of FACTORS
    return (leading + [f for f in factors(kind, rng, 4) if f not in leading])[:2]


def _remark(question: str, prompt: str) -> str:
    """The remark a question's answer adds, by a digest of its id-free text (no draw of the run).

    The first from there that the prompt does not hold already: an answer whose
    question quotes another answer (a boundary question) would otherwise be a near
    copy of a line of its prompt, which the gates refuse (llm/quality.py).
    """
    start = id_free_digest(question)[0]
    turns = [_REMARKS[(start + i) % len(_REMARKS)] for i in range(len(_REMARKS))]
    shown = without_elsewhere(prompt)
    return next((r for r in turns if r not in shown), turns[0])
