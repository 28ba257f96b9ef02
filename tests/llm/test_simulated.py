"""SimulatedLLM: schema-valid, deterministic, honest about being simulated, and configurable.

Covers: llm/protocol.py, llm/schemas.py, llm/simulated_chain.py, llm/simulated_prompts.py,
llm/simulated_prose.py, llm/simulated_tracks.py.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

from fractal_nb import InvalidInputError, LLMError, SimulatedLLM
from fractal_nb.engine.orthogonality import near_duplicates
from fractal_nb.llm.protocol import LLM, Message, estimate_tokens, messages_tokens, metered
from fractal_nb.llm.schemas import (
    SCHEMAS,
    Answer,
    Connections,
    Eval,
    HarvestFindings,
    Judgement,
    LeafAnswer,
    ProxySignal,
    SeedPlan,
    SingleAnswer,
    Synthesis,
    SynthesisObject,
    Think,
    TrackFindings,
    TrackPlan,
    WidenPlan,
)
from fractal_nb.prompts import chat, render

A = "n-00000000000000a1"
B = "n-00000000000000b2"
C = "n-00000000000000c3"

# The engine's real prompts, one per role, filled with plausible values.
EVIDENCE_LINES = ["Most new jobs in the region opened downtown.", "Commuters pull people into the cities."]
EVIDENCE = "\nEvidence:\n[notes/jobs.md:L10-L11]\n" + "\n".join(
    f"{i}: {text}" for i, text in enumerate(EVIDENCE_LINES, start=10)
)
TRACK_VALUES = {
    "track": "jobs",
    "question": "jobs: how jobs pull people into cities",
    "focus": "how jobs pull people into cities",
    "deliverable": "a cited account of the pull of jobs",
    "answer": "Jobs cluster downtown.",
    "children": "(none)",
    "note": "",
}
PROMPTS: dict[type[BaseModel], list[Message]] = {
    SeedPlan: chat("seed", seed="Why do some cities grow faster than others?", lo=5, hi=7),
    Answer: chat(
        "answer",
        seed="Why do cities grow?",
        ancestry="- Q: Why do cities grow?\n  A: Jobs.",
        depth=1,
        max_depth=4,
        question="What are the main causes behind urban growth?",
        siblings="- Who gains from growth? (open)",
        syntheses="(none yet)",
        elsewhere="(none yet)",
        task=render("answer_branch"),
    ),
    LeafAnswer: chat(
        "answer",
        seed="Why do cities grow?",
        ancestry="- Q: Why do cities grow?\n  A: Jobs.",
        depth=3,
        max_depth=4,
        question="Which services employ the most people downtown?",
        siblings="(none)",
        syntheses="(none yet)",
        elsewhere="(none yet)",
        task=render("answer_leaf"),
    ),
    Synthesis: chat(
        "synthesize",
        question="What drives growth?",
        conclusion="",
        answer="Jobs and land.",
        children="- Which jobs?\n  Services.\n- Which land?\n  Cheap land at the edge.",
    ),
    Connections: chat(
        "connect",
        question="What drives growth?",
        node_id="new",
        answer="Jobs.",
        candidates="\n".join(f"- [{n}] an answer from another branch" for n in (A, B, C)),
    ),
    HarvestFindings: chat(
        "harvest",
        seed="Why do cities grow?",
        chain="- Why do cities grow?: jobs\n  - Which jobs?: services",
        gaps="- failed: Which land? (LLMError: boom)",
    ),
    WidenPlan: chat("widen", seed="Why do cities grow?", existing="- What drives growth?", n=2),
    TrackPlan: chat("tracks_seed", seed="Why do some cities grow faster than others?", lo=3, hi=4, note=""),
    TrackFindings: chat(
        "track_synthesis",
        track="jobs",
        question="jobs: how jobs pull people into cities",
        focus="how jobs pull people into cities",
        deliverable="a cited account of the pull of jobs",
        answer="Jobs cluster downtown.",
        children="(none)",
        evidence=EVIDENCE,
        note="",
    ),
    SynthesisObject: chat(
        "aggregate",
        seed="Why do cities grow?",
        tracks="Track jobs:\n  conclusions: jobs pull people\n  - gap: wages unknown\n"
        "Track land:\n  conclusions: land is cheap\n  - gap: rents unknown\n",
    ),
    # The thinkon strategy (llm/simulated_chain.py): Think plans the whole task, Eval returns once
    # every plan item has returned.
    Think: chat("thinkon_think", goal="Why do cities grow?", parent="(none)", depth=0, max_depth=3),
    Eval: chat(
        "thinkon_eval",
        goal="Why do cities grow?",
        parent="(none)",
        depth=0,
        max_depth=3,
        todo="t1. Which jobs pull people in?",
        done="1. Which jobs pull people in?\n   -> Services downtown.",
    ),
    SingleAnswer: chat("single", question="Why do cities grow?", evidence="", citing=""),
    Judgement: chat(
        "judge",
        question="Why do cities grow?",
        strategy="fractal",
        summary="Jobs pull people in.",
        findings="- Jobs pull people in. [cites verified lines]\n- Land is cheap.",
        gaps="(none)",
    ),
}
# The prose fields each role writes (questions are questions, not labelled text).
PROSE = {
    SeedPlan: lambda o: [o["decomposition"]],
    Answer: lambda o: [o["answer"]],
    LeafAnswer: lambda o: [o["answer"]],
    Synthesis: lambda o: [o["synthesis"], *o["tensions"]],
    Connections: lambda o: [link["note"] for link in o["convergences"] + o["contradictions"]],
    HarvestFindings: lambda o: [f["finding"] for f in o["findings"]],
    WidenPlan: lambda o: [o["rationale"]],
    TrackPlan: lambda o: [o["decomposition"]],
    TrackFindings: lambda o: [o["conclusions"], *(f["finding"] for f in o["findings"]), *o["gaps"]],
    SynthesisObject: lambda o: [o["unified"], o["justification"], *(n["text"] for n in o["nuances"])],
    Think: lambda o: [o["description"]],
    Eval: lambda o: [o["description"]],
    SingleAnswer: lambda o: [o["answer"], *(f["finding"] for f in o["findings"]), *o["gaps"]],
    Judgement: lambda o: [o["rationale"]],
}


def test_simulated_tracks_are_orthogonal_and_findings_quote_the_evidence_shown() -> None:
    plan = TrackPlan.model_validate(SimulatedLLM(seed=3).complete(PROMPTS[TrackPlan], TrackPlan))
    assert len(plan.tracks) >= 3 and near_duplicates(plan.tracks) == []
    found = SimulatedLLM(seed=3).complete(PROMPTS[TrackFindings], TrackFindings)
    lines = {f"{i}": text for i, text in enumerate(EVIDENCE_LINES, start=10)}
    assert found["findings"], "evidence shown: findings cite it"
    for finding in found["findings"]:
        (cited,) = finding["citations"]
        assert cited["source"] == "notes/jobs.md" and cited["quote"] == lines[str(cited["line_start"])]
    bare = SimulatedLLM(seed=3).complete(
        chat("track_synthesis", **{**TRACK_VALUES, "evidence": ""}), TrackFindings
    )
    assert bare["findings"] == [], "no evidence shown: nothing to cite"
    made = SimulatedLLM().complete(PROMPTS[SynthesisObject], SynthesisObject)
    assert made["open_questions"] == ["wages unknown", "rents unknown"]
    assert made["nuances"][0]["tracks"] == ["jobs", "land"]


def seed_messages(lo: int, hi: int, seed: str = "Why do cities grow?") -> list[Message]:
    return chat("seed", seed=seed, lo=lo, hi=hi)


def answer_messages(question: str, depth: int = 1) -> list[Message]:
    return chat(
        "answer",
        seed="Why do cities grow?",
        ancestry="(this is a seed question)",
        depth=depth,
        max_depth=6,
        question=question,
        siblings="(none)",
        syntheses="(none yet)",
        elsewhere="(none yet)",
        task=render("answer_branch"),
    )


def test_prompts_cover_every_role() -> None:
    assert set(PROMPTS) == set(SCHEMAS)


@pytest.mark.parametrize("schema", list(SCHEMAS), ids=lambda s: s.__name__)
def test_every_role_gets_a_schema_valid_labelled_answer(schema: type[BaseModel]) -> None:
    llm = SimulatedLLM(seed=4, link_rate=1.0)
    output = llm.complete(PROMPTS[schema], schema)
    assert isinstance(output, dict)
    assert schema.model_validate(output).model_dump(mode="json") == output
    json.dumps(output)  # JSON-ready
    texts = PROSE[schema](output)
    assert texts, f"{schema.__name__} wrote no prose"
    assert all(t.startswith("[simulated]") for t in texts), texts
    assert isinstance(llm, LLM)


@pytest.mark.parametrize("schema", list(SCHEMAS), ids=lambda s: s.__name__)
def test_a_bare_prompt_still_gets_a_valid_answer(schema: type[BaseModel]) -> None:
    output = SimulatedLLM(seed=1).complete([{"role": "user", "content": "Hello?"}], schema)
    schema.model_validate(output)


def test_connect_links_only_to_candidate_ids_shown() -> None:
    linked: set[str] = set()
    for seed in range(30):
        output = SimulatedLLM(seed=seed, link_rate=1.0).complete(PROMPTS[Connections], Connections)
        ids = {link["node_id"] for link in output["convergences"] + output["contradictions"]}
        assert ids <= {A, B, C}
        linked |= ids
    assert linked, "link_rate=1.0 never linked anything"
    quiet = SimulatedLLM(seed=0, link_rate=0.0).complete(PROMPTS[Connections], Connections)
    assert quiet == {"convergences": [], "contradictions": []}


def test_harvest_carries_the_prompt_gaps() -> None:
    output = SimulatedLLM().complete(PROMPTS[HarvestFindings], HarvestFindings)
    assert output["gaps"] == ["failed: Which land? (LLMError: boom)"]


# --- determinism ---------------------------------------------------------------------------


@pytest.mark.parametrize("schema", list(SCHEMAS), ids=lambda s: s.__name__)
def test_same_seed_and_prompt_give_the_same_output(schema: type[BaseModel]) -> None:
    first = SimulatedLLM(seed=9, link_rate=0.5).complete(PROMPTS[schema], schema)
    second = SimulatedLLM(seed=9, link_rate=0.5).complete(PROMPTS[schema], schema)
    assert first == second


def test_node_ids_do_not_change_the_output() -> None:
    one = answer_messages("Does [n-0000000000000001] hold?")
    other = answer_messages("Does [n-00000000000000ff] hold?")

    def normalized(messages: list[Message]) -> str:
        output = json.dumps(SimulatedLLM(seed=2).complete(messages, Answer))
        return re.sub(r"n-[0-9a-f]{16}", "n-ID", output)

    # The draws ignore the ids: only the quoted question text differs.
    assert normalized(one) == normalized(other)
    assert normalized(one) != normalized(answer_messages("Does [n-0000000000000001] fail?"))


def test_different_seeds_usually_differ() -> None:
    messages = seed_messages(5, 7)
    outputs = {json.dumps(SimulatedLLM(seed=s).complete(messages, SeedPlan)) for s in range(8)}
    assert len(outputs) >= 4
    answers = {json.dumps(SimulatedLLM(seed=s).complete(answer_messages("Why?"), Answer)) for s in range(8)}
    assert len(answers) >= 4
    assert SimulatedLLM(seed=3).model != SimulatedLLM(seed=4).model


def test_different_prompts_usually_differ() -> None:
    llm = SimulatedLLM(seed=0)
    answers = {json.dumps(llm.complete(answer_messages(f"Question {i}?"), Answer)) for i in range(6)}
    assert len(answers) == 6  # the question's text is quoted in the answer


@pytest.mark.parametrize(("lo", "hi"), [(3, 4), (5, 7), (8, 12), (1, 1), (2, 2)])
def test_seed_question_count_respects_the_bounds(lo: int, hi: int) -> None:
    counts = set()
    for seed in range(12):
        plan = SimulatedLLM(seed=seed).complete(seed_messages(lo, hi), SeedPlan)
        questions = plan["questions"]
        assert lo <= len(questions) <= hi
        assert len(set(questions)) == len(questions)
        counts.add(len(questions))
    if hi - lo >= 2:
        assert len(counts) > 1, "the count never varies inside the range"


def test_seed_kind_follows_the_seed() -> None:
    question = SimulatedLLM().complete(seed_messages(3, 4, "Why do cities grow?"), SeedPlan)
    assert question["seed_kind"] == "question"
    claim = seed_messages(3, 4, "Cities grow.")
    kinds = {SimulatedLLM(seed=s).complete(claim, SeedPlan)["seed_kind"] for s in range(10)}
    assert kinds and "question" not in kinds


def test_branching_zero_proposes_no_sub_questions() -> None:
    for seed in range(5):
        output = SimulatedLLM(seed=seed, branching=0).complete(answer_messages("Why?"), Answer)
        assert output["sub_questions"] == [] and output["saturation"] is not None


def test_branching_shrinks_with_depth() -> None:
    def mean_subs(depth: int) -> float:
        llm = SimulatedLLM(seed=0, branching=3, decay=0.3)
        counts = [
            len(llm.complete(answer_messages(f"Q{i}?", depth), Answer)["sub_questions"]) for i in range(20)
        ]
        return sum(counts) / len(counts)

    assert mean_subs(1) == 3
    assert mean_subs(3) < 1


# --- failures ------------------------------------------------------------------------------


def test_failure_rate_one_always_raises() -> None:
    llm = SimulatedLLM(seed=1, failure_rate=1.0)
    for schema in SCHEMAS:
        for _ in range(3):
            with pytest.raises(LLMError, match="simulated failure"):
                llm.complete(PROMPTS[schema], schema)


def test_failure_rate_zero_never_raises() -> None:
    llm = SimulatedLLM(seed=1, failure_rate=0.0)
    for i in range(40):
        llm.complete(answer_messages(f"Q{i}?"), Answer)
        llm.complete(answer_messages("the same question"), Answer)


def test_a_retried_prompt_can_succeed_after_failing() -> None:
    def outcomes(llm: SimulatedLLM) -> list[bool]:
        results = []
        for _ in range(30):
            try:
                llm.complete(answer_messages("Flaky?"), Answer)
                results.append(True)
            except LLMError:
                results.append(False)
        return results

    first = outcomes(SimulatedLLM(seed=5, failure_rate=0.5))
    assert False in first and True in first
    assert any(not a and b for a, b in zip(first, first[1:], strict=False)), (
        "no failure was followed by a success of the same prompt"
    )
    # The attempt counter is deterministic: a fresh model with the same seed repeats it.
    assert outcomes(SimulatedLLM(seed=5, failure_rate=0.5)) == first


def test_failures_report_the_prompt_tokens() -> None:
    messages = answer_messages("Fail?")
    with metered() as usage, pytest.raises(LLMError):
        SimulatedLLM(failure_rate=1.0).complete(messages, Answer)
    assert usage.attempts == 1
    assert usage.prompt_tokens == messages_tokens(messages)
    assert usage.completion_tokens == 0


# --- arguments -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"branching": -1},
        {"latency_s": -0.1},
        {"decay": 1.5},
        {"decay": -0.1},
        {"failure_rate": 1.01},
        {"failure_rate": -0.5},
        {"link_rate": 2},
        {"link_rate": -1},
    ],
    ids=lambda kw: next(iter(kw)),
)
def test_invalid_arguments_raise_invalid_input(kwargs: dict[str, Any]) -> None:
    name = next(iter(kwargs))
    with pytest.raises(InvalidInputError, match=name):
        SimulatedLLM(**kwargs)


def test_an_unknown_schema_raises_invalid_input() -> None:
    class Poem(BaseModel):
        verse: str

    with pytest.raises(InvalidInputError, match="Poem"):
        SimulatedLLM().complete([{"role": "user", "content": "Write a poem."}], Poem)


def test_repr_and_model_name_say_simulated() -> None:
    llm = SimulatedLLM(seed=12, latency_s=0.5)
    assert llm.model == "simulated-12"
    assert "SimulatedLLM" in repr(llm) and "seed=12" in repr(llm) and "0.5" in repr(llm)


# --- latency and usage ---------------------------------------------------------------------


def test_latency_is_honoured() -> None:
    llm = SimulatedLLM(latency_s=0.05)
    started = time.perf_counter()
    llm.complete(PROMPTS[Synthesis], Synthesis)
    assert time.perf_counter() - started >= 0.05
    failing = SimulatedLLM(latency_s=0.05, failure_rate=1.0)
    started = time.perf_counter()
    with pytest.raises(LLMError):
        failing.complete(PROMPTS[Synthesis], Synthesis)
    assert time.perf_counter() - started >= 0.05


@pytest.mark.parametrize("schema", list(SCHEMAS), ids=lambda s: s.__name__)
def test_usage_is_reported_to_the_meter(schema: type[BaseModel]) -> None:
    messages = PROMPTS[schema]
    with metered() as usage:
        output = SimulatedLLM(seed=2).complete(messages, schema)
    assert usage.attempts == 1 and not usage.cached
    assert usage.prompt_tokens == messages_tokens(messages) > 0
    assert usage.completion_tokens == estimate_tokens(json.dumps(output)) > 0


def test_usage_accumulates_and_needs_no_meter() -> None:
    llm = SimulatedLLM()
    llm.complete(PROMPTS[Answer], Answer)  # no meter: nothing to report to, no error
    with metered() as usage:
        llm.complete(PROMPTS[Answer], Answer)
        llm.complete(PROMPTS[Synthesis], Synthesis)
    assert usage.attempts == 2
    expected = messages_tokens(PROMPTS[Answer]) + messages_tokens(PROMPTS[Synthesis])
    assert usage.prompt_tokens == expected


def test_the_simulators_tokens_are_marked_estimated_in_the_ledger() -> None:
    from fractal_nb import Exploration

    with Exploration.create("Why?", intensity="pulse", llm=SimulatedLLM(seed=1)) as ex:
        ex.run(progress=False)
        calls = ex.llm_calls()
        assert len(calls) and calls["tokens_estimated"].all()  # no server reported them


# -- evidence (engine/evidence.py): the simulator cites the lines it is shown ---------------------

EVIDENCE_TEXT = "Cities grow where jobs cluster.\n\nHousing supply limits growth.\nPorts grew first."


def evidence_messages(question: str, hits: list[dict[str, Any]]) -> list[Message]:
    from fractal_nb.engine import evidence

    return chat(
        "answer",
        seed="Why do cities grow?",
        ancestry="(this is a seed question)",
        depth=3,
        max_depth=4,
        question=question,
        siblings="(none)",
        syntheses="(none yet)",
        elsewhere="(none yet)",
        task=render("answer_leaf") + evidence.section(hits),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("question", [f"Why does growth differ in case {i}?" for i in range(12)])
def test_with_evidence_an_answer_cites_lines_of_the_first_passage_verbatim(question: str) -> None:
    hits = [
        {"source": "notes/a.md", "line_start": 7, "line_end": 10, "text": EVIDENCE_TEXT},
        {"source": "other.txt", "line_start": 1, "line_end": 1, "text": "Another passage entirely."},
    ]
    out = SimulatedLLM(seed=2).complete(evidence_messages(question, hits), LeafAnswer)
    (cited,) = out["citations"]
    lines = dict(enumerate(EVIDENCE_TEXT.split("\n"), start=7))
    assert cited["source"] == "notes/a.md" and 7 <= cited["line_start"] <= cited["line_end"] <= 10
    assert 1 <= cited["line_end"] - cited["line_start"] + 1 <= 3
    assert cited["quote"] == "\n".join(lines[n] for n in range(cited["line_start"], cited["line_end"] + 1))
    assert "" not in cited["quote"].split("\n")  # never a blank line
    start, end = cited["line_start"], cited["line_end"]
    assert (
        f"It rests on notes/a.md, {f'line {start}' if start == end else f'lines {start}-{end}'}."
        in out["answer"]
    )
    again = SimulatedLLM(seed=2).complete(evidence_messages(question, hits), LeafAnswer)
    assert again["citations"] == out["citations"]  # deterministic


def test_without_evidence_or_without_a_passage_an_answer_cites_nothing() -> None:
    plain = SimulatedLLM().complete(answer_messages("Why do ports grow first?"), Answer)
    assert plain["citations"] == [] and "rests on" not in plain["answer"]
    empty = SimulatedLLM().complete(evidence_messages("Why do ports grow first?", []), LeafAnswer)
    assert empty["citations"] == []


def test_the_harvest_carries_the_chains_citations_to_its_findings() -> None:
    from fractal_nb.engine import evidence

    cites = evidence.cites_lines(
        [
            {
                "source": "notes/a.md",
                "line_start": 7,
                "line_end": 7,
                "quote": "Cities grow where jobs cluster.",
            },
            {"source": "b.txt", "line_start": 2, "line_end": 3, "quote": "Ports grew first.\nThen rail."},
        ],
        "    ",
    )
    messages = evidence.with_rule(
        chat(
            "harvest",
            seed="Why do cities grow?",
            chain=f"- Why do cities grow?: jobs\n  - Which jobs?: services{cites}\n  - Which land?: cheap",
            gaps="(none)",
        ),
        sources=True,
    )
    out = SimulatedLLM().complete(messages, HarvestFindings)
    assert len(out["findings"]) == 3  # three syntheses in the chain, the cites lines not counted
    carried = [f["citations"] for f in out["findings"]]
    assert carried[0] == [
        {"source": "notes/a.md", "line_start": 7, "line_end": 7, "quote": "Cities grow where jobs cluster."}
    ]
    assert carried[1] == [
        {"source": "b.txt", "line_start": 2, "line_end": 3, "quote": "Ports grew first. Then rail."}
    ]
    assert carried[2] == carried[0]
    plain = SimulatedLLM().complete(PROMPTS[HarvestFindings], HarvestFindings)
    assert all(f["citations"] == [] for f in plain["findings"])


# -- texts that read like a run (issue 27): never the seed again, each level its own words ---------------

TRAM = "Should a mid-sized city build a tram line?"
# Without links (no boundary questions, which the engine words) a tree has the same shape and text
# whatever the number of workers: the figures below do not depend on timing.
TREES = [
    ("pulse", {"seed": 1}),
    ("explore", {"seed": 4, "branching": 2.3}),
    ("deep", {"seed": 1, "branching": 2.5}),
]


@pytest.fixture(scope="module")
def trees() -> dict[str, list[dict[str, Any]]]:
    from fractal_nb import Exploration

    nodes = {}
    for intensity, kwargs in TREES:
        llm = SimulatedLLM(**kwargs, link_rate=0)  # type: ignore[arg-type]
        with Exploration.create(TRAM, intensity=intensity, llm=llm) as ex:
            assert ex.run(progress=False) == "all_complete"
            nodes[intensity] = ex.store.get_snapshot(ex.graph_id)["nodes"]
    return nodes


def questions(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [n for n in nodes if n["node_type"] == "question"]


def parent_question(nodes: list[dict[str, Any]], question: dict[str, Any]) -> dict[str, Any]:
    by_id = {n["node_id"]: n for n in nodes}
    return by_id[by_id[question["parent_id"]]["parent_id"]]


@pytest.mark.parametrize("intensity", [i for i, _ in TREES])
def test_no_question_below_the_seed_repeats_it(
    trees: dict[str, list[dict[str, Any]]], intensity: str
) -> None:
    below = [q["text"].lower() for q in questions(trees[intensity]) if q["depth"] > 0]
    assert below
    assert not [t for t in below if TRAM.rstrip("?").lower() in t or TRAM[:30].lower() in t]


@pytest.mark.parametrize("intensity", [i for i, _ in TREES])
def test_labels_cut_at_forty_characters_still_differ(
    trees: dict[str, list[dict[str, Any]]], intensity: str
) -> None:
    heads = Counter(q["text"][:40].lower() for q in questions(trees[intensity]))
    distinct = sum(heads[q["text"][:40].lower()] == 1 for q in questions(trees[intensity]))
    assert distinct >= 0.9 * len(questions(trees[intensity])), heads.most_common(3)


def test_each_level_opens_apart_from_its_parent_and_its_siblings(
    trees: dict[str, list[dict[str, Any]]],
) -> None:
    nodes = trees["deep"]
    assert max(q["depth"] for q in questions(nodes)) >= 4
    siblings: dict[str, list[str]] = {}
    for q in questions(nodes):
        if q["depth"] > 0:
            parent = parent_question(nodes, q)
            assert q["text"][:40] != parent["text"][:40]
            siblings.setdefault(parent["node_id"], []).append(q["text"][:40])
    assert all(len(set(heads)) == len(heads) for heads in siblings.values())


def test_a_sub_question_narrows_what_its_question_was_about(trees: dict[str, list[dict[str, Any]]]) -> None:
    from fractal_nb.llm.simulated_questions import read

    nodes = trees["deep"]
    deeper = [q for q in questions(nodes) if q["depth"] >= 2]
    assert deeper
    for q in deeper:  # the aspect and the element its parent added, then an element of its own
        about = read(parent_question(nodes, q)["text"]).subject
        assert about in q["text"] and len(q["text"]) > len(about)
        assert q["metadata"]["proxy_signal"] in read(q["text"]).signals


def test_answers_and_syntheses_speak_of_their_own_question(trees: dict[str, list[dict[str, Any]]]) -> None:
    from fractal_nb.llm.simulated_questions import read

    nodes = trees["explore"]
    by_id = {n["node_id"]: n for n in nodes}
    answers = [n for n in nodes if n["node_type"] == "answer"]
    for answer in answers:
        about = read(by_id[answer["parent_id"]]["text"]).subject.lower()
        assert answer["text"].startswith("[simulated]") and about in answer["text"].lower()
    for q in questions(nodes):
        synthesis = q["metadata"]["synthesis"]
        assert synthesis.startswith("[simulated]") and read(q["text"]).subject.lower() in synthesis.lower()
    assert len({a["text"] for a in answers}) == len(answers)


@pytest.mark.parametrize("question", ["Who would fight a tram line, and how strong is their case?", TRAM])
def test_sub_questions_differ_by_proxy_signal(question: str) -> None:
    from fractal_nb.llm.simulated_questions import read

    out = SimulatedLLM(seed=3, branching=5).complete(answer_messages(question), Answer)
    subs = out["sub_questions"]
    assert sorted(s["proxy_signal"] for s in subs) == sorted(s.value for s in ProxySignal)
    openings = {" ".join(s["text"].split()[:2]) for s in subs}
    assert len(openings) == len(subs), [s["text"] for s in subs]
    for sub in subs:
        assert sub["text"] != question and TRAM.rstrip("?") not in sub["text"]
        if question != TRAM:  # below its own question the simulator reads the signal back
            assert read(sub["text"]).signals == {ProxySignal(sub["proxy_signal"])}


def test_one_worker_repeats_a_run_exactly_texts_and_all() -> None:
    from fractal_nb import Exploration

    def texts() -> list[tuple[str, int, str]]:
        with Exploration.create(TRAM, intensity="explore", llm=SimulatedLLM(seed=4)) as ex:
            ex.run(1, progress=False)
            nodes = ex.store.get_snapshot(ex.graph_id)["nodes"]
            return [(n["node_type"], n["depth"], re.sub(r"n-[0-9a-f]{16}", "n-ID", n["text"])) for n in nodes]

    first = texts()
    assert len(first) > 10 and first == texts()
