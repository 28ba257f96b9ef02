"""The store across real processes: file locking, read-only opens, crash safety.

Every test here starts real child interpreters (``sys.executable``) on a lasting
store, named on their command line: a DuckDB file in ``tmp_path`` or the test's
PostgreSQL schema (``Backend.lasting``); nothing is mocked. A DuckDB file has one
writing process at a time (its lock, its read-only opens: ``duckdb_only``); a
PostgreSQL store has many at once. Children are always killed in a ``finally``
so a failing test leaves no process behind.

Covers: store/duckdb_file.py, store/holders.py, store/in_process.py.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fractal_nb import GraphStore, NotFoundError, StateError, StoreLockedError
from fractal_nb.store.holders import HOST, is_gone, process_start
from tests.conftest import Backend

REPO_ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 30.0

# A child that opens the store, creates a graph with a few open questions, says
# READY, then obeys stdin: "close" closes the store (and says CLOSED); end of
# input exits.
HOLDER = r"""
import sys
from fractal_nb import GraphStore

store = GraphStore(sys.argv[1])
g = store.create_graph("Who holds the file?", "deep", "autonomous")
gid = g["graph_id"]
answer = store.add_node(gid, g["root_node_id"], "answer", "The child does.")["node_id"]
for i in range(3):
    store.add_node(gid, answer, "question", f"held question {i}")
print("READY", gid, flush=True)
for line in sys.stdin:
    if line.strip() == "close":
        store.close()
        print("CLOSED", flush=True)
"""

# A child that adds questions one call at a time and prints each id only after
# add_node has returned (that is, after its transaction committed).
WRITER = r"""
import sys
from fractal_nb import GraphStore

store = GraphStore(sys.argv[1])
g = store.create_graph("Does a killed writer lose work?", "deep", "autonomous")
gid = g["graph_id"]
# Several answers, so a slow reader's kill never meets a node's bound on children (MAX_CHILDREN).
answers = [store.add_node(gid, g["root_node_id"], "answer", f"Let us see {k}.")["node_id"] for k in range(20)]
print("READY", gid, g["root_node_id"], ",".join(answers), flush=True)
i = 0
while True:
    node = store.add_node(gid, answers[i // 90], "question", f"question {i} " + "x" * 200,
                          owner="writer", metadata={"i": i})
    print("COMMITTED", node["node_id"], flush=True)
    i += 1
"""

# A child that writes batches of questions: it prints each id as add_node
# returns inside the batch (PENDING, not yet committed), then BATCH_DONE k once
# the batch's transaction has committed.
BATCH_SIZE = 10
BATCH_WRITER = (
    f"BATCH = {BATCH_SIZE}\n"
    + r"""
import sys
from fractal_nb import GraphStore

store = GraphStore(sys.argv[1])
g = store.create_graph("Is a batch all or nothing?", "deep", "autonomous")
gid = g["graph_id"]
answers = [store.add_node(gid, g["root_node_id"], "answer", f"Let us see {k}.")["node_id"] for k in range(20)]
print("READY", gid, g["root_node_id"], ",".join(answers), flush=True)
k = 0
while True:
    with store.batch():
        for i in range(BATCH):
            node = store.add_node(gid, answers[k // 9], "question", f"batch {k} question {i}",
                                  metadata={"batch": k})
            print("PENDING", k, node["node_id"], flush=True)
    print("BATCH_DONE", k, flush=True)
    k += 1
"""
)


class Child:
    """A child interpreter running one script, with its stdout read line by line."""

    def __init__(self, tmp_path: Path, name: str, source: str, *args: str) -> None:
        script = tmp_path / f"{name}.py"
        script.write_text(source)
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p),
        }
        self.proc = subprocess.Popen(
            [sys.executable, str(script), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            env=env,
        )
        self.pid = self.proc.pid
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)  # end of output

    def expect(self, prefix: str, timeout: float = READY_TIMEOUT_S) -> list[str]:
        """Wait for the next line; it must start with ``prefix``. Returns its words."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"child {self.pid} said nothing within {timeout} s") from None
        if line is None:
            raise AssertionError(f"child {self.pid} ended before {prefix!r}: {self.stderr()}")
        words = line.split()
        assert words and words[0] == prefix, f"expected {prefix!r} from child, got {line!r}"
        return words

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def finish(self, timeout: float = 10.0) -> int:
        """Close stdin and wait for a clean exit."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout=timeout)

    def sigkill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def remaining_lines(self) -> list[str]:
        """Every line still to read, once the process has ended."""
        self._reader.join(timeout=10)
        out: list[str] = []
        while True:
            line = self.lines.get_nowait()
            if line is None:
                return out
            out.append(line)

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read()

    def kill(self) -> None:
        """Cleanup: make sure the child is gone, whatever state it is in."""
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        finally:
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    try:
                        stream.close()
                    except OSError:
                        pass


@pytest.fixture
def children(tmp_path: Path) -> Iterator[list[Child]]:
    """Children started by a test; every one is killed afterwards, pass or fail."""
    started: list[Child] = []
    try:
        yield started
    finally:
        for child in started:
            child.kill()


def spawn(children: list[Child], tmp_path: Path, name: str, source: str, *args: str) -> Child:
    child = Child(tmp_path, name, source, *args)
    children.append(child)
    return child


def folder_state(folder: Path) -> dict[str, tuple[int, int]]:
    """Name -> (size, mtime_ns) of every file in ``folder`` except the child scripts."""
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir() if p.suffix != ".py"}


def assert_consistent(store: GraphStore, graph_id: str) -> dict[str, Any]:
    """The snapshot of ``graph_id`` holds together: tree edges, parents, order, events."""
    snap = store.get_snapshot(graph_id)
    nodes = snap["nodes"]
    ids = [n["node_id"] for n in nodes]
    assert len(ids) == len(set(ids)), "a node id appears twice"
    seqs = [n["seq"] for n in nodes]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "creation order is broken"
    roots = [n for n in nodes if n["parent_id"] is None]
    assert len(roots) == 1 and roots[0]["node_id"] == snap["root_node_id"]
    known = set(ids)
    for n in nodes:
        assert n["parent_id"] is None or n["parent_id"] in known, f"orphan node {n['node_id']}"
    tree_edges = {(e["from_node"], e["to_node"]) for e in snap["edges"] if e["edge_type"] == "parent_child"}
    assert tree_edges == {(n["parent_id"], n["node_id"]) for n in nodes if n["parent_id"]}
    events = store.get_events(graph_id)["events"]
    added = [e["node_id"] for e in events if e["kind"] == "node_added"]
    assert sorted(added) == sorted(ids), "node_added events and nodes disagree"
    return snap


def claim_all(store: GraphStore, graph_id: str, worker: str = "w") -> list[str]:
    claimed: list[str] = []
    while True:
        got = store.claim_work(graph_id, worker)
        if got["node_id"] is None:
            return claimed
        claimed.append(got["node_id"])


# -- a file held by another process ---------------------------------------------------


@pytest.mark.duckdb_only
def test_open_while_another_process_writes_is_refused_with_holder_and_ways_out(
    tmp_path: Path, children: list[Child]
) -> None:
    db = tmp_path / "held.duckdb"
    child = spawn(children, tmp_path, "holder", HOLDER, str(db))
    child.expect("READY")
    before = folder_state(tmp_path)

    for read_only in (False, True):
        with pytest.raises(StoreLockedError) as info:
            GraphStore(db, read_only=read_only)
        err = info.value
        message = str(err)
        assert err.holder_pid == child.pid
        assert str(child.pid) in message
        assert str(db.resolve()) in message and err.path == str(db.resolve())
        assert "close" in message  # way out 1: close it in that process
        assert "MCP" in message  # way out 2: connect to the owner's MCP server

    assert child.proc.poll() is None, "the refused open must not disturb the holder"
    assert folder_state(tmp_path) == before, "a refused open created or changed a file"


@pytest.mark.duckdb_only
def test_after_the_holder_closes_read_only_sees_the_graph_and_refuses_writes(
    tmp_path: Path, children: list[Child]
) -> None:
    db = tmp_path / "handover.duckdb"
    child = spawn(children, tmp_path, "holder", HOLDER, str(db))
    graph_id = child.expect("READY")[1]
    with pytest.raises(StoreLockedError):
        GraphStore(db)

    # close() alone (the process keeps running) releases the file
    child.send("close")
    child.expect("CLOSED")
    assert child.proc.poll() is None

    with GraphStore(db, read_only=True) as ro:
        assert "read_only" in repr(ro)
        snap = ro.get_snapshot(graph_id)
        assert snap["seed"] == "Who holds the file?" and snap["status"] == "active"
        assert len(snap["nodes"]) == 5  # root, its answer, three questions
        questions = [n for n in snap["nodes"] if n["node_type"] == "question" and n["depth"] == 1]
        assert ro.get_open_questions(graph_id)["count"] == 3
        assert ro.get_claimable_work(graph_id)["count"] == 3
        ro.query_convergence(graph_id)
        ro.get_saturation_status(graph_id)
        ro.get_events(graph_id)

        q, answer = questions[0]["node_id"], snap["nodes"][1]["node_id"]
        writes = {
            "create_graph": lambda: ro.create_graph("another", "deep", "autonomous"),
            "add_node": lambda: ro.add_node(graph_id, answer, "question", "one more"),
            "update_node": lambda: ro.update_node(graph_id, q, {"k": 1}),
            "mark_saturated": lambda: ro.mark_saturated(graph_id, q, "pruned"),
            "prune_branch": lambda: ro.prune_branch(graph_id, q),
            "claim_work": lambda: ro.claim_work(graph_id, "w"),
            "synthesize_node": lambda: ro.synthesize_node(graph_id, q, "done"),
            "update_graph_status": lambda: ro.update_graph_status(graph_id, "paused"),
            "resume_graph": lambda: ro.resume_graph(graph_id),
            "recover_stuck": lambda: ro.recover_stuck(graph_id, 0),
            "approve_gate": lambda: ro.approve_gate(graph_id),
            "mark_error": lambda: ro.mark_error(graph_id, q, "boom"),
            "delete_graph": lambda: ro.delete_graph(graph_id),
        }
        for name, call in writes.items():
            with pytest.raises(StateError) as info:
                call()
            message = str(info.value)
            assert "read_only" in message and "without read_only" in message, (name, message)
        with pytest.raises(StateError, match="read_only"):
            with ro.batch():
                pass
        assert ro.get_snapshot(graph_id) == snap, "a refused write changed the store"

    # the child may exit now; then open normally and write
    assert child.finish() == 0, child.stderr()
    with GraphStore(db) as rw:
        claimed = rw.claim_work(graph_id, "parent")
        assert claimed["node_id"] == questions[0]["node_id"]
        rw.add_node(graph_id, claimed["node_id"], "answer", "written by the parent")
        assert rw.get_open_questions(graph_id)["count"] == 2
    with GraphStore(db, read_only=True) as ro:
        nodes = ro.get_snapshot(graph_id)["nodes"]
        answered = [n["node_id"] for n in nodes if n["node_type"] == "question" and n["status"] == "answered"]
        assert answered == [nodes[0]["node_id"], claimed["node_id"]]  # root, parent's question


@pytest.mark.duckdb_only
def test_two_processes_may_read_a_file_no_one_writes(tmp_path: Path, children: list[Child]) -> None:
    db = tmp_path / "shared.duckdb"
    with GraphStore(db) as store:
        graph_id = store.create_graph("Read by many?", "pulse", "autonomous")["graph_id"]
    reader = r"""
import sys
from fractal_nb import GraphStore
store = GraphStore(sys.argv[1], read_only=True)
print("READY", len(store.get_snapshot(sys.argv[2])["nodes"]), flush=True)
sys.stdin.read()
"""
    child = spawn(children, tmp_path, "reader", reader, str(db), graph_id)
    assert child.expect("READY")[1] == "1"
    with GraphStore(db, read_only=True) as ro:
        assert ro.get_snapshot(graph_id)["graph_id"] == graph_id
    # but a writer is refused while the child reads, and told who holds the file
    with pytest.raises(StoreLockedError) as info:
        GraphStore(db)
    assert info.value.holder_pid == child.pid and str(child.pid) in str(info.value)


@pytest.mark.postgresql_only
def test_two_processes_write_one_postgresql_store_at_once(
    backend: Backend, tmp_path: Path, children: list[Child]
) -> None:
    """What a DuckDB file refuses (above), a PostgreSQL store allows: two writing processes and this one."""
    writers = [spawn(children, tmp_path, f"writer{i}", WRITER, backend.lasting) for i in range(2)]
    graphs = [w.expect("READY")[1] for w in writers]
    committed: list[list[str]] = [[], []]
    with backend.open(backend.lasting) as store:

        def events(graph_id: str) -> list[int]:
            return [e["event_id"] for e in store.get_events(graph_id)["events"]]

        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:  # until each process has committed between two commits of the other
            for i, w in enumerate(writers):
                committed[i].append(w.expect("COMMITTED")[1])
            first, second = events(graphs[0]), events(graphs[1])
            if min(first) < max(second) and min(second) < max(first) and len(committed[1]) >= 10:
                break
            assert time.monotonic() < deadline, "the two writers never wrote at once"
        # this process writes too while both children go on
        claimed = [store.claim_work(g, "parent")["node_id"] for g in graphs]
        assert None not in claimed
        for i, w in enumerate(writers):
            committed[i].extend(w.expect("COMMITTED")[1] for _ in range(10))
            assert w.proc.poll() is None, w.stderr()
        lines = [_kill_after(w, 0, "COMMITTED") for w in writers]
        for i, graph_id in enumerate(graphs):
            committed[i] += [line.split()[1] for line in lines[i] if line.startswith("COMMITTED")]
            snap = assert_consistent(store, graph_id)
            by_id = {n["node_id"]: n for n in snap["nodes"]}
            assert all(c in by_id for c in committed[i]), "a committed node was lost"
            assert by_id[claimed[i]]["owner"] == "parent" and by_id[claimed[i]]["status"] == "claimed"


def test_a_graph_deleted_by_another_process_is_not_found_after_reopening(
    backend: Backend, tmp_path: Path, children: list[Child]
) -> None:
    db = backend.lasting
    with backend.open(db) as store:
        graph_id = store.create_graph("Deleted elsewhere?", "pulse", "autonomous")["graph_id"]
        assert store.get_open_questions(graph_id)["count"] == 1  # the root; read it here once
    deleter = r"""
import sys
from fractal_nb import GraphStore
with GraphStore(sys.argv[1]) as store:
    store.delete_graph(sys.argv[2])
print("DELETED", flush=True)
"""
    child = spawn(children, tmp_path, "deleter", deleter, db, graph_id)
    child.expect("DELETED")
    assert child.finish() == 0
    with backend.open(db) as store:
        with pytest.raises(NotFoundError, match=graph_id):
            store.get_snapshot(graph_id)
        for read in (
            store.get_open_questions,
            store.get_claimable_work,
            store.get_ready_to_synthesize,
            store.query_convergence,
            store.get_saturation_status,
            store.get_events,
        ):
            with pytest.raises(NotFoundError, match=graph_id):
                read(graph_id)


# -- a writer killed mid-way ---------------------------------------------------------


def _kill_after(child: Child, lines_wanted: int, prefix: str) -> list[str]:
    """Read ``lines_wanted`` lines starting with ``prefix`` (others kept), then SIGKILL."""
    seen: list[str] = []
    deadline = time.monotonic() + READY_TIMEOUT_S
    counted = 0
    while counted < lines_wanted:
        line = child.lines.get(timeout=max(0.1, deadline - time.monotonic()))
        if line is None:
            raise AssertionError(f"writer died early: {child.stderr()}")
        seen.append(line)
        counted += line.startswith(prefix)
    child.sigkill()
    assert child.proc.returncode == -signal.SIGKILL
    return seen + child.remaining_lines()  # lines printed before the kill


@pytest.mark.slow
def test_sigkill_mid_writes_loses_no_committed_node(
    backend: Backend, tmp_path: Path, children: list[Child]
) -> None:
    db = backend.lasting
    child = spawn(children, tmp_path, "writer", WRITER, db)
    _, graph_id, root, listed = child.expect("READY")
    answers = listed.split(",")
    lines = _kill_after(child, 40, "COMMITTED")
    committed = [line.split()[1] for line in lines if line.startswith("COMMITTED")]
    assert len(committed) >= 40

    with backend.open(db) as store:  # the lock (DuckDB's file lock) died with the process
        snap = assert_consistent(store, graph_id)
        ids = [n["node_id"] for n in snap["nodes"]]
        missing = [c for c in committed if c not in ids]
        assert not missing, f"{len(missing)} committed node(s) lost after SIGKILL: {missing[:5]}"
        # at most the one call in flight may have landed without being printed
        head = 1 + len(answers)
        assert len(ids) - head - len(committed) in (0, 1)
        assert ids[:head] == [root, *answers] and ids[head : head + len(committed)] == committed
        by_id = {n["node_id"]: n for n in snap["nodes"]}
        assert all(by_id[c]["status"] == "open" for c in committed)
        assert all(by_id[c]["owner"] == "writer" for c in committed)
        assert [by_id[c]["metadata"]["i"] for c in committed] == list(range(len(committed)))

        claimed = claim_all(store, graph_id, "after-crash")
        assert claimed == ids[head:]  # creation order, each once
        done = store.claim_work(graph_id, "after-crash")
        assert done["node_id"] is None and done["graph_done"] is False  # all claimed, none done
        assert_consistent(store, graph_id)


@pytest.mark.slow
def test_sigkill_inside_a_batch_keeps_batches_all_or_nothing(
    backend: Backend, tmp_path: Path, children: list[Child]
) -> None:
    db = backend.lasting
    child = spawn(children, tmp_path, "batch_writer", BATCH_WRITER, db)
    _, graph_id, _root, _answers = child.expect("READY")
    # kill a little after the 4th batch began, most likely inside a batch
    lines = _kill_after(child, 3 * BATCH_SIZE + 4, "PENDING")
    pending: dict[int, list[str]] = {}
    done: set[int] = set()
    for line in lines:
        words = line.split()
        if words[0] == "PENDING":
            pending.setdefault(int(words[1]), []).append(words[2])
        elif words[0] == "BATCH_DONE":
            done.add(int(words[1]))
    assert done >= {0, 1, 2}

    with backend.open(db) as store:
        snap = assert_consistent(store, graph_id)
        by_batch: dict[int, list[str]] = {}
        for n in snap["nodes"]:
            if "batch" in n["metadata"]:
                by_batch.setdefault(n["metadata"]["batch"], []).append(n["node_id"])
        for k in done:
            assert by_batch.get(k) == pending[k], f"committed batch {k} lost nodes"
        for k, landed in by_batch.items():
            # all or nothing: a batch that landed is whole, even one killed before
            # its BATCH_DONE line was printed
            assert len(landed) == BATCH_SIZE, f"batch {k} landed {len(landed)} nodes, not all"
            assert landed == pending[k]
        assert set(by_batch) - done <= {max(pending)}, "only the batch in flight may be unreported"
        assert len(claim_all(store, graph_id)) == BATCH_SIZE * len(by_batch)


# -- two stores on one file in one process ------------------------------------------


@pytest.mark.slow
def test_two_stores_in_one_process_share_the_write_lock(backend: Backend) -> None:
    db = backend.lasting
    with backend.open(db) as first, backend.open(db) as second:
        g = first.create_graph("Shared by two stores?", "deep", "autonomous")
        gid = g["graph_id"]
        with first.batch():
            answer = first.add_node(gid, g["root_node_id"], "answer", "Many questions.")["node_id"]
            questions = [first.add_node(gid, answer, "question", f"q{i}")["node_id"] for i in range(100)]
        assert second.get_open_questions(gid)["count"] == 100  # one database behind both

        barrier = threading.Barrier(8)
        claims: dict[str, list[str]] = {}
        errors: list[BaseException] = []

        def work(store: GraphStore, worker: str) -> None:
            mine: list[str] = []
            try:
                barrier.wait(timeout=30)
                while True:
                    got = store.claim_work(gid, worker)
                    if got["node_id"] is None:
                        break
                    mine.append(got["node_id"])
            except BaseException as exc:  # surfaced below, with the worker's name
                errors.append(exc)
            claims[worker] = mine

        threads = [
            threading.Thread(target=work, args=(store, f"{name}-{i}"))
            for name, store in (("first", first), ("second", second))
            for i in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads)
        assert not errors, f"claims raised: {errors!r}"

        everything = [node for mine in claims.values() for node in mine]
        assert len(everything) == 100, "a question was claimed twice or not at all"
        assert sorted(everything) == sorted(questions)
        snap = second.get_snapshot(gid)
        owner = {n["node_id"]: n["owner"] for n in snap["nodes"]}
        for worker, mine in claims.items():
            assert all(owner[n] == worker for n in mine)
        wanted = set(questions)
        assert all(n["status"] == "claimed" for n in snap["nodes"] if n["node_id"] in wanted)

    # and the store is free again once both are closed
    with backend.open(db, read_only=True) as ro:
        assert ro.get_open_questions(gid)["count"] == 0


def test_a_killed_holder_not_yet_reaped_is_gone() -> None:
    """kill -9 of a holder whose parent has not waited for it yet (a zombie) is gone at once."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; print(flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "\n"  # running
        start = process_start(child.pid)
        assert not is_gone("h", HOST, child.pid, start), "a live process is not gone"
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not Path(f"/proc/{child.pid}/stat").read_text().split(") ")[1].startswith("Z"):
            assert time.monotonic() < deadline, "the killed child never became a zombie"
            time.sleep(0.01)
        assert is_gone("h", HOST, child.pid, start), "killed, unreaped: gone all the same"
    finally:
        child.kill()
        child.communicate(timeout=30)
