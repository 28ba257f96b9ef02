"""A model that calls the source tools itself (docs/architecture/engine.md, "Tool calls"), through the real
``openai`` client against a local fake server and a real store with sources: each tool call runs
against the store and is a ledger row of its own, the number of calls is bounded, a server without
tools is remembered as such, and a budget reserves every round trip the tools may add.

Covers: engine/evidence_tools.py, llm/protocol.py, llm/openai_tools.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from fractal_nb import Exploration, GraphStore
from fractal_nb.cli.running import ledger_line
from fractal_nb.engine.calls import ModelCaller, call_bound
from fractal_nb.engine.evidence_tools import MAX_K, MAX_LINES, SourceTools, source_block
from fractal_nb.engine.limits import Limits
from fractal_nb.errors import BudgetExhaustedError, InvalidInputError, LLMError, LLMOutputError
from fractal_nb.llm.openai_llm import OpenAILLM
from fractal_nb.llm.protocol import Message, metered, uses_tools
from fractal_nb.llm.schemas import LeafAnswer
from fractal_nb.vocabulary import TOOL_NAMES
from tests.engine.test_openai_runs import FAST, role_responder
from tests.llm.fake_openai import FakeOpenAI, ToolCalls, endless_tool_caller, read_lines, tool_caller
from tests.local_port import free_port

NOTES = "\n".join(
    [
        "# Rivers",
        "",
        "Rivers meander because the outer bank of a bend erodes faster than the inner bank.",
        "Sediment settles on the inner bank, where the water slows down.",
        "Over decades the bend grows until the neck is cut off, leaving an oxbow lake.",
        "",
        *(
            f"Gauge station {i} logged a flow of {100 + i} cubic metres a second in spring."
            for i in range(60)
        ),
    ]
)
QUESTION = "Why do rivers meander?"
RUN_SEED = "Why do rivers meander across their floodplains?"
MESSAGES: list[Message] = [
    {"role": "system", "content": "You answer questions about the evidence at hand."},
    {"role": "user", "content": f"Question to answer now (depth 1):\n{QUESTION}\nReply with a JSON object."},
]


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """The model's structured answer (what it says once the tools are done)."""
    return {
        "answer": "Bends grow because the outer bank erodes while the inner bank gains sediment.",
        "confidence": 0.7,
    }


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def store() -> Iterator[GraphStore]:
    with GraphStore() as s:
        yield s


@pytest.fixture
def graph(store: GraphStore) -> str:
    graph_id = str(store.create_graph(QUESTION, "pulse")["graph_id"])
    store.add_sources(
        graph_id, [{"name": "notes/rivers.md", "kind": "snippet", "location": None, "text": NOTES}]
    )
    return graph_id


def ledger(store: GraphStore, graph_id: str) -> list[dict[str, Any]]:
    return list(store.get_llm_calls(graph_id)["calls"])


def test_a_model_searches_reads_and_cites_what_it_read(store: GraphStore, graph: str) -> None:
    responder = tool_caller(answer, "outer bank erodes")
    with FakeOpenAI(responder=responder) as server:
        caller = ModelCaller(server.llm(), store, graph)
        result = caller(LeafAnswer, MESSAGES, node_id=None, worker="w1", tools=SourceTools(store, graph))
    assert result.answer.startswith("Bends grow")
    offered = [bool(r.get("tools")) for r in server.requests]
    assert offered == [True, True, True, False], "search, read, done; then the structured answer, tools off"
    # The tool results reached the model as the store gave them.
    read = read_lines(server.requests[-1])
    assert read and read[0]["source"] == "notes/rivers.md"
    lines = store.read_source(graph, "notes/rivers.md", read[0]["line_start"], read[0]["line_end"])["lines"]
    assert read[0]["lines"] == lines
    # Its citations quote what read_source returned, and the store verifies them.
    citations = responder(server.requests[-1])["citations"]  # type: ignore[index]
    assert citations and all(c["status"] == "verified" for c in store.check_citations(graph, citations))
    rows = ledger(store, graph)
    assert [r["role"] for r in rows] == ["tool:search_sources", "tool:read_source", "answer"]
    tools, call = rows[:2], rows[2]
    assert all(r["outcome"] == "ok" and r["prompt_tokens"] == r["completion_tokens"] == 0 for r in tools)
    assert all(r["attempts"] == 0 and r["worker"] == "w1" for r in tools)
    # The round trips' tokens are the call's own: every request the server answered.
    assert call["attempts"] == len(server.requests) == 4
    assert call["prompt_tokens"] == sum(u["prompt_tokens"] for u in server.usages if u)
    assert call["completion_tokens"] == sum(u["completion_tokens"] for u in server.usages if u)
    assert store.llm_spend(graph)[0]["calls"] == 1, "tool rows are not model calls"
    assert store.count_replies(graph)["accepted"] == 1


def test_a_miscited_quote_is_refused_by_the_store(store: GraphStore, graph: str) -> None:
    responder = tool_caller(answer, "outer bank erodes", miscite=True)
    with FakeOpenAI(responder=responder) as server:
        ModelCaller(server.llm(), store, graph)(
            LeafAnswer, MESSAGES, node_id=None, worker="w1", tools=SourceTools(store, graph)
        )
    citations = responder(server.requests[-1])["citations"]  # type: ignore[index]
    assert citations and [c["status"] for c in store.check_citations(graph, citations)] == ["misquoted"]


@pytest.mark.parametrize("max_calls", [1, 3, 4])
def test_a_model_that_never_stops_calling_tools_is_stopped_at_the_bound(
    store: GraphStore, graph: str, max_calls: int
) -> None:
    with FakeOpenAI(responder=endless_tool_caller(answer)) as server:
        caller = ModelCaller(server.llm(), store, graph)
        result = caller(
            LeafAnswer,
            MESSAGES,
            node_id=None,
            worker="w1",
            tools=SourceTools(store, graph, max_calls=max_calls),
        )
    assert result.answer.startswith("Bends grow")
    rows = ledger(store, graph)
    assert [r["role"] for r in rows] == ["tool:search_sources"] * max_calls + ["answer"]
    # Two calls per reply: the requests that made them, then the answer with tools off.
    tool_requests = (max_calls + 1) // 2
    assert [bool(r.get("tools")) for r in server.requests] == [True] * tool_requests + [False]
    sent = [m for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(sent) == max_calls, "a call past the bound is dropped from the conversation, never run"


def test_a_tool_refusal_is_text_the_model_reads_and_an_error_row(store: GraphStore, graph: str) -> None:
    def bad_calls(body: dict[str, Any]) -> dict[str, Any] | ToolCalls:
        if body.get("tools") and not any(m["role"] == "tool" for m in body["messages"]):
            return ToolCalls(
                (
                    ("read_source", {"source": "notes/lakes.md", "line_start": 1, "line_end": 3}),
                    ("read_source", {"source": "notes/rivers.md", "line_start": 2, "line_end": 1}),
                    ("search_sources", {}),
                    ("fly_away", {"to": "the moon"}),
                    ("read_source", {}),
                ),
                raw={2: "{not json", 4: "[1, 2]"},
            )
        return answer(body)

    with FakeOpenAI(responder=bad_calls) as server:
        caller = ModelCaller(server.llm(), store, graph)
        caller(LeafAnswer, MESSAGES, node_id=None, worker="w1", tools=SourceTools(store, graph, max_calls=5))
    results = [str(m["content"]) for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert results[0].startswith("error: ") and "notes/lakes.md" in results[0]
    assert "line_end (1) must not be before line_start (2)" in results[1]
    assert "were not JSON" in results[2]
    assert "there is no tool 'fly_away'" in results[3]
    assert "the arguments of read_source must be a JSON object" in results[4]
    rows = ledger(store, graph)
    assert [r["role"] for r in rows] == [
        "tool:read_source",
        "tool:read_source",
        "tool:search_sources",
        "tool:unknown",
        "tool:read_source",
        "answer",
    ]
    assert [r["outcome"] for r in rows] == ["error"] * 5 + ["ok"]
    assert "fly_away" in rows[3]["error"] and "notes/lakes.md" in rows[0]["error"]


def test_a_server_that_refuses_tools_is_remembered_and_the_call_goes_on(
    store: GraphStore, graph: str
) -> None:
    with FakeOpenAI("no_tools", responder=tool_caller(answer)) as server:
        llm = server.llm()
        caller = ModelCaller(llm, store, graph)
        box = SourceTools(store, graph)
        assert uses_tools(llm, box) and llm.takes_tools
        first = caller(LeafAnswer, MESSAGES, node_id=None, worker="w1", tools=box)
        assert not llm.takes_tools and not uses_tools(llm, box)
        second = caller(LeafAnswer, MESSAGES, node_id=None, worker="w1", tools=box)
    assert first.answer == second.answer
    assert [bool(r.get("tools")) for r in server.requests] == [True, False, False], "asked with tools once"
    rows = ledger(store, graph)
    assert [(r["role"], r["outcome"]) for r in rows] == [("answer", "ok"), ("answer", "ok")]
    assert rows[0]["attempts"] == 2, "the refused request reached the server"


def test_tool_calls_true_makes_a_refusal_an_error_and_false_never_offers_tools(
    store: GraphStore, graph: str
) -> None:
    box = SourceTools(store, graph)
    with FakeOpenAI("no_tools", responder=tool_caller(answer)) as server:
        with pytest.raises(LLMError, match="HTTP 400"):
            ModelCaller(server.llm(tool_calls=True, max_retries=0), store, graph)(
                LeafAnswer, MESSAGES, node_id=None, worker="w1", tools=box
            )
        off = server.llm(tool_calls=False)
        assert not off.takes_tools and not uses_tools(off, box)
        with metered() as usage:
            off.complete_with_tools(MESSAGES, LeafAnswer, box)
        assert not usage.tool_calls and not server.requests[-1].get("tools")
    with pytest.raises(InvalidInputError, match="tool_calls must be True, False or 'auto'"):
        server.llm(tool_calls="yes")  # type: ignore[arg-type]


def test_each_tool_call_is_on_the_meter(store: GraphStore, graph: str) -> None:
    with FakeOpenAI(responder=tool_caller(answer, "oxbow lake")) as server:
        with metered() as usage:
            server.llm().complete_with_tools(MESSAGES, LeafAnswer, SourceTools(store, graph))
    assert [(c.name, c.ok) for c in usage.tool_calls] == [("search_sources", True), ("read_source", True)]
    search, read = usage.tool_calls
    assert search.arguments == {"query": "oxbow lake", "k": 3}
    assert read.arguments["source"] == "notes/rivers.md" and read.result_chars > 0 and read.error is None
    assert usage.mode == "json_schema" and usage.attempts == 4


def test_a_call_with_tools_is_reserved_whole_and_the_budget_is_never_overshot(
    store: GraphStore, graph: str
) -> None:
    budget, workers = 150_000, 8  # a call's reservation is about a third of it: some run side by side
    with FakeOpenAI(responder=endless_tool_caller(answer, "gauge station flow"), latency_s=0.01) as server:
        llm = server.llm(max_concurrency=None)  # every worker's call in flight at once
        caller = ModelCaller(llm, store, graph)
        caller.arm(Limits(max_tokens=budget), [])
        box = SourceTools(store, graph)
        reserved = sum(call_bound(llm, MESSAGES, "answer", box))
        refused: list[BudgetExhaustedError] = []

        def work(worker: str) -> None:
            while True:
                try:
                    caller(LeafAnswer, MESSAGES, node_id=None, worker=worker, tools=box)
                except BudgetExhaustedError as exc:
                    refused.append(exc)
                    return

        threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    rows = [r for r in ledger(store, graph) if r["role"] == "answer"]
    spent = [r["prompt_tokens"] + r["completion_tokens"] for r in rows]
    assert len(refused) == workers and len(rows) > workers
    assert max(spent) <= reserved, "a call never spends more than it reserved, its tool round trips included"
    assert max(spent) > sum(call_bound(llm, MESSAGES, "answer")), (
        "without the tools' share it would overshoot"
    )
    assert budget <= sum(spent) <= budget + max(spent), f"{sum(spent):,} spent on a budget of {budget:,}"
    assert sum(r["attempts"] for r in rows) == len(server.requests)


def test_source_tools_read_search_and_refuse_in_words(store: GraphStore, graph: str) -> None:
    box = SourceTools(store, graph, max_calls=2)
    assert [d["function"]["name"] for d in box.definitions()] == list(TOOL_NAMES)
    assert box.run(
        "read_source", {"source": "notes/rivers.md", "line_start": 3, "line_end": 4}
    ) == source_block("notes/rivers.md", 3, NOTES.splitlines()[2:4])
    long = box.run("read_source", {"source": "notes/rivers.md", "line_start": 1, "line_end": 500.0})
    assert long.splitlines()[0] == f"[notes/rivers.md:L1-L{MAX_LINES}]" and "cut at" in long.splitlines()[-1]
    found = box.run("search_sources", {"query": "oxbow lake"})
    assert found.startswith("[notes/rivers.md:L") and "oxbow lake" in found
    assert "no passage" in box.run("search_sources", {"query": "zzzqqq"})
    for arguments, problem in (
        ({"query": ""}, "query must be non-empty text"),
        ({"query": "river", "k": MAX_K + 1}, f"k must be from 1 to {MAX_K}"),
        ({"query": "river", "k": True}, "k must be a whole number"),
    ):
        with pytest.raises(InvalidInputError, match=problem):
            box.run("search_sources", arguments)
    with pytest.raises(InvalidInputError, match="max_calls must be an integer from 1 to 16"):
        SourceTools(store, graph, max_calls=0)


def test_tool_calls_are_logged_under_a_node_time_limit(store: GraphStore, graph: str) -> None:
    with FakeOpenAI(responder=tool_caller(answer, "oxbow lake")) as server:
        caller = ModelCaller(server.llm(), store, graph)
        with caller.time_limit(60):  # the call runs on a timed thread, its meter carried there
            caller(LeafAnswer, MESSAGES, node_id=None, worker="w1", tools=SourceTools(store, graph))
    assert [r["role"] for r in ledger(store, graph)] == ["tool:search_sources", "tool:read_source", "answer"]


def test_a_model_that_answers_at_once_spends_one_request(store: GraphStore, graph: str) -> None:
    with FakeOpenAI(responder=answer) as server:  # offered tools, it answers without calling one
        caller = ModelCaller(server.llm(), store, graph)
        caller(LeafAnswer, MESSAGES, node_id=None, worker="w1", tools=SourceTools(store, graph))
    assert len(server.requests) == 1 and server.requests[0]["tool_choice"] == "auto"
    (row,) = ledger(store, graph)
    assert (row["role"], row["mode"], row["attempts"], row["corrections"]) == ("answer", "tools", 1, 0)


def test_a_failed_call_logs_its_tool_calls_and_its_error(store: GraphStore, graph: str) -> None:
    def junk_after_tools(body: dict[str, Any]) -> dict[str, Any] | str | ToolCalls | None:
        if body.get("tools"):
            return tool_caller(answer, "oxbow lake")(body)
        return {"answer": "}, {", "confidence": 0.5}  # junk however often it is corrected

    with FakeOpenAI(responder=junk_after_tools) as server:
        caller = ModelCaller(server.llm(), store, graph)
        with pytest.raises(LLMError):
            caller(LeafAnswer, MESSAGES, node_id=None, worker="w1", tools=SourceTools(store, graph))
    rows = ledger(store, graph)
    assert [(r["role"], r["outcome"]) for r in rows] == [
        ("tool:search_sources", "ok"),
        ("tool:read_source", "ok"),
        ("answer", "error"),
    ]
    assert rows[-1]["corrections"] == 1, "the tool round trips are not corrections; the junk's one is"


def test_a_broken_body_while_tools_are_offered_goes_on_to_the_structured_answer(
    store: GraphStore, graph: str
) -> None:
    with FakeOpenAI(
        "flaky", responder=tool_caller(answer), faults=("malformed_body",), failure_rate=1.0
    ) as server:
        with pytest.raises(LLMOutputError):
            server.llm(max_retries=0).complete_with_tools(MESSAGES, LeafAnswer, SourceTools(store, graph))
    assert [bool(r.get("tools")) for r in server.requests] == [True, False, False]


def test_a_server_that_is_down_is_an_error_not_a_server_without_tools(store: GraphStore, graph: str) -> None:
    with FakeOpenAI(responder=tool_caller(answer, "oxbow lake"), down_after=0) as server:
        llm = server.llm(max_retries=0)
        with pytest.raises(LLMError, match="HTTP 503"):
            llm.complete_with_tools(MESSAGES, LeafAnswer, SourceTools(store, graph))
        assert llm.takes_tools, "a 503 says nothing about tools"
        server.down_after = None
        with metered() as usage:
            llm.complete_with_tools(MESSAGES, LeafAnswer, SourceTools(store, graph))
        assert len(usage.tool_calls) == 2
        server.down_after = len(server.requests) + 1  # tools taken, then the server fails mid-call
        with pytest.raises(LLMError, match="HTTP 503"):
            llm.complete_with_tools(MESSAGES, LeafAnswer, SourceTools(store, graph))
        assert llm.takes_tools
    nowhere = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    with OpenAILLM(model="fake", base_url=nowhere, max_retries=0) as gone:
        with pytest.raises(LLMError, match="cannot reach the model server"):
            gone.complete_with_tools(MESSAGES, LeafAnswer, SourceTools(store, graph))
        assert gone.takes_tools


# --- whole runs: the workers' answers call the tools ----------------------------------------------


def explore_with_sources(llm: OpenAILLM) -> Exploration:
    ex = Exploration.create(RUN_SEED, intensity="pulse", llm=llm, clock=FAST)
    ex.store.add_sources(
        ex.graph_id, [{"name": "notes/rivers.md", "kind": "snippet", "location": None, "text": NOTES}]
    )
    return ex


def test_a_run_with_sources_calls_the_tools_for_each_answer() -> None:
    with FakeOpenAI(responder=tool_caller(role_responder(), "outer bank erodes")) as server:
        with explore_with_sources(server.llm()) as ex:
            assert ex.run(progress=False) == "all_complete"
            calls = ex.llm_calls()
            line = ledger_line(ex)  # what the shell prints: model calls and tool calls apart
    answers = calls.query("role == 'answer'")
    tools = calls[calls["role"].str.startswith("tool:")]
    assert len(answers) and len(tools) == 2 * len(answers), "a search and a read per answer"
    assert set(tools["node_id"]) == set(answers["node_id"]), "each tool row names its question"
    assert (tools["outcome"] == "ok").all() and (tools["prompt_tokens"] == 0).all()
    assert int(calls["attempts"].sum()) == len(server.requests), "the ledger counts every round trip"
    offered = [r for r in server.requests if r.get("tools")]
    assert len(offered) == 3 * len(answers), "search, read, done: the other roles never get tools"
    model_calls = len(calls) - len(tools)
    assert line.startswith(f"{model_calls:,} model calls ({model_calls} accepted, 0 corrected")
    assert f"; {len(tools)} tool calls by the model" in line


def test_a_run_without_sources_offers_no_tools() -> None:
    with FakeOpenAI(responder=tool_caller(role_responder(), "outer bank erodes")) as server:
        with Exploration.create(RUN_SEED, intensity="pulse", llm=server.llm(), clock=FAST) as ex:
            assert ex.run(progress=False) == "all_complete"
            assert not ex.llm_calls()["role"].str.startswith("tool:").any()
    assert not any(r.get("tools") for r in server.requests)


@pytest.mark.parametrize("workers", [1, 8])
def test_the_budget_holds_when_answers_call_tools(workers: int) -> None:
    budget = 30_000
    responder = endless_tool_caller(role_responder(), "gauge station flow")
    with FakeOpenAI(responder=responder, latency_s=0.01) as server:
        with explore_with_sources(server.llm(max_concurrency=None)) as ex:
            report = ex.run(workers, progress=False, max_tokens=budget)
            calls = ex.llm_calls()
    spent = calls["prompt_tokens"] + calls["completion_tokens"]
    assert report == "budget_exhausted"
    assert calls["role"].str.startswith("tool:").any(), "the answers called tools"
    assert budget <= int(spent.sum()) <= budget + int(spent.max()), (
        f"{int(spent.sum()):,} spent on {budget:,}"
    )


def test_round_trips_without_usage_are_estimated_and_carry_the_seed(store: GraphStore, graph: str) -> None:
    with FakeOpenAI(responder=tool_caller(answer, "oxbow lake"), usage=False) as server:
        caller = ModelCaller(server.llm(seed=11), store, graph)
        caller(LeafAnswer, MESSAGES, node_id=None, worker="w1", tools=SourceTools(store, graph))
    assert all(r["seed"] == 11 for r in server.requests)
    call = ledger(store, graph)[-1]
    assert call["tokens_estimated"] and call["prompt_tokens"] > 0 and call["completion_tokens"] > 0
    assert repr(SourceTools(store, graph)) == f"SourceTools({graph!r}, max_calls=4)"
