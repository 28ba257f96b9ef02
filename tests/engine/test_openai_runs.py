"""Whole explorations through the real openai client against a local fake OpenAI-compatible server.

The fake plays a model that answers every role sensibly (a tree actually grows),
while the server misbehaves the way real ones do: llama.cpp's HTTP 500 to
``json_schema``, replies wrapped in prose and fences, and a flaky transport.

Covers: engine/seeding.py, engine/strategies/fractal.py.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections import Counter
from typing import Any

import pytest

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.engine import calls as calls_module
from fractal_nb.engine.dispatcher import ScaledClock
from fractal_nb.llm.schemas import (
    SCHEMAS,
    Answer,
    Connections,
    Eval,
    HarvestFindings,
    Judgement,
    LeafAnswer,
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
from tests.engine.test_runs import check_finished_graph
from tests.llm.fake_openai import FakeOpenAI, schema_responder

FAST = ScaledClock(0.001)  # the dispatcher's 2/4/8 s backoff becomes 2/4/8 ms
SEED = "Why do some cities grow faster than others?"
POISON = "unanswerable"  # a seed question with this word always gets an invalid answer
NODE_ID = re.compile(r"^- \[(n-[0-9a-f]{16})\]", re.MULTILINE)  # a candidate's line


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "FRACTAL_NB_MODEL",
        "OPENAI_MODEL",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)


# --- a fake model that plays every role ----------------------------------------------------


def schema_name(body: dict[str, Any]) -> str:
    """The schema the request asks for: from response_format, else from the system message."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return str(fmt["json_schema"]["name"])
    if fmt.get("type") == "json_object" and fmt.get("schema"):
        return str(fmt["schema"]["title"])
    system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
    _, _, schema = system.partition("valid against this JSON schema:\n")
    if not schema:
        raise ValueError("the request names no schema")
    return str(json.loads(schema)["title"])


def first_user(body: dict[str, Any]) -> str:
    """The prompt itself (later user messages are the client's corrections)."""
    return next(str(m["content"]) for m in body["messages"] if m["role"] == "user")


def digest(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def _field(prompt: str, pattern: str, default: str = "") -> str:
    match = re.search(pattern, prompt)
    return match.group(1).strip() if match else default


def seed_plan(prompt: str, poison: bool) -> dict[str, Any]:
    bounds = re.search(r"between (\d+) and (\d+)", prompt)
    assert bounds is not None, "the seed prompt says how many questions to pose"
    lo, hi = int(bounds.group(1)), int(bounds.group(2))
    count = lo + digest(prompt) % (hi - lo + 1)
    angles = [
        "causes",
        "evidence",
        "winners and losers",
        "history",
        "measurement",
        "risks",
        "costs",
        "alternatives",
        "mechanisms",
        "scale",
        "future",
        "policy",
    ]
    questions = [
        f"What do we know about the {angles[i % len(angles)]} of urban growth (part {i + 1})?"
        for i in range(count)
    ]
    if poison:
        questions[-1] = f"Which {POISON} question breaks every model?"
    return {
        "seed_kind": "question",
        "decomposition": f"The seed splits into {count} dimensions.",
        "questions": questions,
    }


def sub_count(question: str) -> int:
    """How many sub-questions the fake proposes for a question: 0, 1 or 2."""
    return digest("subs:" + question) % 3


def answer(prompt: str) -> dict[str, Any]:
    question = _field(prompt, r"Question to answer now[^\n]*:\n([^\n]+)", "the question")
    depth = int(_field(prompt, r"Question to answer now \(depth (\d+)", "1"))
    if POISON in question:
        return {"answer": "", "confidence": 2.0}  # invalid however often it is corrected
    h = digest(question)
    subs = [
        {
            "text": f"Follow-up {h % 10_000:04d}.{k} at depth {depth + 1}: what qualifies it?",
            "proxy_signal": ["qualifiers", "alternatives", "assumptions"][(h + k) % 3],
        }
        for k in range(sub_count(question))
    ]
    return {
        # Its own point (a digest of the question): questions that differ by a digit get answers that
        # differ by more, or one would be a near copy of the other shown nearby (llm/quality.py).
        "answer": f"A grounded answer to: {question[:120]} (point {h % 997}, weight {h % 89})",
        "confidence": round(0.5 + (h % 40) / 100, 2),
        "sub_questions": subs,
        "saturation": None if subs else "actionable",
    }


def connections(prompt: str) -> dict[str, Any]:
    candidates = NODE_ID.findall(prompt.split("Answers to compare with", 1)[-1])
    h = digest(prompt)
    found: dict[str, list[dict[str, str]]] = {"convergences": [], "contradictions": []}
    if candidates and h % 3 == 0:
        found["convergences"].append({"node_id": candidates[0], "note": "both point to jobs"})
    if len(candidates) > 1 and h % 5 == 0:
        found["contradictions"].append({"node_id": candidates[-1], "note": "opposite directions"})
    return found


def synthesis(prompt: str) -> dict[str, Any]:
    question = _field(prompt, r"Question: ([^\n]+)", "the question")
    children = prompt.count("\n- ")
    # Words of its own, its question's alone: a question whose one sub-question is a boundary question
    # (whose text holds the question, and whose synthesis is this sentence about it) would otherwise be
    # a near-copy of that line, refused every time (llm/quality.py), and the run could never finish.
    own = f"(a question of {len(question)} characters)"
    text = f"Synthesis of '{question[:100]}' from {children} sub-findings {own}."
    return {"synthesis": text, "tensions": []}


def harvest_findings(prompt: str) -> dict[str, Any]:
    return {
        "findings": [
            {"finding": "Jobs drive the growth of cities.", "confidence": "high"},
            {"finding": "Land supply limits how fast cities grow.", "confidence": "medium"},
        ],
        "gaps": [],
    }


def widen_plan(prompt: str) -> dict[str, Any]:
    """New seed questions (a later turn's widen): numbered past the ones the prompt lists."""
    wanted = re.search(r"pose exactly (\d+)", prompt)
    assert wanted is not None, "the widen prompt says how many questions to pose"
    listed = prompt.split("Existing seed questions:", 1)[1].count("\n- ")
    return {
        "rationale": "These cover the side effects of growth, which no listed question asks about.",
        "questions": [
            f"What do we know about the side effects of urban growth (part {listed + i + 1})?"
            for i in range(int(wanted.group(1)))
        ],
    }


def simulated(schema: type[Any]) -> Any:
    """The simulator's reply to a prompt for ``schema`` (it reads the same prompt)."""
    return lambda prompt: SimulatedLLM().complete([{"role": "user", "content": prompt}], schema)


def role_responder(*, poison: bool = False) -> Any:
    """A responder that answers each schema sensibly from the prompt it is shown."""
    builders = {
        "SeedPlan": lambda p: seed_plan(p, poison),
        "Answer": answer,
        "LeafAnswer": answer,
        "Connections": connections,
        "Synthesis": synthesis,
        "HarvestFindings": harvest_findings,
        "WidenPlan": widen_plan,
        # The tracks strategy's roles (engine/strategies/tracks.py): played by the simulator, from the prompt.
        **{schema.__name__: simulated(schema) for schema in (TrackPlan, TrackFindings, SynthesisObject)},
        # The thinkon strategy, compare()'s baseline and its judge: played by the simulator too.
        **{schema.__name__: simulated(schema) for schema in (Think, Eval, SingleAnswer, Judgement)},
    }

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        name = schema_name(body)
        if name not in builders:
            return schema_responder(body)
        return builders[name](first_user(body))

    return respond


def refused_once_responder() -> Any:
    """:func:`role_responder`, but each answer's first reply is a bare link the gates refuse.

    Asked again (a correction round, or the engine's retry), it answers well.
    """
    good, asked = role_responder(), set[str]()

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        reply = good(body)
        prompt = json.dumps(body["messages"][:2])
        if "answer" in reply and prompt not in asked:
            asked.add(prompt)
            return {**reply, "answer": "https://en.wikipedia.org/wiki/\nUrban_growth"}
        return reply

    return respond


def test_the_fake_model_answers_every_role_validly() -> None:
    prompts = {
        SeedPlan: chat("seed", seed=SEED, lo=5, hi=7),
        Answer: chat(
            "answer",
            seed=SEED,
            ancestry="-",
            depth=1,
            max_depth=4,
            task=render("answer_branch"),
            question="Why jobs?",
            siblings="(none)",
            syntheses="(none yet)",
            elsewhere="(none yet)",
        ),
        LeafAnswer: chat(
            "answer",
            seed=SEED,
            ancestry="-",
            depth=3,
            max_depth=4,
            task=render("answer_leaf"),
            question="Why jobs?",
            siblings="(none)",
            syntheses="(none yet)",
            elsewhere="(none yet)",
        ),
        Synthesis: chat("synthesize", question="Why jobs?", conclusion="", answer="x", children="- a\n  b"),
        Connections: chat(
            "connect",
            question="Why?",
            node_id="new",
            answer="x",
            candidates="- [n-00000000000000a1] y\n- [n-00000000000000b2] z",
        ),
        HarvestFindings: chat("harvest", seed=SEED, chain="- x", gaps="(none)"),
        WidenPlan: chat("widen", seed=SEED, existing="- Why jobs?", n=2),
        TrackPlan: chat("tracks_seed", seed=SEED, lo=3, hi=4, note=""),
        TrackFindings: chat(
            "track_synthesis",
            track="jobs",
            question="jobs: how jobs pull people",
            focus="how jobs pull people",
            deliverable="a cited account",
            answer="x",
            children="-",
            evidence="",
            note="",
        ),
        SynthesisObject: chat(
            "aggregate", seed=SEED, tracks="Track jobs:\n  conclusions: jobs pull people\n"
        ),
        Think: chat("thinkon_think", goal=SEED, parent="(none)", depth=0, max_depth=3),
        Eval: chat(
            "thinkon_eval",
            goal=SEED,
            parent="(none)",
            depth=0,
            max_depth=3,
            todo="t1. Why jobs?",
            done="(none)",
        ),
        SingleAnswer: chat("single", question=SEED, evidence="", citing=""),
        Judgement: chat(
            "judge", question=SEED, strategy="single", summary="x", findings="- a", gaps="(none)"
        ),
    }
    respond = role_responder()
    for schema in SCHEMAS:
        for fmt in (
            {"type": "json_schema", "json_schema": {"name": schema.__name__}},
            {"type": "json_object", "schema": schema.model_json_schema()},
            None,
        ):
            body: dict[str, Any] = {"messages": list(prompts[schema])}
            if fmt is None:
                note = f"valid against this JSON schema:\n{json.dumps(schema.model_json_schema())}"
                body["messages"][0] = {"role": "system", "content": "Be good.\n\n" + note}
            else:
                body["response_format"] = fmt
            schema.model_validate(respond(body))
    plan = respond(
        {
            "messages": prompts[SeedPlan],
            "response_format": {"type": "json_schema", "json_schema": {"name": "SeedPlan"}},
        }
    )
    assert 5 <= len(plan["questions"]) <= 7
    many = [
        answer(
            chat(
                "answer",
                seed=SEED,
                ancestry="-",
                depth=1,
                max_depth=4,
                question=f"Q{i}?",
                siblings="-",
                syntheses="-",
                elsewhere="-",
                task=render("answer_branch"),
            )[1]["content"]
        )
        for i in range(30)
    ]
    assert {len(a["sub_questions"]) for a in many} == {0, 1, 2}


# --- whole runs ----------------------------------------------------------------------------


def run_through(
    server: FakeOpenAI, intensity: str, *, reruns: int = 0, **llm_options: Any
) -> tuple[Exploration, Any, str]:
    options: dict[str, Any] = {"timeout": 5.0, "max_retries": 1, **llm_options}
    llm = server.llm(**options)
    ex = Exploration.create(SEED, intensity=intensity, llm=llm, clock=FAST)
    status = ex.run(progress=False)
    for _ in range(reruns):  # a synthesis the model kept failing pauses the run: "run() again to retry"
        if status == "all_complete":
            break
        assert "run() again to retry" in repr(status), status
        status = ex.run(progress=False)
    if status != "all_complete":
        calls = ex.llm_calls()
        failed = calls[calls["outcome"] == "error"][["node_id", "role", "attempts", "error"]]
        raise AssertionError(f"{status!r}\nfailed calls:\n{failed.to_string()}")
    result = ex.harvest()
    return ex, result, status


def check_result(ex: Exploration, result: Any, server: FakeOpenAI) -> None:
    """What every run here must show: a finished tree built from the fake's answers."""
    assert result.status == "completed" and ex.status == "completed"
    check_finished_graph(ex)
    assert not result.stuck_nodes
    nodes = ex.nodes()
    root = nodes[nodes["depth"] == 0].iloc[0]
    assert root["status"] == "synthesized"
    assert result.synthesis_chain[0].node_id == root["node_id"]
    assert result.synthesis_chain[0].synthesis.startswith("Synthesis of ")
    answers = nodes[nodes["node_type"] == "answer"]
    assert answers["text"].str.startswith(("A grounded answer", "The seed splits")).all()
    calls = ex.llm_calls()
    assert {"seed", "answer", "synthesize", "harvest"} <= set(calls["role"])
    assert (calls["model"] == "fake").all()
    ok = calls[calls["outcome"] == "ok"]
    assert (ok["prompt_tokens"] > 0).all() and (ok["completion_tokens"] > 0).all()
    assert len(server.requests) >= len(ok)
    assert result.node_count == len(nodes) and result.edge_count == len(ex.edges())


def test_llama_cpp_run_falls_back_to_json_object_once() -> None:
    with FakeOpenAI("llama_cpp", responder=role_responder()) as server:
        ex, result, _ = run_through(server, "pulse")
        with ex:
            check_result(ex, result, server)
            formats = [(r.get("response_format") or {}).get("type") for r in server.requests]
            # json_schema is probed once, in the first call, without the client's retries
            # of its HTTP 500; then json_object is remembered for every call.
            tried = 1
            assert formats[:tried] == ["json_schema"] * tried
            assert set(formats[tried:]) == {"json_object"} and len(formats) > 5 + tried
            assert server.requests[0]["response_format"]["json_schema"]["name"] == "SeedPlan"
            assert server.requests[tried]["response_format"]["schema"]["title"] == "SeedPlan"
            assert {r["response_format"]["schema"]["title"] for r in server.requests[tried:]} == {
                "SeedPlan",
                "LeafAnswer",
                "Synthesis",
                "HarvestFindings",
            } | ({"Connections"} if "connect" in set(ex.llm_calls()["role"]) else set())
            # Every completion that landed was a json_object one; no call failed.
            calls = ex.llm_calls()
            assert set(calls["outcome"]) == {"ok"}
            assert calls["attempts"].sum() == len(server.requests)  # the probe's request included
            assert set(calls["mode"]) == {"json_object"}
            # The summary is the root's synthesis (the fake's), the findings the harvest call's.
            assert result.summary == result.synthesis_chain[0].synthesis
            assert result.summary.startswith("Synthesis of ") and result.synthesis_chain[0].depth == 0
            assert [f["finding"] for f in result.findings] == [
                "Jobs drive the growth of cities.",
                "Land supply limits how fast cities grow.",
            ]
            nodes = ex.nodes()
            questions = nodes.query("node_type == 'question'")
            assert 3 <= (questions["depth"] == 1).sum() <= 4
            assert questions["depth"].max() == 1  # pulse: no sub-questions below the seed ones
            # Exactly the answers whose fake reply proposed sub-questions are depth-limited.
            branching = {q.node_id for q in questions.itertuples() if q.depth == 1 and sub_count(q.text)}
            answers = nodes.query("node_type == 'answer'").set_index("node_id")
            limited = {answers.loc[a, "parent_id"] for a in result.depth_limited}
            assert branching and limited == branching


def test_junk_replies_are_repaired_through_a_whole_explore_run() -> None:
    with FakeOpenAI("junk", responder=role_responder()) as server:
        ex, result, _ = run_through(server, "explore")
        with ex:
            check_result(ex, result, server)
            calls = ex.llm_calls()
            # Discarded: a synthesis refused because a boundary question landed below it meanwhile.
            assert set(calls["outcome"]) <= {"ok", "discarded"}
            assert set(calls.query("outcome == 'discarded'")["role"]) <= {"synthesize"}
            assert (calls["attempts"] == 1).all()  # repaired, never sent back for correction
            assert len(server.requests) == len(calls)
            nodes = ex.nodes()
            questions = nodes[nodes["node_type"] == "question"]
            assert questions["depth"].max() >= 2, "the fake's sub-questions never branched"
            # The raw newline the junk adds to the first string field is stripped again.
            assert not nodes["text"].str.endswith("\n").any()
            assert not ex.syntheses()["synthesis"].str.contains("```").any()
            sub = questions[questions["text"].str.startswith("Follow-up")]
            assert (
                len(sub)
                and sub["meta_proxy_signal"].isin(["qualifiers", "alternatives", "assumptions"]).all()
            )
            assert result.convergence_count + result.contradiction_count > 0
            assert ex.edges()["edge_type"].isin(["convergence", "contradiction"]).any()


def test_a_flaky_server_slows_the_run_but_it_completes() -> None:
    with FakeOpenAI(
        "flaky", responder=role_responder(poison=True), seed=7, failure_rate=0.3, slow_s=2.5
    ) as server:
        # Under load a synthesis may fail every try of one run (timeouts are wall time): the next run retries.
        # The timeout leaves a loaded machine's ordinary reply (well under a second) room; a slow fault not.
        ex, result, _ = run_through(server, "explore", reruns=6, timeout=1.5, max_retries=1, output_retries=2)
        with ex:
            check_result(ex, result, server)
            faults = Counter(server.faults)
            assert sum(faults.values()) >= 5 and len(faults) >= 3, faults
            calls = ex.llm_calls()
            failed = calls[calls["outcome"] == "error"]
            assert len(failed) or (calls["attempts"] > 1).any()
            assert failed["error"].str.match(r"LLM(Output|Timeout|Unavailable)?Error: ").all()
            assert (calls["attempts"] > 1).any()  # junk bodies were sent back for correction

            nodes = ex.nodes().set_index("node_id")
            questions = nodes[nodes["node_type"] == "question"]
            # The poisoned question failed for good: three failed claims, an error, a gap.
            [poison_id] = questions.index[questions["text"].str.contains(POISON)]
            assert questions.loc[poison_id, "status"] == "saturated"
            assert questions.loc[poison_id, "status_reason"] == "error"
            assert questions.loc[poison_id, "meta_failures"] == 3
            poison_calls = calls[(calls["node_id"] == poison_id) & (calls["role"] == "answer")]
            # Three failed attempts count; one that met a 5xx (the server's fault) does not.
            assert len(poison_calls) >= 3 and (poison_calls["outcome"] == "error").all()
            assert any(g.startswith("failed: ") and POISON in g for g in result.gaps)
            # Any node that failed for good is a gap; any that failed and recovered is not.
            for _, node in questions[questions["status_reason"] == "error"].iterrows():
                assert any(g.startswith("failed: ") and node["text"][:60] in g for g in result.gaps)
            recovered = questions[
                (questions["status"] == "synthesized") & questions.get("meta_failures", 0).fillna(0).gt(0)
            ]
            for _, node in recovered.iterrows():
                assert not any(node["text"][:60] in g for g in result.gaps)
            released = ex.events().query("kind == 'released'")
            assert poison_id in set(released["node_id"])


# --- a model that sends junk ----------------------------------------------------------------

JUNK_TEXTS = ("}, {", ":{", "1", "https://example.com/a", "Yes", "Maybe", "a goal")


def junk_responder() -> Any:
    """The sensible model, except where a small model's junk comes back instead.

    Answers to a quarter of the questions are junk (``}, {``, ``1``, a URL, the
    question echoed, the prompt's hint) however often they are sent back
    (rejected: the question fails); another quarter are junk at first and
    sound once corrected; another quarter propose ``Yes`` as a sub-question (dropped
    with its reason, the answer kept); the root's synthesis is ``:{`` every time.
    """
    sane = role_responder()
    turns = itertools.count()

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        name, prompt = schema_name(body), first_user(body)
        corrected = len(body["messages"]) > 2  # the client's correction round trip
        reply = sane(body)
        if name in ("Answer", "LeafAnswer"):
            question = _field(prompt, r"Question to answer now[^\n]*:\n([^\n]+)")
            kind = digest("junk:" + question) % 4
            if kind == 0:  # junk, the question echoed back, or the prompt's own hint, in turn
                junk = [*JUNK_TEXTS[:4], question, "Your answer, in full sentences."]
                return {**reply, "answer": junk[next(turns) % len(junk)] if corrected else junk[0]}
            if kind == 1 and not corrected:
                return {**reply, "answer": "}, {"}
            if kind == 2 and name == "Answer":  # a junk sub-question is dropped, the answer kept uncorrected
                junk = {"text": "Yes", "proxy_signal": "qualifiers"}
                return {**reply, "sub_questions": [*reply.get("sub_questions", []), junk]}
        if name == "Synthesis" and _field(prompt, r"Question: ([^\n]+)") == SEED:
            return {"synthesis": ":{", "tensions": []}
        return reply

    return respond


def test_junk_is_refused_corrected_once_and_the_result_says_it_is_degraded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A quarter of the questions are refused however often they are asked, three times each: when two
    # of them are the last work left, their retries and the root's refused synthesis can make eight
    # failed calls in a row, which the caller rightly calls an outage (tests/engine/test_model_outage.py)
    # and the run pauses. That happened once in CI; this test is about the refusals, not the outage rule.
    monkeypatch.setattr(calls_module, "FAILING_AFTER", 10_000)
    with FakeOpenAI("ok", responder=junk_responder()) as server:
        llm = server.llm(timeout=5.0, max_retries=0, output_retries=1)
        with Exploration.create(SEED, intensity="explore", llm=llm, clock=FAST) as ex:
            status = ex.run(progress=False)
            result = ex.harvest()
            assert status == "all_complete" and result.status == "completed"
            check_finished_graph(ex)
            assert not result.stuck_nodes

            # Nothing of a refused reply was stored: no junk node, no junk synthesis or finding.
            nodes = ex.nodes()
            assert not nodes["text"].isin(JUNK_TEXTS).any()
            by_id = nodes.set_index("node_id")["text"]
            for a in nodes[nodes["node_type"] == "answer"].itertuples():
                assert a.text != by_id[a.parent_id] and "your answer" not in a.text.lower()
            syntheses = ex.syntheses()["synthesis"]
            assert not syntheses.str.fullmatch(r"\W*|https?://\S+").any()
            assert all(f["finding"] not in JUNK_TEXTS for f in result.findings)

            # A refused reply got exactly one correction round trip, then the call failed.
            calls = ex.llm_calls()
            rejected = calls[calls["error"].fillna("").str.startswith("LLMOutputError")]
            assert len(rejected) and (rejected["attempts"] == 2).all()
            kinds = (
                "holds no words",
                "copies the prompt",
                "repeats the instructions",
            )  # the prompt's wording
            assert rejected["error"].str.contains("|".join([*kinds, "too short", "mostly symbols"])).all()
            assert all(rejected["error"].str.contains(why).any() for why in kinds)
            corrected = calls[(calls["outcome"] == "ok") & (calls["attempts"] == 2)]
            assert len(corrected)
            dropped = nodes[nodes["node_type"] == "answer"]["meta_refused"].dropna()
            assert len(dropped) and all("'Yes' is too short" in " ".join(r) for r in dropped)
            assert not nodes["text"].eq("Yes").any()
            assert calls["attempts"].sum() == len(server.requests)

            # The failing questions are gaps, not findings; the run says it is degraded.
            questions = nodes[nodes["node_type"] == "question"]
            failed = questions[questions["status_reason"] == "error"]
            assert len(failed)
            for text in failed["text"]:
                assert any(g.startswith("failed: ") and text[:60] in g for g in result.gaps)
            assert result.replies["rejected"] == len(rejected)
            assert result.replies["corrected"] == len(corrected)
            assert sum(result.replies.values()) == len(calls)
            assert result.degraded
            assert any("question(s) failed" in r for r in result.degraded_reasons)
            assert any("synthes" in r for r in result.degraded_reasons)  # the root's ":{"
            assert result.synthesis_chain[0].degraded
            # The summary is the root's synthesis even so: joined without the model, and labelled so.
            assert result.summary == result.synthesis_chain[0].synthesis
            assert result.summary.startswith("[model synthesis failed")
            markdown = result._repr_markdown_()
            assert "**Degraded result:**" in markdown and "rejected" in markdown
            assert "fractal-degraded" in result._repr_html_()


def test_a_sound_model_gives_a_result_that_is_not_degraded() -> None:
    with FakeOpenAI("ok", responder=role_responder()) as server:
        ex, result, _ = run_through(server, "explore")
        with ex:
            check_result(ex, result, server)
            assert not result.degraded and result.degraded_reasons == []
            assert result.replies == {
                "accepted": len(ex.llm_calls()),
                "corrected": 0,
                "rejected": 0,
                "failed": 0,
            }
            assert "Degraded" not in result._repr_markdown_()
            # The last level is asked for an answer only; connect only with candidates to link.
            asked = Counter()
            for body in server.requests:
                name = schema_name(body)
                if name in ("Answer", "LeafAnswer"):
                    depth, limit = map(
                        int,
                        re.findall(
                            r"\(depth (\d+); sub-questions are possible "
                            r"only below depth (\d+)\)",
                            first_user(body),
                        )[0],
                    )
                    asked[name, depth + 1 >= limit] += 1
                if name == "Connections":
                    assert NODE_ID.search(first_user(body).split("Answers to compare with", 1)[-1])
            assert set(asked) == {("Answer", False), ("LeafAnswer", True)}, asked


def test_a_seed_phase_short_of_the_minimum_says_so_in_the_result() -> None:
    sane = role_responder()

    def two_questions(body: dict[str, Any]) -> dict[str, Any]:
        reply = sane(body)
        return {**reply, "questions": reply["questions"][:2]} if schema_name(body) == "SeedPlan" else reply

    with FakeOpenAI("ok", responder=two_questions) as server:
        ex, result, _ = run_through(server, "pulse")
        with ex:
            seed_calls = ex.llm_calls().query("role == 'seed'")
            assert len(seed_calls) > 1  # asked again for a fuller plan before settling
            assert (ex.nodes().query("node_type == 'question'")["depth"] == 1).sum() == 2
            assert result.degraded
            assert any(
                "seed phase posed 2 usable questions where the intensity asks for at least 3" in r
                for r in result.degraded_reasons
            ), result.degraded_reasons
