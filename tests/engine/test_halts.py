"""Halts, the seed's other laws (docs/architecture/engine.md, "Halts").

halt(ambiguity): options and tradeoffs as a gate the person answers, the branch going on with the
choice; halt(confusion): a clarifying question to the person; terminate(blocked): the blocker and
the suggested alternatives in the result, a gap.

Covers: engine/primitive.py, store/stops.py.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from fractal_nb import Exploration, GraphStore, SimulatedLLM
from fractal_nb.engine.gaps import gap_rows
from fractal_nb.engine.primitive import _choice_note
from fractal_nb.errors import InvalidInputError, StateError
from fractal_nb.llm.protocol import Message
from fractal_nb.llm.quality import ReplyContext
from fractal_nb.llm.schemas import Answer, LeafAnswer
from tests.engine.test_openai_runs import SEED as OPENAI_SEED
from tests.engine.test_openai_runs import first_user, role_responder, schema_name
from tests.engine.test_runs import FAST
from tests.llm.fake_openai import FakeOpenAI

SEED = "Where should the new depot go?"  # every seed question names the depot: each one halts


class RecordingLLM(SimulatedLLM):
    """The simulated model, keeping every answer prompt it was sent (to see what reaches the model)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.answer_prompts: list[str] = []
        self._prompts_lock = threading.Lock()

    def complete(self, messages: list[Message], schema: type[BaseModel]) -> dict[str, Any]:
        if getattr(schema, "role", None) == "answer":
            with self._prompts_lock:
                self.answer_prompts.append(messages[-1]["content"])
        return super().complete(messages, schema)

    def prompts_for(self, question: str) -> list[str]:
        return [p for p in self.answer_prompts if f"\n{question}\n" in p or f"\n{question}" in p]


def halting(kind: str, **kwargs: Any) -> tuple[Exploration, RecordingLLM]:
    llm = RecordingLLM(halt_on={"depot": kind})
    return Exploration.create(SEED, intensity="pulse", llm=llm, clock=FAST, **kwargs), llm


def state_of(ex: Exploration, node_id: str) -> tuple[Any, ...]:
    """What a refused call must leave as it was: the node, the graph's status and its event count."""
    node = ex.store.get_node(ex.graph_id, node_id)["node"]
    return node["status"], node["metadata"], ex.status, len(ex.events())


def test_an_ambiguity_holds_the_question_and_the_branch_goes_on_with_the_choice() -> None:
    ex, llm = halting("ambiguity")
    with ex:
        report = ex.run(progress=False)
        assert report == "paused" and "held for your answer (ex.choose)" in str(report.status_reason)
        gates = ex.gates
        assert len(gates) >= 3 and set(gates["held"]) == {"ambiguity"}
        node_id, question = gates["node_id"][0], gates["text"][0]
        node = ex.store.get_node(ex.graph_id, node_id)
        assert node["node"]["status"] == "gated" and not node["children"], "a halt writes no answer node"
        halt = node["node"]["metadata"]["halt"]
        assert halt["kind"] == "ambiguity" and len(halt["options"]) == 2
        assert all(o["option"] and o["tradeoffs"] for o in halt["options"])
        assert gates["options"][0] == halt["options"] and gates["asks"][0] == halt["question"]
        # The answer call that halted is logged against the question, with the held event.
        calls = ex.llm_calls()
        assert len(calls.query(f"node_id == '{node_id}' and role == 'answer' and outcome == 'ok'")) == 1
        assert len(ex.events().query(f"node_id == '{node_id}' and kind == 'held'")) == 1
        assert [h["node_id"] for h in ex.preview().held] == list(gates["node_id"])
        assert ex.preview().gap_rows[0]["kind"] == "held"

        chosen = ex.choose(node_id, 1)
        assert chosen["status"] == "open" and ex.status == "active"
        assert chosen["choice"] == {
            "kind": "ambiguity",
            "text": halt["options"][1]["option"],
            "asked": halt["question"],
        }
        for other in gates["node_id"][1:]:
            ex.choose(other, "the cheapest site near the motorway")
        assert ex.run(progress=False) == "all_complete"
        prompt = llm.prompts_for(question)[-1]
        assert f"The person chose: {halt['options'][1]['option']}" in prompt
        assert f"(You asked the person: {halt['question']})" in prompt
        answered = ex.store.get_node(ex.graph_id, node_id)
        assert answered["node"]["status"] in ("synthesized", "saturated")
        answer = next(c for c in answered["children"] if c["node_type"] == "answer")
        assert "following the person's word ([simulated] the broad reading)" in answer["text"]
        result = ex.harvest()
        assert result.status == "completed" and not result.held
        assert not [g for g in result.gap_rows if g["kind"] in ("held", "gated")]


def test_a_confusion_asks_a_clarifying_question_and_the_answer_reads_the_clarification() -> None:
    ex, llm = halting("confusion")
    with ex:
        assert ex.run(progress=False) == "paused"
        held = ex.held()
        assert held and {h["kind"] for h in held} == {"confusion"} and all(not h["options"] for h in held)
        assert all(h["asks"].endswith("?") for h in held), "a clarifying question"
        with pytest.raises(InvalidInputError, match="takes your answer as text"):
            ex.choose(held[0]["node_id"], 0)
        for h in held:
            ex.choose(h["node_id"], "  I mean a depot for parcel vans, inside the ring road.  ")
        assert ex.run(progress=False) == "all_complete"
        prompt = llm.prompts_for(held[0]["question"])[-1]
        assert "The person clarified: I mean a depot for parcel vans, inside the ring road." in prompt
        meta = ex.store.get_node(ex.graph_id, held[0]["node_id"])["node"]["metadata"]
        assert "halt" not in meta and meta["choice"]["kind"] == "confusion"


def test_a_blocked_question_is_a_gap_with_its_blocker_and_alternatives() -> None:
    ex, _ = halting("blocked")
    with ex:
        assert ex.run(progress=False) == "all_complete", "a blocked question is done: nothing waits"
        result = ex.harvest()
        assert result.status == "completed" and len(result.blocked) >= 3
        first = result.blocked[0]
        node = ex.store.get_node(ex.graph_id, first["node_id"])["node"]
        assert node["status"] == "saturated" and node["status_reason"] == "blocked"
        assert node["metadata"]["blocked"] == {
            "blocker": first["blocker"],
            "alternatives": first["alternatives"],
        }
        assert (
            first["blocker"].startswith("[simulated] Nothing available") and len(first["alternatives"]) == 2
        )
        gaps = [g for g in result.gap_rows if g["kind"] == "blocked"]
        assert [g["node_id"] for g in gaps] == [b["node_id"] for b in result.blocked]
        assert first["alternatives"][0] in gaps[0]["detail"]
        assert any(g.startswith("blocked: ") for g in result.gaps)
        assert first["node_id"] not in [s["node_id"] for s in result.saturated], "a gap, not settled"
        # The root rests on questions nobody could answer: weak, and it says why.
        assert result.weak and any(r.startswith("blocked: ") for r in result.weak[0]["reasons"])
        markdown, page = result.to_markdown(), result._repr_html_()
        assert "**Blocked**" in markdown and "class='fractal-blocked'" in page


def test_approve_never_releases_a_held_question_and_prune_cuts_it() -> None:
    ex, _ = halting("ambiguity")
    with ex:
        ex.run(progress=False)
        held = list(ex.gates["node_id"])
        before = state_of(ex, held[0])
        with pytest.raises(StateError, match="approving cannot release it: answer it with choose"):
            ex.approve([held[0]])
        assert state_of(ex, held[0]) == before
        with pytest.raises(StateError, match="approving cannot release it"):
            ex.approve(held)
        assert ex.approve()["count"] == 0, "approve all skips held questions"
        assert set(ex.gates["node_id"]) == set(held) and set(ex.gates["held"]) == {"ambiguity"}
        assert ex.prune(held[0])["status"] == "saturated"
        assert ex.store.get_node(ex.graph_id, held[0])["node"]["status_reason"] == "pruned"
        assert held[0] not in set(ex.gates["node_id"])


def test_a_checkpoint_gate_and_a_held_question_side_by_side() -> None:
    llm = SimulatedLLM(halt_on={"depot": "confusion"})
    with Exploration.create(SEED, intensity="explore", checkpoint="depth:2", llm=llm, clock=FAST) as ex:
        assert ex.run(progress=False) == "paused"
        gates = ex.gates
        assert set(gates["held"]) == {"confusion"} and gates["held"].notna().all()
        # a checkpoint gate takes no choice; a held one takes no approval
        ex.choose(gates["node_id"][0], "parcel vans")
        plain = ex.store.list_gates(ex.graph_id)
        assert plain["held"] == len(gates) - 1


@pytest.mark.parametrize(
    ("choice", "error", "message"),
    [
        (2, InvalidInputError, "out of range: the options are numbered 0 to 1"),
        (-1, InvalidInputError, "out of range"),
        ("", InvalidInputError, "non-empty text"),
        ("   ", InvalidInputError, "non-empty text"),
        (True, InvalidInputError, "choice must be an option's index"),
        (None, InvalidInputError, "choice must be"),
        (1.0, InvalidInputError, "choice must be"),
        ("x" * 100_001, InvalidInputError, "choice"),
    ],
)
def test_bad_choices_are_refused_and_change_nothing(choice: object, error: type, message: str) -> None:
    ex, _ = halting("ambiguity")
    with ex:
        ex.run(progress=False)
        node_id = ex.gates["node_id"][0]
        before = state_of(ex, node_id)
        with pytest.raises(error, match=message):
            ex.choose(node_id, choice)  # type: ignore[arg-type]
        assert state_of(ex, node_id) == before and ex.status == "paused"


def test_only_a_held_question_takes_a_choice() -> None:
    with Exploration.create(
        SEED, intensity="pulse", checkpoint="depth:1", llm=SimulatedLLM(), clock=FAST
    ) as ex:
        ex.run(progress=False)
        gate = ex.gates["node_id"][0]
        before = state_of(ex, gate)
        with pytest.raises(StateError, match=r"a checkpoint's gate: approve it \(approve_gate\), not held"):
            ex.choose(gate, "anything")
        assert state_of(ex, gate) == before
        root = ex.store.get_graph(ex.graph_id)["root_node_id"]
        with pytest.raises(StateError, match="not held by a question to the person"):
            ex.choose(root, "anything")
        with pytest.raises(Exception, match="not found"):
            ex.choose("n-missing", "anything")


def test_harvest_lists_a_question_never_answered_as_held() -> None:
    ex, _ = halting("confusion")
    with ex:
        ex.run(progress=False)
        held = ex.held()
        result = ex.harvest(finish=True)
        rows = [g for g in result.gap_rows if g["kind"] == "held"]
        assert [r["node_id"] for r in rows] == [h["node_id"] for h in held]
        assert "the person never answered" in rows[0]["detail"] and held[0]["asks"] in rows[0]["detail"]
        assert any(g.startswith("held for the person (confusion: ") for g in result.gaps)
        assert set(ex.gaps()["kind"]) >= {"held"}


def test_the_store_refuses_a_bad_halt_and_a_halt_without_the_claim() -> None:
    store = GraphStore()
    g = store.create_graph(SEED, "pulse", "autonomous")
    gid = g["graph_id"]
    answer = store.add_node(gid, g["root_node_id"], "answer", "Three sites are possible.")
    q = store.add_node(gid, answer["node_id"], "question", "Which site costs least?")["node_id"]
    store.claim_work(gid, "w1")
    ok = {"kind": "blocked", "question": "No cost data exist.", "alternatives": ["Ask the council."]}
    bad = [
        ({"kind": "doubt", "question": "Which?"}, "halt kind"),
        ({"kind": "ambiguity", "question": "Which?", "options": [{"option": "A", "tradeoffs": "t"}]}, "two"),
        (
            {"kind": "ambiguity", "question": "Which?", "options": [{"option": "A", "tradeoffs": "t"}] * 2},
            "two distinct",
        ),
        (
            {"kind": "ambiguity", "question": "Which?", "options": [{"option": "A"}, {"option": "B"}]},
            "tradeoffs",
        ),
        ({"kind": "blocked", "question": "No data."}, "at least one suggested alternative"),
        ({"kind": "blocked", "question": "", "alternatives": ["x"]}, "halt.question"),
        ({**ok, "answer": "x"}, "not the keys"),
        ("[1, 2]", "JSON object"),
    ]
    events = len(store.get_events(gid)["events"])
    for halt, message in bad:
        with pytest.raises(InvalidInputError, match=message):
            store.submit_halt(gid, q, halt, owner="w1")
    with pytest.raises(StateError, match="only the worker holding a question's claim"):
        store.submit_halt(gid, q, ok, owner="w2")
    assert store.get_node(gid, q)["node"]["status"] == "claimed"
    assert len(store.get_events(gid)["events"]) == events
    assert store.submit_halt(gid, q, ok, owner="w1")["status"] == "saturated"


def test_junk_in_a_halt_is_refused_like_any_other_field() -> None:
    prompt = [Message(role="user", content="Question to answer now (depth 1):\nWhich site costs least?")]
    context = ReplyContext.of(prompt, Answer)
    junk = [
        {"kind": "ambiguity", "question": "}, {", "options": []},
        {
            "kind": "ambiguity",
            "question": "Which of the two sites do you mean?",
            "options": [
                {"option": "}, {", "tradeoffs": "1 2 3"},
                {"option": "the north site", "tradeoffs": "cheaper land"},
            ],
        },
        {
            "kind": "blocked",
            "question": "No cost data exist anywhere.",
            "alternatives": ["http://x.example/y"],
        },
        {
            "kind": "ambiguity",
            "question": "Which site do you mean here?",
            "options": [{"option": "the north site", "tradeoffs": "cheaper land"}],
        },
    ]
    for halt in junk:
        with pytest.raises(ValidationError):
            LeafAnswer.model_validate(
                {"answer": "It depends on the site.", "confidence": 0.4, "halt": halt}, context=context
            )
    fine = LeafAnswer.model_validate(
        {
            "answer": "It depends on the site.",
            "confidence": 0.4,
            "halt": {
                "kind": "confusion",
                "question": "Do you mean rent or build costs?",
                "options": [{"option": "rent", "tradeoffs": "dropped for a confusion"}],
            },
        },
        context=context,
    )
    assert fine.halt is not None and fine.halt.options == [], "what a kind does not use is dropped"


def halting_responder() -> Any:
    """The fake model of tests/engine/test_openai_runs.py, halting on two of its seed questions.

    "causes": an ambiguity until the person's choice is in the prompt; "evidence": blocked; "winners":
    a halt with one option first (junk: refused, corrected), then a plain answer.
    """
    good = role_responder()

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        reply = good(body)
        prompt = first_user(body)
        if schema_name(body) not in ("Answer", "LeafAnswer"):
            return reply
        question = prompt.split("Question to answer now", 1)[1].splitlines()[1]
        if "causes" in question and "The person chose:" not in prompt:
            options = [
                {"option": "jobs", "tradeoffs": "well measured, misses housing"},
                {"option": "housing supply", "tradeoffs": "explains limits, data are patchy"},
            ]
            return {
                **reply,
                "halt": {"kind": "ambiguity", "question": "Causes of which growth?", "options": options},
            }
        if "evidence" in question:
            halt = {
                "kind": "blocked",
                "question": "No city-level series exist.",
                "alternatives": ["Use region data."],
            }
            return {**reply, "halt": halt}
        if (
            "winners" in question and len(body["messages"]) <= 2
        ):  # the first try; a correction answers plainly
            one = [{"option": "owners", "tradeoffs": "they gain from rents"}]
            return {
                **reply,
                "halt": {"kind": "ambiguity", "question": "Winners in which sense?", "options": one},
            }
        return reply

    return respond


def test_halts_through_the_real_openai_client() -> None:
    with FakeOpenAI(mode="llama_cpp", responder=halting_responder()) as server:
        with Exploration.create(OPENAI_SEED, intensity="pulse", llm=server.llm(), clock=FAST) as ex:
            report = ex.run(progress=False)
            assert report == "paused" and "1 question(s) held for your answer" in str(report.status_reason)
            (held,) = ex.held()
            assert "causes" in held["question"] and [o["option"] for o in held["options"]] == [
                "jobs",
                "housing supply",
            ]
            corrected = [r for r in server.requests if len(r["messages"]) > 2 and "winners" in first_user(r)]
            assert corrected and "at least two distinct options" in json.dumps(corrected[0]["messages"][2:])
            ex.choose(held["node_id"], "housing supply")
            assert ex.run(progress=False) == "all_complete"
            asked = f"below depth 2):\n{held['question']}\n"  # its answer prompts, not a sibling's
            prompts = [first_user(r) for r in server.requests if asked in first_user(r) + "\n"]
            assert len(prompts) == 2, "asked twice: the halt, then the answer with the choice"
            assert "The person chose: housing supply" in prompts[-1]
            result = ex.harvest()
            (blocked,) = result.blocked
            assert blocked["blocker"] == "No city-level series exist." and blocked["alternatives"] == [
                "Use region data."
            ]
            assert "blocked" in {g["kind"] for g in result.gap_rows}


def test_held_and_blocked_questions_are_escaped_in_the_result() -> None:
    llm = SimulatedLLM(halt_on={"<b>depot</b>": "ambiguity"})
    with Exploration.create(
        "Where should the <b>depot</b> go?", intensity="pulse", llm=llm, clock=FAST
    ) as ex:
        ex.run(progress=False)
        result = ex.preview()
        assert result.held and all("<b>depot</b>" in h["question"] for h in result.held)
        page, markdown = result._repr_html_(), result.to_markdown()
        assert (
            "class='fractal-held'" in page
            and "&lt;b&gt;depot&lt;/b&gt;" in page
            and "<b>depot</b>" not in page
        )
        assert (
            "ex.choose(node_id, choice)" in markdown and "0: " in markdown and "<b>depot</b>" not in markdown
        )


def test_a_question_held_again_keeps_the_earlier_choices_in_its_prompt() -> None:
    store = GraphStore()
    g = store.create_graph(SEED, "pulse", "autonomous")
    gid = g["graph_id"]
    answer = store.add_node(gid, g["root_node_id"], "answer", "Three sites are possible.")
    q = store.add_node(gid, answer["node_id"], "question", "Which site costs least?")["node_id"]
    first = {"kind": "confusion", "question": "Costs to build or to run?"}
    options = [{"option": "north", "tradeoffs": "cheap land"}, {"option": "south", "tradeoffs": "near roads"}]
    second = {"kind": "ambiguity", "question": "Which of two sites?", "options": options}
    for halt, choice in ((first, "to run"), (second, "SOUTH")):
        assert store.claim_work(gid, "w1")["node_id"] == q
        assert store.submit_halt(gid, q, halt, owner="w1")["status"] == "gated"
        store.choose(gid, q, choice)
    meta = store.get_node(gid, q)["node"]["metadata"]
    assert meta["choice"]["text"] == "south", "an option's text, matched case-blind, is that option"
    assert [c["text"] for c in meta["choices_before"]] == ["to run"]
    note = _choice_note(meta)
    assert note.index("The person clarified: to run") < note.index("The person chose: south")
    events = [e["kind"] for e in store.get_events(gid)["events"] if e["node_id"] == q]
    assert events[-6:] == ["claimed", "held", "chosen", "claimed", "held", "chosen"]


def test_a_halt_refused_at_write_time_is_logged_as_discarded() -> None:
    class PruningLLM(RecordingLLM):
        """Halts, and a person prunes the question while the model is answering it."""

        store: GraphStore | None = None
        graph_id = ""

        def complete(self, messages: list[Message], schema: type[BaseModel]) -> dict[str, Any]:
            reply = super().complete(messages, schema)
            if getattr(schema, "role", None) == "answer" and self.store is not None:
                for node in self.store.get_snapshot(self.graph_id)["nodes"]:
                    if node["status"] == "claimed":
                        self.store.prune_branch(self.graph_id, node["node_id"])
            return reply

    llm = PruningLLM(halt_on={"depot": "blocked"})
    with Exploration.create(SEED, intensity="pulse", llm=llm, clock=FAST) as ex:
        ex.step(1)  # the seed
        llm.store, llm.graph_id = ex.store, ex.graph_id
        (record,) = ex.step(1)
        assert record.error is not None and record.error.startswith("write refused") and record.halted is None
        node = ex.store.get_node(ex.graph_id, record.node_id)["node"]
        assert node["status_reason"] == "pruned" and "blocked" not in node["metadata"]
        calls = ex.llm_calls().query(f"node_id == '{record.node_id}'")
        assert list(calls["outcome"]) == ["discarded"], "paid for, not used, still in the ledger"


def test_a_halt_s_lists_are_checked_and_a_blocked_mark_without_a_halt_is_a_gap() -> None:
    store = GraphStore()
    g = store.create_graph(SEED, "pulse", "autonomous")
    gid = g["graph_id"]
    answer = store.add_node(gid, g["root_node_id"], "answer", "Three sites are possible.")
    q = store.add_node(gid, answer["node_id"], "question", "Which site costs least?")["node_id"]
    store.claim_work(gid, "w1")
    many = [f"Ask office {i}." for i in range(7)]
    for halt, message in (
        ({"kind": "blocked", "question": "No data.", "alternatives": "Ask."}, "are lists"),
        ({"kind": "blocked", "question": "No data.", "alternatives": many}, "at most 6"),
    ):
        with pytest.raises(InvalidInputError, match=message):
            store.submit_halt(gid, q, halt, owner="w1")
    store.mark_saturated(gid, q, "blocked")  # an agent's own mark, without a halt: still a gap
    (row,) = [r for r in gap_rows(store.get_snapshot(gid)["nodes"]) if r["node_id"] == q]
    assert (row["kind"], row["detail"]) == ("blocked", "blocked")
