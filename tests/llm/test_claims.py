"""Claims of an answer: facts with support, assumptions, unknowns; junk refused, none allowed.

Schemas and gates directly, then through OpenAILLM and the real openai client
against local OpenAI-compatible servers (tests/llm/fake_openai.py), then the
simulated model's claims.

Covers: llm/schemas.py.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError

from fractal_nb.llm.protocol import Message
from fractal_nb.llm.quality import ReplyContext
from fractal_nb.llm.schemas import MAX_CLAIMS, Answer, LeafAnswer, Synthesis
from fractal_nb.llm.simulated import SimulatedLLM
from fractal_nb.prompts import chat, render
from fractal_nb.text import normalize
from fractal_nb.vocabulary import ClaimKind

from .fake_openai import FakeOpenAI

QUESTION = "Why do some cities grow faster than others?"
GOOD_CLAIMS = [
    {"kind": "fact", "text": "Jobs cluster in large cities.", "support": "census employment counts"},
    {"kind": "assumption", "text": "Housing supply responds slowly."},
    {"kind": "unknown", "text": "How much migration policy matters."},
]
BASE = {"answer": "Jobs pull people in, housing holds them back.", "confidence": 0.7}


def messages() -> list[Message]:
    return chat(
        "answer",
        seed=QUESTION,
        ancestry="(this is a seed question)",
        depth=1,
        max_depth=4,
        question=QUESTION,
        siblings="(none)",
        syntheses="(none yet)",
        elsewhere="(none yet)",
        task=render("answer_branch"),
    )


def test_good_claims_are_kept_apart_and_typed() -> None:
    answer = Answer.model_validate(
        {**BASE, "claims": GOOD_CLAIMS}, context=ReplyContext.of(messages(), Answer)
    )
    assert [c.kind for c in answer.claims] == [ClaimKind.FACT, ClaimKind.ASSUMPTION, ClaimKind.UNKNOWN]
    assert answer.claims[0].support == "census employment counts"


def test_no_claims_is_a_valid_answer() -> None:
    for schema in (Answer, LeafAnswer):
        assert schema.model_validate(BASE).claims == []
    assert Synthesis.model_validate({"synthesis": "Jobs and housing decide growth."}).claims == []


def test_a_fact_without_support_is_an_assumption() -> None:
    answer = LeafAnswer.model_validate({**BASE, "claims": [{"kind": "fact", "text": "Rents rise fastest."}]})
    assert answer.claims[0].kind == ClaimKind.ASSUMPTION


@pytest.mark.parametrize(
    ("claim", "why"),
    [
        ({"kind": "fact", "text": "}, {", "support": "counts"}, "holds no words"),
        ({"kind": "unknown", "text": "See https://en.wikipedia.org/wiki/Urban_growth"}, "is a link"),
        ({"kind": "assumption", "text": "assumption"}, "too short"),
        ({"kind": "assumption", "text": "Your answer here"}, "schema's wording"),
        ({"kind": "unknown", "text": '{"text": "growth of the cities"}'}, "JSON"),
        ({"kind": "unknown", "text": QUESTION}, "copies the prompt"),
        ({"kind": "fact", "text": "Jobs cluster in cities.", "support": "}, {"}, "holds no words"),
        (
            {"kind": "fact", "text": "Jobs cluster in cities.", "support": "For a fact: what it rests on."},
            "wording",
        ),
        ({"kind": "rumour", "text": "Jobs cluster in cities."}, "fact"),
    ],
)
def test_junk_claims_are_refused_like_junk_text(claim: dict[str, Any], why: str) -> None:
    """A junk claim is dropped with its reason (the answer's ``refused``); the answer it came with is kept."""
    kept = Answer.model_validate({**BASE, "claims": [claim]}, context=ReplyContext.of(messages(), Answer))
    assert kept.claims == [] and kept.answer == BASE["answer"]
    [refused] = kept.refused
    assert refused.startswith("claims: ") and re.search(why, refused), refused


def test_the_list_of_claims_is_bounded() -> None:
    many = [
        {"kind": "unknown", "text": f"Open point number {i} about housing."} for i in range(MAX_CLAIMS + 1)
    ]
    with pytest.raises(ValidationError, match=f"at most {MAX_CLAIMS}"):
        Answer.model_validate({**BASE, "claims": many})


# -- through OpenAILLM against a real local OpenAI-compatible server ---------------------------


def test_a_server_that_returns_claims_gives_them_back() -> None:
    with FakeOpenAI("ok", responder=lambda body: {**BASE, "claims": GOOD_CLAIMS}) as server:
        reply = server.llm(timeout=5.0, max_retries=0).complete(messages(), Answer)
    assert [(c["kind"], c["text"]) for c in reply["claims"]] == [(c["kind"], c["text"]) for c in GOOD_CLAIMS]
    assert reply["claims"][0]["support"] == "census employment counts"
    [body] = server.requests
    schema = body["response_format"]["json_schema"]["schema"]
    assert "claims" in schema["properties"], "the model is asked for claims"
    assert "claims" in body["messages"][-1]["content"], "the prompt asks for them too"


def test_a_server_that_returns_junk_claims_gets_them_dropped_and_its_answer_kept() -> None:
    """A junk claim costs no correction round trip: it is dropped with its reason, never stored as a claim."""
    junk = {**BASE, "claims": [{"kind": "fact", "text": "}, {", "support": "fact"}, *GOOD_CLAIMS[:1]]}
    with FakeOpenAI("ok", responder=lambda body: junk) as server:
        reply = server.llm(timeout=5.0, max_retries=0, output_retries=1).complete(messages(), Answer)
    assert len(server.requests) == 1, "no correction round trip for one bad claim"
    assert [c["text"] for c in reply["claims"]] == [GOOD_CLAIMS[0]["text"]]
    [refused] = reply["refused"]
    assert refused.startswith("claims: text: ") and "holds no words" in refused


# -- the simulated model ---------------------------------------------------------------------------


def test_simulated_claims_are_deterministic_distinct_and_never_the_question() -> None:
    llm = SimulatedLLM(seed=3)
    questions = [QUESTION, "What does housing cost in fast-growing cities?", "Who moves to cities, and why?"]

    def claims_of(question: str) -> list[dict[str, str]]:
        prompt = chat(
            "answer",
            seed=QUESTION,
            ancestry="(this is a seed question)",
            depth=1,
            max_depth=2,
            question=question,
            siblings="(none)",
            syntheses="(none yet)",
            elsewhere="(none yet)",
            task=render("answer_leaf"),
        )
        return list(llm.complete(prompt, LeafAnswer)["claims"])

    first = {q: claims_of(q) for q in questions}
    assert first == {q: claims_of(q) for q in questions}, "the same question, the same claims"
    texts = [normalize(c["text"]) for claims in first.values() for c in claims]
    assert len(texts) == len(set(texts)) == 3 * len(questions), "distinct across questions"
    assert {c["kind"] for claims in first.values() for c in claims} == set(ClaimKind)
    assert all(normalize(QUESTION) not in t and normalize(q) not in t for q in questions for t in texts)
    assert all(c["support"] for claims in first.values() for c in claims if c["kind"] == "fact")
