"""Thinkon to the letter (seed 002, §2.1 and §6): Think calls tools, and a sub-goal's Solve has a time limit.

Think's call carries the source tools and the caller's own tools (``Exploration.create(...,
tools=[fn])``) to a model that takes tools, through the real ``openai`` client against a
local OpenAI-compatible server on 127.0.0.1; each tool call is a ledger row; a caller's
tool that raises is an error text the model reads; a tool that cannot be described is
refused before any file is made. The per-Solve time limit (``solve_time_s``) is timed by
the run's clock, a fake one here: a sub-goal past it returns its partial state while its
parent's Eval and its siblings go on (docs/architecture/engine.md, "Thinkon", "Tool calls").

Covers: engine/caller_tools.py, engine/strategies/thinkon_time.py, engine/limits.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from fractal_nb import Exploration, GraphStore, ScriptedLLM, SimulatedLLM
from fractal_nb.engine import RunState, ScaledClock
from fractal_nb.errors import InvalidInputError, StateError
from fractal_nb.vocabulary import TOOL_NAMES
from tests.engine.chain_script import assert_chain_invariant, call, ret, todo
from tests.engine.test_openai_runs import (
    FAST,
    _no_proxy,  # noqa: F401 - the same autouse fixture
    role_responder,
    schema_name,
)
from tests.engine.test_thinkon import events, parents, root_done
from tests.llm.fake_openai import FakeOpenAI, ToolCalls

GOAL = "Why do rivers meander across their floodplains?"
NOTES = "\n".join(
    [
        "# Rivers",
        "Rivers meander because the outer bank of a bend erodes faster than the inner bank.",
        "Sediment settles on the inner bank, where the water slows down.",
    ]
)
FINAL = "Bends grow because the outer bank erodes while the inner bank gains sediment."


def tool_messages(body: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def thinker(*calls: tuple[str, dict[str, Any]]) -> Any:
    """A model whose Think makes ``calls`` (in one reply) when offered tools, then returns :data:`FINAL`."""

    def respond(body: dict[str, Any]) -> dict[str, Any] | str | ToolCalls:
        if body.get("tools"):
            return "I have what I need." if tool_messages(body) else ToolCalls(calls)
        assert schema_name(body) == "Think", "the chain's only step: the root's Think returns"
        return {"type": "RETURN", "description": FINAL}

    return respond


def think_chain(server: FakeOpenAI, **options: Any) -> Exploration:
    llm = server.llm(timeout=5.0, max_retries=0)
    return Exploration.create(GOAL, intensity="pulse", llm=llm, strategy="thinkon", clock=FAST, **options)


def ledger(ex: Exploration) -> list[tuple[str, str, str | None]]:
    calls = ex.llm_calls()
    return [(r.role, r.outcome, r.node_id) for r in calls.itertuples()]


def test_think_searches_the_sources_then_returns_and_the_tool_call_is_logged() -> None:
    with FakeOpenAI(responder=thinker(("search_sources", {"query": "outer bank erodes", "k": 2}))) as server:
        with think_chain(server) as ex:
            ex.store.add_sources(
                ex.graph_id, [{"name": "notes/rivers.md", "kind": "snippet", "location": None, "text": NOTES}]
            )
            assert ex.run(progress=False) == "all_complete"
            root = ex.store.get_graph(ex.graph_id)["root_node_id"]
            assert ledger(ex) == [("tool:search_sources", "ok", root), ("think", "ok", root)]
            assert ex.harvest().summary == FINAL
    offered = [[t["function"]["name"] for t in r["tools"]] for r in server.requests if r.get("tools")]
    assert offered == [list(TOOL_NAMES)] * 2, "Think's call carried the source tools"
    (found,) = tool_messages(server.requests[1])
    assert found.startswith("[notes/rivers.md:L") and "outer bank of a bend erodes" in found


def test_a_callers_tool_is_offered_to_think_and_its_result_is_in_the_next_request() -> None:
    asked: list[tuple[str, str]] = []

    def river_length(river: str, unit: str = "km") -> str:
        """The length of a river, from the caller's own table."""
        asked.append((river, unit))
        return f"{river}: 6650 {unit}"

    with FakeOpenAI(responder=thinker(("river_length", {"river": "Nile"}))) as server:
        with think_chain(server, tools=[river_length]) as ex:
            assert ex.run(progress=False) == "all_complete"
            roles = [role for role, _, _ in ledger(ex)]
            metadata = ex.store.get_graph(ex.graph_id)["metadata"]
    assert asked == [("Nile", "km")]
    assert roles == ["tool:river_length", "think"]
    (definition,) = server.requests[0]["tools"]
    assert definition["function"]["name"] == "river_length"
    assert definition["function"]["description"] == "The length of a river, from the caller's own table."
    parameters = definition["function"]["parameters"]
    assert parameters["required"] == ["river"] and parameters["properties"]["river"]["type"] == "string"
    assert parameters["properties"]["unit"]["default"] == "km"
    assert tool_messages(server.requests[1]) == ["Nile: 6650 km"], "its result, in the next request"
    assert "tools" not in str(metadata), "tools are code: the file never keeps them"


def test_a_callers_tool_is_offered_to_the_fractal_answer_step_too() -> None:
    def river_length(river: str) -> str:
        """The length of a river."""
        return "6650 km"

    offered: list[list[str]] = []
    answer = role_responder()

    def respond(body: dict[str, Any]) -> Any:
        if body.get("tools"):
            offered.append([t["function"]["name"] for t in body["tools"]])
            return "No tool needed."
        return answer(body)

    with FakeOpenAI(responder=respond) as server:
        llm = server.llm(timeout=5.0, max_retries=0)
        with Exploration.create(GOAL, intensity="pulse", llm=llm, clock=FAST, tools=[river_length]) as ex:
            assert ex.run(progress=False) == "all_complete"
            answers = int((ex.llm_calls()["role"] == "answer").sum())
    assert answers and offered == [["river_length"]] * answers, "each answer, and no other role"


def test_a_callers_tool_that_raises_is_an_error_the_model_reads_and_the_chain_goes_on() -> None:
    def gauge_flow(station: int) -> str:
        """The flow a gauge station logged, in cubic metres a second."""
        raise RuntimeError(f"gauge {station} is offline")

    calls = (("gauge_flow", {"station": 3}), ("gauge_flow", {"station": "three"}), ("gauge_flux", {}))
    with FakeOpenAI(responder=thinker(*calls)) as server:
        with think_chain(server, tools=[gauge_flow]) as ex:
            assert ex.run(progress=False) == "all_complete"
            rows = ex.llm_calls()
            assert ex.harvest().summary == FINAL
    raised, refused, unknown = tool_messages(server.requests[1])
    assert raised == "error: gauge_flow raised RuntimeError: gauge 3 is offline"
    assert refused.startswith("error: the arguments of gauge_flow are refused: station:")
    assert unknown == "error: there is no tool 'gauge_flux'; the tools: gauge_flow"
    assert list(rows["role"]) == ["tool:gauge_flow", "tool:gauge_flow", "tool:unknown", "think"]
    assert list(rows["outcome"]) == ["error", "error", "error", "ok"]
    assert "gauge 3 is offline" in rows["error"].iloc[0] and "gauge_flux" in rows["error"].iloc[2]


def test_a_model_without_tools_runs_as_before_with_tools_registered() -> None:
    def river_length(river: str) -> str:
        """The length of a river."""
        raise AssertionError("a model without tools never calls one")

    with Exploration.create(
        GOAL, intensity="pulse", llm=SimulatedLLM(), strategy="thinkon", tools=[river_length]
    ) as ex:
        assert ex.run(progress=False) == "all_complete"
        assert not ex.llm_calls()["role"].str.startswith("tool:").any()


class Gauge:
    """A type pydantic cannot describe as JSON."""


def no_annotation(river):  # type: ignore[no-untyped-def]
    """The length of a river."""


def no_docstring(river: str) -> str:
    return river


def unsupported(gauge: Gauge) -> str:
    """A gauge's flow."""
    return ""


def variadic(*rivers: str) -> str:
    """Rivers' lengths."""
    return ""


def search_sources(query: str) -> str:
    """My own search."""
    return ""


BAD_TOOLS: list[tuple[object, str]] = [
    ([lambda river: river], "a tool's name must be"),
    ([no_annotation], "has no type annotation"),
    ([no_docstring], "has no docstring"),
    ([unsupported], "annotations cannot be a tool's JSON schema"),
    ([variadic], "cannot be passed by name"),
    ([search_sources], f"none of {', '.join(TOOL_NAMES)}, unknown"),
    ([no_docstring, no_docstring], "tools[0]"),
    (no_docstring, "tools must be a list of functions"),
    (["river_length"], "tools[0] must be a function"),
]


@pytest.mark.parametrize(("tools", "says"), BAD_TOOLS)
def test_a_tool_that_cannot_be_described_is_refused_before_anything_is_written(
    tmp_path: Path, tools: object, says: str
) -> None:
    path = tmp_path / "refused.duckdb"
    with pytest.raises(InvalidInputError, match=re.escape(says)):
        Exploration.create(GOAL, llm=SimulatedLLM(), strategy="thinkon", path=path, tools=tools)  # type: ignore[arg-type]
    assert not path.exists(), "a refused registration makes no file"
    with Exploration.create(GOAL, llm=SimulatedLLM(), path=tmp_path / "kept.duckdb"):
        pass
    with pytest.raises(InvalidInputError, match=re.escape(says)):
        Exploration.open(tmp_path / "kept.duckdb", llm=SimulatedLLM(), tools=tools)  # type: ignore[arg-type]


def test_two_tools_of_one_name_are_refused() -> None:
    def river_length(river: str) -> str:
        """The length of a river."""
        return ""

    twin = river_length
    with pytest.raises(InvalidInputError, match="tools names river_length more than once"):
        Exploration.create(GOAL, llm=SimulatedLLM(), tools=[river_length, twin])


# --- the per-Solve time limit -------------------------------------------------------------------


class RunClock(ScaledClock):
    """The run's clock, moved only by the model's replies; its waits are the dispatcher's, scaled down."""

    def __init__(self) -> None:
        super().__init__(0.001)
        self.t = 0.0

    def now(self) -> float:
        return self.t


class TimedScript(ScriptedLLM):
    """A scripted chain whose replies take ``costs[(role, goal)]`` seconds of the run's clock."""

    def __init__(self, clock: RunClock, costs: dict[tuple[str, str], float], **script: Any) -> None:
        super().__init__(**script)
        self.clock, self.costs = clock, costs

    def complete(self, messages: Any, schema: Any) -> dict[str, Any]:
        reply = super().complete(messages, schema)
        role, goal, _ = self.prompts[-1]
        self.clock.t += self.costs.get((role, goal), 0.0)
        return reply


ROOT = "Write a short guide to the rivers of Europe."
SLOW = "Survey the Danube's tributaries."
DEEP = "List the tributaries from the source to Vienna."
NEXT = "Describe the Rhine delta."


def timed_chain(clock: RunClock) -> TimedScript:
    return TimedScript(
        clock,
        {("think", DEEP): 7.0, ("think", NEXT): 2.0},  # the deep level's Think plans for 7 s
        think={
            ROOT: [todo("t1. The Danube.\nt2. The Rhine.")],
            SLOW: [todo("t1. Its tributaries, source to Vienna.")],
            DEEP: [todo("t1. The Iller.\nt2. The Lech.")],
            NEXT: [ret("The Rhine splits into the Waal and the Nederrijn.")],
        },
        evaluate={
            ROOT: [call(SLOW), call(NEXT), ret("The guide: the Danube in part, the Rhine.")],
            SLOW: [call(DEEP)],
        },
    )


def test_a_sub_goal_past_its_solve_time_returns_its_partial_state_and_the_parent_goes_on() -> None:
    clock = RunClock()
    llm = timed_chain(clock)
    with Exploration.create(ROOT, llm=llm, strategy="thinkon", clock=clock, solve_time_s=6) as ex:
        assert ex.run(max_workers=1, progress=False) == "all_complete", "the run goes on past the cut"
        assert llm.asked("eval", DEEP) == [], "checked before the deep level's next call: never made"
        done = root_done(ex)
        assert [(d["goal"], d["outcome"]) for d in done] == [(SLOW, "cut"), (NEXT, "returned")]
        assert done[0]["result"].startswith("Partial result (solve time limit:")
        nodes = {
            n["text"]: n for n in ex.store.get_snapshot(ex.graph_id)["nodes"] if n["node_type"] == "question"
        }
        for goal in (SLOW, DEEP):  # the sub-goal past its limit, and the level in flight below it
            node = nodes[goal]
            assert node["status"] == "saturated" and node["metadata"]["budget_exhausted"]
            assert node["metadata"]["budget_reason"] == (
                f"solve time limit: the Solve of {SLOW!r} ran 7.0 s, at most 6 s (solve_time_s)"
            )
        assert nodes[ROOT]["status"] == "synthesized", "the root's Solve is the run's: it returned"
        assert "[CUT SHORT]" in llm.asked("eval", ROOT)[1], "the parent's Eval read the partial state"
        levels = {n["text"]: n["metadata"]["thinkon"]["spent_s"] for n in nodes.values()}
        assert levels == {ROOT: 9.0, SLOW: 7.0, DEEP: 7.0, NEXT: 2.0}, "each subtree's running time"
        result = ex.harvest()
        assert result.summary == "The guide: the Danube in part, the Rhine."
        assert result.degraded and any("per-Solve time limit" in r for r in result.degraded_reasons)
        assert_chain_invariant(events(ex), parents(ex))


def test_without_a_solve_time_the_same_chain_goes_on_and_is_not_degraded() -> None:
    clock = RunClock()
    llm = timed_chain(clock)
    llm.script["eval"][DEEP] = [ret("The Iller and the Lech.")]
    llm.script["eval"][SLOW] = [call(DEEP), ret("The Iller and the Lech, then more.")]
    with Exploration.create(ROOT, llm=llm, strategy="thinkon", clock=clock) as ex:
        assert ex.run(max_workers=1, progress=False) == "all_complete"
        assert llm.asked("eval", DEEP), "the deep level went on"
        assert [d["outcome"] for d in root_done(ex)] == ["returned", "returned"]
        assert not ex.harvest().degraded


def test_the_solve_time_is_kept_with_the_graph_and_a_worker_elsewhere_applies_it(tmp_path: Path) -> None:
    path = tmp_path / "chain.duckdb"
    with Exploration.create(ROOT, llm=SimulatedLLM(), strategy="thinkon", path=path, solve_time_s=6):
        pass
    with GraphStore(path) as store:
        (graph,) = store.list_graphs()["graphs"]
        kept = store.get_graph(graph["graph_id"])
        assert kept["metadata"]["limits"]["solve_time_s"] == 6
        worker = RunState.for_graph(store, kept, SimulatedLLM())  # a worker's state: no whole store
        assert worker.limits.solve_time_s == 6 and worker.limits.max_tokens is None


def test_a_solve_time_is_refused_for_a_graph_without_levels(tmp_path: Path) -> None:
    path = tmp_path / "fractal.duckdb"
    with pytest.raises(InvalidInputError, match="solve_time_s= bounds a thinkon sub-goal's Solve"):
        Exploration.create(GOAL, llm=SimulatedLLM(), path=path, solve_time_s=6)
    assert not path.exists()
    with pytest.raises(InvalidInputError, match="solve_time_s must be a finite number > 0"):
        Exploration.create(GOAL, llm=SimulatedLLM(), strategy="thinkon", solve_time_s=0)
    with Exploration.create(GOAL, intensity="pulse", llm=SimulatedLLM()) as ex:
        with pytest.raises(StateError, match="solve_time_s bounds a thinkon sub-goal's Solve"):
            ex.run(progress=False, solve_time_s=6)
        assert "limits" not in ex.store.get_graph(ex.graph_id)["metadata"], "nothing was written"


def test_the_ledger_takes_a_callers_tool_role_and_refuses_a_name_no_tool_has() -> None:
    with GraphStore() as store:
        graph_id = store.create_graph(GOAL, "pulse")["graph_id"]
        row = {
            "graph_id": graph_id,
            "role": "tool:river_length",
            "model": "m",
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "attempts": 0,
            "latency_s": 0.0,
            "outcome": "ok",
        }
        store.record_llm_calls([row])
        with pytest.raises(InvalidInputError, match="or tool:<name> for a call of a caller's own tool"):
            store.record_llm_calls([{**row, "role": "tool:river length!"}])
        assert [c["role"] for c in store.get_llm_calls(graph_id)["calls"]] == ["tool:river_length"]
