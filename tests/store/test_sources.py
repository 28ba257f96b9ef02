"""Sources and checked citations in the store (docs/architecture/store.md, "Sources and citations").

Covers: store/citations.py.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import duckdb
import pytest

from fractal_nb import FractalError, GraphStore, InvalidInputError, NotFoundError
from fractal_nb.store.sources import MAX_SOURCE_CHARS, chunk_spans
from fractal_nb.vocabulary import CitationStatus, Support
from tests.conftest import Tree, make_tree
from tests.store.test_concurrency import run_threads

NOTES = "\n".join(
    [
        "# How a claim stays atomic",
        "",
        "A claim is one UPDATE of the question's row,",
        "guarded by its status: open or past its lease.",
        "",
        "Two workers racing for a question: one UPDATE wins,",
        "the other sees no row changed and claims the next one.",
    ]
)


def text(name: str, body: str, kind: str = "snippet", location: str | None = None) -> dict[str, Any]:
    return {"name": name, "kind": kind, "location": location, "text": body}


def cite(source: str, start: int, end: int, quote: str) -> dict[str, Any]:
    return {"source": source, "line_start": start, "line_end": end, "quote": quote}


def rows(store: GraphStore) -> tuple[int, ...]:
    """What a refused call must leave as it was: every row a source write touches."""
    counts = []
    for table in ("sources", "source_chunks", "events", "graph_history", "nodes"):
        found = store._db.fetchone(f"SELECT count(*) FROM {table}")
        assert found is not None
        counts.append(int(found[0]))
    return tuple(counts)


@pytest.fixture
def noted(tree: Tree) -> Tree:
    tree.store.add_sources(tree.graph_id, [text("notes.md", NOTES)])
    return tree


# -- chunks and ids -------------------------------------------------------------------


def test_chunks_are_line_windows_cut_at_blank_lines_with_stable_ids(tree: Tree) -> None:
    paragraphs = "\n".join(("\n".join(f"line {p}.{i}" for i in range(9)) + "\n") for p in range(12))
    [source] = tree.store.add_sources(tree.graph_id, [text("long.md", paragraphs)])
    chunks = tree.store.source_chunks(tree.graph_id)
    lines = paragraphs.split("\n")
    assert source["line_count"] == len(lines) - 1  # the final newline opens no line
    assert source["chunk_count"] == len(chunks) > 1
    expected_id = hashlib.sha256(f"long.md\0{source['content_hash']}".encode()).hexdigest()[:12]
    assert source["source_id"] == expected_id
    assert source["content_hash"] == hashlib.sha256(paragraphs.encode()).hexdigest()
    # Non-overlapping, covering every line, each ~20-40 lines, ending at a blank line but the last.
    assert chunks[0]["line_start"] == 1 and chunks[-1]["line_end"] == source["line_count"]
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert b["line_start"] == a["line_end"] + 1
        assert 20 <= a["line_end"] - a["line_start"] + 1 <= 40
        assert lines[a["line_end"] - 1] == ""
    for c in chunks:
        assert c["chunk_id"] == f"{expected_id}:{c['line_start']}-{c['line_end']}"
        assert c["text"] == "\n".join(lines[c["line_start"] - 1 : c["line_end"]])
    # The same text in another graph (or file): the same ids.
    other = tree.store.create_graph("Another question", "pulse")["graph_id"]
    tree.store.add_sources(other, [text("long.md", paragraphs)])
    assert [c["chunk_id"] for c in tree.store.source_chunks(other)] == [c["chunk_id"] for c in chunks]


def test_a_chunk_ends_before_it_passes_its_character_bound() -> None:
    assert chunk_spans(["x" * 5000] * 3) == [(1, 1), (2, 2), (3, 3)]


def test_sources_are_scoped_by_graph(noted: Tree) -> None:
    store = noted.store
    other = store.create_graph("Another question", "pulse")["graph_id"]
    assert store.list_sources(other) == [] and store.source_chunks(other) == []
    assert store.search_sources(other, "claim UPDATE row") == []
    [checked] = store.check_citations(other, [cite("notes.md", 3, 3, "A claim is one UPDATE")])
    assert checked["status"] == CitationStatus.NO_SUCH_SOURCE
    with pytest.raises(NotFoundError, match="has no source named 'notes.md'"):
        store.read_source(other, "notes.md", 1, 1)
    assert [s["name"] for s in store.list_sources(noted.graph_id)] == ["notes.md"]


def test_adding_the_same_text_again_writes_nothing(noted: Tree) -> None:
    before = rows(noted.store)
    again = noted.store.add_sources(noted.graph_id, [text("notes.md", NOTES)])
    assert rows(noted.store) == before
    assert again == noted.store.list_sources(noted.graph_id)


def test_one_event_for_an_add(tree: Tree) -> None:
    tree.store.add_sources(tree.graph_id, [text("a.md", "alpha line here"), text("b.md", "beta line here")])
    kinds = [e["kind"] for e in tree.store.get_events(tree.graph_id)["events"]]
    assert kinds.count("sources_added") == 1


# -- reading and searching ------------------------------------------------------------


def test_read_source_gives_lines_as_stored_and_refuses_what_is_not_there(noted: Tree) -> None:
    store, g = noted.store, noted.graph_id
    assert store.read_source(g, "notes.md", 3, 4)["lines"] == [
        "A claim is one UPDATE of the question's row,",
        "guarded by its status: open or past its lease.",
    ]
    source_id = store.list_sources(g)[0]["source_id"]
    assert store.read_source(g, source_id, 1, 1)["source"] == "notes.md"  # by id too
    with pytest.raises(InvalidInputError, match="notes.md has 7 lines; ask for lines 1 to 7"):
        store.read_source(g, "notes.md", 6, 9)
    with pytest.raises(NotFoundError, match="its sources: 'notes.md'"):
        store.read_source(g, "other.md", 1, 1)
    with pytest.raises(InvalidInputError, match="line_end 1 is before line_start 2"):
        store.read_source(g, "notes.md", 2, 1)


def test_search_finds_the_chunk_and_rebuilds_when_sources_change(noted: Tree) -> None:
    store, g = noted.store, noted.graph_id
    [hit] = store.search_sources(g, "which worker wins the race?", k=3)
    assert hit["source"] == "notes.md" and hit["score"] > 0
    assert store.search_sources(g, "mitochondria") == []
    store.add_sources(g, [text("bio.md", "The mitochondria is the powerhouse of the cell.")])
    [found] = store.search_sources(g, "mitochondria")
    assert found["source"] == "bio.md"


# -- the check ------------------------------------------------------------------------


def test_the_check_marks_a_missing_source_missing_lines_and_a_misquote(noted: Tree) -> None:
    store, g = noted.store, noted.graph_id
    checked = store.check_citations(
        g,
        [
            cite("notes.md", 3, 4, "A claim is one UPDATE of the question's row,\n  guarded by its status"),
            cite("missing.md", 1, 1, "A claim is one UPDATE"),
            cite("notes.md", 7, 9, "the other sees no row changed"),
            cite("notes.md", 3, 3, "A claim is two UPDATEs of the row"),
            cite("notes.md", 6, 6, "two workers racing for a question"),  # case differs
        ],
    )
    assert [c["status"] for c in checked] == [
        CitationStatus.VERIFIED,
        CitationStatus.NO_SUCH_SOURCE,
        CitationStatus.NO_SUCH_LINES,
        CitationStatus.MISQUOTED,
        CitationStatus.MISQUOTED,
    ]
    assert "detail" not in checked[0]
    assert "7 lines" in checked[2]["detail"] and "not in notes.md lines 3-3" in checked[3]["detail"]


def test_the_check_tolerates_what_a_model_copies_from_the_evidence(noted: Tree) -> None:
    store, g = noted.store, noted.graph_id
    copied = "[notes.md:L6-L7]\n6: Two workers racing for a question: one UPDATE wins,\n7: the other sees"
    quoted = '"one UPDATE wins, the other sees no row changed"'
    too_short = "one"  # a word is in many lines: it cannot prove a span
    statuses = [
        c["status"]
        for c in store.check_citations(g, [cite("notes.md", 6, 7, q) for q in (copied, quoted, too_short)])
    ]
    assert statuses == [CitationStatus.VERIFIED, CitationStatus.VERIFIED, CitationStatus.MISQUOTED]


def test_a_malformed_citation_is_refused_and_writes_nothing(noted: Tree) -> None:
    store, g, q = noted.store, noted.graph_id, noted.seeds[0]
    before = rows(store)
    for bad, message in [
        ("notes.md:3", "must be a list"),
        (["notes.md"], r"citations\[0\] must be an object"),
        ([cite("notes.md", 0, 1, "x")], "line_start must be a line number >= 1"),
        ([cite("notes.md", 4, 3, "x")], "line_end 3 is before its line_start 4"),
        ([cite("notes.md", 1, 1, "")], "quote must be the cited text"),
    ]:
        with pytest.raises(InvalidInputError, match=message):
            store.submit_answer(g, q, "An answer.", metadata={"citations": bad})
    assert rows(store) == before


# -- support on the write paths -------------------------------------------------------


def _answer_meta(tree: Tree, question: str, **meta: Any) -> dict[str, Any]:
    answer = tree.store.submit_answer(tree.graph_id, question, "An answer.", metadata=meta or None)
    return tree.node(answer["answer"]["node_id"])["metadata"]


def test_a_quote_of_punctuation_or_spaces_never_verifies(tree: Tree) -> None:
    ruled = "# Locks\n============\nA lock is held by one worker at a time.\n- - - - - - - - - - - -\n"
    tree.store.add_sources(tree.graph_id, [text("ruled.md", ruled)])
    quotes = [(2, "============"), (4, "- - - - - - - - - - - -"), (2, '"============"'), (3, "...........")]
    checked = tree.store.check_citations(tree.graph_id, [cite("ruled.md", n, n, q) for n, q in quotes])
    assert [c["status"] for c in checked] == [CitationStatus.MISQUOTED] * len(quotes)
    words = tree.store.check_citations(tree.graph_id, [cite("ruled.md", 3, 3, "held by one worker")])
    assert words[0]["status"] == CitationStatus.VERIFIED
    meta = _answer_meta(tree, tree.seeds[0], citations=[cite("ruled.md", 2, 2, "============")])
    assert meta["support"] == Support.UNSUPPORTED


def test_an_answer_with_a_failed_or_no_citation_is_unsupported(noted: Tree) -> None:
    good = cite("notes.md", 6, 6, "one UPDATE wins")
    meta = _answer_meta(noted, noted.seeds[0], citations=[good])
    assert meta["support"] == Support.SUPPORTED and meta["citations"][0]["status"] == CitationStatus.VERIFIED
    for question, citations in zip(
        noted.seeds[1:],
        [[good, cite("gone.md", 1, 1, "anything at all here")], [good, cite("notes.md", 3, 80, "A claim")]],
        strict=True,
    ):
        assert _answer_meta(noted, question, citations=citations)["support"] == Support.UNSUPPORTED
    q = noted.ask(noted.root_answer, "Another question?")
    meta = _answer_meta(noted, q)  # no citations while the graph has sources
    assert meta["support"] == Support.UNSUPPORTED and meta["citations"] == []
    q = noted.ask(noted.root_answer, "A misquoting question?")
    assert _answer_meta(noted, q, citations=[cite("notes.md", 6, 6, "two UPDATEs win")])["support"] == (
        Support.UNSUPPORTED
    )


def test_the_seeds_plan_is_no_claim_about_the_sources(fresh_store: GraphStore) -> None:
    # The root's answer decomposes the seed: judged only when it cites (the view marked it unsupported).
    store = fresh_store
    graph = store.create_graph("How does a claim stay atomic?", "pulse", "autonomous")
    store.add_sources(graph["graph_id"], [text("notes.md", NOTES)])
    plan = store.add_answer(
        graph["graph_id"], graph["root_node_id"], "Three parts.", sub_questions=["Which row?"]
    )
    assert "support" not in store.get_node(graph["graph_id"], plan["answer"]["node_id"])["node"]["metadata"]
    question = plan["sub_questions"][0]["node_id"]
    answered = store.add_answer(graph["graph_id"], question, "One UPDATE.")
    meta = store.get_node(graph["graph_id"], answered["answer"]["node_id"])["node"]["metadata"]
    assert meta["support"] == Support.UNSUPPORTED


def test_without_sources_an_answer_has_no_sources(tree: Tree) -> None:
    meta = _answer_meta(tree, tree.seeds[0], citations=[cite("notes.md", 1, 1, "anything at all here")])
    assert meta["support"] == Support.NO_SOURCES
    assert meta["citations"][0]["status"] == CitationStatus.NO_SUCH_SOURCE
    assert "support" not in _answer_meta(tree, tree.seeds[1])  # nothing cited, nothing to cite


def test_add_answer_checks_citations_too(noted: Tree) -> None:
    written = noted.store.add_answer(
        noted.graph_id,
        noted.seeds[0],
        "An answer.",
        metadata={"citations": [cite("notes.md", 2, 2, "x" * 20)]},
    )
    meta = noted.node(written["answer"]["node_id"])["metadata"]
    assert (
        meta["support"] == Support.UNSUPPORTED and meta["citations"][0]["status"] == CitationStatus.MISQUOTED
    )


def test_synthesize_node_checks_each_finding(noted: Tree) -> None:
    q = noted.seeds[0]
    noted.store.add_node(noted.graph_id, q, "answer", "An answer.")
    findings = [
        {
            "finding": "One UPDATE wins.",
            "confidence": "high",
            "citations": [cite("notes.md", 6, 6, "one UPDATE wins")],
        },
        {
            "finding": "Leases never expire.",
            "confidence": "low",
            "citations": [cite("notes.md", 4, 4, "never expire")],
        },
        {"finding": "Uncited.", "confidence": "low"},
    ]
    noted.store.synthesize_node(noted.graph_id, q, "A synthesis.", findings=findings)
    stored = noted.node(q)["metadata"]["findings"]
    assert [f["support"] for f in stored] == [Support.SUPPORTED, Support.UNSUPPORTED, Support.UNSUPPORTED]
    assert stored[1]["citations"][0]["status"] == CitationStatus.MISQUOTED
    assert stored[0]["confidence"] == "high"


def test_record_harvest_checks_findings_and_writes_the_harvest(noted: Tree) -> None:
    harvest = {
        "summary": "Claims are atomic.",
        "findings": [
            {
                "finding": "One UPDATE wins.",
                "confidence": "high",
                "citations": [cite("notes.md", 6, 6, "one UPDATE wins")],
            },
            {
                "finding": "Made up.",
                "confidence": "high",
                "citations": [cite("elsewhere.md", 1, 1, "made up things")],
            },
        ],
        "gaps": [],
    }
    noted.store.record_harvest(noted.graph_id, harvest)
    kept = noted.store.get_graph(noted.graph_id)["metadata"]["harvest"]
    assert kept["summary"] == "Claims are atomic."
    assert [f["support"] for f in kept["findings"]] == [Support.SUPPORTED, Support.UNSUPPORTED]
    assert kept["findings"][1]["citations"][0]["status"] == CitationStatus.NO_SUCH_SOURCE
    before = rows(noted.store)
    with pytest.raises(InvalidInputError, match=r"harvest.findings\[0\] must be an object with a 'finding'"):
        noted.store.record_harvest(noted.graph_id, {"findings": ["bare text"]})
    assert rows(noted.store) == before


# -- bad input changes nothing --------------------------------------------------------


@pytest.mark.parametrize(
    ("graph", "texts", "error", "message"),
    [
        ("g-unknown", [text("a.md", "some text")], NotFoundError, "graph 'g-unknown' not found"),
        (None, [], InvalidInputError, "texts must be a non-empty list"),
        (None, [text("a.md", "   \n ")], InvalidInputError, r"\('a.md'\) has no text"),
        (
            None,
            [text("notes.md", "other content")],
            InvalidInputError,
            "already has a source named 'notes.md'",
        ),
        (
            None,
            [text("b.md", "one"), text("b.md", "two")],
            InvalidInputError,
            "two sources are named 'b.md' with other content",
        ),
        (None, [text("a.md", "x" * (MAX_SOURCE_CHARS + 1))], InvalidInputError, "a source holds at most"),
        (None, [text("a.md", "text", kind="pdf")], InvalidInputError, "kind must be one of file, snippet"),
        (None, [text("", "text")], InvalidInputError, "name must be a name of 1-1,000 characters"),
        (None, [text("a.md", "a\x00b")], InvalidInputError, "NUL character"),
    ],
)
def test_bad_sources_are_refused_whole_and_change_nothing(
    noted: Tree, graph: str | None, texts: list[dict[str, Any]], error: type[FractalError], message: str
) -> None:
    store = noted.store
    good = text("fresh.md", "a fresh text that would be added")
    before = rows(store)
    with pytest.raises(error, match=message):
        store.add_sources(graph or noted.graph_id, [good, *texts] if texts else [])
    assert rows(store) == before
    assert [s["name"] for s in store.list_sources(noted.graph_id)] == ["notes.md"]


# -- forks ----------------------------------------------------------------------------


def test_a_fork_holds_the_sources_its_source_had_at_the_event(noted: Tree) -> None:
    store, g = noted.store, noted.graph_id
    at = store.get_events(g)["events"][-1]["event_id"]
    store.add_sources(g, [text("later.md", "added after the fork point")])
    fork = store.fork_graph(g, at)["graph_id"]
    assert [s["name"] for s in store.list_sources(fork)] == ["notes.md"]
    assert [c["chunk_id"] for c in store.source_chunks(fork)] == [
        c["chunk_id"] for c in store.source_chunks(g) if c["source"] == "notes.md"
    ]
    q = store.get_open_questions(fork)["open_questions"][0]["node_id"]
    answer = store.submit_answer(
        fork, q, "An answer.", metadata={"citations": [cite("notes.md", 6, 6, "one UPDATE wins")]}
    )
    meta = next(n for n in store.get_snapshot(fork)["nodes"] if n["node_id"] == answer["answer"]["node_id"])[
        "metadata"
    ]
    assert meta["support"] == Support.SUPPORTED
    assert [s["name"] for s in store.list_sources(g)] == ["notes.md", "later.md"]  # the source is unchanged
    store.delete_graph(fork)
    assert store.list_sources(g) and not store._db.fetchone(
        "SELECT 1 FROM sources WHERE graph_id = ?", [fork]
    )


# -- a table of the store's file ------------------------------------------------------


@pytest.mark.duckdb_only  # a table of the analyst's in the store's DuckDB file
def test_table_lines_reads_the_analysts_table_and_refuses_the_stores_own(tmp_path: Path) -> None:
    path = tmp_path / "x.duckdb"
    GraphStore(path).close()
    with duckdb.connect(str(path)) as con:  # the analyst's data, put beside the graphs while no run holds it
        con.execute('CREATE TABLE "sales data" (region VARCHAR, amount INTEGER, note VARCHAR)')
        con.execute("INSERT INTO \"sales data\" VALUES ('north', 10, NULL), ('south', 7, 'late')")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with GraphStore(path, read_only=True) as store:
        assert store.table_lines("sales data") == [
            "region | amount | note",
            "north | 10 | ",
            "south | 7 | late",
        ]
        assert store.table_lines("sales data", ["amount"]) == ["amount", "10", "7"]
        with pytest.raises(
            InvalidInputError, match="has no column 'price'; its columns: region, amount, note"
        ):
            store.table_lines("sales data", ["price"])
        for name in ("nodes", "node_history", "missing", 'sales data"; DROP TABLE nodes; --'):
            with pytest.raises(InvalidInputError, match="tables and views there: sales data"):
                store.table_lines(name)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest  # read, never written


# -- threads --------------------------------------------------------------------------


def test_threads_adding_sources_and_submitting_cited_answers_lose_nothing(fresh_store: GraphStore) -> None:
    t = make_tree(fresh_store, "explore", seeds=24)
    fresh_store.add_sources(t.graph_id, [text("notes.md", NOTES)])
    threads = 6

    def work(i: int) -> list[str]:
        fresh_store.add_sources(t.graph_id, [text(f"t{i}.md", f"Thread {i} wrote this evidence line.")])
        fresh_store.add_sources(t.graph_id, [text("shared.md", "The same text from every thread.")])
        answered = []
        while (claim := fresh_store.claim_work(t.graph_id, f"w{i}"))["node_id"] is not None:
            quote = f"Thread {i} wrote this evidence" if len(answered) % 2 else "one UPDATE wins"
            source = f"t{i}.md" if len(answered) % 2 else "notes.md"
            line = 1 if len(answered) % 2 else 6
            result = fresh_store.submit_answer(
                t.graph_id,
                claim["node_id"],
                f"Answer by {i}.",
                owner=f"w{i}",
                metadata={"citations": [cite(source, line, line, quote)]},
            )
            answered.append(result["answer"]["node_id"])
        return answered

    answers = [a for mine in run_threads(work, threads) for a in mine]
    assert len(answers) == len(set(answers)) == 24
    names = [s["name"] for s in fresh_store.list_sources(t.graph_id)]
    assert sorted(names) == sorted(["notes.md", "shared.md", *(f"t{i}.md" for i in range(threads))])
    nodes = {n["node_id"]: n for n in fresh_store.get_snapshot(t.graph_id)["nodes"]}
    assert {nodes[a]["metadata"]["support"] for a in answers} == {Support.SUPPORTED}
    kinds = [e["kind"] for e in fresh_store.get_events(t.graph_id)["events"]]
    assert kinds.count("sources_added") == threads + 2  # notes, shared once, one per thread


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s, g: s.read_source(g, 3, 1, 1), "source must be a source's name"),
        (lambda s, g: s.read_source(g, "notes.md", 1, 401), "read at most 400 at once"),
        (lambda s, g: s.search_sources(g, "x" * 2001), "the limit is 2,000"),
        (lambda s, g: s.search_sources(g, "claims", 0), "k must be an integer from 1 to 50"),
        (lambda s, g: s.table_lines(""), "a table's name must be a non-empty string"),
        (lambda s, g: s.check_citations(g, [cite("notes.md", 1, 1, "q")] * 101), "the limit is 100"),
        (lambda s, g: s.record_harvest(g, ["findings"]), "harvest must be an object"),
        (lambda s, g: s.record_harvest(g, {"findings": "none"}), "harvest.findings must be a list"),
        (lambda s, g: s.record_harvest(g, {"findings": [{"finding": "f"}] * 501}), "the limit is 500"),
        (lambda s, g: s.add_sources(g, [text(f"{i}", "t") for i in range(5001)]), "add at most 5,000"),
        (lambda s, g: s.add_sources(g, [text("a", "t", location="")]), "location must be a file's path"),
        (lambda s, g: s.add_sources(g, [text("a", "\ud800")]), "is not valid Unicode text"),
        (lambda s, g: s.add_sources(g, ["a.md"]), r"texts\[0\] must be an object"),
    ],
)
def test_bad_arguments_are_refused_and_change_nothing(noted: Tree, call: Any, message: str) -> None:
    before = rows(noted.store)
    with pytest.raises(InvalidInputError, match=message):
        call(noted.store, noted.graph_id)
    assert rows(noted.store) == before


@pytest.mark.duckdb_only  # a table of the analyst's in the store's DuckDB file
def test_table_lines_refuses_bad_columns_and_big_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "x.duckdb"
    GraphStore(path).close()
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t AS SELECT range AS n FROM range(3)")
    with GraphStore(path, read_only=True) as store:
        with pytest.raises(InvalidInputError, match="columns must be a non-empty list of column names"):
            store.table_lines("t", [])
        monkeypatch.setattr("fractal_nb.store.sources.MAX_TABLE_ROWS", 2)
        with pytest.raises(InvalidInputError, match="table 't' has 3 rows; a table source holds at most 2"):
            store.table_lines("t")


def test_a_file_source_is_hashed_once_per_change(tree: Tree, tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text(NOTES)
    tree.store.add_sources(tree.graph_id, [text("notes.md", NOTES, kind="file", location=str(path))])
    citation = [cite("notes.md", 6, 6, "one UPDATE wins")]
    for _ in range(2):  # the second check reads the hash it kept for this (path, mtime, size)
        [checked] = tree.store.check_citations(tree.graph_id, citation)
        assert checked["status"] == CitationStatus.VERIFIED and "detail" not in checked
    path.unlink()
    assert "changed on disk (or is gone)" in tree.store.check_citations(tree.graph_id, citation)[0]["detail"]


def test_an_answer_submitted_over_mcp_has_its_citations_checked(noted: Tree) -> None:
    import asyncio
    import json

    from mcp import Client

    from fractal_nb.mcp.server import build_server
    from tests.mcp.seed_worker import call

    store, g = noted.store, noted.graph_id
    claimed = store.claim_work(g, "outside")["node_id"]
    citations = [cite("notes.md", 6, 6, "one UPDATE wins"), cite("notes.md", 6, 6, "one UPDATE loses")]

    async def scenario() -> dict[str, Any]:
        async with Client(build_server(store)) as client:
            return await call(
                client,
                "fractal_submit_answer",
                graph_id=g,
                node_id=claimed,
                text="An outside agent's answer.",
                owner="outside",
                metadata=json.dumps({"citations": citations}),
            )

    written = asyncio.run(scenario())
    meta = noted.node(written["answer"]["node_id"])["metadata"]
    assert [c["status"] for c in meta["citations"]] == [CitationStatus.VERIFIED, CitationStatus.MISQUOTED]
    assert meta["support"] == Support.UNSUPPORTED
