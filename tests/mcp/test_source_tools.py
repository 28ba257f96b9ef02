"""An outside agent works with a graph's evidence over MCP (docs/architecture/faces.md, "Sources over MCP"):
it adds a snippet, searches, reads, checks citations, and submits a cited answer (verified) and a
miscited one (unsupported); a track's findings travel in fractal_synthesize_node. A remote worker's
model reads the same sources through RemoteStore.

Covers: store/citations.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from fractal_nb import Exploration, GraphStore, Snippet
from fractal_nb.engine.evidence_tools import SourceTools
from fractal_nb.errors import FractalError
from fractal_nb.mcp.remote import RemoteStore, work_remotely
from fractal_nb.mcp.server import BackgroundServer, build_server
from tests.engine.test_openai_runs import role_responder
from tests.llm.fake_openai import FakeOpenAI, tool_caller
from tests.mcp.seed_worker import call

SOURCE_TOOLS = {
    "fractal_list_sources",
    "fractal_add_source_text",
    "fractal_search_sources",
    "fractal_read_source",
    "fractal_check_citations",
    "fractal_glob_sources",
    "fractal_grep_sources",
}
INTERVIEW = "\n".join(
    [
        "Interview with the harbour master, spring.",
        "",
        "The tide turns twice a day because the moon pulls the sea towards it.",
        "The sun adds a smaller pull, so spring tides come at full and new moon.",
        "Neap tides come when the sun and moon pull at right angles.",
    ]
)


@pytest.fixture
def store() -> Iterator[GraphStore]:
    with GraphStore(lease_s=60) as s:
        yield s


def run(store: GraphStore, scenario: Any) -> Any:
    async def main() -> Any:
        async with Client(build_server(store)) as client:
            return await scenario(client)

    return asyncio.run(main())


async def refused(client: Client, tool: str, **arguments: Any) -> str:
    """The store's refusal of a tool call (it must be one)."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool} was not refused"
    return str(json.loads(result.content[0].text)["error"])


async def seeded(client: Client) -> tuple[str, list[str]]:
    """A graph with two claimable questions under the root's answer; its id and theirs."""
    g = await call(client, "fractal_create_graph", seed="Why do tides turn?", intensity="pulse")
    gid, root = g["graph_id"], g["root_node_id"]
    answer = await call(
        client, "fractal_add_node", graph_id=gid, parent_id=root, node_type="answer", text="The moon."
    )
    questions = []
    for text in ("What pulls the sea?", "When are tides strongest?"):
        q = await call(
            client,
            "fractal_add_node",
            graph_id=gid,
            parent_id=answer["node_id"],
            node_type="question",
            text=text,
        )
        questions.append(q["node_id"])
    return gid, questions


def test_the_source_tools_are_served(store: GraphStore) -> None:
    async def scenario(client: Client) -> set[str]:
        return {t.name for t in (await client.list_tools()).tools}

    assert SOURCE_TOOLS <= run(store, scenario)


def test_an_agent_adds_searches_reads_and_submits_cited_and_miscited_answers(store: GraphStore) -> None:
    async def scenario(client: Client) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        gid, _ = await seeded(client)
        seen["gid"] = gid
        seen["added"] = await call(
            client, "fractal_add_source_text", graph_id=gid, name="interview.txt", text=INTERVIEW
        )
        seen["again"] = await call(
            client, "fractal_add_source_text", graph_id=gid, name="interview.txt", text=INTERVIEW
        )
        seen["other_text"] = await refused(
            client, "fractal_add_source_text", graph_id=gid, name="interview.txt", text="Something else."
        )
        seen["sources"] = await call(client, "fractal_list_sources", graph_id=gid)
        seen["hits"] = await call(
            client, "fractal_search_sources", graph_id=gid, query="moon pulls the sea", k=2
        )
        seen["read"] = await call(
            client, "fractal_read_source", graph_id=gid, source="interview.txt", line_start=3, line_end=4
        )
        seen["unknown"] = await refused(
            client, "fractal_read_source", graph_id=gid, source="diary.txt", line_start=1, line_end=2
        )
        good = {"source": "interview.txt", "line_start": 3, "line_end": 3, "quote": "the moon pulls the sea"}
        bad = {"source": "interview.txt", "line_start": 4, "line_end": 4, "quote": "the moon pushes the sea"}
        seen["checked"] = await call(
            client, "fractal_check_citations", graph_id=gid, citations=json.dumps([good, bad])
        )
        for worker, citation in (("w1", good), ("w2", bad)):
            claim = await call(client, "fractal_claim_work", graph_id=gid, worker_id=worker)
            seen[worker] = await call(
                client,
                "fractal_submit_answer",
                graph_id=gid,
                node_id=claim["node_id"],
                owner=worker,
                text=f"{worker}: the moon's pull turns the tide.",
                metadata=json.dumps({"citations": [citation]}),
                saturation="actionable",
            )
        seen["snapshot"] = await call(client, "fractal_get_snapshot", graph_id=gid)
        return seen

    seen = run(store, scenario)
    assert seen["added"]["name"] == "interview.txt" and seen["added"]["kind"] == "snippet"
    assert seen["again"]["source_id"] == seen["added"]["source_id"], "the same text again changes nothing"
    assert "interview.txt" in seen["other_text"]
    assert [s["name"] for s in seen["sources"]["sources"]] == ["interview.txt"]
    hits = seen["hits"]["hits"]
    assert hits and hits[0]["source"] == "interview.txt" and "moon pulls the sea" in hits[0]["text"]
    assert seen["read"]["lines"] == INTERVIEW.splitlines()[2:4]
    assert "diary.txt" in seen["unknown"]
    assert [c["status"] for c in seen["checked"]["citations"]] == ["verified", "misquoted"]
    answers = {
        n["owner"]: n["metadata"]
        for n in seen["snapshot"]["nodes"]
        if n["node_type"] == "answer" and n.get("owner") in ("w1", "w2")
    }
    assert [c["status"] for c in answers["w1"]["citations"]] == ["verified"]
    assert answers["w1"]["support"] == "supported"
    assert [c["status"] for c in answers["w2"]["citations"]] == ["misquoted"]
    assert answers["w2"]["support"] == "unsupported"
    # Nothing the refusals asked for was written: one source, with its one text.
    assert len(store.list_sources(seen["gid"])) == 1


def test_an_agent_globs_and_greps_the_sources_as_a_preset_skill_does(store: GraphStore) -> None:
    """The reads a preset's skills make (engine/skills.py), served as tools: names, then numbered lines."""

    async def scenario(client: Client) -> dict[str, Any]:
        gid, _ = await seeded(client)
        for name, text in (("notes/interview.txt", INTERVIEW), ("notes/log.md", "Tide at 6.\nNo moon.")):
            await call(client, "fractal_add_source_text", graph_id=gid, name=name, text=text)
        return {
            "all": await call(client, "fractal_glob_sources", graph_id=gid, pattern="**/*.txt"),
            "none": await call(client, "fractal_glob_sources", graph_id=gid, pattern="*.py"),
            "hits": await call(client, "fractal_grep_sources", graph_id=gid, pattern=r"\bmoon\b"),
            "in_md": await call(client, "fractal_grep_sources", graph_id=gid, pattern="moon", glob="*.md"),
            "bad": await refused(client, "fractal_grep_sources", graph_id=gid, pattern="(unclosed"),
            "sources": await call(client, "fractal_list_sources", graph_id=gid),
        }

    seen = run(store, scenario)
    assert seen["all"]["names"] == ["notes/interview.txt"] and seen["none"]["names"] == []
    assert [(h["source"], h["line"]) for h in seen["hits"]["hits"]] == [
        ("notes/interview.txt", 3),
        ("notes/interview.txt", 4),
        ("notes/interview.txt", 5),
        ("notes/log.md", 2),
    ]
    assert [h["text"] for h in seen["in_md"]["hits"]] == ["No moon."]
    assert "(unclosed" in seen["bad"]
    assert len(seen["sources"]["sources"]) == 2  # the refusal wrote nothing


def test_a_tracks_findings_travel_in_synthesize_node(store: GraphStore) -> None:
    async def scenario(client: Client) -> dict[str, Any]:
        gid, questions = await seeded(client)
        await call(client, "fractal_add_source_text", graph_id=gid, name="interview.txt", text=INTERVIEW)
        claim = await call(client, "fractal_claim_work", graph_id=gid, worker_id="w1")
        await call(
            client,
            "fractal_add_node",
            graph_id=gid,
            parent_id=claim["node_id"],
            node_type="answer",
            text="The moon pulls the sea; the sun adds a little.",
            owner="w1",
        )
        findings = [
            {
                "finding": "The moon's pull turns the tide.",
                "confidence": "high",
                "citations": [
                    {
                        "source": "interview.txt",
                        "line_start": 3,
                        "line_end": 3,
                        "quote": "the moon pulls the sea",
                    }
                ],
            },
            {"finding": "Tides follow the wind.", "confidence": "low", "citations": []},
        ]
        await call(
            client,
            "fractal_synthesize_node",
            graph_id=gid,
            node_id=claim["node_id"],
            synthesis_text="The moon, helped by the sun, turns the tide.",
            findings=json.dumps(findings),
        )
        branch = await call(client, "fractal_get_branch", graph_id=gid, node_id=claim["node_id"])
        bad = await refused(
            client,
            "fractal_synthesize_node",
            graph_id=gid,
            node_id=questions[1],
            synthesis_text="Never written.",
            findings="{}",
        )
        return {"branch": branch, "bad": bad}

    seen = run(store, scenario)
    question = seen["branch"]["nodes"][0]
    assert [f["support"] for f in question["metadata"]["findings"]] == ["supported", "unsupported"]
    assert "findings must be a JSON list" in seen["bad"]


def test_a_remote_workers_model_reads_the_sources_over_mcp(store: GraphStore) -> None:
    graph_id = str(store.create_graph("Why do tides turn?", "pulse")["graph_id"])
    store.add_sources(
        graph_id, [{"name": "interview.txt", "kind": "snippet", "location": None, "text": INTERVIEW}]
    )
    server = BackgroundServer(store)
    try:
        server.start()
        with RemoteStore(server.url) as remote:
            box = SourceTools(remote, graph_id)
            found = box.run("search_sources", {"query": "neap tides right angles", "k": 1})
            read = box.run("read_source", {"source": "interview.txt", "line_start": 5, "line_end": 5})
            assert [s["name"] for s in remote.list_sources(graph_id)] == ["interview.txt"]
            with pytest.raises(FractalError, match="diary.txt"):
                box.run("read_source", {"source": "diary.txt", "line_start": 1, "line_end": 1})
    finally:
        server.stop()
    assert found.startswith("[interview.txt:L") and "right angles" in found
    assert read == "[interview.txt:L5-L5]\n5: Neap tides come when the sun and moon pull at right angles."


def test_a_remote_worker_answers_with_tool_calls_logged_in_the_ledger(tmp_path: Path) -> None:
    with FakeOpenAI(responder=tool_caller(role_responder(), "moon pulls the sea")) as server:
        with Exploration.create(
            "Why do tides turn twice a day?", intensity="pulse", llm=server.llm(), path=tmp_path / "t.duckdb"
        ) as ex:
            ex.add_sources(Snippet(INTERVIEW, name="interview.txt"))
            ex.step(1)  # the seed phase, here; the questions are worked over MCP
            url = ex.serve_mcp()
            with RemoteStore(url) as remote:
                work_remotely(remote, server.llm(), worker_id="far", graph_id=ex.graph_id)
            calls = ex.llm_calls()
    answers = calls.query("role == 'answer'")
    tools = calls[calls["role"].str.startswith("tool:")]
    assert len(answers) and set(answers["worker"]) <= {"far-1"}
    assert sorted(tools["role"].unique()) == ["tool:read_source", "tool:search_sources"]
    assert len(tools) == 2 * len(answers) and (tools["outcome"] == "ok").all()
