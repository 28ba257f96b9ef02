"""The quality rules (llm/quality.py) on the junk a small model really sends, through the schemas.

Covers: llm/schemas.py, llm/copies.py, llm/urls.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from fractal_nb.llm.protocol import Message
from fractal_nb.llm.quality import STORED, ReplyContext
from fractal_nb.llm.schemas import (
    Answer,
    Connections,
    HarvestFindings,
    LeafAnswer,
    SeedPlan,
    Synthesis,
    WidenPlan,
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
    """A junk sub-question is dropped with its reason; the answer it came with is kept."""
    reply = answer("Jobs draw people.", sub_questions=[{"text": text, "proxy_signal": "qualifiers"}])
    kept = Answer.model_validate(reply, context=ReplyContext.of(PROMPT, Answer))
    assert kept.sub_questions == [] and kept.answer == "Jobs draw people."
    assert [r for r in kept.refused if r.startswith("sub_questions: ") and why in r]


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
    kept = SeedPlan.model_validate(plan, context=ReplyContext.of(PROMPT, SeedPlan))
    assert kept.questions == plan["questions"][::2] and "too short" in kept.refused[0]
    assert "holds no words" in refusal(
        SeedPlan, {**plan, "questions": plan["questions"][::2], "decomposition": "}, {"}
    )
    copied = {**plan, "questions": ["Independent, specific seed questions.", "Yes"]}
    assert "schema's wording" in refusal(SeedPlan, copied)  # no question left: the reply is refused


def test_schema_descriptions_are_placeholders() -> None:
    """The wording of the schema itself (its descriptions) is never content."""
    reply = {
        "synthesis": "Jobs pull people and housing limits them.",
        "tensions": ["Contradictions kept visible."],
    }
    kept = Synthesis.model_validate(reply, context=ReplyContext.of(PROMPT, Synthesis))
    assert kept.tensions == [] and "schema's wording" in kept.refused[0]  # dropped, the synthesis kept
    links = {"convergences": [{"node_id": "n-1", "note": "The shared conclusion, or the tension."}]}
    kept_links = Connections.model_validate(links, context=ReplyContext.of(PROMPT, Connections))
    assert kept_links.convergences == [] and "schema's wording" in kept_links.refused[0]
    assert "schema's wording" in refusal(Synthesis, {"synthesis": "Contradictions kept visible."})


def test_remarks_and_harvest_text_may_quote_the_prompt() -> None:
    """A note or a gap speaks about what the prompt shows, so quoting it is no echo."""
    prompt: list[Message] = [{"role": "user", "content": "Chain:\n- Jobs pull people into cities."}]
    harvested = {
        "findings": [{"finding": "Jobs pull people into cities.", "confidence": "high"}],
        "gaps": ["housing supply"],
    }
    assert HarvestFindings.model_validate(harvested, context=ReplyContext.of(prompt, HarvestFindings))


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

    messages = chat("widen", seed="Why do cities grow?", existing="- Why do wages differ?", n=2)
    context = ReplyContext.of(messages, WidenPlan)
    hint = "one or two sentences of your own on what the new questions cover that the existing ones do not"
    copied = {"rationale": hint, "questions": ["How does housing limit growth?"]}
    assert "schema's wording" in refusal(WidenPlan, copied, context)
    seed = chat("seed", seed="Why do cities grow?", lo=3, hi=5)
    plan = {"seed_kind": "question", "decomposition": "text", "questions": ["Why do wages differ?"]}
    assert "too short" in refusal(SeedPlan, plan, ReplyContext.of(seed, SeedPlan))


# --- issue 24: junk a real small model (Gemma 3 270M) wrote, refused however it is dressed ------------

CORRECTION_COPY = "value_error: The schema's wording, not content: write your own text"  # verbatim, the issue
PARENT_ANSWER = "Cities with more jobs attract workers, who in turn create demand for more local jobs."
CHILD_PROMPT: list[Message] = [
    {"role": "system", "content": "You answer one question of a question tree."},
    {
        "role": "user",
        "content": "Path from the seed to this question (each question with its answer):\n"
        "- Q: Why do some cities grow faster than others?\n"
        f"  A: {PARENT_ANSWER}\n"
        "Question to answer now (depth 1 of 3):\nHow strong is the pull of jobs on migration?",
    },
]


@pytest.mark.parametrize(
    "text",
    [
        "https://en.wikipedia.org/wiki/\nUrban_growth",  # a URL split by a newline, as Gemma wrote one
        "https://en.wikipedia.org/wiki/Urban_gro\nwth",  # cut inside a word
        "https://www.\nexample.com/cities/growth",
        "https:\n//example.com/cities-grow-faster",
        "https://en.wiki pedia.org/wiki/Urban growth",  # spaces instead of the line break
        "en.wikipedia.org/wiki/Urban_growth\nUrban growth",
        "[Urban growth](https://en.wikipedia.org/wiki/Urban_growth)",
    ],
)
def test_links_however_split_are_refused(text: str) -> None:
    why = refusal(LeafAnswer, answer(text))
    assert "is a link" in why or "holds no words" in why, why


def test_a_copy_of_a_correction_is_refused_in_every_field() -> None:
    """The issue's root synthesis and summary: the gates' own correction, given back as content."""
    assert "repeats the instructions or a correction" in refusal(LeafAnswer, answer(CORRECTION_COPY))
    assert "repeats the instructions" in refusal(Synthesis, {"synthesis": CORRECTION_COPY, "tensions": []})
    harvested = {"findings": [{"finding": CORRECTION_COPY, "confidence": "high"}], "gaps": []}
    assert "repeats the instructions" in refusal(HarvestFindings, harvested)
    # Without any context too (the simulated model's own check, the engine's second look).
    assert "repeats the instructions" in refusal(HarvestFindings, harvested, context=ReplyContext())


@pytest.mark.parametrize(
    "text",
    [
        "That reply was not a valid HarvestFindings: findings: 'A paragraph of your own.' is the schema…",
        "'A paragraph of your own.' is the schema's wording, not…",
        "is too short: write at least 3 words",
        "Reply again with only the corrected JSON object.",
        "The copies the prompt: write it in your own words, please",
    ],
)
def test_a_clipped_quote_of_a_correction_is_refused_as_a_harvest_finding(text: str) -> None:
    from fractal_nb.prompts import chat

    messages = chat("harvest", seed="Why do cities grow?", chain="- Jobs pull people.", gaps="(none)")
    reply = {"findings": [{"finding": text, "confidence": "high"}], "gaps": []}
    assert "repeats the instructions" in refusal(
        HarvestFindings, reply, ReplyContext.of(messages, HarvestFindings)
    )


def test_a_correction_actually_sent_is_never_content_but_the_text_it_quotes_may_be_mended() -> None:
    """Pydantic's own messages (not only the gates') count once sent; the model's quoted text does not."""
    from fractal_nb.llm.quality import correction

    with pytest.raises(ValidationError) as info:
        Answer.model_validate(
            answer("Jobs and housing in cities?", confidence=1.7),
            context=ReplyContext.of(PROMPT, Answer),
        )
    message, wording = correction(Answer, info.value)
    assert "Jobs and housing in cities" in message and "Jobs and housing" not in wording
    context = ReplyContext.of(PROMPT, Answer).after(wording)
    copied = answer("Input should be less than or equal to 1, confidence")
    assert "repeats the instructions" in refusal(LeafAnswer, copied, context)
    mended = answer(
        "Jobs draw people.",
        sub_questions=[{"text": "How do jobs and housing in cities interact?", "proxy_signal": "qualifiers"}],
    )
    assert Answer.model_validate(mended, context=context).sub_questions[0].text.startswith("How do jobs")


@pytest.mark.parametrize(
    "text",
    [
        PARENT_ANSWER + " Indeed.",  # the case: the parent's answer with a word appended
        PARENT_ANSWER.replace("workers", "people"),  # a word changed
        PARENT_ANSWER.replace(" local", ""),  # a word dropped
        "So: " + PARENT_ANSWER.lower(),
    ],
)
def test_a_parents_answer_with_small_edits_is_refused(text: str) -> None:
    assert "copies the prompt" in refusal(LeafAnswer, answer(text), ReplyContext.of(CHILD_PROMPT, LeafAnswer))


@pytest.mark.parametrize(
    "text",
    [
        # The parent's answer with a clause of its own: a quarter of it new, so it says something.
        PARENT_ANSWER + " Migration follows wages with a lag of a few years.",
        "Jobs pull strongly: most movers name work as the reason, but housing costs cap the flow.",
        "Cities with more jobs attract workers; the pull is strongest for young graduates.",
        "Strong.",
    ],
)
def test_answers_that_build_on_their_parent_pass(text: str) -> None:
    assert LeafAnswer.model_validate(answer(text), context=ReplyContext.of(CHILD_PROMPT, LeafAnswer))


def test_copies_of_the_instructions_or_the_schema_with_small_edits_are_refused() -> None:
    from fractal_nb.prompts import chat

    messages = chat(
        "synthesize", question="Why do cities grow?", conclusion="", answer="Jobs.", children="- a\n  b"
    )
    context = ReplyContext.of(messages, Synthesis)
    copied = "Compose a synthesis that answers the question from its sub-questions' syntheses, briefly."
    assert "repeats the instructions" in refusal(Synthesis, {"synthesis": copied}, context)
    plan = {
        "seed_kind": "question",
        "decomposition": "How the seed breaks apart, in prose, mostly.",
        "questions": ["Why do wages differ?"],
    }
    assert "repeats the instructions" in refusal(SeedPlan, plan)


def test_the_thresholds_are_where_the_tests_say() -> None:
    """Four words in five from what is never content; nine in ten from one line of the prompt."""
    from fractal_nb.llm.copies import copied_share
    from fractal_nb.llm.quality import NEAR_COPY_SHARE, NEVER_CONTENT_SHARE

    appended = copied_share(PARENT_ANSWER + " Indeed.", PARENT_ANSWER)
    clause = copied_share(
        PARENT_ANSWER + " Migration follows wages with a lag of a few years.", PARENT_ANSWER
    )
    assert clause < 0.65 < NEVER_CONTENT_SHARE < NEAR_COPY_SHARE <= appended
    gate = "Value error, 'x' is the schema's wording, not content: write your own text"
    assert copied_share(CORRECTION_COPY, gate) >= NEVER_CONTENT_SHARE


def test_a_harvest_names_a_finding_but_one_read_back_may_hold_none() -> None:
    """The summary is the root's synthesis (issue 42): the harvest's reply is its findings, at least one."""
    assert "findings: none" in refusal(HarvestFindings, {"findings": [], "gaps": ["housing supply"]})
    assert "findings\n  Field required" in refusal(
        HarvestFindings, {"summary": "Jobs pull people into cities."}
    )
    assert HarvestFindings.model_validate({"findings": [], "gaps": []}, context=STORED).findings == []


@pytest.mark.parametrize(
    "text", ["Syntheses of sub-questions", "Syntheses of sub-tracks.", "Material of sub-questions only"]
)
def test_a_heading_of_the_prompt_with_a_word_dropped_is_refused(text: str) -> None:
    """The local model's root synthesis (issue 42): "Syntheses of its sub-questions" minus "its".

    No run of three words is shared with the heading, so the run-based gates kept it.
    """
    from fractal_nb.prompts import chat

    messages = chat(
        "synthesize", question="Why do cities grow?", conclusion="", answer="Jobs.", children="- a\n  b"
    )
    assert "repeats the instructions" in refusal(
        Synthesis, {"synthesis": text}, ReplyContext.of(messages, Synthesis)
    )


def test_a_corrections_words_written_back_as_an_answer_are_refused() -> None:
    """Gemma 270M answered "Value error" after a correction (demo --local, issue 42), and it was kept."""
    context = ReplyContext.of(PROMPT, LeafAnswer)
    assert "repeats the instructions or a correction" in refusal(LeafAnswer, answer("Value error"), context)


@pytest.mark.parametrize(
    ("question", "text"),
    [
        (
            "Is Paris the capital of France?",
            "Paris is the capital of France.",
        ),  # a short yes, in the question's words
        ("How large is the tram budget?", "The tram budget is large."),
    ],
)
def test_a_short_answer_in_the_questions_own_words_passes(question: str, text: str) -> None:
    """Only the prompts' fixed lines are headings: the question's words are the answer's to use."""
    prompt: list[Message] = [
        {"role": "user", "content": f"Seed: {question}\nQuestion to answer now (depth 1 of 3):\n{question}"}
    ]
    assert LeafAnswer.model_validate(answer(text), context=ReplyContext.of(prompt, LeafAnswer))


def _synthesis_prompt(conclusion: bool) -> list[Message]:
    from fractal_nb.prompts import chat, render

    children = (
        "- Who hires tram builders?\n  The construction industry has been a source of labor for decades, "
        "but it's now being replaced by robots and automation."
    )
    return chat(
        "synthesize",
        question="Why would a city build a tram line?",
        conclusion=render("conclusion") if conclusion else "",
        answer="It depends on the streets.",
        children=children,
    )


DRIFTED = (
    "The construction industry has long been a source of labor, but robots and automation now replace it."
)


def test_a_conclusion_that_shares_no_word_with_the_seed_is_refused() -> None:
    """`demo --local` (issue 42): the root's synthesis on robots, kept because the syntheses below drifted.

    A synthesis below the root may rest on its material alone; the conclusion must answer the seed.
    """
    below = ReplyContext.of(_synthesis_prompt(conclusion=False), Synthesis)
    assert Synthesis.model_validate({"synthesis": DRIFTED}, context=below).synthesis == DRIFTED
    root = ReplyContext.of(_synthesis_prompt(conclusion=True), Synthesis)
    assert root.conclusion and not below.conclusion
    assert "shares no word with its seed question" in refusal(Synthesis, {"synthesis": DRIFTED}, root)
    answered = "A city builds a tram line where buses are full and the streets have room for tracks."
    assert Synthesis.model_validate({"synthesis": answered}, context=root).synthesis == answered


def test_a_conclusion_that_speaks_of_the_task_is_refused() -> None:
    """`demo --local` (issue 42) then wrote the system prompt back as its conclusion: "builds" is the seed's.

    Its one word of the seed's is the instructions' too; a conclusion whose words are mostly the
    instructions' says nothing of trams or buses, even where it names the city.
    """
    root = ReplyContext.of(_synthesis_prompt(conclusion=True), Synthesis)
    task = "A worker in an exploratory exploration builds a graph of questions and answers."
    assert "shares no word with its seed question" in refusal(Synthesis, {"synthesis": task}, root)
    vacuous = "The answer depends on the question: each city differs, and what we know is uncertain."
    assert "speaks of the task" in refusal(Synthesis, {"synthesis": vacuous}, root)
    below = ReplyContext.of(_synthesis_prompt(conclusion=False), Synthesis)
    assert Synthesis.model_validate({"synthesis": task}, context=below).synthesis == task  # not a conclusion


def test_a_conclusion_must_share_a_word_of_the_seeds_own_topic() -> None:
    """`demo --local` (issue 42): an apartment block "built", for a seed on building a tram line.

    "build" is the instructions' word too ("built recursively"), so it does not make a conclusion
    about the seed; "tram" does, however short the conclusion.
    """
    root = ReplyContext.of(_synthesis_prompt(conclusion=True), Synthesis)
    block = "A six-story apartment complex is 80 percent built, and they propose to build more floors on it."
    assert "shares no word with its seed question" in refusal(Synthesis, {"synthesis": block}, root)
    short = "Trams carry more people than buses but cost more to lay down."
    assert Synthesis.model_validate({"synthesis": short}, context=root).synthesis == short
