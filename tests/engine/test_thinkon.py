"""The thinkon strategy (seed 002; docs/architecture/engine.md, "Thinkon"): plan, call, check, return.

Each rule on a chain played by ``ScriptedLLM`` (replies by goal) or the simulator:
the strong invariant read off the event log, ``todo`` written only by Think, redo
and repair, loop detection, invalid output ending one branch, the depth limit, a
spent budget returning the partial result marked degraded, step by step, and the
seed's own example (an essay of 800-1200 words in three sections, one redone).

Covers: engine/run_state.py, llm/simulated_chain.py, store/chain.py, views/inspector_html.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from fractal_nb import Exploration, GraphStore, ScriptedLLM, SimulatedLLM
from fractal_nb.engine.strategies.thinkon import repeated
from fractal_nb.errors import InvalidInputError, LLMUnavailableError, StateError
from tests.engine.chain_script import JUNK, assert_chain_invariant, call, chain_events, ret, todo
from tests.engine.test_run_report import TickingClock
from tests.engine.test_runs import FAST

ESSAY = json.loads((Path(__file__).parents[2] / "notebooks" / "data" / "ai_art_essay.json").read_text())


def parents(ex: Exploration) -> dict[str, str | None]:
    """Each question's parent question (a level's parent level)."""
    nodes = {n["node_id"]: n for n in ex.store.get_snapshot(ex.graph_id)["nodes"]}

    def above(node_id: str | None) -> str | None:  # a sub-goal hangs under its parent's plan (an answer)
        node = nodes.get(node_id or "")
        return (
            None if node is None else node_id if node["node_type"] == "question" else above(node["parent_id"])
        )

    return {i: above(n["parent_id"]) for i, n in nodes.items() if n["node_type"] == "question"}


def events(ex: Exploration) -> list[dict[str, Any]]:
    return ex.store.get_events(ex.graph_id)["events"]


def chain(goal: str, llm: Any, intensity: str = "explore", **kw: Any) -> Exploration:
    return Exploration.create(goal, intensity=intensity, llm=llm, strategy="thinkon", clock=FAST, **kw)


def root_done(ex: Exploration) -> list[dict[str, str]]:
    return ex.store.thinkon_level(ex.graph_id, ex.store.get_graph(ex.graph_id)["root_node_id"])["done"]


def essay_llm() -> ScriptedLLM:
    s1, s2, s3 = ESSAY["sections"]
    essay = "\n\n".join([ESSAY["opening"], s1["text"], s2["text"], s3["text"], ESSAY["closing"]])
    return ScriptedLLM(
        think={
            ESSAY["goal"]: [todo(ESSAY["plan"])],
            s1["goal"]: [ret(s1["text"])],
            s2["goal"]: [JUNK, ret(s2["text"])],  # the first try's reply is no Think at all
            s3["goal"]: [ret(s3["text"])],
        },
        evaluate={
            ESSAY["goal"]: [
                call(s1["goal"]),
                call(s2["goal"]),
                call(s2["goal"]),
                call(s3["goal"]),
                ret(essay),
            ]
        },
    )


def test_the_seeds_essay_plans_three_sections_redoes_the_failed_one_and_returns_the_essay() -> None:
    llm = essay_llm()
    with chain(ESSAY["goal"], llm) as ex:
        ex.run(progress=False)
        result = ex.harvest()
        done = root_done(ex)
        s1, s2, s3 = (s["goal"] for s in ESSAY["sections"])
        assert [(d["goal"], d["outcome"]) for d in done] == [
            (s1, "returned"),
            (s2, "failed"),  # kept in done: Eval saw it and called it again
            (s2, "returned"),
            (s3, "returned"),
        ]
        assert "[FAILED]" in llm.asked("eval", ESSAY["goal"])[2], "the Eval after the failure saw it"
        assert "[FAILED]" not in llm.asked("eval", ESSAY["goal"])[1]
        words = len(result.summary.split())
        assert 800 <= words <= 1200, words
        assert result.summary.startswith(ESSAY["opening"]) and ESSAY["sections"][1]["text"] in result.summary
        assert [f["finding"] for f in result.findings] == [s["text"] for s in ESSAY["sections"]]
        assert all(f["node_id"] for f in result.findings), "each finding names its level"
        failed = [g for g in result.gaps if "MAYBE" in g or "Think" in g]
        assert failed, "the failed first try is a gap, named"
        assert result.strategy == "thinkon"
        assert_chain_invariant(events(ex), parents(ex))


def test_todo_is_written_by_think_only() -> None:
    llm = essay_llm()
    with chain(ESSAY["goal"], llm) as ex:
        ex.run(progress=False)
        planned = [e for e in chain_events(events(ex)) if e["kind"] == "thinkon_planned"]
        assert [e["payload"]["todo"] for e in planned] == [ESSAY["plan"]], "one plan, Think's, at the root"
        root = ex.store.get_graph(ex.graph_id)["root_node_id"]
        assert ex.store.thinkon_level(ex.graph_id, root)["todo"] == ESSAY["plan"], "no Eval rewrote it"
    store = GraphStore()
    g = store.create_graph("Plan a trip.", "explore", "autonomous", metadata={"strategy": "thinkon"})
    gid, root = g["graph_id"], g["root_node_id"]
    assert store.claim_work(gid, "w")["node_id"] == root
    with pytest.raises(StateError, match="waits for its think"):
        store.thinkon_call(gid, root, "Book the train.", worker_id="w")
    store.thinkon_plan(gid, root, "t1. Book the train.", worker_id="w")
    store.claim_work(gid, "w")
    before = store.get_events(gid)["last_event_id"]
    with pytest.raises(StateError, match="a plan is written only by Think"):
        store.thinkon_plan(gid, root, "t1. Something else entirely.", worker_id="w")
    assert store.get_events(gid)["last_event_id"] == before, "a refused write changes nothing"
    assert store.thinkon_level(gid, root)["todo"] == "t1. Book the train."
    with pytest.raises(StateError, match="claim it first"):
        store.thinkon_call(gid, root, "Book the train.", worker_id="someone-else")
    with pytest.raises(InvalidInputError):
        store.thinkon_return(gid, root, "Done.", worker_id="w", outcome="maybe")


def test_redo_and_repair_are_calls_and_every_return_stays_in_done() -> None:
    goal = "Publish the quarterly figures on the website today."
    llm = ScriptedLLM(
        think={
            goal: [todo("t1. Export the figures from the ledger.\nt2. Upload the export to the website.")],
            "Export the figures from the ledger.": [ret("The export is ready as a spreadsheet file.")],
            "Upload the export to the website.": [
                ret("Upload failed: the website refuses files without a login token."),
                ret("The export is online at the figures page of the website."),
            ],
            "Get a login token for the website.": [ret("A login token was issued for the website.")],
        },
        evaluate={
            goal: [
                call("Export the figures from the ledger."),
                call("Upload the export to the website."),
                call("Get a login token for the website."),  # a repair first
                call("Upload the export to the website."),  # then the redo
                ret("The quarterly figures are online after one repaired upload."),
            ]
        },
    )
    with chain(goal, llm) as ex:
        ex.run(progress=False)
        done = root_done(ex)
        assert [d["goal"] for d in done] == [
            "Export the figures from the ledger.",
            "Upload the export to the website.",
            "Get a login token for the website.",
            "Upload the export to the website.",
        ]
        assert done[1]["result"].startswith("Upload failed"), "a failure its result says stays in done"
        assert "Upload failed" in llm.asked("eval", goal)[2]
        assert ex.harvest().summary == "The quarterly figures are online after one repaired upload."
        assert_chain_invariant(events(ex), parents(ex))


def test_a_sub_goal_called_again_without_progress_is_a_loop_and_stops() -> None:
    goal = "Count the words of the draft exactly."
    llm = ScriptedLLM(
        think={goal: [todo("t1. Count the words.")], "Count the words.": [ret("About nine hundred words.")]},
        evaluate={goal: [call("Count the words.")]},  # it never stops calling it
    )
    with chain(goal, llm) as ex:
        ex.run(progress=False)
        done = root_done(ex)
        assert [d["goal"] for d in done] == ["Count the words."] * 2, "the third call is the loop"
        result = ex.harvest()
        assert result.degraded
        root = ex.store.get_node(ex.graph_id, ex.store.get_graph(ex.graph_id)["root_node_id"])["node"]
        assert root["status"] == "saturated" and root["metadata"]["budget_reason"].startswith("loop:")
        assert "About nine hundred words." in root["metadata"]["synthesis"], "its state: what returned"
        assert any("loop:" in g for g in result.gaps)


def test_a_reworded_sub_goal_is_the_same_sub_goal_and_its_repeats_are_bounded() -> None:
    """Loop detection compares normalized texts by similarity: a redo worded otherwise counts."""
    goal = "Report the length of the draft."
    words = [
        "Count the words of the draft.",
        "Count the words in the draft",
        "Count all the words of the draft.",
    ]
    other = "Count the sections of the draft."  # near in wording, another sub-goal
    llm = ScriptedLLM(
        think={
            goal: [todo("t1. Count the words.\nt2. Count the sections.")],
            **{w: [ret(f"About {900 + i} words.")] for i, w in enumerate(words)},
            other: [ret("Three sections.")],
        },
        evaluate={goal: [call(words[0]), call(other), call(words[1]), call(words[2]), call(words[0])]},
    )
    with chain(goal, llm) as ex:
        ex.run(progress=False)
        assert [d["goal"] for d in root_done(ex)] == [words[0], other, words[1], words[2]]
        root = ex.store.get_node(ex.graph_id, ex.store.get_graph(ex.graph_id)["root_node_id"])["node"]
        assert root["metadata"]["budget_reason"] == (f"loop: {words[0]!r} called 4 times (at most 3)"), (
            "three rewordings and the first again: the fourth call; the sections not counted"
        )
        assert_chain_invariant(events(ex), parents(ex))
        assert ex.harvest().degraded


def test_repeats_are_bounded_and_a_changing_return_is_progress() -> None:
    def entry(goal: str, result: str) -> dict[str, str]:
        return {"node_id": "n-1", "goal": goal, "result": result, "outcome": "returned"}

    progress = [entry("Improve the intro.", f"Better, draft {i}.") for i in range(2)]
    assert repeated(progress, "Improve the intro.") is None, "two different returns: progress"
    assert repeated([*progress, entry("Improve the intro.", "Better, draft 3.")], "improve the intro") == (
        "loop: 'improve the intro' called 4 times (at most 3)"
    )
    assert repeated(progress, "Write the conclusion.") is None


def test_invalid_output_ends_that_branch_only_and_the_chain_goes_on() -> None:
    goal = "Compare three bicycles for a daily commute."
    llm = ScriptedLLM(
        think={
            goal: [todo("t1. Judge the city bike.\nt2. Judge the road bike.\nt3. Judge the cargo bike.")],
            "Judge the city bike.": [ret("The city bike is comfortable and slow.")],
            "Judge the road bike.": [JUNK],
            "Judge the cargo bike.": [ret("The cargo bike carries shopping and children.")],
        },
        evaluate={
            goal: [
                call("Judge the city bike."),
                call("Judge the road bike."),
                call("Judge the cargo bike."),
                ret("The city bike suits most commutes; the road bike was not judged."),
            ]
        },
    )
    with chain(goal, llm) as ex:
        ex.run(progress=False)
        done = root_done(ex)
        assert [d["outcome"] for d in done] == ["returned", "failed", "returned"]
        road = next(n for n in ex.nodes().itertuples() if n.text == "Judge the road bike.")
        node = ex.store.get_node(ex.graph_id, road.node_id)["node"]
        assert (node["status"], node["status_reason"]) == ("saturated", "error")
        result = ex.harvest()
        assert result.summary.startswith("The city bike suits")
        assert [g for g in result.gaps if "Judge the road bike." in g], "the failed branch is a gap"
        assert_chain_invariant(events(ex), parents(ex))


def test_the_depth_limit_returns_the_levels_state() -> None:
    goal = "Plan a garden for a small yard."
    llm = ScriptedLLM(
        think={
            goal: [todo("t1. Choose the plants.")],
            "Choose the plants.": [todo("t1. Choose the trees.\nt2. Choose the flowers.")],
        },
        evaluate={
            goal: [call("Choose the plants."), ret("A garden of plants still to be chosen.")],
            "Choose the plants.": [call("Choose the trees.")],
        },
    )
    with chain(goal, llm, intensity="pulse") as ex:  # max_depth 2: levels at depths 0 and 1
        ex.run(progress=False)
        (entry,) = root_done(ex)
        assert entry["outcome"] == "cut" and "depth limit" in entry["result"]
        assert entry["result"].startswith("Partial result (depth limit")
        assert ex.harvest().summary == "A garden of plants still to be chosen."
        assert_chain_invariant(events(ex), parents(ex))


def test_a_spent_budget_returns_the_partial_result_marked_degraded() -> None:
    goal = "Survey the options for heating an old house."
    items = ["Price a heat pump.", "Price a gas boiler.", "Price wood stoves."]
    llm = ScriptedLLM(
        think={
            goal: [todo("\n".join(f"t{i}. {item}" for i, item in enumerate(items, 1)))],
            **{item: [ret(f"{item[6:-1].capitalize()} costs a lot to install.")] for item in items},
        },
        evaluate={goal: [*(call(i) for i in items), ret("All three were priced.")]},
    )
    with chain(goal, llm, max_tokens=2600) as ex:
        status = ex.run(progress=False)
        assert status == "budget_exhausted"
        calls = ex.sql("SELECT prompt_tokens + completion_tokens AS tokens FROM llm_calls ORDER BY call_id")
        before_last = int(calls.tokens.sum() - calls.tokens.iloc[-1])
        assert before_last < 2600 <= int(calls.tokens.sum()), "checked before each call: at most one past it"
        result = ex.harvest()
        assert result.degraded
        root = ex.store.get_node(ex.graph_id, ex.store.get_graph(ex.graph_id)["root_node_id"])["node"]
        assert root["status"] == "saturated" and root["status_reason"] == "budget_exhausted"
        assert result.summary.startswith("Partial result (")
        assert "costs a lot to install" in result.summary, "what returned before the budget ran out"
        assert any("budget_exhausted" in g for g in result.gaps)
        assert_chain_invariant(events(ex), parents(ex))


def test_step_advances_one_think_or_one_eval() -> None:
    llm = essay_llm()
    with chain(ESSAY["goal"], llm) as ex:
        kinds: list[str | None] = []
        while True:
            records = ex.step()
            if not records:
                break
            assert len(records) == 1
            kinds.append(records[0].thinkon)
        assert kinds == [
            "plan",  # the root's Think
            "call",  # Eval: section 1
            "return",  # section 1's Think
            "call",
            "failed",  # section 2's Think gave junk
            "call",  # the redo
            "return",
            "call",
            "return",
            "return",  # the root's Eval returns the essay
        ]
        assert len([p for p in llm.prompts if p[0] in ("think", "eval")]) == len(kinds)


def test_the_simulator_plays_a_chain_the_same_way_twice() -> None:
    shapes = []
    for _ in range(2):
        with chain("Should a mid-sized city build a tram line?", SimulatedLLM(seed=2)) as ex:
            ex.run(progress=False)
            result = ex.harvest()
            assert not result.degraded and result.findings
            shapes.append([(d["goal"], d["result"]) for d in root_done(ex)])
            assert_chain_invariant(events(ex), parents(ex))
    assert shapes[0] == shapes[1] and len(shapes[0]) >= 2


KILLED_CHILD = textwrap.dedent("""
    import json, sys, threading
    from fractal_nb import Exploration, SimulatedLLM

    class Holding(SimulatedLLM):
        # The third Eval holds its claim and says so: the kill lands mid-chain, a level claimed.
        evals = 0

        def complete(self, messages, schema):
            if getattr(schema, "role", "") == "eval":
                Holding.evals += 1
                if Holding.evals == 3:
                    print(json.dumps({"holding": True}), flush=True)
                    threading.Event().wait()
            return super().complete(messages, schema)

    ex = Exploration.create(sys.argv[2], intensity="explore", llm=Holding(seed=2), strategy="thinkon",
                            path=sys.argv[1])
    print(json.dumps({"graph_id": ex.graph_id}), flush=True)
    ex.run(progress=False)
""")


def test_a_chain_killed_mid_step_resumes_from_the_file_and_finishes(tmp_path: Path) -> None:
    path, goal = tmp_path / "chain.duckdb", "Should a mid-sized city build a tram line?"
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_CHILD, str(path), goal],
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.getcwd(),
    )
    try:
        assert child.stdout is not None
        graph_id = json.loads(child.stdout.readline())["graph_id"]
        assert json.loads(child.stdout.readline()) == {"holding": True}
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)
        if child.stdout is not None:
            child.stdout.close()
    with GraphStore(path, read_only=True) as store:
        committed = {n["node_id"] for n in store.get_snapshot(graph_id)["nodes"]}
        (held,) = [n for n in store.get_snapshot(graph_id)["nodes"] if n["status"] == "claimed"]
        assert store.thinkon_level(graph_id, held["node_id"])["phase"] == "eval"
        done_before = len(store.thinkon_level(graph_id, held["node_id"])["done"])
    with Exploration.open(path, llm=SimulatedLLM(seed=2), clock=FAST) as ex:
        assert ex.run(progress=False) == "all_complete"
        result = ex.harvest()
        assert not result.degraded and result.strategy == "thinkon"
        assert committed <= set(ex.nodes().node_id), "every committed node kept"
        assert len(ex.store.thinkon_level(graph_id, held["node_id"])["done"]) >= done_before
        assert_chain_invariant(events(ex), parents(ex))
    with chain(goal, SimulatedLLM(seed=2)) as whole:  # the same chain run in one go
        whole.run(progress=False)
        assert [d["goal"] for d in root_done(whole)] == [d["goal"] for d in ex_done(path, graph_id)], (
            "the resumed chain made the same calls"
        )


def ex_done(path: Path, graph_id: str) -> list[dict[str, str]]:
    with GraphStore(path, read_only=True) as store:
        return store.thinkon_level(graph_id, store.get_graph(graph_id)["root_node_id"])["done"]


def test_the_inspector_shows_a_levels_plan_and_done_escaped() -> None:
    from fractal_nb.views.inspector_html import inspector_html

    goal = "Review the <img src=x onerror=alert(1)> gallery page."
    llm = ScriptedLLM(
        think={
            goal: [todo("t1. Check the <script>alert(1)</script> captions.")],
            "Check the <script>alert(1)</script> captions.": [JUNK],
        },
        evaluate={
            goal: [call("Check the <script>alert(1)</script> captions."), ret("The page reads well enough.")]
        },
    )
    with chain(goal, llm) as ex:
        ex.run(progress=False)
        page = inspector_html(ex.inspect(ex.store.get_graph(ex.graph_id)["root_node_id"]))
        assert "<script>" not in page and "<img" not in page
        assert "Thinkon level" in page and "next: returned" in page
        assert "t1. Check the &lt;script&gt;alert(1)&lt;/script&gt; captions." in page
        assert "Done</b> (1)" in page and "failed</b>" in page
        assert "<b>Result:</b> The page reads well enough." in page


def test_a_paused_chain_resumes_where_it_stopped() -> None:
    llm = essay_llm()
    with chain(ESSAY["goal"], llm) as ex:
        stops: list[str | None] = []

        def pause_at_the_first_call(record: Any) -> None:
            if record.thinkon == "call" and not stops:
                stops.append(record.node_id)
                ex.pause()

        assert ex.run(progress=False, on_step=pause_at_the_first_call) == "paused"
        (level,) = [lv for lv in ex.store.thinkon_chain(ex.graph_id) if lv["depth"] == 1]
        assert level["phase"] == "think" and level["status"] == "open", "the called sub-goal waits"
        assert ex.run(progress=False) == "all_complete"
        assert [d["outcome"] for d in root_done(ex)] == ["returned", "failed", "returned", "returned"]
        assert len(llm.asked("think", ESSAY["sections"][0]["goal"])) == 1, "nothing was done twice"
        assert_chain_invariant(events(ex), parents(ex))


class StallingEval(SimulatedLLM):
    """The simulator, but the root's second Eval stalls until released."""

    def __init__(self) -> None:
        super().__init__(seed=2)
        self.release = threading.Event()
        self.evals = 0

    def complete(self, messages: Any, schema: Any) -> dict[str, Any]:
        if getattr(schema, "role", "") == "eval":
            self.evals += 1
            if self.evals == 2:
                self.release.wait(60)
        return super().complete(messages, schema)


def test_a_steps_time_limit_returns_the_levels_state_and_the_run_stops() -> None:
    llm = StallingEval()
    try:
        with chain("Should a mid-sized city build a tram line?", llm) as ex:
            # Up to the stalled step without a time limit: a loaded machine's ordinary step may
            # take longer than 50 ms, so only the stalled one runs under it (issue 37).
            def pause_once_a_level_returned(record: Any) -> None:
                if record.thinkon == "return":
                    ex.pause()

            assert ex.run(max_workers=1, progress=False, on_step=pause_once_a_level_returned) == "paused"
            assert llm.evals == 1 and len(root_done(ex)) == 1, "the next step is the root's stalled Eval"
            report = ex.run(max_workers=1, progress=False, node_timeout_s=0.05)
            assert report == "all_complete", "the chain ended: its root returned its state"
            root = ex.store.get_node(ex.graph_id, ex.store.get_graph(ex.graph_id)["root_node_id"])["node"]
            assert root["status"] == "saturated" and "time limit" in root["metadata"]["budget_reason"]
            assert root["metadata"]["synthesis"].startswith("Partial result (")
            assert len(root_done(ex)) == 1, "what returned before the stall is its state"
            result = ex.harvest()
            assert result.degraded and any("time limit" in g for g in result.gaps)
    finally:
        llm.release.set()


def test_a_model_out_of_reach_gives_the_level_back_and_the_chain_goes_on_later() -> None:
    class Down(SimulatedLLM):
        up = False

        def complete(self, messages: Any, schema: Any) -> dict[str, Any]:
            if not Down.up:
                raise LLMUnavailableError("connection refused")
            return super().complete(messages, schema)

    with chain("Should a mid-sized city build a tram line?", Down(seed=2)) as ex:
        assert ex.run(progress=False) == "model_unavailable"
        (level,) = ex.store.thinkon_chain(ex.graph_id)
        assert level["status"] == "open" and level["phase"] == "think", "not failed: given back"
        Down.up = True
        assert ex.run(progress=False) == "all_complete" and not ex.harvest().degraded


def test_a_harvest_cuts_even_a_held_level_and_that_workers_write_is_refused() -> None:
    from fractal_nb.engine.run_state import RunState
    from fractal_nb.engine.strategies.thinkon import harvested, unwind

    store = GraphStore()
    g = store.create_graph("Plan a trip.", "explore", "autonomous", metadata={"strategy": "thinkon"})
    gid, root = g["graph_id"], g["root_node_id"]
    store.claim_work(gid, "w")
    store.thinkon_plan(gid, root, "t1. Book the train.", worker_id="w")
    store.claim_work(gid, "w")
    child = store.thinkon_call(gid, root, "Book the train.", worker_id="w")["node_id"]
    store.claim_work(gid, "w")  # the sub-goal, held by a worker still at its model call
    run = RunState.for_graph(store, store.get_graph(gid), SimulatedLLM(), whole=store)
    assert unwind(run, "harvested") == [child, root]
    assert store.thinkon_chain(gid) == []
    assert [d["outcome"] for d in store.thinkon_level(gid, root)["done"]] == ["cut"]
    with pytest.raises(StateError, match="claim it first"):
        store.thinkon_return(gid, child, "The train is booked.", worker_id="w")
    assert harvested([], ["a gap"]).findings == [] and harvested([], ["a gap"]).gaps == ["a gap"]
    store.close()


def test_the_chain_rules_are_for_chains_and_a_return_lands_once(fresh_store: GraphStore) -> None:
    fractal = fresh_store.create_graph("Why?", "explore", "autonomous")
    gid, root = fractal["graph_id"], fractal["root_node_id"]
    sub = fresh_store.add_answer(gid, root, "Because.", sub_questions=["How?"])["sub_questions"][0]["node_id"]
    fresh_store.claim_work(gid, "w")
    before = fresh_store.get_events(gid)["last_event_id"]
    for call_it in (
        lambda: fresh_store.thinkon_return(gid, sub, "Like this.", worker_id="w"),
        lambda: fresh_store.thinkon_level(gid, sub),
        lambda: fresh_store.thinkon_chain(gid),
    ):
        with pytest.raises(StateError, match="no thinkon chain"):
            call_it()
    assert fresh_store.get_events(gid)["last_event_id"] == before, "a fractal graph is left as it was"
    with chain(ESSAY["goal"], essay_llm()) as ex:
        ex.run(progress=False)
        ex.harvest()
        with pytest.raises(StateError, match="takes no turns"):
            ex.ask("What about music?")
        with pytest.raises(StateError, match="takes no turns"):
            ex.widen(2)


def test_a_wall_time_budget_cuts_the_chain_and_its_partial_result_names_the_budget() -> None:
    """The run's wall-time budget bounds a chain as it bounds a tree (on a clock that ticks per read)."""
    goal = "Write a short essay on tides."
    with Exploration.create(
        goal, intensity="explore", llm=SimulatedLLM(seed=4), strategy="thinkon", clock=TickingClock()
    ) as ex:
        report = ex.run(progress=False, max_wall_s=5)
        assert report == "budget_exhausted"
        assert (report.status_reason or "").startswith("wall-time budget of 5 s reached")
        result = ex.harvest()
        assert result.degraded
        assert result.gaps and all("wall-time budget of 5 s reached" in g for g in result.gaps), result.gaps
        root = ex.store.get_node(ex.graph_id, ex.store.get_graph(ex.graph_id)["root_node_id"])["node"]
        assert root["metadata"]["budget_reason"].startswith("wall-time budget of 5 s reached")
        assert_chain_invariant(events(ex), parents(ex))
