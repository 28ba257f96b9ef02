"""Facts stay facts only where a child states them; unknowns are gaps; the weak mark set and cleared.

Runs go through the real openai client against a local OpenAI-compatible server
(tests/llm/fake_openai.py) or the simulated model; the weak mark's test drives the
engine's own primitive and cascade over a store built through its calls.

Covers: engine/gaps.py, engine/grounding.py, engine/primitive.py, engine/run_state.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.engine.gaps import gap_rows
from fractal_nb.engine.grounding import same_fact
from fractal_nb.engine.phases import preview
from fractal_nb.engine.primitive import cascade, process
from fractal_nb.engine.run_state import RunState
from fractal_nb.errors import StateError
from fractal_nb.text import normalize
from fractal_nb.vocabulary import ClaimKind
from tests.conftest import Backend
from tests.engine.test_openai_runs import FAST, SEED, first_user, role_responder, schema_name
from tests.llm.fake_openai import FakeOpenAI

pytestmark = pytest.mark.both_backends

ASSUMED = "Land stays cheap at the edge of town"


def promoting_responder() -> Any:
    """test_openai_runs' fake model; its answers state claims, its syntheses call every claim a fact."""
    good = role_responder()

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        reply = good(body)
        name, prompt = schema_name(body), first_user(body)
        if name in ("Answer", "LeafAnswer"):
            point = reply["answer"].rsplit("(point ", 1)[-1].split(",")[0]
            reply["claims"] = [
                {
                    "kind": "fact",
                    "text": f"Employers added jobs in area {point}",
                    "support": "payroll records",
                },
                {"kind": "assumption", "text": ASSUMED},
                {"kind": "unknown", "text": f"How fast area {point} keeps growing"},
            ]
        if name == "Synthesis":  # every claim shown, each promoted to a fact (and one of its own)
            shown = [
                line.split("] ", 1)[1].split(" (support:")[0]
                for line in prompt.splitlines()
                if "    [" in line
            ]
            reply["claims"] = [
                {"kind": "fact", "text": text, "support": "the sub-findings"} for text in dict.fromkeys(shown)
            ][:7] + [
                {
                    "kind": "fact",
                    "text": "Growth will double by the next decade",
                    "support": "the model's hunch",
                }
            ]
        return reply

    return respond


def test_a_synthesis_never_promotes_an_assumption_to_a_fact(backend: Backend) -> None:
    with FakeOpenAI("ok", responder=promoting_responder()) as server:
        llm = server.llm(timeout=5.0, max_retries=1)
        with Exploration.create(SEED, intensity="pulse", llm=llm, clock=FAST, path=backend.target) as ex:
            assert ex.run(progress=False) == "all_complete"
            nodes = ex.store.get_snapshot(ex.graph_id)["nodes"]
    answers = [n for n in nodes if n["node_type"] == "answer" and n["metadata"].get("claims")]
    assert answers, "answers keep their claims in their metadata"
    stated_facts = {
        normalize(c["text"]) for n in answers for c in n["metadata"]["claims"] if c["kind"] == ClaimKind.FACT
    }
    synthesized = [n for n in nodes if n["node_type"] == "question" and n["metadata"].get("claims")]
    carried = [c for n in synthesized for c in n["metadata"]["claims"]]
    assert carried, "syntheses carry claims up"
    for claim in carried:
        if claim["kind"] == ClaimKind.FACT:  # a fact of a synthesis is a fact some answer stated
            assert any(same_fact(claim["text"], f) for f in stated_facts), claim
            assert claim["support"] == "payroll records" and claim["source"], claim
    kinds = {normalize(c["text"]): c["kind"] for c in carried}
    assert kinds[normalize(ASSUMED)] == ClaimKind.ASSUMPTION, "the model called it a fact; code did not"
    assert kinds[normalize("Growth will double by the next decade")] == ClaimKind.ASSUMPTION
    assert any(c["kind"] == ClaimKind.FACT for c in carried), "real facts stay facts"


def test_unknowns_are_gaps_and_nothing_else_new_is(backend: Backend) -> None:
    with Exploration.create(
        SEED, intensity="explore", llm=SimulatedLLM(seed=4), clock=FAST, path=backend.target
    ) as ex:
        assert ex.run(1, progress=False) == "budget_exhausted"  # questions cut by a budget: gaps too
        nodes = ex.store.get_snapshot(ex.graph_id)["nodes"]
        rows = gap_rows(nodes)
        without_claims = [
            {**n, "metadata": {k: v for k, v in n["metadata"].items() if k != "claims"}} for n in nodes
        ]
        before = gap_rows(without_claims)  # the rule before claims: questions only
        assert before and all(r["kind"] != "unknown" for r in before)
        assert rows[: len(before)] == before, "every question gap stays as it was"
        unknowns = rows[len(before) :]
        assert {r["kind"] for r in unknowns} == {"unknown"}
        named = {
            normalize(c["text"])
            for n in nodes
            for c in n["metadata"].get("claims") or []
            if c["kind"] == ClaimKind.UNKNOWN
        }
        assert sorted(normalize(r["detail"]) for r in unknowns) == sorted(named), "each unknown once"
        assert set(ex.gaps()["kind"]) == {"unexplored", "unknown"}
        assert any(g.startswith("unknown: ") for g in ex.preview().gaps)


def test_a_failed_child_makes_the_chain_weak_and_recovering_it_re_grounds_it(backend: Backend) -> None:
    store = backend.open()
    g = store.create_graph(SEED, "explore", "autonomous")
    gid, root = g["graph_id"], g["root_node_id"]
    a, b = (
        q["node_id"]
        for q in store.add_answer(
            gid, root, "Jobs and land decide it.", sub_questions=["Where do jobs go?", "Where is land cheap?"]
        )["sub_questions"]
    )
    [a1] = [
        q["node_id"]
        for q in store.add_answer(gid, a, "To hubs.", sub_questions=["Which hubs win?"])["sub_questions"]
    ]
    store.add_answer(gid, b, "At the edge of town.")
    store.synthesize_node(gid, b, "Land is cheap at the edge of town.")  # a sound leaf
    for _ in range(3):  # the model fails on a1 every time: error, then a harvest saturates it as failed
        assert store.claim_work(gid, "w-1", holder=None)["node_id"] == a1
        store.release_claim(gid, a1, "w-1", "LLMOutputError: junk")
    store.mark_saturated(gid, a1, "error")
    llm = SimulatedLLM(seed=2, branching=0, link_rate=0)
    with pytest.raises(StateError, match="is a worker's store: seeding, settling and harvesting"):
        preview(RunState.for_graph(store, store.get_graph(gid), llm))  # no whole store: a worker's run
    run = RunState.for_graph(store, store.get_graph(gid), llm, whole=store)
    assert set(cascade(run, "w-1")) == {a, root}

    def weak(node_id: str) -> list[dict[str, str]]:
        return list(store.get_node(gid, node_id)["node"]["metadata"].get("weak") or [])

    assert weak(a) == [{"node_id": a1, "reason": "failed"}]
    assert weak(root) == [{"node_id": a, "reason": "weak"}], "the mark climbs the chain"
    assert weak(b) == []
    result = preview(run)  # a look, read-only: the result flags them
    assert result.weak_count == 2 and {w["node_id"] for w in result.weak} == {a, root}
    assert result.synthesis_chain[0].weak == (f"weak: {a}",)
    assert any("2 synthesis(es) are weak" in r and a in r and root in r for r in result.degraded_reasons)
    feed = {n["node_id"]: n for n in store.get_changes(gid, since=0)["nodes"]}
    assert feed[root]["weak"] == [{"node_id": a, "reason": "weak"}]

    assert a1 in store.recover_stuck(gid, include_errors=True)["recovered"]
    assert store.get_node(gid, a1)["node"]["status"] == "open"
    assert store.get_node(gid, a)["node"]["status"] == "answered", "the synthesis over it reopened"
    assert weak(a) and weak(root), "weak until written again on sound children"
    claim = store.claim_work(gid, "w-2", holder=None)
    assert claim["node_id"] == a1
    step = process(run, claim, "w-2")  # answered at last; the cascade writes the syntheses again
    assert step.ok and set(step.synthesized) >= {a1, a, root}
    assert weak(a) == [] and weak(root) == [], "re-grounded: the mark is cleared"
    result = preview(run)
    assert result.weak_count == 0 and not any("weak" in r for r in result.degraded_reasons)
    assert not any(n["weak"] for n in store.get_changes(gid, since=0)["nodes"])
    store.close()
