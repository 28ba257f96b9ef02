"""``ex.state()`` (docs/architecture/facade.md, "The state of an exploration"): the six questions of
seed 004's completion standard answered from the stored state alone, on a run with a failure,
a prune, a fork and a follow-up."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.errors import LLMOutputError
from fractal_nb.exploration.state import ExplorationState
from fractal_nb.llm.protocol import Message
from tests.conftest import Backend

pytestmark = pytest.mark.both_backends


class FailsOn(SimulatedLLM):
    """The simulator, failing every answer to the questions containing ``word`` (model failures are data)."""

    def __init__(self, word: str) -> None:
        super().__init__(seed=5)
        self.word = word
        self.calls = 0

    def complete(self, messages: list[Message], schema: type[Any]) -> dict[str, Any]:
        self.calls += 1
        asked = messages[-1]["content"].partition("Question to answer now")[2].partition("\n")[2]
        if getattr(schema, "role", "") == "answer" and asked.startswith(self.word):
            raise LLMOutputError("the model replied with junk")
        return super().complete(messages, schema)


def checks_of(state: ExplorationState) -> dict[str, bool]:
    return {c["name"]: c["passed"] for c in state.checks}


def test_state_answers_the_six_questions(backend: Backend) -> None:
    path = backend.lasting
    llm = FailsOn("\x00")  # set below, once the seed questions are known
    with Exploration.create("Why do cities grow?", intensity="pulse", llm=llm, path=path) as ex:
        ex.step(1)  # the seed plan
        seeds = ex.nodes().query("depth == 1 and node_type == 'question'")
        failing, pruned = seeds["text"].iloc[0], seeds["node_id"].iloc[1]
        llm.word = failing
        ex.prune(pruned)
        ex.run(progress=False)
        ex.harvest(finish=True)
        ex.ask("What part does the climate play in how cities grow?")
        ex.run(progress=False)
        ex.harvest(finish=True)
        fork = ex.fork(at=ex.heads().iloc[0])
        fork.close()

        calls = llm.calls
        state = ex.state()
        assert llm.calls == calls, "no model call"
        # 1. The current line of work: the seed turn, then the follow-up.
        assert state.line_of_work[0].startswith("turn 1 (seed)")
        assert state.line_of_work[1].startswith("turn 2 (ask): ask(question='What part does the climate")
        assert state.current_head is not None and state.current_head["turn"] == 2
        # 2. Branches and why: the seed plan's (their proxy signal or the plan) and the follow-up.
        origins = {b["question"]: b["origin"] for b in state.branches}
        assert origins["What part does the climate play in how cities grow?"] == "ask"
        assert set(seeds["text"]) <= set(origins) and origins[failing] == "seed plan"
        assert all(b["why"] for b in state.branches)
        # 3. Values: stated facts (no sources: none is verified), assumptions, missing (the prune) and failed.
        kinds = state.counts()
        assert kinds["verified"] == 0 and kinds["stated"] > 0 and kinds["assumed"] > 0
        failed_ids = {v["node_id"] for v in state.values if v["kind"] == "failed"}
        missing_ids = {v["node_id"] for v in state.values if v["kind"] == "missing"}
        assert seeds["node_id"].iloc[0] in failed_ids and pruned in missing_ids
        stated = [v["detail"] for v in state.values if v["kind"] == "stated"]
        assert all(d.startswith("no verified citation; the model's own support: ") for d in stated)
        # 4. The head resume uses: the current one.
        assert state.open_turn is None and state.resume_from.startswith("head 2 (event ")
        # 5. Heads to attach from: head 1, not worth it (a failure beneath it), and why.
        assert [h["turn"] for h in state.attach_from] == [1]
        assert not state.attach_from[0]["worth_attaching"] and "failed" in state.attach_from[0]["why"]
        # 6. Checks: the failure makes the root's synthesis rest on unsound ground; the rest hold.
        checks = checks_of(state)
        assert checks["the root's synthesis rests on sound sub-questions"] is False
        assert checks["every question is answered or a gap"] and checks["nothing is held by a worker"]
        assert checks["no assumption was promoted to a fact"] and checks["every fact names its support"]
        # The same as JSON, and as HTML with model text escaped.
        assert json.loads(json.dumps(state.to_dict()))["current_head"]["turn"] == 2
        assert "<script" not in state._repr_html_()


def test_a_fork_says_where_it_came_from_and_an_open_turn_is_what_resume_continues(backend: Backend) -> None:
    path = backend.lasting
    with Exploration.create(
        "Why do cities grow?", intensity="pulse", llm=SimulatedLLM(seed=5), path=path
    ) as ex:
        ex.run(progress=False)
        ex.harvest()
        head = ex.heads().iloc[0]
        fork = ex.fork(at=head)
        try:
            fork.ask("Which cities shrank, and why?")
            state = fork.state()
            assert state.line_of_work[0] == f"forked from {ex.graph_id} at its event {head['head_event']}"
            assert state.open_turn == 2 and state.resume_from.startswith("turn 2 is open since head 1")
            assert state.attach_from[0]["worth_attaching"] if state.attach_from else True
        finally:
            fork.close()
        assert ex.state().attach_from == [] and ex.state().current_head["worth_attaching"]  # type: ignore[index]


def test_the_shell_prints_the_state_asks_and_forks(backend: Backend, capsys: Any) -> None:
    from fractal_nb.cli.main import main

    db = backend.lasting
    assert main(["demo", "--db", db, "--intensity", "pulse", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["ask", "--db", db, "What part does the climate play?", "--quiet", "--llm", "simulated"]) == 0
    assert "Turn 2: asked 'What part does the climate play?'" in capsys.readouterr().out
    assert main(["state", db, "--json"]) == 0
    state = json.loads(capsys.readouterr().out)
    assert state["current_head"]["turn"] == 2 and [h["turn"] for h in state["attach_from"]] == [1]
    assert any(v["kind"] == "missing" and v["detail"].startswith("unknown") for v in state["values"])
    assert main(["state", db]) == 0
    text = capsys.readouterr().out
    assert "Line of work:\n  turn 1 (seed)" in text and "Resume uses: head 2" in text
    assert main(["fork", "--db", db, "--head", "1"]) == 0
    said = capsys.readouterr().out
    assert "Forked " in said
    with Exploration.open(db, llm=SimulatedLLM(), graph_id=_only_fork(db)) as fork:
        assert fork.heads()["turn"].tolist() == [1] and fork.status == "completed"
    # The shell's way to the fork, as printed (issue 42): report it, then ask it a follow-up.
    report = re.search(r"see it:  fractal-nb (.+)", said)
    ask = re.search(r"ask it a follow-up:  fractal-nb (.+)", said)
    assert report and ask, said
    assert main(shlex.split(report.group(1))) == 0 and "**Status:** completed" in capsys.readouterr().out
    typed = ask.group(1).replace("QUESTION", shlex.quote("Does rain matter?"))
    assert main([*shlex.split(typed), "--quiet"]) == 0
    assert "Turn 2: asked 'Does rain matter?'" in capsys.readouterr().out
    source = str(Exploration.family(db)["graph_id"].iloc[0])
    assert main(["fork", "--db", db, "--graph-id", source, "--head", "9"]) == 1
    assert "has no head of turn 9" in capsys.readouterr().err


def _only_fork(db: str) -> str:
    family = Exploration.family(db)
    return str(family[family["forked_from"].notna()]["graph_id"].iloc[0])


def test_a_fact_no_source_states_is_no_verified_value_and_fails_its_check(backend: Backend) -> None:
    from fractal_nb.exploration.state import exploration_state

    store = backend.open()
    g = store.create_graph("Why do dams fail?", "pulse", "autonomous")
    gid = g["graph_id"]
    q = store.add_answer(gid, g["root_node_id"], "Water.", sub_questions=["When do they fail?"])
    leaf = q["sub_questions"][0]["node_id"]
    store.add_answer(gid, leaf, "In floods.")
    claim = {"kind": "fact", "text": "Dams always fail in spring.", "support": "trust me"}
    store.synthesize_node(gid, leaf, "Spring floods.", claims=[claim])  # past the engine's grounding
    state = exploration_state(store, gid)
    value = next(v for v in state.values if v["text"] == claim["text"])
    assert value["kind"] == "assumed" and "no source states it" in value["detail"]
    assert checks_of(state)["no assumption was promoted to a fact"] is False


def test_a_forks_own_head_can_be_read_forked_and_attached_and_a_deleted_source_is_said(
    backend: Backend,
) -> None:
    path = backend.lasting
    with Exploration.create(
        "Why do cities grow?", intensity="pulse", llm=SimulatedLLM(seed=5), path=path
    ) as ex:
        ex.run(progress=False)
        ex.harvest()
        ex.ask("What part does the climate play in how cities grow?")
        ex.run(progress=False)
        ex.harvest()
        fork = ex.fork(at=ex.heads().iloc[-1])  # at head 2
        try:
            head = fork.heads().iloc[-1]
            assert fork.state().current_head["worth_attaching"]  # type: ignore[index]
            assert len(fork.at(head).nodes()) == len(fork.nodes())
            again = fork.fork(at=head)
            again.close()
            narrow = fork.attach(head, "Which harbour cities grew fastest?")
            narrow.close()
            ex.store.delete_graph(ex.graph_id)  # the source goes; the fork keeps its rows
            first = fork.state().attach_from[0]
            assert first["turn"] == 1 and not first["worth_attaching"] and "deleted since" in first["why"]
        finally:
            fork.close()


def test_a_fact_is_verified_only_by_a_citation_the_store_verified_that_says_it(
    backend: Backend, tmp_path: Path
) -> None:
    """Issue 42: a model's own support makes a fact "stated"; a verified citation quoting it, "verified"."""
    from tests.engine.test_evidence import GROWTH

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "growth.md").write_text(GROWTH)
    with Exploration.create(
        "Why do some cities grow faster than others?",
        intensity="pulse",
        llm=SimulatedLLM(seed=3),
        sources=folder,
        path=backend.lasting,
    ) as ex:
        ex.run(progress=False)
        state = ex.state()
        verified = [v for v in state.values if v["kind"] == "verified"]
        assert verified, state.counts()
        for value in verified:  # each names lines of the file that hold what it says
            source, lines, quote = value["detail"].removeprefix("cites ").split(":", 2)
            first, last = (int(n) for n in lines.removeprefix("L").split("-L"))
            held = " ".join(GROWTH.splitlines()[first - 1 : last])
            assert source == "notes/growth.md" and quote.strip().rstrip("…")[:40] in held, value
        # The same fact, its citation misquoted in the store: only stated.
        nodes = ex.store.get_snapshot(ex.graph_id)["nodes"]
        for node in nodes:
            cited = node["metadata"].get("citations")
            if node["node_type"] == "answer" and cited:
                ex.store.update_node(
                    ex.graph_id, node["node_id"], {"citations": [{**c, "status": "misquoted"} for c in cited]}
                )
        after = ex.state()
        assert after.counts()["verified"] == 0
        assert {v["text"] for v in after.values if v["kind"] == "stated"} >= {v["text"] for v in verified}
