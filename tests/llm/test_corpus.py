"""The gates on real replies: what the packaged Gemma 3 270M wrote, recorded, judged again here (issue 40).

``corpus/gemma-3-270m.json`` holds the model's replies to the engine's own prompts
(``bench/local_model_bench.py --record``: each role on five questions, two request
seeds, three server setups), each with its prompt. Every reply is judged as the
engine judges it; whatever a reply keeps is then checked here by plain string
rules of this module, not by the gates' code: no copy of its prompt, of the
schema's wording or of the worked example; no link; no bare yes, no or "I don't
know" as an answer; no question given as an answer; no parent answer copied with
small edits. And the setup the local model runs with keeps most replies: gates
that refused all of a small model's work would leave the project unable to think
without a key.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from fractal_nb.llm import schemas
from fractal_nb.llm.quality import ReplyContext

CORPUS = Path(__file__).parent / "corpus" / "gemma-3-270m.json"
SCHEMAS: dict[str, type[BaseModel]] = {
    s.__name__: s
    for s in (schemas.SeedPlan, schemas.Answer, schemas.LeafAnswer, schemas.Synthesis, schemas.Connections)
    + (schemas.HarvestFindings,)
}
NON_ANSWERS = {"yes", "no", "maybe", "i don't know", "i do not know", "not sure", "i am not sure", "no idea"}


@cache
def corpus() -> dict[str, Any]:
    return json.loads(CORPUS.read_text())


def judged(entry: dict[str, Any]) -> BaseModel | None:
    """The reply as the engine keeps it (None: refused)."""
    schema = SCHEMAS[entry["schema"]]
    messages = corpus()["prompts"][entry["prompt"]]
    try:
        return schema.model_validate(json.loads(entry["reply"]), context=ReplyContext.of(messages, schema))
    except (ValidationError, ValueError):
        return None


def kept_texts(reply: BaseModel) -> list[tuple[str, str]]:
    """Every (field, text) a kept reply would store."""
    data = reply.model_dump(mode="json", exclude={"refused"})
    found: list[tuple[str, str]] = []

    def walk(value: Any, where: str) -> None:
        if isinstance(value, str) and where.split(".")[-1] not in ("seed_kind", "kind", "proxy_signal"):
            found.append((where, value))
        elif isinstance(value, dict):
            for key, item in value.items():
                if key not in ("node_id", "confidence", "saturation", "halt"):
                    walk(item, f"{where}.{key}" if where else key)
        elif isinstance(value, list):
            for item in value:
                walk(item, where)

    walk(data, "")
    return found


def words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


def share_in(text: str, source: str, run: int = 4) -> float:
    """The share of ``text``'s words inside a run of ``run`` words that ``source`` holds too."""
    mine, theirs = words(text), " ".join(words(source))
    covered: set[int] = set()
    for i in range(len(mine) - run + 1):
        if " ".join(mine[i : i + run]) in theirs:
            covered.update(range(i, i + run))
    return len(covered) / len(mine) if mine else 0.0


def example_lines(messages: list[dict[str, str]]) -> str:
    return "\n".join(
        line for m in messages for line in m["content"].splitlines() if line.startswith(("Example ", "{"))
    )


def test_the_corpus_holds_every_role_and_design() -> None:
    replies = corpus()["replies"]
    assert {r["design"] for r in replies} == {"served", "no-penalty", "gemma-template"}
    assert {r["schema"] for r in replies} == set(SCHEMAS)
    assert all(r["prompt"] in corpus()["prompts"] for r in replies)


@pytest.mark.parametrize("design", ["served", "no-penalty", "gemma-template"])
def test_nothing_a_recorded_reply_keeps_is_junk(design: str) -> None:
    checked = 0
    for entry in (r for r in corpus()["replies"] if r["design"] == design):
        reply = judged(entry)
        if reply is None:
            continue
        messages = corpus()["prompts"][entry["prompt"]]
        prompt = "\n".join(m["content"] for m in messages)
        examples = example_lines(messages)
        for field, text in kept_texts(reply):
            checked += 1
            where = f"{entry['schema']}.{field}: {text!r}"
            assert not re.search(r"https?\s*:\s*/\s*/|www\s*\.", text, re.IGNORECASE), f"a link kept: {where}"
            assert len(words(text)) < 4 or share_in(text, examples) < 0.8, (
                f"the worked example copied: {where}"
            )
            if field in ("answer", "synthesis", "summary", "decomposition"):
                plain = " ".join(words(text))
                assert plain not in NON_ANSWERS, f"a non-answer kept: {where}"
                lines = [line for line in prompt.splitlines() if len(words(line)) >= 4]
                assert len(words(text)) < 5 or all(share_in(text, line) < 0.9 for line in lines), (
                    f"a line of the prompt copied: {where}"
                )
            if field == "answer":
                question_only = text.rstrip().endswith("?") and not re.search(r"[.!;]\s", text)
                assert not question_only, f"a question given as an answer: {where}"
    assert checked or design == "gemma-template", "nothing kept to check"


def test_the_setup_the_local_model_runs_with_keeps_most_replies() -> None:
    """The served setup (ChatML, a repeat penalty) keeps most recorded replies; the others far fewer."""
    kept: Counter[str] = Counter()
    asked: Counter[str] = Counter()
    for entry in corpus()["replies"]:
        asked[entry["design"]] += 1
        kept[entry["design"]] += judged(entry) is not None
    share = {design: kept[design] / asked[design] for design in asked}
    print(f"replies kept per setup: {share}")
    assert share["served"] >= 0.6, share
    assert share["served"] > share["no-penalty"] > share["gemma-template"], share


def test_the_junk_the_issue_names_is_refused() -> None:
    """Replies a small model wrote (issue 40), each refused where it would have been kept before."""
    seed_prompt = next(
        m
        for e in corpus()["replies"]
        if e["schema"] == "SeedPlan"
        for m in [corpus()["prompts"][e["prompt"]]]
    )
    answer_prompt = next(
        m
        for e in corpus()["replies"]
        if e["schema"] == "LeafAnswer"
        for m in [corpus()["prompts"][e["prompt"]]]
    )
    leaf = schemas.LeafAnswer
    for text in ("Yes", "yes.", "I don't know. I have no idea.", "Which city grows fastest?"):
        with pytest.raises(ValidationError):
            leaf.model_validate(
                {"answer": text, "confidence": 0.5}, context=ReplyContext.of(answer_prompt, leaf)
            )
    plan = {
        "seed_kind": "question",
        "decomposition": "A school's four-day week changes buses, heating and childcare costs.",
        "questions": ["What does the school save on buses and heating?"],
    }
    with pytest.raises(ValidationError):  # the worked example's topic, not the seed's
        schemas.SeedPlan.model_validate(plan, context=ReplyContext.of(seed_prompt, schemas.SeedPlan))
