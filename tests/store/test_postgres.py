"""What only the PostgreSQL store has: its URL's password kept out of sight, its schema versions, its server.

The store contract's own tests run on PostgreSQL too (the ``backend`` fixture); these are
the connection's (fractal_nb/store/postgres.py).

Covers: mcp/remote/worker.py.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from fractal_nb import Exploration, GraphStore
from fractal_nb.errors import FractalError, InvalidInputError, StateError
from fractal_nb.llm.simulated import SimulatedLLM
from fractal_nb.store import open_store
from tests.conftest import Backend

pytestmark = pytest.mark.postgresql_only

PASSWORD = "s3cret-Pa55"


def _with_password(url: str) -> str:
    parts = urlsplit(url)
    netloc = f"{parts.username}:{PASSWORD}@{parts.hostname}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


def test_a_password_in_the_url_is_never_shown(backend: Backend, capsys: pytest.CaptureFixture[str]) -> None:
    # The throwaway cluster trusts every local connection, so a password is accepted and ignored:
    # what is tested is that it never leaves the URL it came in.
    assert backend.url is not None
    url = _with_password(backend.url)
    with open_store(url) as store:
        g = store.create_graph("Why do trams return?", "pulse")
        shown = [
            repr(store),
            store.location,
            str(store.get_events(g["graph_id"])),
            str(store.get_graph(g["graph_id"])),
        ]
        with pytest.raises(FractalError) as refused:
            store.get_graph("no-such-graph")
        shown.append(str(refused.value))
    with Exploration.open(url, g["graph_id"], llm=SimulatedLLM(seed=1)) as ex:
        shown.append(repr(ex))
    assert all(PASSWORD not in text for text in shown), shown
    assert "postgresql://postgres@" in store.location


def test_an_unreachable_server_is_a_clear_error_without_the_password() -> None:
    with pytest.raises(StateError) as refused:
        GraphStore(f"postgresql://nobody:{PASSWORD}@127.0.0.1:1/none?connect_timeout=2")
    assert "cannot connect to postgresql://nobody@127.0.0.1:1/none" in str(refused.value)
    assert PASSWORD not in str(refused.value)


def test_a_schema_a_newer_version_wrote_is_refused_and_left_as_it_is(backend: Backend) -> None:
    with backend.open() as store:
        store.create_graph("Why do trams return?", "pulse")
    import psycopg

    assert backend.url is not None
    with psycopg.connect(backend.url, autocommit=True) as conn:
        conn.execute("UPDATE store_info SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StateError, match="store version 99; this fractal-nb knows up to 1: upgrade"):
        backend.open()
    with psycopg.connect(backend.url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM graphs").fetchone() == (1,)


def test_another_applications_schema_is_refused_unchanged(backend: Backend) -> None:
    import psycopg

    assert backend.url is not None
    with psycopg.connect(backend.url, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoices (id int)")
    with pytest.raises(
        InvalidInputError, match=r"not a fractal_nb store: it holds other tables \(invoices\)"
    ):
        backend.open()
    with psycopg.connect(backend.url, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
        assert tables.fetchall() == [("invoices",)]


def test_stores_opening_a_new_schema_at_once_make_it_once(backend: Backend) -> None:
    opened: list[GraphStore] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            opened.append(backend.open())
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    graphs = [s.create_graph(f"Question {i}?", "pulse")["graph_id"] for i, s in enumerate(opened)]
    for s in opened:
        s.close()
    with backend.open() as store:
        assert sorted(g["graph_id"] for g in store.list_graphs()["graphs"]) == sorted(graphs)


def test_read_only_refuses_writes_and_a_schema_with_no_store(backend: Backend) -> None:
    assert backend.url is not None
    with pytest.raises(InvalidInputError, match="not a fractal_nb store yet: there is nothing to read"):
        GraphStore(backend.url, read_only=True)
    with backend.open() as store:
        gid = store.create_graph("Why do trams return?", "pulse")["graph_id"]
    with GraphStore(backend.url, read_only=True) as reader:
        assert reader.get_graph(gid)["seed"] == "Why do trams return?"
        with pytest.raises(StateError, match="read_only=True"):
            reader.update_graph_status(gid, "paused")


@pytest.fixture
def seeded(backend: Backend) -> Iterator[tuple[str, str]]:
    """A graph created, seeded and left active with open questions, as a notebook leaves it."""
    assert backend.url is not None
    with Exploration.create(
        "How do cities grow?", intensity="explore", llm=SimulatedLLM(seed=3), path=backend.url
    ) as ex:
        ex.step()  # seeds the root; its questions stay open for the workers
        yield backend.url, ex.graph_id


def test_worker_processes_work_the_database_with_no_owner(seeded: tuple[str, str], tmp_path: Path) -> None:
    url, graph_id = seeded
    command = [sys.executable, "-m", "fractal_nb.cli.main", "worker", "--db", url, "--graph-id", graph_id]
    command += ["--llm", "simulated", "--threads", "2"]
    workers = [
        subprocess.Popen([*command, "--worker-id", f"w{i}"], stdout=subprocess.PIPE, text=True)
        for i in range(3)
    ]
    outputs = [w.communicate(timeout=300)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0, 0], outputs
    with open_store(url) as store:
        events = store.get_events(graph_id)["events"]
        claims = [e["node_id"] for e in events if e["kind"] == "claimed"]
        nodes = store.get_snapshot(graph_id)["nodes"]
        answered = [n["parent_id"] for n in nodes if n["node_type"] == "answer"]
        open_left = [n for n in nodes if n["status"] in ("open", "claimed")]
    assert len(answered) > 3 and len(answered) == len(set(answered)), "a question answered twice"
    assert len(claims) == len(set(claims)), "a question claimed twice"
    assert open_left == []
    assert {line.split(":")[0].rsplit("-", 1)[0] for o in outputs for line in o.splitlines()} == {
        "w0",
        "w1",
        "w2",
    }


def test_a_notebooks_live_feed_shows_work_other_processes_did(seeded: tuple[str, str]) -> None:
    """The view's feed (what the kernel pump ticks) on one store, the workers in other processes."""
    from fractal_nb.views.graph_feed import GraphFeed

    url, graph_id = seeded
    with open_store(url) as store:
        feed = GraphFeed(store, graph_id)
        before = feed.snapshot()["counts"]
        assert feed.delta() is None
        command = [sys.executable, "-m", "fractal_nb.cli.main", "worker", "--db", url, "--graph-id", graph_id]
        subprocess.run([*command, "--llm", "simulated"], check=True, capture_output=True, timeout=300)
        delta = feed.delta()
        assert delta is not None
        after = delta["counts"]
        assert after["answered"] + after["synthesized"] > before["answered"] + before["synthesized"]
        assert after == GraphFeed(store, graph_id).snapshot()["counts"]  # the deltas add up to the whole


def test_a_watcher_hears_work_another_store_adds_and_not_its_claims_nor_its_own(backend: Backend) -> None:
    """Two stores on one schema (two connection pools, as two processes have): NOTIFY carries the news."""
    from tests.conftest import make_tree

    with backend.open() as here, backend.open() as there:
        tree = make_tree(here, "pulse", seeds=2)
        other = here.create_graph("Another question?", "pulse")["graph_id"]
        heard: list[str] = []
        news, barrier = threading.Event(), threading.Event()

        def wake() -> None:
            heard.append("work")
            news.set()

        stops = [here.watch(tree.graph_id, wake), here.watch(other, barrier.set)]
        try:
            there.claim_work(tree.graph_id, "elsewhere")  # takes work: tells nothing
            # Its own commit is no news from elsewhere: its workers announce their work themselves.
            here.add_node(tree.graph_id, tree.seeds[0], "answer", "This store's own answer.")
            there.add_node(other, there.get_graph(other)["root_node_id"], "answer", "Another graph's news.")
            # One listener hears the commits in their order: once the later one is heard, so was the claim.
            assert barrier.wait(30), "no news of the other graph's answer"
            assert heard == []
            there.add_node(tree.graph_id, tree.seeds[1], "answer", "A leaf's answer readies its synthesis.")
            assert news.wait(30), "no news of the answer committed by the other store"
        finally:
            for stop in stops:
                stop()
        assert heard == ["work"]
