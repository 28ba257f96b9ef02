"""The citation check: whether a cited span of a graph's source holds the quoted text.

docs/architecture/store.md, "Sources and citations". The store checks every citation when
it is written (an answer's ``metadata["citations"]``, a synthesis's or the harvest's
findings), inside the write's transaction, against the source's text *as it was
added* (its chunks), never the disk. Each citation gets a
:class:`~fractal_nb.vocabulary.CitationStatus`, named by the first check that failed:

1. ``no_such_source``: the graph has no source of that name (or source id);
2. ``no_such_lines``: the span is past the source's last line;
3. ``misquoted``: the quote is not in those lines.

The quote is compared whitespace-normalized (runs of spaces, tabs and newlines are
one space) and case-sensitively: a quote is the source's words. What a model copies
from the evidence it was shown is tolerated: a ``[name:L3-L5]`` tag and ``12:`` /
``L12:`` line-number prefixes at the start of the quote's lines, and quotation marks
around the whole quote. A quote's length is its letters and digits: one with fewer than
:data:`MIN_QUOTE_CHARS` verifies only when it is all the cited lines hold, so "the"
cannot prove a span, and one with none (punctuation, a rule of ``=``) never does.

Support (:class:`~fractal_nb.vocabulary.Support`): ``supported`` when at least one
citation is verified and none failed; ``unsupported`` when one failed or there is
none while the graph has sources; ``no_sources`` when the graph has none.
A verified citation of a file that no longer hashes the same on disk says so in
its ``detail`` (it still checks against the stored text) when it is checked by a
read (``check_citations``); a write never reads the disk, and the faces tell a
changed file when they show it (``results/evidence.py``). The disk is read with a
size bound and only from a regular file (``read_text_file``).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..checks import shown
from ..errors import InvalidInputError
from ..vocabulary import CitationStatus, Support
from .database import Database
from .records import CitationRecord
from .sources import lines_of, read_text_file

MAX_CITATIONS = 100  # citations of one answer or finding the store takes (the model's schema asks fewer)
MAX_QUOTE_CHARS = 10_000
MAX_FINDINGS = 500  # findings in one synthesis or harvest
MIN_QUOTE_CHARS = 12  # a shorter quote verifies only when it is all the cited lines hold
_SPACE = re.compile(r"\s+")
_CONTENT = re.compile(r"[^\W_]")  # a letter or a digit: what a quote's length is counted in
_TAG = re.compile(r"^\s*\[[^\]\n]*:L?\d+(?:\s*-\s*L?\d+)?\]\s*")  # [name:L3-L5] the evidence shows
_LINE_NUMBER = re.compile(r"^\s*L?\d+\s*[:|]\s?", re.MULTILINE)  # 12: / L12: / 12 | before a line
_QUOTES = "\"'“”‘’«»`"


def normalized(text: str) -> str:
    r"""``text`` with each run of whitespace one space, stripped.

    >>> normalized("  a claim\n   stays\tatomic ")
    'a claim stays atomic'
    """
    return _SPACE.sub(" ", text).strip()


def quote_readings(quote: str) -> list[str]:
    r"""The normalized ways a quote may be read: as given, then without what a model copies.

    >>> quote_readings('"[notes.md:L3-L4] 3: one line\n4: next"')
    ['"[notes.md:L3-L4] 3: one line 4: next"', 'one line next']
    """
    bare = quote.strip().strip(_QUOTES)
    bare = _LINE_NUMBER.sub("", _TAG.sub("", bare))
    readings = [normalized(quote), normalized(bare)]
    return [r for i, r in enumerate(readings) if r and r not in readings[:i]]


def quote_found(quote: str, cited: str) -> bool:
    r"""Whether ``quote`` is in ``cited`` (whitespace-normalized), per the module's rules.

    >>> quote_found("claims  stay\natomic", "Why do claims stay atomic? A lock.")
    True
    >>> quote_found("Claims stay atomic", "Why do claims stay atomic? A lock.")
    False
    >>> quote_found("A", "A lock is held.")  # too short to prove a span
    False
    >>> quote_found("============", "============\nA lock is held.")  # punctuation carries no content
    False
    """
    text = normalized(cited)
    for reading in quote_readings(quote):
        content = len(_CONTENT.findall(reading))
        if content == 0 or (content < MIN_QUOTE_CHARS and reading != text):
            continue
        if reading in text:
            return True
    return False


def file_hash(path: str) -> str | None:
    """sha256 of a file's text as a source stores it (None: gone or unreadable)."""
    try:
        return hashlib.sha256(read_text_file(Path(path)).encode("utf-8")).hexdigest()
    except (OSError, InvalidInputError):
        return None


def require_citations(value: object, what: str = "citations") -> list[dict[str, Any]]:
    """Raw citations: a list of ``{source, line_start, line_end, quote}`` (None: none); refused otherwise."""
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise InvalidInputError(
            f"{what} must be a list of {{source, line_start, line_end, quote}} objects, not {shown(value)}"
        )
    if len(value) > MAX_CITATIONS:
        raise InvalidInputError(f"{what} holds {len(value):,} citations; the limit is {MAX_CITATIONS}")
    parsed: list[dict[str, Any]] = []
    for index, item in enumerate(value):
        where = f"{what}[{index}]"
        if not isinstance(item, Mapping):
            raise InvalidInputError(
                f"{where} must be an object {{source, line_start, line_end, quote}}, not {shown(item)}"
            )
        source, start, end, quote = (item.get(k) for k in ("source", "line_start", "line_end", "quote"))
        if not isinstance(source, str) or not source.strip() or len(source) > 1000:
            raise InvalidInputError(
                f"{where}.source must be a source's name (1-1000 characters), not {shown(source)}"
            )
        for key, number in (("line_start", start), ("line_end", end)):
            if isinstance(number, bool) or not isinstance(number, int) or number < 1:
                raise InvalidInputError(f"{where}.{key} must be a line number >= 1, not {shown(number)}")
        assert isinstance(start, int) and isinstance(end, int)
        if end < start:
            raise InvalidInputError(f"{where}.line_end {end} is before its line_start {start}")
        if not isinstance(quote, str) or not quote.strip() or len(quote) > MAX_QUOTE_CHARS:
            raise InvalidInputError(
                f"{where}.quote must be the cited text (1-{MAX_QUOTE_CHARS:,} characters), not {shown(quote)}"
            )
        parsed.append({"source": source, "line_start": start, "line_end": end, "quote": quote})
    return parsed


def support_of(records: Sequence[CitationRecord], has_sources: bool) -> Support:
    """The support of an answer or finding with these checked citations (see the module)."""
    if not has_sources:
        return Support.NO_SOURCES
    if records and all(r["status"] == CitationStatus.VERIFIED for r in records):
        return Support.SUPPORTED
    return Support.UNSUPPORTED


class CitationCheck:
    """Checks citations against a graph's stored sources; ``GraphStore`` builds it for every write path."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._hashes: dict[tuple[str, int, int], str | None] = {}  # (path, mtime_ns, size): its hash
        self._lock = threading.Lock()

    def has_sources(self, graph_id: str) -> bool:
        """Whether the graph has any source; in a write, read once per graph (in_process.py, ``sourced``)."""
        writing = self._db.writing()
        known = self._db.file.sourced.get(graph_id) if writing else None
        if known is not None:
            return known
        row = self._db.fetchone("SELECT count(*) FROM sources WHERE graph_id = ?", [graph_id])
        if writing:
            self._db.file.sourced[graph_id] = bool(row and row[0])
        return bool(row and row[0])

    def check(self, graph_id: str, citations: object, what: str = "citations") -> list[CitationRecord]:
        """Each citation with its status (and a ``detail`` when it failed or its file changed)."""
        parsed = require_citations(citations, what)
        if not parsed:
            return []
        named = sorted({c["source"] for c in parsed})
        rows = self._db.fetchall(  # the cited sources, by name or id, in one query
            "SELECT source_id, name, location, content_hash, line_count FROM sources "
            "WHERE graph_id = ? AND (name IN (SELECT unnest(?::VARCHAR[])) "
            "OR source_id IN (SELECT unnest(?::VARCHAR[])))",
            [graph_id, named, named],
        )
        sources = {row[0]: row for row in rows} | {row[1]: row for row in rows}  # a name wins over an id
        return [self._one(graph_id, c, sources.get(c["source"])) for c in parsed]

    def checked_answer(self, graph_id: str, meta: dict[str, Any]) -> dict[str, Any]:
        """An answer's metadata with ``citations`` checked and ``support`` set.

        See docs/architecture/store.md, "Sources and citations".
        """
        has = self.has_sources(graph_id)
        if "citations" not in meta and not has:
            return meta
        records = self.check(graph_id, meta.get("citations"), "metadata.citations")
        return {**meta, "citations": records, "support": support_of(records, has).value}

    def checked_findings(
        self, graph_id: str, findings: object, what: str = "findings"
    ) -> list[dict[str, Any]]:
        """Findings (``{finding, confidence, citations, ...}``), each with checked citations and support."""
        if not isinstance(findings, list | tuple):
            raise InvalidInputError(
                f"{what} must be a list of {{finding, confidence, citations}} objects, not {shown(findings)}"
            )
        if len(findings) > MAX_FINDINGS:
            raise InvalidInputError(f"{what} holds {len(findings):,} findings; the limit is {MAX_FINDINGS}")
        has = self.has_sources(graph_id)
        checked: list[dict[str, Any]] = []
        for index, item in enumerate(findings):
            if not isinstance(item, Mapping) or not isinstance(item.get("finding"), str):
                raise InvalidInputError(
                    f"{what}[{index}] must be an object with a 'finding' text (and confidence, "
                    f"citations), not {shown(item)}"
                )
            records = self.check(graph_id, item.get("citations"), f"{what}[{index}].citations")
            checked.append({**item, "citations": records, "support": support_of(records, has).value})
        return checked

    def _one(self, graph_id: str, citation: dict[str, Any], source: tuple[Any, ...] | None) -> CitationRecord:
        record: CitationRecord = {**citation, "status": CitationStatus.VERIFIED.value}  # type: ignore[typeddict-item]
        if source is None:
            return {
                **record,
                "status": CitationStatus.NO_SUCH_SOURCE.value,
                "detail": f"the graph has no source named {citation['source']!r}",
            }
        source_id, name, location, content_hash, line_count = source
        start, end = citation["line_start"], citation["line_end"]
        if end > line_count:
            return {
                **record,
                "status": CitationStatus.NO_SUCH_LINES.value,
                "detail": f"{name} has {line_count} lines; lines {start}-{end} are past its end",
            }
        cited = "\n".join(lines_of(self._db, graph_id, source_id, start, end))
        if not quote_found(citation["quote"], cited):
            return {
                **record,
                "status": CitationStatus.MISQUOTED.value,
                "detail": f"the quote is not in {name} lines {start}-{end} (compared whitespace-normalized)",
            }
        # The disk is read only outside a write (a check asked for by a person or a face), never in
        # the write's transaction: a file swapped for a pipe or a device cannot hold the write lock.
        if location is not None and not self._db.writing() and self._disk_hash(location) != content_hash:
            record["detail"] = (
                f"the file {location} changed on disk (or is gone) since it was added; "
                "checked against the text as added"
            )
        return record

    def _disk_hash(self, location: str) -> str | None:
        try:
            stat = Path(location).stat()
        except OSError:
            return None
        key = (location, stat.st_mtime_ns, stat.st_size)
        with self._lock:
            if key in self._hashes:
                return self._hashes[key]
        digest = file_hash(location)
        with self._lock:
            self._hashes[key] = digest
        return digest
