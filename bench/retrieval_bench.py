"""Retrieval benchmark: lexical libraries over source chunks, side by side in one run (issue 26).

Run from the repository root::

    python bench/retrieval_bench.py            # >= 12,000 chunks: this repository + the standard library
    python bench/retrieval_bench.py --quick    # a smoke run: >= 2,000 chunks

The corpus is built on this machine without network: this repository's text
files (the README, docs, the package, tests, benches) and then the Python standard
library's ``.py`` files, in sorted order, until it holds ``--chunks`` chunks.
Files are cut into the store's chunks (``fractal_nb.store.sources.chunk_spans``:
non-overlapping windows of about 30 lines, ending at a blank line between 20
and 40 where there is one; a chunk's text is its lines joined by "\\n"); a
checkout without that module uses a copy of the same windows written here.

The questions (``bench/retrieval_questions.json``) are about this repository,
each with the file and lines that answer it; a span is found by an anchor
string at run time, so the fixture survives edits above it. A hit is one of a
candidate's first five chunks overlapping the span (recall@5; @1 beside it).

Candidates, all given the same terms (``fractal_nb.retrieval.tokenize`` of a
chunk's source name and text, and of the question):

- ``bm25s``: ``fractal_nb.retrieval.SourceIndex`` itself (the choice);
- ``tantivy``: an in-memory tantivy index, the terms as pre-split words, the
  question as a disjunction of term queries (BM25 too);
- ``term overlap``: the baseline with no library, chunks ranked by how many of
  the question's distinct terms they hold;
- ``DuckDB ILIKE``: the same count with ``ILIKE '%term%'`` in SQL, what the store
  could do alone;
- ``DuckDB fts`` only with ``FRACTAL_NB_BENCH_FTS=1`` and the extension installed:
  DuckDB does not ship it (``LOAD fts`` fails; ``INSTALL fts`` downloads it at
  run time, which fractal_nb never does), so it is not a candidate.

Index time is the median of ``--repeat`` builds from the chunks (terms
included); query time the median over every question, ``--repeat`` times.
Nothing here is a test: numbers depend on the machine and its load
(tests/test_retrieval.py checks the fixture and the recall).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import statistics
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

import duckdb  # noqa: E402

import fractal_nb.retrieval  # noqa: E402
from fractal_nb.retrieval import SourceIndex, tokenize  # noqa: E402
from fractal_nb.store.records import ChunkRecord  # noqa: E402
from fractal_nb.store.sources import chunk_spans, split_lines  # noqa: E402  (the store's own chunks)

QUESTIONS = Path(__file__).with_name("retrieval_questions.json")
K = 5
REPOSITORY_PARTS = [("README.md",), ("docs", "*.md"), ("fractal_nb", "*.py", "*.sql", "*.txt")]
REPOSITORY_PARTS += [("tests", "*.py"), ("bench", "*.py")]


# -- the corpus --------------------------------------------------------------------------------


def file_chunks(name: str, text: str) -> list[ChunkRecord]:
    """A file's chunks with the store's ids (``source_id:line_start-line_end``)."""
    content_hash = hashlib.sha256(text.encode()).hexdigest()
    lines = split_lines(text)
    source_id = hashlib.sha256(f"{name}\0{content_hash}".encode()).hexdigest()[:12]
    chunks: list[ChunkRecord] = []
    for start, end in chunk_spans(lines):
        body = "\n".join(lines[start - 1 : end])
        if body.strip():  # blank lines alone are no evidence (the store keeps them; no question finds them)
            chunks.append(
                {
                    "chunk_id": f"{source_id}:{start}-{end}",
                    "source_id": source_id,
                    "source": name,
                    "line_start": start,
                    "line_end": end,
                    "text": body,
                }
            )
    return chunks


def repository_files(root: Path = ROOT) -> Iterator[tuple[str, Path]]:
    """This repository's text files, by part, each part's files sorted."""
    for folder, *patterns in REPOSITORY_PARTS:
        if not patterns:
            yield folder, root / folder
            continue
        found = {p for pattern in patterns for p in (root / folder).rglob(pattern)}
        for path in sorted(found):
            yield path.relative_to(root).as_posix(), path


def stdlib_files() -> Iterator[tuple[str, Path]]:
    """The standard library's ``.py`` files, sorted (installed packages left out)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.rglob("*.py")):
        if "site-packages" not in path.parts:
            yield "stdlib/" + path.relative_to(stdlib).as_posix(), path


def build_corpus(chunks: int, *, root: Path = ROOT, stdlib: bool = True) -> list[ChunkRecord]:
    """This repository's chunks, then the standard library's until there are ``chunks``."""
    corpus: list[ChunkRecord] = []
    for name, path in repository_files(root):
        corpus += file_chunks(name, path.read_text(encoding="utf-8"))
    for name, path in stdlib_files() if stdlib else ():
        if len(corpus) >= chunks:
            break
        try:
            corpus += file_chunks(name, path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, OSError):
            continue  # a file that is not UTF-8 text (a few test fixtures)
    return corpus


# -- the questions -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    """Lines of a file: 1-based, inclusive."""

    source: str
    line_start: int
    line_end: int


@dataclass(frozen=True)
class Question:
    """A question and the lines that answer it (one span, or a few that say the same)."""

    text: str
    spans: tuple[Span, ...]

    def answered_by(self, chunk: ChunkRecord) -> bool:
        """Whether ``chunk`` overlaps lines that answer the question."""
        return any(
            chunk["source"] == span.source
            and chunk["line_start"] <= span.line_end
            and chunk["line_end"] >= span.line_start
            for span in self.spans
        )


def find_span(entry: dict[str, Any], question: str, root: Path = ROOT) -> Span:
    """The span an entry names by its anchor; ValueError when the anchor is not on exactly one line."""
    lines = (root / entry["file"]).read_text(encoding="utf-8").split("\n")
    at = [i for i, line in enumerate(lines) if entry["anchor"] in line]
    if len(at) != 1:
        raise ValueError(
            f"{entry['file']}: the anchor {entry['anchor']!r} of {question!r} is on {len(at)} lines, "
            f"not one; update {QUESTIONS.name}"
        )
    return Span(entry["file"], at[0] + 1, min(at[0] + entry["lines"], len(lines)))


def load_questions(path: Path = QUESTIONS, root: Path = ROOT) -> list[Question]:
    """The fixture's questions with their spans, found by anchor."""
    return [
        Question(
            entry["question"],
            tuple(find_span(e, entry["question"], root) for e in [entry, *entry.get("also", [])]),
        )
        for entry in json.loads(path.read_text(encoding="utf-8"))["questions"]
    ]


# -- the candidates ----------------------------------------------------------------------------


class Searcher(Protocol):
    def search(self, query: str, k: int = K) -> list[tuple[ChunkRecord, float]]: ...


def chunk_terms(chunk: ChunkRecord) -> list[str]:
    """What every candidate indexes of a chunk: its source's name and its text, as terms."""
    return tokenize(chunk["source"]) + tokenize(chunk["text"])


class TantivyIndex:
    """tantivy in memory over the same terms (pre-split, so tantivy's own tokenizer only splits at spaces)."""

    def __init__(self, chunks: Sequence[ChunkRecord]) -> None:
        import tantivy

        self._tantivy = tantivy
        self._chunks = list(chunks)
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("terms", stored=False, tokenizer_name="whitespace")
        builder.add_integer_field("position", stored=True)
        self._schema = builder.build()
        index = tantivy.Index(self._schema)
        writer = index.writer(heap_size=50_000_000, num_threads=1)
        for position, chunk in enumerate(self._chunks):
            writer.add_document(tantivy.Document(terms=" ".join(chunk_terms(chunk)), position=position))
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        self._searcher = index.searcher()

    def search(self, query: str, k: int = K) -> list[tuple[ChunkRecord, float]]:
        terms = list(dict.fromkeys(tokenize(query)))
        if not terms:
            return []
        should = self._tantivy.Occur.Should
        clauses = [(should, self._tantivy.Query.term_query(self._schema, "terms", t)) for t in terms]
        hits = self._searcher.search(self._tantivy.Query.boolean_query(clauses), k).hits
        return [(self._chunks[self._searcher.doc(a)["position"][0]], float(score)) for score, a in hits]


class TermOverlap:
    """The baseline with no library: how many of the question's distinct terms a chunk holds."""

    def __init__(self, chunks: Sequence[ChunkRecord]) -> None:
        self._chunks = list(chunks)
        self._terms = [frozenset(chunk_terms(chunk)) for chunk in self._chunks]

    def search(self, query: str, k: int = K) -> list[tuple[ChunkRecord, float]]:
        terms = set(tokenize(query))
        counts = [(len(terms & held), -i) for i, held in enumerate(self._terms)]
        best = sorted((c for c in counts if c[0] > 0), reverse=True)[:k]
        return [(self._chunks[-i], float(count)) for count, i in best]


class DuckDBLike:
    """The same count in SQL: ``ILIKE '%term%'`` per distinct term, over the source name and the text."""

    def __init__(self, chunks: Sequence[ChunkRecord]) -> None:
        self._chunks = list(chunks)
        self._db = duckdb.connect(config={"autoinstall_known_extensions": False})
        self._db.execute("CREATE TABLE chunks (position INTEGER, body VARCHAR)")
        rows = [(i, f"{chunk['source']}\n{chunk['text']}") for i, chunk in enumerate(self._chunks)]
        self._db.executemany("INSERT INTO chunks VALUES (?, ?)", rows)

    def search(self, query: str, k: int = K) -> list[tuple[ChunkRecord, float]]:
        terms = list(dict.fromkeys(tokenize(query)))
        if not terms:
            return []
        score = " + ".join("(body ILIKE ?)::INTEGER" for _ in terms)
        sql = (
            f"SELECT position, score FROM (SELECT position, {score} AS score FROM chunks) "
            "WHERE score > 0 ORDER BY score DESC, position LIMIT ?"
        )
        rows = self._db.cursor().execute(sql, [*(f"%{t}%" for t in terms), k]).fetchall()
        return [(self._chunks[position], float(s)) for position, s in rows]


class DuckDBFts:
    """DuckDB's ``fts`` extension (BM25), only when it is installed already: it is never downloaded here."""

    def __init__(self, chunks: Sequence[ChunkRecord]) -> None:
        self._chunks = list(chunks)
        self._db = duckdb.connect(config={"autoinstall_known_extensions": False})
        self._db.execute("LOAD fts")
        self._db.execute("CREATE TABLE chunks (position INTEGER, terms VARCHAR)")
        rows = [(i, " ".join(chunk_terms(chunk))) for i, chunk in enumerate(self._chunks)]
        self._db.executemany("INSERT INTO chunks VALUES (?, ?)", rows)
        self._db.execute(
            "PRAGMA create_fts_index('chunks', 'position', 'terms', stemmer='none', stopwords='none', "
            "ignore='', lower=0, strip_accents=0)"
        )

    def search(self, query: str, k: int = K) -> list[tuple[ChunkRecord, float]]:
        terms = " ".join(dict.fromkeys(tokenize(query)))
        if not terms:
            return []
        rows = (
            self._db.cursor()
            .execute(
                "SELECT position, score FROM (SELECT position, "
                "fts_main_chunks.match_bm25(position, ?) AS score FROM chunks) "
                "WHERE score IS NOT NULL ORDER BY score DESC, position LIMIT ?",
                [terms, k],
            )
            .fetchall()
        )
        return [(self._chunks[position], float(s)) for position, s in rows]


def fts_status() -> str | None:
    """Why DuckDB's ``fts`` cannot be measured here (None: it is installed), without downloading it."""
    db = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    try:
        db.execute("LOAD fts")
    except duckdb.Error as exc:
        first = str(exc).splitlines()[0]
        return f"not shipped with duckdb {duckdb.__version__} (LOAD fts: {first}); INSTALL fts downloads it"
    finally:
        db.close()
    return None


def candidates(*, fts: bool) -> list[tuple[str, Callable[[Sequence[ChunkRecord]], Searcher]]]:
    """The candidates this machine can run, the chosen one first."""
    found: list[tuple[str, Callable[[Sequence[ChunkRecord]], Searcher]]] = [
        ("bm25s (SourceIndex)", SourceIndex)
    ]
    try:
        import tantivy  # noqa: F401
    except ImportError:
        print("tantivy: not installed (pip install tantivy), left out")
    else:
        found.append(("tantivy", TantivyIndex))
    found += [("term overlap", TermOverlap), ("DuckDB ILIKE", DuckDBLike)]
    if fts:
        found.append(("DuckDB fts", DuckDBFts))
    return found


# -- measuring ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    """One candidate's numbers."""

    name: str
    index_s: float
    query_ms: float
    recall_at_1: float
    recall_at_k: float


def recall(searcher: Searcher, questions: Sequence[Question], k: int) -> float:
    """The share of questions with a chunk of their supporting lines among the first ``k`` found."""
    found = sum(any(q.answered_by(chunk) for chunk, _ in searcher.search(q.text, k)) for q in questions)
    return found / len(questions)


def cold_terms(corpus: Sequence[ChunkRecord]) -> list[list[str]]:
    """Every chunk's terms, the cache of words' terms emptied first."""
    fractal_nb.retrieval._word_terms.cache_clear()
    return [chunk_terms(chunk) for chunk in corpus]


def timed(call: Callable[[], object]) -> float:
    """Seconds ``call`` took."""
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def measure(
    name: str,
    build: Callable[[Sequence[ChunkRecord]], Searcher],
    corpus: Sequence[ChunkRecord],
    questions: Sequence[Question],
    repeat: int,
) -> Measured:
    """Index time (median of ``repeat`` builds), query time (median per question) and recall."""
    builds, searcher = [], None
    for _ in range(repeat):
        fractal_nb.retrieval._word_terms.cache_clear()  # each build as a new process pays it
        started = time.perf_counter()
        searcher = build(corpus)
        builds.append(time.perf_counter() - started)
    assert searcher is not None
    queries = []
    for _ in range(repeat):
        for q in questions:
            started = time.perf_counter()
            searcher.search(q.text, K)
            queries.append(time.perf_counter() - started)
    return Measured(
        name,
        statistics.median(builds),
        statistics.median(queries) * 1000,
        recall(searcher, questions, 1),
        recall(searcher, questions, K),
    )


def table(rows: Sequence[Measured]) -> str:
    """The printed comparison, the chosen library's ratios beside each other candidate."""
    chosen = rows[0]
    lines = [f"{'candidate':<22}{'index s':>9}{'query ms':>10}{'recall@1':>10}{f'recall@{K}':>10}  vs bm25s"]
    for row in rows:
        ratio = (
            f"  index x{row.index_s / chosen.index_s:.2f}, query x{row.query_ms / chosen.query_ms:.2f}"
            if row is not chosen
            else ""
        )
        lines.append(
            f"{row.name:<22}{row.index_s:>9.2f}{row.query_ms:>10.2f}"
            f"{row.recall_at_1:>10.2f}{row.recall_at_k:>10.2f}{ratio}"
        )
    return "\n".join(lines)


def installed_mb(package: str) -> str:
    """How much a package's files take, as its install record lists them."""
    files = importlib.metadata.files(package) or []
    return f"{sum(f.size or 0 for f in files) / 1e6:.1f} MB"


def choice(rows: Sequence[Measured], terms_s: float, questions: int) -> str:
    """Why bm25s, with this run's numbers beside the other candidates'."""
    chosen, others = rows[0], {row.name: row for row in rows[1:]}
    lines = [
        f"choice: bm25s (fractal_nb.retrieval.SourceIndex): pure Python over numpy ({installed_mb('bm25s')} "
        "installed), no network, no model; its search only reads the index, so threads share one.",
        f"  recall@{K} {chosen.recall_at_k:.2f} ({round(chosen.recall_at_k * questions)} of {questions} "
        f"questions), {chosen.query_ms:.2f} ms a question, {chosen.index_s:.2f} s to index "
        f"({terms_s:.2f} s of it the terms every candidate shares).",
    ]
    if "tantivy" in others:
        t = others["tantivy"]
        more = round((t.recall_at_k - chosen.recall_at_k) * questions)
        lines.append(
            f"  tantivy (a compiled Rust wheel, {installed_mb('tantivy')}): recall@{K} {t.recall_at_k:.2f} "
            f"({round(t.recall_at_k * questions)} of {questions}: {more:+d} against bm25s), "
            f"{t.query_ms:.2f} ms a question, {t.index_s:.2f} s to index."
        )
    plain = [row for name, row in others.items() if name != "tantivy"]
    if plain:
        best = max(plain, key=lambda row: row.recall_at_k)
        lines.append(
            f"  without a library ({best.name}): recall@{K} {best.recall_at_k:.2f}, "
            f"{best.query_ms:.1f} ms a question."
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 chunks, one build each")
    parser.add_argument(
        "--chunks", type=int, default=None, help="corpus size (default 12,000; 0: this repository alone)"
    )
    parser.add_argument("--repeat", type=int, default=None, help="builds and query rounds (median kept)")
    args = parser.parse_args()
    size = args.chunks if args.chunks is not None else 2_000 if args.quick else 12_000
    repeat = args.repeat or (1 if args.quick else 3)

    from machine import print_header  # bench/machine.py, beside this script

    print_header(__doc__.splitlines()[0])
    corpus = build_corpus(size, stdlib=size > 0)
    questions = load_questions()
    sources = len({chunk["source"] for chunk in corpus})
    print(
        f"corpus: {len(corpus):,} chunks of {sources:,} files; {len(questions)} questions; median of {repeat}"
    )
    print("chunks: the store's (fractal_nb.store.sources.chunk_spans)")
    fts_reason = fts_status()
    fts = os.environ.get("FRACTAL_NB_BENCH_FTS") == "1" and fts_reason is None
    print(
        f"DuckDB fts: {fts_reason or 'installed' + ('' if fts else ' (FRACTAL_NB_BENCH_FTS=1 measures it)')}"
    )
    print()
    rows = [measure(name, build, corpus, questions, repeat) for name, build in candidates(fts=fts)]
    print(table(rows))
    terms = statistics.median(timed(lambda: cold_terms(corpus)) for _ in range(repeat))
    print(f"of each index time, the terms alone (the same for every candidate): {terms:.2f} s")
    print()
    print(choice(rows, terms, len(questions)))


if __name__ == "__main__":
    main()
