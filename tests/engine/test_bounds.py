"""The engine keeps a node's children bounded whatever the model proposes (issue 37).

A model proposing 10,000 sub-questions made 10,001 children under one node: the
answer's sub-questions are cut to ``MAX_SUB_QUESTIONS`` (the schema says so to the
model) and the cut is recorded on the answer. A thinkon level calls at most
``MAX_CHILDREN`` sub-goals: the next call returns the level's state.
"""

from __future__ import annotations

import hashlib
from typing import Any

from fractal_nb import Exploration, ScriptedLLM
from fractal_nb.vocabulary import MAX_CHILDREN, MAX_SUB_QUESTIONS
from tests.engine.chain_script import call, ret, todo
from tests.engine.test_openai_runs import SEED, first_user, role_responder, schema_name
from tests.engine.test_runs import FAST
from tests.llm.fake_openai import FakeOpenAI

PROPOSED = 10_000


def flooding_responder() -> Any:
    """The sensible fake model of test_openai_runs, but its first branching answer asks 10,000 questions."""
    sensible = role_responder()
    flooded: list[str] = []

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        reply: dict[str, Any] = sensible(body)
        if schema_name(body) == "Answer" and not flooded:
            flooded.append(first_user(body))
            reply["sub_questions"] = [
                {
                    "text": f"Which of the {i:05d} forces of growth weighs most here?",
                    "proxy_signal": "qualifiers",
                }
                for i in range(PROPOSED)
            ]
            reply["saturation"] = None
        return reply

    return respond


def test_a_model_proposing_ten_thousand_sub_questions_is_cut_to_the_bound_and_the_cut_recorded() -> None:
    with (
        FakeOpenAI("ok", responder=flooding_responder()) as server,
        Exploration.create(SEED, intensity="explore", llm=server.llm(timeout=30.0), clock=FAST) as ex,
    ):
        seeded, worked = ex.step(2)  # the seed phase, then the first question: the flooded answer
        assert seeded.worker == "seed" and worked.ok
        assert len(worked.sub_questions) == MAX_SUB_QUESTIONS
        nodes = ex.store.get_snapshot(ex.graph_id)["nodes"]
        (answer,) = [n for n in nodes if n["node_type"] == "answer" and n["parent_id"] == worked.node_id]
        assert answer["metadata"]["sub_questions_cut"] == {
            "proposed": PROPOSED,
            "kept": MAX_SUB_QUESTIONS,
            "reason": f"an answer asks at most {MAX_SUB_QUESTIONS} sub-questions: the model proposed "
            f"10,000 new ones, the first {MAX_SUB_QUESTIONS} were kept",
        }
        below = [n["text"] for n in nodes if n["parent_id"] == answer["node_id"]]
        assert below == [
            f"Which of the {i:05d} forces of growth weighs most here?" for i in range(MAX_SUB_QUESTIONS)
        ]
        # The model was told: the answer schema bounds the list.
        asked = [r for r in server.requests if schema_name(r) == "Answer"]
        schema = asked[0]["response_format"]["json_schema"]["schema"]
        assert schema["properties"]["sub_questions"]["maxItems"] == MAX_SUB_QUESTIONS


def test_a_thinkon_level_calls_at_most_max_children_sub_goals() -> None:
    goal = "List the facts a brief on tides needs."
    # Sub-goals no two alike (a reworded one is the same sub-goal: its repeats end the level as a loop).
    subs = [
        f"Check tide record {hashlib.sha256(bytes([i])).hexdigest()[:16]}." for i in range(MAX_CHILDREN + 1)
    ]
    llm = ScriptedLLM(
        think={goal: [todo("t1. State each fact in turn.")]}
        | {sub: [ret(f"Tide fact {i} is stated here.")] for i, sub in enumerate(subs)},
        evaluate={goal: [call(sub) for sub in subs] + [ret("All the facts, stated.")]},
    )
    with Exploration.create(goal, intensity="explore", llm=llm, strategy="thinkon", clock=FAST) as ex:
        ex.run(progress=False)
        root = ex.store.get_graph(ex.graph_id)["root_node_id"]
        level = ex.store.thinkon_level(ex.graph_id, root)
        assert len(level["done"]) == MAX_CHILDREN
        (node,) = [n for n in ex.store.get_snapshot(ex.graph_id)["nodes"] if n["node_id"] == root]
        assert (
            f"width limit: {MAX_CHILDREN} sub-goals called, at most {MAX_CHILDREN}"
            in node["metadata"]["synthesis"]
        )
        assert len(ex.events().query("kind == 'thinkon_called'")) == MAX_CHILDREN
