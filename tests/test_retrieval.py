"""fractal_nb/retrieval.py (docs/architecture/engine.md, "Retrieval"): ranking, terms, bounds, junk,
threads."""

from __future__ import annotations

import doctest
import importlib.util
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import fractal_nb.retrieval
from fractal_nb.errors import InvalidInputError
from fractal_nb.retrieval import SourceIndex, tokenize
from fractal_nb.store.records import ChunkRecord

ROOT = Path(__file__).resolve().parents[1]


def chunk(text: str, source: str = "notes.md", line_start: int = 1) -> ChunkRecord:
    line_end = line_start + text.count("\n")
    return {
        "chunk_id": f"s1:{line_start}-{line_end}",
        "source_id": "s1",
        "source": source,
        "line_start": line_start,
        "line_end": line_end,
        "text": text,
    }


CHUNKS = [
    chunk("Rainfall in the valley doubled in March.", line_start=1),
    chunk("The harbour froze twice this winter.\nShips waited.", line_start=2),
    chunk("Prices of wheat rose after the harbour froze.", line_start=4),
    chunk("def claim_work(self):\n    return self.lease", "store/queue.py", 1),
    chunk("class HolderInfo:\n    parseHTTPHeader = None", "store/holders.py", 3),
]


def ids(hits: list[tuple[ChunkRecord, float]]) -> list[str]:
    return [f"{hit['source']}:{hit['line_start']}" for hit, _ in hits]


def test_the_chunk_with_the_words_ranks_first_and_scores_fall() -> None:
    index = SourceIndex(CHUNKS)
    hits = index.search("When did the harbour freeze twice?")
    assert ids(hits)[0] == "notes.md:2"  # harbour, froze... twice: only it has "twice"
    assert "notes.md:4" in ids(hits)  # harbour too, ranked below
    scores = [score for _, score in hits]
    assert all(score > 0 for score in scores) and scores == sorted(scores, reverse=True)
    assert ids(index.search("rainfall valley"))[0] == "notes.md:1"
    assert hits[0][0] is CHUNKS[1]  # the chunk as given, not a copy


def test_identifiers_count_whole_and_by_their_parts() -> None:
    assert tokenize("claim_work parseHTTPHeader HTMLParser sha256") == [
        "claim_work", "claim", "work",
        "parsehttpheader", "parse", "http", "header",
        "htmlparser", "html", "parser",
        "sha256", "sha", "256",
    ]  # fmt: skip
    index = SourceIndex(CHUNKS)
    assert ids(index.search("claim work"))[0] == "store/queue.py:1"  # the parts find the identifier
    assert ids(index.search("claim_work"))[0] == "store/queue.py:1"
    assert ids(index.search("How is an HTTP header parsed?"))[0] == "store/holders.py:3"
    assert ids(index.search("holders"))[0] == "store/holders.py:3"  # found by its source's name


def test_stopwords_and_single_letters_are_not_terms() -> None:
    assert tokenize("What is the x of a y?") == []
    assert tokenize("The Harbour") == ["harbour"]


def test_k_bounds_the_hits_only_matching_chunks_come_back_and_bad_arguments_are_refused() -> None:
    index = SourceIndex(CHUNKS)
    assert len(index) == len(CHUNKS)
    assert len(index.search("harbour froze", k=1)) == 1
    assert sorted(ids(index.search("harbour froze", k=50))) == ["notes.md:2", "notes.md:4"]  # score > 0 only
    assert len(index.search("harbour froze")) == 2
    for k in (0, -1, 1.5, True, "3"):
        with pytest.raises(InvalidInputError, match="k must be a whole number, at least 1"):
            index.search("harbour", k=k)  # type: ignore[arg-type]
    for query in (None, 3, ["harbour"]):
        with pytest.raises(InvalidInputError, match="query must be text"):
            index.search(query)  # type: ignore[arg-type]


@pytest.mark.parametrize("query", ["", "   ", "the of and what is", "zzqx", "?! ... --", "x y z"])
def test_empty_and_junk_queries_find_nothing(query: str) -> None:
    assert SourceIndex(CHUNKS).search(query) == []


def test_an_index_of_no_chunks_or_no_terms_finds_nothing() -> None:
    empty = SourceIndex([])
    assert len(empty) == 0 and empty.search("harbour") == []
    no_terms = SourceIndex([chunk("the of and", source="a"), chunk("", source="b", line_start=2)])
    assert len(no_terms) == 2 and no_terms.search("of the") == [] and no_terms.search("harbour") == []


def test_chunks_of_only_stopwords_are_indexed_and_never_found() -> None:
    index = SourceIndex([chunk("the of and"), chunk("harbour", line_start=2)])
    assert len(index) == 2 and ids(index.search("harbour")) == ["notes.md:2"]


def package_chunks() -> list[ChunkRecord]:
    """This package's own source files, 30 lines a chunk: a corpus with real words and identifiers."""
    chunks = []
    for path in sorted((ROOT / "fractal_nb").rglob("*.py")):
        lines = path.read_text(encoding="utf-8").split("\n")
        for start in range(0, len(lines), 30):
            chunks.append(chunk("\n".join(lines[start : start + 30]), path.name, start + 1))
    return chunks


def test_threads_searching_one_index_find_what_one_thread_finds() -> None:
    index = SourceIndex(package_chunks())
    queries = [
        "lease renewal",
        "rollback",
        "cursor per thread",
        "reserve tokens",
        "fork lineage",
        "zzqx",
    ] * 4
    serial = [index.search(q, k=5) for q in queries]
    assert all(serial[:5])
    threads, found = 8, [[] for _ in range(8)]
    start = threading.Barrier(threads)

    def search(slot: int) -> None:
        start.wait()  # all threads search at once
        found[slot] = [index.search(q, k=5) for q in queries]

    workers = [threading.Thread(target=search, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert found == [serial] * threads


def test_doctests() -> None:
    assert doctest.testmod(fractal_nb.retrieval).failed == 0


# -- the bench's fixture (bench/retrieval_bench.py) --------------------------------------------


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    path = ROOT / "bench" / "retrieval_bench.py"
    spec = importlib.util.spec_from_file_location("retrieval_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["retrieval_bench"] = module  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules["retrieval_bench"]


def test_the_bench_questions_find_their_lines(bench: ModuleType) -> None:
    questions = bench.load_questions()
    assert len(questions) >= 30
    for question in questions:
        for span in question.spans:
            assert 1 <= span.line_start <= span.line_end
    assert doctest.testmod(bench).failed == 0


def test_a_lost_anchor_is_named(bench: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("one\ntwo\none\n", encoding="utf-8")
    fixture = tmp_path / "questions.json"
    fixture.write_text(
        '{"questions": [{"question": "Which?", "file": "notes.md", "anchor": "one", "lines": 2}]}',
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match="the anchor 'one' of 'Which\\?' is on 2 lines, not one"):
        bench.load_questions(fixture, tmp_path)


def test_the_chosen_index_finds_most_answers_in_this_repository(bench: ModuleType) -> None:
    """Recall@5 of SourceIndex on this repository's own chunks (the bench adds the standard library)."""
    corpus = bench.build_corpus(0, stdlib=False)
    questions = bench.load_questions()
    chosen = bench.recall(SourceIndex(corpus), questions, 5)
    baseline = bench.recall(bench.TermOverlap(corpus), questions, 5)
    assert chosen >= 0.7
    assert chosen > baseline


def test_the_bench_runs_on_this_repository_alone() -> None:
    """The bench end to end on its smallest corpus, so it cannot rot (its numbers are not checked)."""
    bench = ROOT / "bench" / "retrieval_bench.py"
    done = subprocess.run(
        [sys.executable, str(bench), "--chunks", "0", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for line in ("bm25s (SourceIndex)", "term overlap", "DuckDB ILIKE", "DuckDB fts: ", "choice: bm25s"):
        assert line in done.stdout
