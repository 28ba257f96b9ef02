"""The quality rules (llm/quality.py) on the junk a small model really sends, through the schemas."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from fractal_nb.llm.protocol import Message
from fractal_nb.llm.quality import STORED, ReplyContext
from fractal_nb.llm.schemas import (
    Answer,
    Connections,
    HarvestSummary,
    LeafAnswer,
    SeedPlan,
    Synthesis,
    connections_among,
)

PROMPT: list[Message] = [
    {"role": "system", "content": "You answer one question of a question tree."},
    {
        "role": "user",
        "content": "Seed: Why do some cities grow faster than others?\n"
        "Question to answer now (depth 1 of 3):\n"
        "What role do jobs play in urban growth?",
    },
]


def answer(text: str, **extra: Any) -> dict[str, Any]:
    return {"answer": text, "confidence": 0.5, **extra}


def refusal(schema: Any, reply: dict[str, Any], context: Any = None) -> str:
    with pytest.raises(ValidationError) as info:
        schema.model_validate(reply, context=context or ReplyContext.of(PROMPT, schema))
    return str(info.value)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("}, {", "holds no words"),
        (":{", "holds no words"),
        ("1", "holds no words"),
        ("42.0 %", "holds no words"),
        ("https://example.com/cities/growth", "holds no words"),
        ('{"answer": "jobs"}', "JSON inside a text field"),
        ('The answer is "answer": jobs', "JSON inside a text field"),
        ("{{{ ]]] ::: jobs ;;; }}}", "mostly symbols"),
        ("answer", "schema's wording"),
        ("Your answer here", "schema's wording"),
        ("What role do jobs play in urban growth?", "copies the prompt"),
        ("why do some cities grow faster than others", "copies the prompt"),
        ("jobs " * 20, "repeats itself"),
    ],
)
def test_junk_answers_are_refused_with_the_reason(text: str, why: str) -> None:
    assert why in refusal(LeafAnswer, answer(text))


@pytest.mark.parametrize(
    "text",
    [
        "Paris",
        "Jobs.",
        "Cities with more jobs attract people, who then create more jobs.",
        "Employment growth explains roughly 40% of it (see https://example.com).",
        "Jobs",  # one word in the prompt is not an echo: short facts recur in prompts
        "Les villes croissent là où il y a du travail.",
        "雇用が集まる都市が成長する。",
    ],
)
def test_real_answers_pass(text: str) -> None:
    reply = LeafAnswer.model_validate(answer(text), context=ReplyContext.of(PROMPT, LeafAnswer))
    assert reply.answer == text.strip()


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("Yes", "too short"),
        ("Maybe", "too short"),
        ("a goal", "too short"),
        ("Cities and jobs and growth.", "asks nothing"),
        ("The role of jobs", "asks nothing"),
        ("What role do jobs play in urban growth?", "copies the prompt"),
        ("What?", "too short"),
    ],
)
def test_questions_that_ask_nothing_are_refused(text: str, why: str) -> None:
    reply = answer("Jobs draw people.", sub_questions=[{"text": text, "proxy_signal": "qualifiers"}])
    assert why in refusal(Answer, reply)


@pytest.mark.parametrize(
    "text",
    [
        "Do wages rise with city size?",
        "How large is the effect of housing supply",
        "To what extent do migrants follow jobs?",
        "¿Crecen las ciudades por el empleo?",
        "Under what conditions does growth stall?",
    ],
)
def test_real_questions_pass(text: str) -> None:
    reply = answer("Jobs draw people.", sub_questions=[{"text": text, "proxy_signal": "qualifiers"}])
    assert Answer.model_validate(reply, context=ReplyContext.of(PROMPT, Answer)).sub_questions[0].text == text


def test_the_seed_plan_refuses_junk_questions_and_decompositions() -> None:
    plan = {
        "seed_kind": "question",
        "decomposition": "It splits by cause, scale and time.",
        "questions": ["Which industries lead growth?", "Yes", "What limits housing supply?"],
    }
    assert "too short" in refusal(SeedPlan, plan)
    assert "holds no words" in refusal(
        SeedPlan, {**plan, "questions": plan["questions"][::2], "decomposition": "}, {"}
    )
    copied = {**plan, "questions": ["Independent, specific seed questions.", "What limits housing?"]}
    assert "schema's wording" in refusal(SeedPlan, copied)


def test_schema_descriptions_are_placeholders() -> None:
    """The wording of the schema itself (its descriptions) is never content."""
    reply = {
        "synthesis": "Jobs pull people and housing limits them.",
        "tensions": ["Contradictions kept visible."],
    }
    assert "schema's wording" in refusal(Synthesis, reply)
    links = {"convergences": [{"node_id": "n-1", "note": "The shared conclusion, or the tension."}]}
    assert "schema's wording" in refusal(Connections, links)


def test_remarks_and_harvest_text_may_quote_the_prompt() -> None:
    """A note or a gap speaks about what the prompt shows, so quoting it is no echo."""
    prompt: list[Message] = [{"role": "user", "content": "Chain:\n- Jobs pull people into cities."}]
    summary = {"summary": "Jobs pull people into cities.", "findings": [], "gaps": ["housing supply"]}
    assert HarvestSummary.model_validate(summary, context=ReplyContext.of(prompt, HarvestSummary))


def test_text_read_back_from_the_store_is_not_judged_again() -> None:
    assert LeafAnswer.model_validate(answer("}, {"), context=STORED).answer == "}, {"
    assert "holds no words" in refusal(LeafAnswer, answer("}, {"), context=ReplyContext())


def test_connections_name_only_the_candidates_and_the_schema_says_so() -> None:
    schema = connections_among(("n-00000000000000a1", "n-00000000000000b2"))
    assert schema is connections_among(("n-00000000000000a1", "n-00000000000000b2"))  # cached
    assert issubclass(schema, Connections) and schema.role == "connect"
    json_schema = schema.model_json_schema()
    link = json_schema["$defs"]["CandidateLink"]
    assert link["properties"]["node_id"]["enum"] == ["n-00000000000000a1", "n-00000000000000b2"]
    good = {"convergences": [{"node_id": "n-00000000000000a1", "note": "both point to jobs"}]}
    assert schema.model_validate(good).convergences[0].node_id == "n-00000000000000a1"
    for bad_id in ('","', "n-00000000000000c3", ""):
        with pytest.raises(ValidationError):
            schema.model_validate({"contradictions": [{"node_id": bad_id, "note": "they disagree"}]})
    with pytest.raises(ValueError, match="at least one candidate"):
        connections_among(())


def test_the_last_level_schema_asks_for_no_sub_questions() -> None:
    assert "sub_questions" not in LeafAnswer.model_json_schema()["properties"]
    assert "sub_questions" in Answer.model_json_schema()["properties"]
    assert LeafAnswer.role == Answer.role == "answer"


def test_the_prompts_own_reply_hints_are_placeholders() -> None:
    """A model that writes back what the prompt asks for ("a paragraph of your own") wrote nothing."""
    from fractal_nb.prompts import chat

    messages = chat("harvest", seed="Why do cities grow?", chain="- Jobs pull people.", gaps="(none)")
    context = ReplyContext.of(messages, HarvestSummary)
    copied = {"summary": "A paragraph of your own.", "findings": [], "gaps": []}
    assert "schema's wording" in refusal(HarvestSummary, copied, context)
    seed = chat("seed", seed="Why do cities grow?", lo=3, hi=5)
    plan = {"seed_kind": "question", "decomposition": "text", "questions": ["Why do wages differ?"]}
    assert "too short" in refusal(SeedPlan, plan, ReplyContext.of(seed, SeedPlan))
    plan["decomposition"] = "Two or three sentences of your own naming the dimensions."
    assert "schema's wording" in refusal(SeedPlan, plan, ReplyContext.of(seed, SeedPlan))
