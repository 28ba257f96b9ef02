"""The sources facade: folders, paths, snippets, columns and tables as evidence (source_inputs.py).

Covers: exploration/source_inputs.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from fractal_nb import Exploration, InvalidInputError, SimulatedLLM, Snippet, StateError, Table
from fractal_nb.cli.main import main
from fractal_nb.exploration.source_inputs import MAX_FILE_BYTES, source_texts
from fractal_nb.vocabulary import CitationStatus

SEED = "How does a claim stay atomic?"
NOTES = "# Claims\n\nA claim is one UPDATE of the question's row.\nThe other worker sees no row changed.\n"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "claims.md").write_text(NOTES)
    (root / "store.py").write_text("def claim():\n    return 'one UPDATE'\n")
    (root / "Makefile").write_text("test:\n\tpytest\n")
    for skipped in (".git", "__pycache__", "node_modules", ".ipynb_checkpoints", ".venv"):
        (root / skipped).mkdir()
        (root / skipped / "inside.py").write_text("print('left out')\n")
    (root / ".hidden.md").write_text("hidden\n")
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (root / "data.txt").write_bytes(b"text\x00with a NUL")  # binary despite its suffix
    (root / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))  # not UTF-8
    (root / "big.txt").write_text("x" * (MAX_FILE_BYTES + 1))
    (root / "empty.md").write_text("  \n")
    return root


def names(frame: pd.DataFrame) -> list[str]:
    return sorted(frame["name"])


def test_a_folder_gives_its_text_files_named_under_the_folder(folder: Path) -> None:
    texts = source_texts([folder])
    assert sorted(t["name"] for t in texts) == ["repo/Makefile", "repo/docs/claims.md", "repo/store.py"]
    claims = next(t for t in texts if t["name"] == "repo/docs/claims.md")
    assert claims["kind"] == "file" and claims["location"] == str(folder / "docs" / "claims.md")
    assert claims["text"] == NOTES


def test_files_snippets_and_columns(folder: Path) -> None:
    texts = source_texts(
        [
            [
                folder / "store.py",
                "repo/docs/claims.md",
            ],  # a list of paths; relative to the working directory
            Snippet("Leases expire after 20 s.", name="lease"),
            Snippet("An unnamed snippet."),
            pd.DataFrame({"note": ["first row", None, "third\nrow"]})["note"],
        ]
    )
    by_name = {t["name"]: t for t in texts}
    assert list(by_name)[:3] == ["repo/store.py", "repo/docs/claims.md", "lease"]
    assert list(by_name)[3].startswith("snippet-")
    assert by_name["note"]["text"] == "first row\n\nthird row"  # a line per row
    assert by_name["note"]["kind"] == "dataframe"
    outside = Path("/").joinpath(*folder.parts[1:])  # absolute: under the working directory still
    assert source_texts([outside / "store.py"])[0]["name"] == "repo/store.py"


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("nowhere.md", "no file or folder at 'nowhere.md'"),
        ("paper.pdf", "is a PDF; sources are text. Convert it to text first"),
        ("repo/data.txt", "is a binary file"),
        ("repo/latin1.txt", "is not UTF-8 text"),
        ("repo/big.txt", "than a source file may: at most 2,000,000"),
        ("repo/empty.md", "is empty"),
        (pd.DataFrame({"a": [1]}), r"pass one of its columns \(df\['notes'\]\)"),
        (3, "int is not a source"),
        (Snippet(""), "Snippet text must be a non-empty string"),
        (pd.Series([], name="none", dtype=object), "column 'none' has no rows"),
        (Table("orders"), "a Table source needs the exploration's store"),
    ],
)
def test_what_is_not_a_source_is_refused(folder: Path, item: object, message: str) -> None:
    Path("paper.pdf").write_bytes(b"%PDF-1.7")
    with pytest.raises(InvalidInputError, match=message):
        source_texts([folder, item])


def test_a_folder_with_no_text_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pics").mkdir()
    (tmp_path / "pics" / "a.png").write_bytes(b"\x89PNG")
    with pytest.raises(InvalidInputError, match="holds no text files"):
        source_texts([tmp_path / "pics"])


def test_create_with_sources_and_add_more(folder: Path) -> None:
    with Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(), sources=folder) as ex:
        assert names(ex.sources()) == ["repo/Makefile", "repo/docs/claims.md", "repo/store.py"]
        added = ex.add_sources(Snippet("Leases expire.", name="lease"), folder / "docs" / "claims.md")
        assert list(added["name"]) == ["lease", "repo/docs/claims.md"]  # the same file again: the same source
        assert len(ex.sources()) == 4
        assert list(ex.sources().columns) == [
            "source_id", "name", "kind", "location", "lines", "chunks", "content_hash", "changed",
        ]  # fmt: skip
        assert ex.store.search_sources(ex.graph_id, "UPDATE row")[0]["source"] == "repo/docs/claims.md"


def test_a_refused_source_creates_nothing(folder: Path) -> None:
    target = Path("refused.duckdb")
    with pytest.raises(InvalidInputError, match="no file or folder at 'missing'"):
        Exploration.create(
            SEED, intensity="pulse", llm=SimulatedLLM(), path=target, sources=[folder, "missing"]
        )
    assert not target.exists()
    # What the store refuses is refused before a file is made: no file is left behind.
    refused = [
        ([Snippet("one text", name="a"), Snippet("another text", name="a")], "two sources are named 'a'"),
        ([Snippet(f"text {i}", name=f"s{i}") for i in range(5_001)], "add at most 5,000 at once"),
        (Snippet("x" * 5_000_001, name="big"), "a source holds at most 5,000,000"),
        (Table("no_such_table"), "is not a table or view"),  # read once the file is open
    ]
    for sources, message in refused:
        with pytest.raises(InvalidInputError, match=message):
            Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(), path=target, sources=sources)
        assert not target.exists() and not Path("refused.duckdb.wal").exists()
    # A file that was there before stays, with its graphs, when a create in it is refused.
    Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(), path=target).close()
    with pytest.raises(InvalidInputError, match="is not a table or view"):
        Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(), path=target, sources=Table("nope"))
    assert len(Exploration.graphs(target)) == 1


def test_add_sources_refusal_adds_nothing(folder: Path) -> None:
    with Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(), sources=folder) as ex:
        before = ex.sources()
        events = len(ex.events())
        with pytest.raises(InvalidInputError):
            ex.add_sources(Snippet("fresh", name="fresh"), Path("paper.pdf"))
        with pytest.raises(InvalidInputError, match="already has a source named 'repo/store.py'"):
            ex.add_sources(Snippet("fresh text", name="fresh"), Snippet("other", name="repo/store.py"))
        pd.testing.assert_frame_equal(ex.sources(), before)
        assert len(ex.events()) == events


def test_a_changed_file_is_detected_and_its_citation_checks_the_stored_text(folder: Path) -> None:
    claims = folder / "docs" / "claims.md"
    with Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(), sources=folder) as ex:
        frame = ex.sources().set_index("name")
        assert frame.loc["repo/docs/claims.md", "changed"] is False
        claims.write_text(NOTES.replace("one UPDATE", "two UPDATEs"))
        (folder / "store.py").unlink()
        frame = ex.sources().set_index("name")
        assert frame.loc["repo/docs/claims.md", "changed"] is True
        assert frame.loc["repo/store.py", "changed"] is True  # gone
        assert frame.loc["repo/Makefile", "changed"] is False
        [checked] = ex.store.check_citations(
            ex.graph_id,
            [
                {
                    "source": "repo/docs/claims.md",
                    "line_start": 3,
                    "line_end": 3,
                    "quote": "one UPDATE of the question's row",
                }
            ],
        )
        assert checked["status"] == CitationStatus.VERIFIED  # the text as added
        assert "changed on disk" in checked["detail"]
        ex.add_sources(Snippet("a snippet", name="s"))
        assert ex.sources().set_index("name").loc["s", "changed"] is None


def test_a_view_that_reads_a_file_is_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "analysis.duckdb"
    Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(), path=path).close()
    (tmp_path / "rows.csv").write_text("what\nread from disk\n")
    with duckdb.connect(str(path)) as con:
        con.execute(f"CREATE VIEW from_disk AS SELECT * FROM read_csv('{tmp_path / 'rows.csv'}')")
    with Exploration.open(path, llm=SimulatedLLM()) as ex:
        with pytest.raises(InvalidInputError, match="view 'from_disk' reads a file or a URL"):
            ex.add_sources(Table("from_disk"))
        assert ex.sources().empty


def test_a_table_of_the_file_is_read_never_written(tmp_path: Path) -> None:
    path = tmp_path / "analysis.duckdb"
    Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(), path=path).close()
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE incidents (day DATE, what VARCHAR)")
        con.execute("INSERT INTO incidents VALUES ('2026-01-02', 'two workers claimed one question')")
        con.execute("CREATE VIEW recent AS SELECT what FROM incidents")
    with Exploration.open(path, llm=SimulatedLLM()) as ex:
        added = ex.add_sources(Table("incidents", columns=["what"]), Table("recent"))
        assert list(added["kind"]) == ["table", "table"]
        assert ex.store.read_source(ex.graph_id, "incidents", 1, 2)["lines"] == [
            "what",
            "two workers claimed one question",
        ]
        with pytest.raises(InvalidInputError, match="not a table or view of the analyst's"):
            ex.add_sources(Table("nodes"))
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM incidents").fetchone() == (1,)


def test_a_read_only_exploration_refuses_add_sources(tmp_path: Path) -> None:
    path = tmp_path / "x.duckdb"
    Exploration.create(
        SEED, intensity="pulse", llm=SimulatedLLM(), path=path, sources=Snippet("text here")
    ).close()
    with Exploration.open(path, llm=SimulatedLLM(), read_only=True) as ex:
        with pytest.raises(StateError, match="read_only=True"):
            ex.add_sources(Snippet("more"))
        assert len(ex.sources()) == 1


def test_cli_sources_lists_them(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = Path("cli.duckdb")
    Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(), path=path, sources=folder).close()
    (folder / "store.py").write_text("changed\n")
    assert main(["sources", str(path)]) == 0
    out = capsys.readouterr().out
    assert "repo/docs/claims.md" in out and "file" in out
    assert main(["sources", str(path), "--json"]) == 0
    listed = {s["name"]: s for s in json.loads(capsys.readouterr().out)["sources"]}
    assert listed["repo/store.py"]["changed"] is True and listed["repo/Makefile"]["changed"] is False


def test_a_file_outside_the_working_directory_is_named_by_its_file_name(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(folder / "docs")
    assert source_texts([folder / "store.py"])[0]["name"] == "store.py"


def test_an_empty_table_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.duckdb"
    Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(), path=path).close()
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE empty_one (a INTEGER)")
    with (
        Exploration.open(path, llm=SimulatedLLM()) as ex,
        pytest.raises(InvalidInputError, match="has no rows"),
    ):
        ex.add_sources(Table("empty_one"))
