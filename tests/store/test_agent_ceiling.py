"""Rule 17: no more workers hold claims on a graph at once than its budget's agents, in every process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

from fractal_nb import GraphStore
from fractal_nb.vocabulary import BUDGETS, Intensity
from tests.conftest import Backend, FakeClock, Tree, make_tree

PULSE_AGENTS = BUDGETS[Intensity.PULSE].max_agents  # 3


@pytest.fixture
def pulse(fresh_store: GraphStore) -> Tree:
    return make_tree(fresh_store, "pulse", seeds=PULSE_AGENTS + 3)


def test_a_worker_beyond_the_ceiling_claims_nothing_and_is_told_why(pulse: Tree) -> None:
    store, gid = pulse.store, pulse.graph_id
    held = [store.claim_work(gid, f"w{i}")["node_id"] for i in range(PULSE_AGENTS)]
    assert None not in held
    refused = store.claim_work(gid, "w-extra")
    assert refused["node_id"] is None
    assert refused["busy_workers"] == PULSE_AGENTS
    assert refused["graph_done"] is False
    assert store.get_claimable_work(gid)["count"] > 0  # work waits; only the ceiling holds it


def test_a_worker_holding_a_claim_may_take_another_and_a_finished_claim_frees_a_seat(pulse: Tree) -> None:
    store, gid = pulse.store, pulse.graph_id
    first = [store.claim_work(gid, f"w{i}")["node_id"] for i in range(PULSE_AGENTS)]
    assert store.claim_work(gid, "w0")["node_id"] is not None  # w0 is one of the three already
    pulse.answer(str(first[1]))  # w1's question answered: its claim ends
    assert store.claim_work(gid, "w-extra")["node_id"] is not None


def test_claims_past_their_lease_do_not_hold_the_ceiling(pulse: Tree, clock: FakeClock) -> None:
    store, gid = pulse.store, pulse.graph_id
    for i in range(PULSE_AGENTS):
        store.claim_work(gid, f"w{i}", holder=None)  # plain leases (an MCP agent sends no holder)
    assert store.claim_work(gid, "w-extra", holder=None)["node_id"] is None
    clock.advance(store.lease_s + 1)
    assert store.claim_work(gid, "w-extra", holder=None)["node_id"] is not None


EXPLORE_AGENTS = BUDGETS[Intensity.EXPLORE].max_agents  # 8: pulse's depth 2 leaves no room for a sub-question


@pytest.fixture
def explore(fresh_store: GraphStore) -> Tree:
    return make_tree(fresh_store, "explore", seeds=EXPLORE_AGENTS + 3)


def ready_to_synthesize(tree: Tree, question: str) -> None:
    """``question`` answered with one sub-question, saturated: its synthesis is ready (rule 3)."""
    sub = tree.ask(tree.answer(question))
    tree.store.mark_saturated(tree.graph_id, sub, "derivable")


def test_a_synthesis_past_the_ceiling_is_refused_as_a_question_is(explore: Tree) -> None:
    """A synthesis claim is a claim: a ninth worker on an 8-agent graph is told busy, not handed one."""
    store, gid = explore.store, explore.graph_id
    ready_to_synthesize(explore, explore.seeds[0])
    held = [store.claim_work(gid, f"w{i}")["node_id"] for i in range(EXPLORE_AGENTS)]
    assert None not in held
    refused = store.claim_synthesis(gid, "w-extra")
    assert refused["node_id"] is None and refused["busy_workers"] == EXPLORE_AGENTS
    assert refused["graph_status"] == "active"
    assert store.get_ready_to_synthesize(gid)["count"] == 1  # it waits; nothing changed
    assert store.claim_synthesis(gid, "w0")["node_id"] == explore.seeds[0]  # a seated worker takes it


def test_threads_claiming_questions_and_syntheses_at_once_never_pass_the_ceiling(explore: Tree) -> None:
    store, gid = explore.store, explore.graph_id
    for question in explore.seeds[:EXPLORE_AGENTS]:
        ready_to_synthesize(explore, question)
    got: dict[str, str | None] = {}
    start = threading.Barrier(20)

    def claim(worker: str, synthesis: bool) -> None:
        start.wait()
        got[worker] = (store.claim_synthesis if synthesis else store.claim_work)(gid, worker)["node_id"]

    threads = [threading.Thread(target=claim, args=(f"w{i}", i % 2 == 1)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len([w for w, n in got.items() if n is not None]) == EXPLORE_AGENTS


def test_threads_claiming_at_once_never_pass_the_ceiling(pulse: Tree) -> None:
    store, gid = pulse.store, pulse.graph_id
    got: list[str | None] = []
    start = threading.Barrier(12)

    def claim(worker: str) -> None:
        start.wait()
        got.append(store.claim_work(gid, worker)["node_id"])

    threads = [threading.Thread(target=claim, args=(f"w{i}",)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len([n for n in got if n is not None]) == PULSE_AGENTS


def test_a_worker_process_asked_for_more_threads_than_agents_starts_only_max_agents(pulse: Tree) -> None:
    """``fractal-nb worker --threads 12`` on a 3-agent graph: three workers, three reports."""
    from fractal_nb.engine.dispatcher import ScaledClock  # noqa: PLC0415
    from fractal_nb.llm.simulated import SimulatedLLM  # noqa: PLC0415
    from fractal_nb.mcp.remote import work_remotely  # noqa: PLC0415

    reports = work_remotely(
        pulse.store,
        SimulatedLLM(seed=5),
        worker_id="p",
        graph_id=pulse.graph_id,
        threads=12,
        clock=ScaledClock(0.001),
    )
    assert [r.worker for r in reports] == ["p-1", "p-2", "p-3"]


_WORKER = textwrap.dedent(
    """
    import sys
    from fractal_nb.llm.simulated import SimulatedLLM
    from fractal_nb.mcp.remote import work_remotely
    from fractal_nb.store import open_store

    with open_store(sys.argv[1]) as store:
        reports = work_remotely(store, SimulatedLLM(seed=5, latency_s=0.05), worker_id=sys.argv[3],
                                graph_id=sys.argv[2], threads=int(sys.argv[4]))
    print(" ".join(r.exit_reason for r in reports))
    """
)


@pytest.mark.postgresql_only
def test_worker_processes_with_more_threads_than_agents_keep_to_the_ceiling(backend: Backend) -> None:
    """Two processes of 4 threads on a 3-agent graph: at no sampled moment do more than 3 hold claims."""
    assert backend.url is not None
    with backend.open() as store:
        tree = make_tree(store, "pulse", seeds=4)
        gid = tree.graph_id
        busiest = 0
        done = threading.Event()

        def watch() -> None:
            nonlocal busiest
            while not done.is_set():
                row = store._db.fetchone(  # noqa: SLF001 - what every process sees, as it is
                    "SELECT count(DISTINCT owner) FROM nodes WHERE graph_id = ? AND status = 'claimed'", [gid]
                )
                busiest = max(busiest, int(row[0]) if row else 0)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            workers = [
                subprocess.Popen(
                    [sys.executable, "-c", _WORKER, backend.url, gid, f"p{i}", "4"],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for i in range(2)
            ]
            outputs = [w.communicate(timeout=300)[0] for w in workers]
        finally:
            done.set()
            watcher.join()
        assert [w.returncode for w in workers] == [0, 0], outputs
        assert 0 < busiest <= PULSE_AGENTS
