"""Nothing is lost: a killed run resumes from the DuckDB file with every committed node.

Covers: store/in_process.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from fractal_nb import Exploration, GraphStore, SimulatedLLM, StateError
from tests.engine.test_runs import FAST, assert_no_double_claims, check_finished_graph

CHILD = textwrap.dedent("""
    import json, sys, threading
    from fractal_nb import Exploration, SimulatedLLM

    class Holding(SimulatedLLM):
        # After 40 committed nodes, every answer call holds its claim and says so: the kill
        # then lands while claims are surely in flight (no timing involved).
        hold = threading.Event()

        def complete(self, messages, schema):
            if self.hold.is_set() and getattr(schema, "role", "") == "answer":
                print(json.dumps({"holding": True}), flush=True)
                threading.Event().wait()
            return super().complete(messages, schema)

    ex = Exploration.create("How should a library digitise its archive?", intensity="deep",
                            llm=Holding(seed=8), path=sys.argv[1])
    print(json.dumps({"graph_id": ex.graph_id}), flush=True)
    count = 0
    lock = threading.Lock()

    def committed(record):
        global count
        ids = [record.answer_id, *record.sub_questions] if record.answer_id else []
        with lock:
            print(json.dumps({"node": record.node_id, "ids": ids}), flush=True)
            count += len(ids)
            if count >= 40:
                Holding.hold.set()

    ex.run(progress=False, on_step=committed)
""")


@pytest.mark.slow
def test_killed_process_resumes_with_every_committed_node(tmp_path) -> None:
    path = tmp_path / "killed.duckdb"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True, cwd=os.getcwd()
    )
    committed: list[str] = []
    try:
        assert child.stdout is not None
        graph_id = json.loads(child.stdout.readline())["graph_id"]
        for line in child.stdout:
            message = json.loads(line)
            if message.get("holding"):
                break  # a worker holds a claim it will never finish
            committed += message["ids"]
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)
        if child.stdout is not None:
            child.stdout.close()
    assert child.returncode == -signal.SIGKILL

    with GraphStore(path, read_only=True) as store:  # as the killed run left it
        in_flight = {n["node_id"] for n in store.get_snapshot(graph_id)["nodes"] if n["status"] == "claimed"}
    assert in_flight, "the child said a claim was held when it was killed"
    with Exploration.open(path, graph_id, llm=SimulatedLLM(seed=8), clock=FAST) as ex:
        nodes = ex.nodes()
        assert set(committed) <= set(nodes["node_id"]), "a committed node was lost"
        assert not (nodes["status"] == "claimed").any(), "claims of the dead run were not recovered"
        recovered = ex.events().query("kind == 'recovered'")
        assert set(recovered["node_id"]) == in_flight, "its holder is dead: back at once, no lease waited"
        ex.run(progress=False)
        assert ex.harvest().status == "completed"
        check_finished_graph(ex)


def test_stopped_run_resumes_from_the_file(tmp_path) -> None:
    path = tmp_path / "stopped.duckdb"
    with Exploration.create(
        "How should a library digitise its archive?",
        intensity="explore",
        llm=SimulatedLLM(seed=9),
        path=path,
        clock=FAST,
    ) as ex:
        ex.step(5)
        graph_id = ex.graph_id
        before = ex.nodes()
        claim = ex.store.claim_work(graph_id, "worker-that-dies")["node_id"]  # then the kernel dies
    with Exploration.open(path, llm=SimulatedLLM(seed=9), clock=FAST) as ex:
        assert ex.graph_id == graph_id  # the only graph in the file
        after = ex.nodes().set_index("node_id")
        assert set(before["node_id"]) <= set(after.index)
        assert after.loc[claim, "status"] == "open"
        assert ex.run(progress=False) in ("all_complete", "budget_exhausted")
        ex.harvest()
        check_finished_graph(ex)


def test_open_refuses_ambiguous_or_missing_files(tmp_path) -> None:
    path = tmp_path / "two.duckdb"
    for seed in ("one?", "two?"):
        Exploration.create(seed, intensity="pulse", llm=SimulatedLLM(), path=path).close()
    with pytest.raises(ValueError, match="holds 2 graphs"):
        Exploration.open(path, llm=SimulatedLLM())
    with pytest.raises(ValueError, match="no exploration file"):
        Exploration.open(tmp_path / "absent.duckdb", llm=SimulatedLLM())
    with pytest.raises(ValueError, match="llm must be a model"):
        Exploration.open(path, llm="gpt")  # type: ignore[arg-type]


def test_the_harvest_is_kept_with_the_graph(tmp_path) -> None:
    path = tmp_path / "kept.duckdb"
    with Exploration.create(
        "How should a library digitise its archive?",
        intensity="pulse",
        llm=SimulatedLLM(seed=10),
        path=path,
        clock=FAST,
    ) as ex:
        ex.run(progress=False)
        first = ex.harvest()
        calls = len(ex.llm_calls())
        assert ex.harvest() == first
        assert len(ex.llm_calls()) == calls, "a second harvest called the model again"
        graph_id = ex.graph_id
    with Exploration.open(path, graph_id, llm=SimulatedLLM(seed=99), clock=FAST) as ex:
        again = ex.harvest()
        assert again == first and len(ex.llm_calls()) == calls


def test_a_second_open_in_the_running_process_takes_no_live_claim(tmp_path) -> None:
    """A notebook re-runs Exploration.open(path) while a Run of the same file goes on."""
    path = tmp_path / "live.duckdb"
    with Exploration.create(
        "How should a library digitise its archive?",
        intensity="explore",
        llm=SimulatedLLM(seed=8, latency_s=0.05),
        path=path,
        clock=FAST,
    ) as ex:
        outcome: list[str] = []
        runner = threading.Thread(target=lambda: outcome.append(ex.run(progress=False)))
        runner.start()
        try:
            deadline = time.monotonic() + 60
            while not (ex.nodes()["status"] == "claimed").any():  # wait for live claims
                assert time.monotonic() < deadline, "the run never held a claim"
                time.sleep(0.01)
            with Exploration.open(path, llm=SimulatedLLM(seed=8), clock=FAST) as again:
                with pytest.raises(StateError, match="already running in this process"):
                    again.run(progress=False)
                with pytest.raises(StateError, match="already running in this process"):
                    again.step()
                assert again.events().query("kind == 'recovered'").empty, "a live claim was taken"
        finally:
            runner.join(120)
        assert outcome and outcome[0] in ("all_complete", "budget_exhausted")
        events = ex.events()
        assert events.query("kind == 'recovered'").empty
        assert_no_double_claims(ex)  # claimed again only after a refused reply gave it back
        answers = ex.nodes().query("node_type == 'answer'")
        assert answers["parent_id"].is_unique, "a question was answered twice"


SECOND_PROCESS = textwrap.dedent("""
    import sys
    from fractal_nb import Exploration, SimulatedLLM, StoreLockedError
    try:
        Exploration.open(sys.argv[1], llm=SimulatedLLM())
    except StoreLockedError as exc:
        print("LOCKED", exc, flush=True)
""")


def test_a_second_process_opening_a_running_file_is_refused_and_changes_nothing(tmp_path) -> None:
    path = tmp_path / "held.duckdb"
    with Exploration.create(
        "Why?", intensity="explore", llm=SimulatedLLM(seed=8, latency_s=0.05), path=path, clock=FAST
    ) as ex:
        runner = threading.Thread(target=lambda: ex.run(progress=False))
        runner.start()
        try:
            deadline = time.monotonic() + 60
            while not (ex.nodes()["status"] == "claimed").any():
                assert time.monotonic() < deadline, "the run never held a claim"
                time.sleep(0.01)
            done = subprocess.run(
                [sys.executable, "-c", SECOND_PROCESS, str(path)], capture_output=True, text=True, timeout=120
            )
            assert done.stdout.startswith("LOCKED") and f"process {os.getpid()}" in done.stdout, done
        finally:
            runner.join(120)
        assert ex.events().query("kind == 'recovered'").empty
        assert_no_double_claims(ex)
