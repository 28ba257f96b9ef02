"""The real local model: llama.cpp's server with the packaged Gemma 3 270M, through the real openai client.

Marked ``local_llm``: it needs the ``[local]`` extra (xllamacpp's prebuilt llama.cpp server; wheels only).
Without it the test skips, naming the install; with ``CI`` set it is required.
The model is tiny and writes mostly junk; what is asserted is that the run ends
honestly: nothing stuck, every call in the ledger with what the server saw, no
junk stored as a node or presented as a finding, and a result that says it is
degraded when the model could not do the job.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pydantic import TypeAdapter

from fractal_nb import Exploration, LLMError, LLMUnavailableError
from fractal_nb.cli.main import main
from fractal_nb.engine import evidence
from fractal_nb.llm.local_server import INSTALL_HINT, LocalModelServer, local_model_available
from fractal_nb.llm.quality import ReplyContext
from fractal_nb.llm.schemas import Finding, LeafAnswer
from fractal_nb.prompts import chat, render
from tests.extras import ci_requires_extras

pytestmark = pytest.mark.local_llm


def require_local_model() -> None:
    """Skip without the local model, naming what to install; under CI it is required: fail."""
    if not local_model_available():
        if ci_requires_extras():
            pytest.fail(
                f"the local model is missing; CI is set, so it is required: {INSTALL_HINT}", pytrace=False
            )
        pytest.skip(f"the local model is not installed: {INSTALL_HINT}")


@pytest.fixture(scope="module")
def server() -> LocalModelServer:
    require_local_model()
    with LocalModelServer() as running:
        yield running


def acceptance(calls: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Per role, the ledger's outcomes: what the model got accepted (ok) and what it did not (error)."""
    return {role: dict(Counter(group["outcome"])) for role, group in calls.groupby("role")}


def test_a_pulse_exploration_on_the_real_local_model_grows_a_tree(
    server: LocalModelServer, tmp_path: Path
) -> None:
    """Issue 40: the packaged model accepts a seed and grows a tree, and the run ends honestly."""
    with (
        server.llm() as llm,
        Exploration.create(
            "Why do some cities grow faster than others?",
            intensity="pulse",
            llm=llm,
            path=tmp_path / "gemma.duckdb",
        ) as ex,
    ):
        status = ex.run(progress=False)
        calls = ex.llm_calls()
        roles = acceptance(calls)
        print(f"gemma-3-270m: {status}; per role {roles}")
        assert status in ("all_complete", "budget_exhausted"), f"no tree grew: {status}; per role {roles}"
        nodes = ex.nodes()
        assert not (nodes["status"] == "claimed").any(), "a claim was left behind"
        seed_questions = nodes.query("node_type == 'question' and depth == 1")
        assert len(seed_questions) >= 3, f"the seed posed {len(seed_questions)} questions; per role {roles}"
        answered = seed_questions["node_id"].isin(nodes.query("node_type == 'answer'")["parent_id"]).sum()
        assert answered * 2 >= len(seed_questions), f"{answered} of {len(seed_questions)} answered; {roles}"
        assert (calls["attempts"] >= 1).all() and (calls["queue_s"] >= 0).all()
        assert set(calls["mode"].dropna()) <= {"json_schema"}  # llama.cpp's server enforces it by grammar
        assert llm.max_concurrency == server.slots and llm.mode == "json_schema"  # learned from /props
        result = ex.harvest(finish=True)
        assert result.status == "completed" and result.synthesis_chain
        root = nodes.query("parent_id.isna()", engine="python")
        synthesis = ex.store.get_synthesis_inputs(ex.graph_id, root["node_id"].iloc[0])["node"]["metadata"]
        assert synthesis.get("synthesis") and not synthesis["synthesis"].startswith("[model synthesis failed")
        # Whatever the model wrote that was stored passes the quality rules judged afresh.
        judge = ReplyContext()
        for text in nodes.query("node_type == 'answer' and depth >= 1")["text"]:
            LeafAnswer.model_validate({"answer": text, "confidence": 0.5}, context=judge)
        for finding in result.findings:
            Finding.model_validate(finding, context=judge)
        assert sum(result.replies.values()) == len(ex.llm_calls())
        refused = result.replies["rejected"]
        print(f"gemma-3-270m: {result.replies}, degraded={result.degraded}: {result.degraded_reasons}")
        if refused >= 0.25 * (refused + result.replies["accepted"] + result.replies["corrected"]):
            assert result.degraded and any("refused" in r for r in result.degraded_reasons)
        if (nodes.query("node_type == 'question'")["status_reason"] == "error").any():
            assert any("failed" in r for r in result.degraded_reasons)


NOTES = {
    "growth.md": "Cities grow faster where jobs cluster.\nFirms follow workers and workers follow firms.\n\n"
    "Housing supply limits how fast a city can grow.\nWhere cities cannot build, prices rise instead.\n",
    "history.txt": "Ports and rail hubs grew first in the history of cities.\n"
    "Transport links still decide which cities grow.\n",
}


def _words(text: str) -> str:
    """A text's words (a ``[name:L1-L2]`` tag, line numbers and spacing aside), as the files are compared."""
    return " ".join(re.findall(r"[A-Za-z]{2,}", re.sub(r"^\s*\[[^\]]*\]", "", text)))


def test_gemma_with_sources_never_passes_a_wrong_citation(server: LocalModelServer, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    for name, text in NOTES.items():
        (folder / name).write_text(text)
    with (
        server.llm() as llm,
        Exploration.create(
            "Why do some cities grow faster than others?",
            intensity="pulse",
            llm=llm,
            path=tmp_path / "gemma-sources.duckdb",
            sources=folder,
        ) as ex,
    ):
        # The seed's plan written here (the tiny model rarely poses usable seed questions): what is
        # tested is its answers, each shown evidence, and what the store lets pass of their citations.
        root = ex.store.get_graph(ex.graph_id)["root_node_id"]
        ex.store.add_answer(
            ex.graph_id,
            root,
            "Growth splits into jobs and housing.",
            owner="seed",
            metadata={"seed_kind": "question", "seed_questions": 2, "seed_minimum": 2},
            sub_questions=[
                "Why do jobs make cities grow faster?",
                "How does housing supply limit city growth?",
            ],
        )
        status = ex.run(progress=False)
        assert status in ("all_complete", "budget_exhausted", "model_unavailable")
        result = ex.harvest(finish=True)
        nodes = ex.store.get_snapshot(ex.graph_id)["nodes"]
        calls = ex.llm_calls()
        # Its raw citations too, whatever the gates made of its answers: asked as a worker asks, each
        # checked by the store (a wrong one must not verify).
        raw: list[dict[str, Any]] = []
        for question in (
            "Why do jobs make cities grow faster?",
            "How does housing supply limit city growth?",
        ):
            shown = evidence.section(ex.store.search_sources(ex.graph_id, question, k=evidence.EVIDENCE_K))
            messages = chat(
                "answer",
                seed="Why do some cities grow faster than others?",
                ancestry="(this is a seed question)",
                depth=1,
                max_depth=2,
                question=question,
                siblings="(none)",
                syntheses="(none yet)",
                elsewhere="(none yet)",
                task=render("answer_leaf") + shown,
            )
            try:
                raw += llm.complete(messages, LeafAnswer).get("citations") or []
            except LLMError:
                pass  # no reply the schema takes: nothing cited
        checked = ex.store.check_citations(ex.graph_id, raw)
    asked = calls[calls["role"] == "answer"]
    assert len(asked) >= 2, "each question was put to the model with its evidence"
    assert not any(n["status"] == "claimed" for n in nodes), "a claim was left behind"

    def truly_there(citation: dict[str, Any]) -> bool:  # read from the files here, not by the store
        path = folder.parent / str(citation["source"])  # a folder's files are named under its name
        if not path.is_file():
            return False
        lines = path.read_text().split("\n")[int(citation["line_start"]) - 1 : int(citation["line_end"])]
        quoted = _words(str(citation["quote"]))
        return bool(quoted) and quoted in _words("\n".join(lines))

    assert all(truly_there(dict(c)) for c in checked if c["status"] == "verified"), checked
    answers = [n for n in nodes if n["node_type"] == "answer" and "seed_kind" not in n["metadata"]]
    cited = [c for a in answers for c in a["metadata"].get("citations") or []]
    for answer in answers:
        citations = answer["metadata"].get("citations") or []
        verified = [c for c in citations if c["status"] == "verified"]
        assert all(truly_there(c) for c in verified), verified  # a wrong citation never passes
        ok = bool(citations) and len(verified) == len(citations)
        assert answer["metadata"]["support"] == ("supported" if ok else "unsupported")
    for finding in result.findings:  # only supported findings, each on citations that are truly there
        assert finding["support"] == "supported" and finding["citations"]
        assert all(c["status"] == "verified" and truly_there(c) for c in finding["citations"])
    assert all(f["support"] == "unsupported" for f in result.unsupported_findings)
    assert result.support_counts == {
        "supported": len(result.findings),
        "unsupported": len(result.unsupported_findings),
    }
    if not result.findings:
        assert result.degraded and any("no supported findings" in r for r in result.degraded_reasons)
    print(
        f"gemma-3-270m with sources: {len(answers)} answers, {len(cited)} citations "
        f"({sum(c['status'] == 'verified' for c in cited)} verified), answers {result.answer_support}, "
        f"findings {result.support_counts}; asked directly: "
        f"{dict(Counter(c['status'] for c in checked))} of {len(checked)} citations"
    )


def test_demo_local_runs_and_stops_its_server(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_local_model()
    monkeypatch.chdir(tmp_path)
    before = _servers()  # the module's own server, started by the fixture of the other test, if it ran
    code = main(["demo", "--local", "--quiet", "--db", "local.duckdb"])
    out = capsys.readouterr().out
    # Finished (0), finished degraded (3: a question the model failed is a gap), or paused because the model
    # failed the root's synthesis on every try (3: synthesis_failed), never a failed seed or
    # a dead server (3 too, said in the output) nor a budget's stop (4).
    assert code in (0, 3), f"the demo on the packaged model ended with exit {code}:\n{out}"
    assert not re.search("seed_failed|model_unavailable|no summary", out), f"no tree grew:\n{out}"
    assert "Seed: " in out and "model calls (" in out and "gemma-3-270m" in out
    assert re.search(r"\d+ accepted, \d+ corrected, \d+ rejected, \d+ failed", out), out
    assert _servers() == before, "the demo left its llama.cpp server running"


def _servers() -> set[int]:
    """Local model servers this test process started (its children), still running."""
    import psutil

    return {
        p.pid
        for p in psutil.Process().children(recursive=True)
        if p.is_running()
        and p.status() != psutil.STATUS_ZOMBIE
        and "fractal_nb.llm.local_server" in " ".join(p.cmdline())
    }


def test_a_file_that_is_not_a_model_kills_the_real_server_at_start_and_says_so(tmp_path: Path) -> None:
    require_local_model()
    junk = tmp_path / "not-a-model.gguf"
    junk.write_bytes(b"GGUF? no: " + bytes(range(256)) * 16)
    server = LocalModelServer(model=junk)
    with pytest.raises(LLMUnavailableError) as raised:
        server.start()
    message = str(raised.value)
    assert message.startswith("the local model server died (exit 1)"), message
    assert "llama.cpp's server did not start" in message and str(server.log_path) in message
    assert server.pid is not None and not _running(server.pid)


def test_the_real_server_killed_mid_completion_is_reported_dead_with_its_log() -> None:
    """As a server that crashes on a completion (llama.cpp's AMX fault): the call says it died, and how."""
    require_local_model()
    with LocalModelServer() as server, server.llm() as llm:
        failures: list[BaseException] = []

        def ask() -> None:
            try:
                llm.complete(
                    [{"role": "user", "content": "Why do some cities grow faster than others?"}], LeafAnswer
                )
            except LLMError as exc:
                failures.append(exc)

        asking = threading.Thread(target=ask)
        asking.start()
        while not _generating(server.port):  # until the request reached a slot
            asking.join(timeout=0.05)  # returns at once if the completion ends
            assert asking.is_alive(), "the completion ended before it could be interrupted"
        assert server.pid is not None
        os.kill(server.pid, signal.SIGKILL)
        asking.join()
    assert len(failures) == 1 and isinstance(failures[0], LLMUnavailableError), failures
    message = str(failures[0])
    assert message.startswith("the local model server died (exit -9, signal SIGKILL); the end of its log")
    assert "cannot reach" not in message


def _generating(port: int) -> bool:
    """Whether llama.cpp's server is working on a request (its ``/slots``)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", "/slots")
        return any(slot.get("is_processing") for slot in json.loads(connection.getresponse().read()))
    finally:
        connection.close()


def _running(pid: int) -> bool:
    import psutil

    return psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE


def test_a_thinkon_chain_on_the_real_local_model_ends_honestly(
    server: LocalModelServer, tmp_path: Path
) -> None:
    """Think and Eval on Gemma 3 270M: whatever it writes, the chain ends, every return reaches its
    parent's done, nothing it wrote that the gates refuse is stored, and the result says what it is."""
    from fractal_nb.llm.schemas import ChainText, Think
    from tests.engine.chain_script import assert_chain_invariant
    from tests.engine.test_thinkon import parents

    with (
        server.llm() as llm,
        Exploration.create(
            "Write three tips for learning to cook.",
            intensity="pulse",
            llm=llm,
            strategy="thinkon",
            path=tmp_path / "gemma-chain.duckdb",
            max_tokens=15_000,  # about 10 calls: a few minutes on 1 thread
        ) as ex,
    ):
        status = ex.run(progress=False)
        assert status in ("all_complete", "budget_exhausted", "model_unavailable")
        nodes = ex.nodes()
        assert not (nodes["status"] == "claimed").any(), "a claim was left behind"
        calls = ex.llm_calls()
        assert set(calls["role"]) <= {"think", "eval"} and (calls["attempts"] >= 1).all()
        result = ex.harvest(finish=True)
        assert result.status == "completed" and result.strategy == "thinkon"
        assert not ex.store.thinkon_chain(ex.graph_id), "every level returned (or was unwound)"
        assert_chain_invariant(ex.store.get_events(ex.graph_id)["events"], parents(ex))
        judge = ReplyContext()
        for node in ex.store.get_snapshot(ex.graph_id)["nodes"]:
            level = node["metadata"].get("thinkon")
            if node["node_type"] == "answer" and level == "plan":  # a plan Think wrote passed the gates
                Think.model_validate({"type": "TODO", "description": node["text"]}, context=judge)
        for finding in result.findings:  # what reached the result is the model's prose, never junk
            assert TypeAdapter(ChainText).validate_python(finding["finding"], context=judge)
        print(f"gemma-3-270m chain: {status}, {result.replies}, degraded={result.degraded}")
        if result.degraded:
            assert result.degraded_reasons
