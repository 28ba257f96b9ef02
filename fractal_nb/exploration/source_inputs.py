"""What an analyst hands an exploration as evidence, turned into the store's source texts.

docs/architecture/store.md, "Sources and citations". ``Exploration.create(..., sources=...)``
and ``ex.add_sources(*items)`` take, each item:

- a folder (``str`` or ``Path``): its text files, recursively (hidden folders,
  ``__pycache__``, ``node_modules``, ``.ipynb_checkpoints``, binary files, files of
  other kinds and files over :data:`MAX_FILE_BYTES` left out), each named by its path
  relative to the folder, prefixed by the folder's name (``notes/2024/march.md``; a line
  break in a file's name is a space); only regular files inside the folder are read: a
  link that leads out of it, a pipe or a device is left out;
- a file: named by its path relative to the working directory when it lies under
  it, else by its file name; a PDF is refused (convert it to text first);
- a list or tuple of any of these;
- :class:`Snippet` ``(text, name=None)``: a text (named ``snippet-<hash>`` without a name);
- a pandas ``Series`` (a DataFrame column): a line per row, named by the column;
- :class:`Table` ``(name, columns=None)``: a table or view of the store's file beside
  the graphs, a header line then a line per row, read (never written) through the store.

Every item is read and checked before anything is written: a refused one adds nothing.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..errors import InvalidInputError
from ..store.citations import file_hash
from ..store.records import SourceRecord, SourceText
from ..store.sources import MAX_FILE_BYTES as MAX_FILE_BYTES  # a file source's size bound
from ..store.sources import SourceKind, read_text_file
from ..text import one_line

TEXT_SUFFIXES = frozenset(
    ".py .pyi .md .markdown .txt .rst .toml .cfg .ini .json .jsonl .yaml .yml .csv .tsv .sql .js .mjs "
    ".ts .tsx .jsx .html .htm .css .scss .sh .bash .zsh .r .jl .rb .go .rs .java .kt .scala .c .h .cc "
    ".cpp .hpp .cs .swift .php .pl .lua .tex .bib .xml .svg .ipynb .env .conf .properties .gradle "
    ".dockerfile .mk .adoc .org .log".split()
)
TEXT_NAMES = frozenset({"Makefile", "Dockerfile", "LICENSE", "README", "CHANGELOG", "NOTICE", "AUTHORS"})
SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", ".ipynb_checkpoints", ".git"})
SOURCE_COLUMNS = ["source_id", "name", "kind", "location", "lines", "chunks", "content_hash", "changed"]
TableReader = Callable[[str, Sequence[str] | None], list[str]]


@dataclass(frozen=True)
class Snippet:
    """A text to cite, e.g. notes pasted in a cell; ``name`` is what citations call it.

    >>> Snippet("Claims are atomic.", name="notes").name
    'notes'
    """

    text: str
    name: str | None = None


@dataclass(frozen=True)
class Table:
    """A table or view of the exploration's DuckDB file (the analyst's data beside the graphs).

    Read through the store, never written to: a header line, then a line per row
    (``|``-separated), of ``columns`` (None: all).
    """

    name: str
    columns: Sequence[str] | None = None


def source_texts(items: Iterable[object], tables: TableReader | None = None) -> list[SourceText]:
    """The source texts of ``items`` (see the module); refused whole when one item is.

    ``tables`` reads a :class:`Table` (the store's ``table_lines``); None refuses tables.
    """
    texts: list[SourceText] = []
    for item in items:
        texts.extend(_texts_of(item, tables))
    if not texts:
        raise InvalidInputError(
            "no sources given: pass a folder, paths, Snippet(text), a column or Table(name)"
        )
    return texts


def _texts_of(item: object, tables: TableReader | None) -> list[SourceText]:
    if isinstance(item, Snippet):
        return [_snippet(item)]
    if isinstance(item, Table):
        return [_table(item, tables)]
    if isinstance(item, pd.Series):
        return [_column(item)]
    if isinstance(item, pd.DataFrame):
        raise InvalidInputError(
            "a DataFrame is not a source; pass one of its columns (df['notes']): a line per row"
        )
    if isinstance(item, str | os.PathLike):
        path = Path(item)
        if path.is_dir():
            return _folder(path)
        if path.exists():  # a file; a pipe or a device is refused as not one (_file)
            return [_file(path)]
        raise InvalidInputError(
            f"no file or folder at {str(item)!r}; pass an existing path, or Snippet(text) for a text"
        )
    if isinstance(item, list | tuple):
        return [text for inner in item for text in _texts_of(inner, tables)]
    raise InvalidInputError(
        f"{type(item).__name__} is not a source: pass a folder, a path, a list of paths, Snippet(text), "
        "a DataFrame column (a pandas Series) or Table(name)"
    )


def _snippet(snippet: Snippet) -> SourceText:
    if not isinstance(snippet.text, str) or not snippet.text.strip():
        raise InvalidInputError(f"Snippet text must be a non-empty string, not {snippet.text!r}")
    name = snippet.name
    if name is None:
        name = "snippet-" + hashlib.sha256(snippet.text.encode("utf-8", "replace")).hexdigest()[:8]
    return {"name": name, "kind": SourceKind.SNIPPET.value, "location": None, "text": snippet.text}


def _column(series: pd.Series) -> SourceText:
    name = "column" if series.name is None else str(series.name)
    if series.empty:
        raise InvalidInputError(f"column {name!r} has no rows; a source must hold some text")
    lines = ["" if pd.isna(v) else " ".join(str(v).split()) for v in series.tolist()]
    return {"name": name, "kind": SourceKind.DATAFRAME.value, "location": None, "text": "\n".join(lines)}


def _table(table: Table, tables: TableReader | None) -> SourceText:
    if tables is None:
        raise InvalidInputError("a Table source needs the exploration's store: add it with ex.add_sources")
    lines = tables(table.name, None if table.columns is None else list(table.columns))
    if len(lines) < 2:
        raise InvalidInputError(f"table {table.name!r} has no rows; a source must hold some text")
    return {"name": table.name, "kind": SourceKind.TABLE.value, "location": None, "text": "\n".join(lines)}


def _file(path: Path) -> SourceText:
    resolved = path.resolve()
    if resolved.suffix.lower() == ".pdf":
        raise InvalidInputError(
            f"{path} is a PDF; sources are text. Convert it to text first (e.g. `pdftotext file.pdf`) "
            "and add the .txt"
        )
    try:  # a regular file of at most MAX_FILE_BYTES, UTF-8 text; InvalidInputError otherwise
        text = read_text_file(resolved)
    except OSError as exc:
        raise InvalidInputError(f"{path} cannot be read: {exc.strerror or exc}") from None
    if not text.strip():
        raise InvalidInputError(f"{path} is empty; a source must hold some text")
    try:
        name = resolved.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        name = resolved.name
    return {"name": one_line(name), "kind": SourceKind.FILE.value, "location": str(resolved), "text": text}


def _folder(folder: Path) -> list[SourceText]:
    """The folder's text files; a link that leads out of the folder (or to no regular file) is left out."""
    root = folder.resolve()
    texts: list[SourceText] = []
    for here, dirs, files in os.walk(root):  # links to folders are not followed
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS)
        for file in sorted(files):
            path = Path(here) / file
            if file.startswith(".") or not (path.suffix.lower() in TEXT_SUFFIXES or file in TEXT_NAMES):
                continue
            target = path.resolve()
            if not target.is_relative_to(root):  # a link out of the folder: never read
                continue
            try:
                text = read_text_file(target)
            except (OSError, InvalidInputError):  # not a regular file, too large, binary or not UTF-8
                continue
            if text.strip():
                name = one_line(f"{root.name}/{path.relative_to(root).as_posix()}")
                texts.append(
                    {"name": name, "kind": SourceKind.FILE.value, "location": str(target), "text": text}
                )
    if not texts:
        raise InvalidInputError(
            f"{folder} holds no text files (of kinds {', '.join(sorted(TEXT_SUFFIXES)[:12])}, ...)"
        )
    return texts


def source_frame(records: Sequence[SourceRecord]) -> pd.DataFrame:
    """Sources as a DataFrame; ``changed`` says whether a file on disk no longer hashes the same.

    ``changed`` is True when the file differs from the text added (or is gone), False
    when it is the same, None for a source that is not a file.
    """
    rows = [
        {
            "source_id": r["source_id"],
            "name": r["name"],
            "kind": r["kind"],
            "location": r["location"],
            "lines": r["line_count"],
            "chunks": r["chunk_count"],
            "content_hash": r["content_hash"],
            "changed": None if r["location"] is None else file_hash(r["location"]) != r["content_hash"],
        }
        for r in records
    ]
    return pd.DataFrame(rows, columns=SOURCE_COLUMNS).astype({"changed": object})
